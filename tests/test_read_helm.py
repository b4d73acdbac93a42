"""Helm values: the production-stack chart's `servingEngineSpec.modelSpec`, read as its template renders
it (issue 15).
"""

from __future__ import annotations

from reading import flags, workloads


def test_production_stack_values_are_read_as_the_chart_renders_them() -> None:
    values = """
servingEngineSpec:
  modelSpec:
  - name: m
    repository: lmcache/vllm-openai
    tag: v0.3.9
    modelURL: Qwen/Qwen3-8B
    requestMemory: 64Gi
    requestGPU: 2
    vllmConfig: {tensorParallelSize: 2}
    lmcacheConfig: {enabled: true, kvRole: kv_producer, cpuOffloadingBufferSize: "30"}
"""
    [w], notes = workloads(("values.yaml", values))
    assert flags(w)["--no-enable-prefix-caching"] is True  # no enablePrefixCaching: the chart writes --no-...
    assert '"kv_role": "kv_producer"' in str(flags(w)["--kv-transfer-config"])
    env = {e.name: e.value for e in w.env}
    assert env["PYTHONHASHSEED"] == "123" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "30"
    assert (w.memory_request_gib, w.gpu_count, w.shm_gib) == (64, 2, 20.0)
    assert any("carries LMCache 0.3.9" in n and "vLLM release is unknown" in n for n in notes)
