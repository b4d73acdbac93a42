"""llm-d modelservice Helm values (issue 32): one workload per role, with the arguments the chart's
`vllmServe` / `imageDefault` commands write (model, port, parallelism) before the container's own, and a
`custom` command read as written."""

from __future__ import annotations

import pytest

from reading import flags, workloads
from vllm_caching_mcp.advice.deployment.read import NothingToReview

VALUES = """
multinode: false
modelArtifacts:
  uri: "hf://Qwen/Qwen3-8B"
  name: Qwen/Qwen3-8B
routing:
  servicePort: 8000
  proxy: {targetPort: 8200}
decode:
  replicas: 2
  parallelism: {tensor: 2}
  containers:
  - name: vllm
    image: ghcr.io/llm-d/llm-d-cuda:v0.4.0
    modelCommand: vllmServe
    args: [--kv-transfer-config, '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    env: [{name: UCX_TLS, value: "cuda_ipc,tcp"}]
    resources: {limits: {memory: 64Gi}}
prefill:
  replicas: 1
  containers:
  - name: vllm
    image: ghcr.io/llm-d/llm-d-cuda:v0.4.0
    modelCommand: custom
    command: [vllm, serve]
    args: [Qwen/Qwen3-8B, --port, "8000", --enforce-eager]
"""


def test_each_role_is_a_workload_with_the_charts_arguments() -> None:
    decode, prefill = workloads(("values.yaml", VALUES))[0]
    assert decode.model == "Qwen/Qwen3-8B" and decode.replicas == 2 and decode.gpu_count == 2
    assert flags(decode)["--port"] == "8200" and flags(decode)["--tensor-parallel-size"] == "2"
    assert "--kv-transfer-config" in flags(decode) and decode.memory_limit_gib == 64
    assert {e.name: e.value for e in decode.env}["TP_SIZE"] == "2"
    # the flag the chart writes is placed where its value is written (parallelism.tensor)
    assert {f.name: f.location.line for f in decode.flags}["--tensor-parallel-size"] == 11
    assert flags(prefill)["--port"] == "8000" and flags(prefill)["--enforce-eager"] is True
    assert "prefill" in prefill.name and prefill.gpu_count == 1


def test_image_default_passes_the_model_as_an_option_and_disabled_roles_are_left_out() -> None:
    values = """
modelArtifacts: {uri: "pvc://models/llama/8b", name: llama, mountPath: /model-cache}
routing: {servicePort: 8000, proxy: {enabled: false}}
decode:
  parallelism: {data: 4, workers: 2}
  containers:
  - {name: vllm, image: "vllm/vllm-openai:v0.11.0", modelCommand: imageDefault}
prefill:
  create: false
  containers:
  - {name: vllm, image: "vllm/vllm-openai:v0.11.0", modelCommand: imageDefault}
"""
    [decode], _ = workloads(("values.yaml", values))
    assert flags(decode)["--model"] == "/model-cache/llama/8b" and flags(decode)["--port"] == "8000"
    assert flags(decode)["--data-parallel-size"] == "4" and flags(decode)["--data-parallel-size-local"] == "2"


def test_the_inference_simulator_is_no_vllm_server() -> None:
    values = """
modelArtifacts: {uri: "hf://random/model", name: random/model}
decode:
  containers:
  - {name: vllm, image: "ghcr.io/llm-d/llm-d-inference-sim:v0.3.0", modelCommand: imageDefault}
"""
    with pytest.raises(NothingToReview):
        workloads(("values.yaml", values))
