"""--dtype bfloat16 on a GPU below compute capability 8.0: the GPU worker refuses it at start-up
(feature.bf16-refused-below-sm80), wherever the GPU is read from (a node selector, --gpu)."""

from __future__ import annotations

import pytest

from reading import review

T4_POOL = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-tesla-t4}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: [--model, Qwen/Qwen2.5-1.5B-Instruct, --dtype, bfloat16]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def _rules(text: str, **host: object) -> set[str]:
    return {f.rule_id for f in review(("deploy.yaml", text), **host).findings}


def test_bfloat16_on_a_t4_node_pool_is_refused() -> None:
    [hit] = [f for f in review(("deploy.yaml", T4_POOL)).findings if f.rule_id == "pitfall.bf16-on-pre-ampere-gpu"]
    assert hit.severity == "error" and hit.location.line == 13
    assert "NVIDIA T4 16GB: compute capability 7.5" in hit.message


@pytest.mark.parametrize(
    ("change", "fires"),
    [
        (("--dtype, bfloat16", "--dtype, half"), False),  # float16 runs on a T4
        (("--dtype, bfloat16", "--dtype, auto"), False),  # auto falls back to float16 by itself
        (("nvidia-tesla-t4", "nvidia-tesla-v100"), True),  # compute capability 7.0
        (("nvidia-tesla-t4", "nvidia-l4"), False),  # 8.9
        (("nvidia-tesla-t4", "nvidia-tesla-a100"), False),  # 8.0: the floor itself
    ],
)
def test_only_bfloat16_below_compute_capability_8_is_refused(change: tuple[str, str], fires: bool) -> None:
    assert ("pitfall.bf16-on-pre-ampere-gpu" in _rules(T4_POOL.replace(*change))) is fires


def test_with_the_gpu_unknown_it_is_not_checked_and_the_host_gpu_settles_it() -> None:
    unnamed = T4_POOL.replace("      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-tesla-t4}\n", "")
    result = review(("deploy.yaml", unnamed))
    assert "pitfall.bf16-on-pre-ampere-gpu" not in {f.rule_id for f in result.findings}
    assert "pitfall.bf16-on-pre-ampere-gpu" in {n.rule_id for n in result.not_checked}
    assert "pitfall.bf16-on-pre-ampere-gpu" in _rules(unnamed, host={"gpu": "T4"})


def test_size_offload_on_a_pre_ampere_gpu_says_its_backend_is_not_recorded() -> None:
    from vllm_caching_mcp.tools import run_tool

    answer = run_tool("size_offload", {"model": "llama-3.1-8b", "gpu": "t4", "version": "0.27.1"})
    assert any("compute capability 7.5" in w and "not recorded" in w for w in answer.warnings), answer.warnings
