"""KAITO's Workspace: a preset served with vLLM (KAITO's default runtime from v0.4.0), with the options of
the `vllm:` section of the ConfigMap its inference.config names."""

from __future__ import annotations

import pytest

from reading import flags, read, review, workloads
from vllm_caching_mcp.advice.deployment.read import NothingToReview

WORKSPACE = """\
apiVersion: v1
kind: Secret
metadata: {name: hf-token}
data:
  HF_TOKEN: <your_base64_encoded_huggingface_token>
---
apiVersion: v1
kind: ConfigMap
metadata: {name: params}
data:
  inference_config.yaml: |
    max_probe_steps: 6
    vllm:
      gpu-memory-utilization: 0.92
      swap-space: 4
---
apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata: {name: ws}
resource: {instanceType: Standard_NC24ads_A100_v4}
inference:
  preset: {name: gpt-oss-120b}
  config: params
"""


def test_a_workspace_is_its_preset_served_with_the_options_of_its_config_map() -> None:
    [w], notes = workloads(("ws.yaml", WORKSPACE))
    assert w.name == "Workspace/ws" and flags(w) == {
        "--model": "gpt-oss-120b",
        "--gpu-memory-utilization": "0.92",
        "--swap-space": "4",
    }
    assert [f.location.line for f in w.flags if f.name == "--swap-space"] == [15]
    assert any("served by KAITO with vLLM" in n for n in notes)
    result = review(("ws.yaml", WORKSPACE), version="0.33.0")
    found = {f.rule_id for f in result.findings if not f.rule_id.startswith("advisory.")}
    assert found == {"pitfall.flag-not-in-release"}  # a placeholder is no bad base64


def test_a_workspace_on_the_transformers_runtime_runs_no_vllm() -> None:
    text = WORKSPACE.replace(
        "metadata: {name: ws}", "metadata: {name: ws, annotations: {kaito.sh/runtime: transformers}}"
    )
    with pytest.raises(NothingToReview):
        read(("ws.yaml", text.split("---\n", 2)[2]))
