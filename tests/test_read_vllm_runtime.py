"""production-stack's operator: a VLLMRuntime read as the `vllm serve` command and environment the
operator builds from its fields (deploymentForVLLMRuntime of the operator's controller)."""

from __future__ import annotations

import json

from reading import effective, flags, workloads

_RUNTIME = """\
apiVersion: production-stack.vllm.ai/v1alpha1
kind: VLLMRuntime
metadata:
  name: llama
spec:
  model:
    modelURL: meta-llama/Llama-3.1-8B-Instruct
    maxModelLen: 16384
    dtype: bfloat16
    enableLoRA: false
    hfTokenSecret: {name: hf-token}
  vllmConfig:
    enablePrefixCaching: true
    tensorParallelSize: 2
    gpuMemoryUtilization: "0.85"
    v1: true
    port: 8000
    extraArgs: ["--max-num-batched-tokens", "4096"]
    env:
      - {name: PYTHONHASHSEED, value: "0"}
  lmCacheConfig:
    enabled: true
    cpuOffloadingBufferSize: "20"
    remoteUrl: lm://cache:80
    remoteSerde: naive
  deploymentConfig:
    replicas: 2
    resources: {cpu: "8", memory: 64Gi, gpu: "2"}
    image: {registry: docker.io, name: "lmcache/vllm-openai:v0.3.5"}
---
apiVersion: v1
kind: Service
metadata: {name: llama-router}
spec: {ports: [{port: 80}]}
"""


def test_the_fields_become_the_options_the_operator_gives() -> None:
    [workload], _ = workloads(("runtime.yaml", _RUNTIME))
    assert workload.model == "meta-llama/Llama-3.1-8B-Instruct"
    got = flags(workload)
    assert got.pop("--kv-transfer-config") == json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    assert got == {
        "--host": "0.0.0.0",
        "--port": "8000",
        "--no-enable-chunked-prefill": True,  # absent is false: the operator passes the --no- form
        "--enable-prefix-caching": True,
        "--max-model-len": "16384",
        "--dtype": "bfloat16",
        "--tensor-parallel-size": "2",
        "--gpu-memory-utilization": "0.85",
        "--max-num-batched-tokens": "4096",
    }
    where = {f.name: f.location for f in workload.flags}
    assert where["--tensor-parallel-size"].line == 14 and where["--kv-transfer-config"].line == 22
    assert where["--host"].path == "(set by the production-stack operator)"


def test_lmcache_fields_become_its_variables() -> None:
    [workload], _ = workloads(("runtime.yaml", _RUNTIME))
    env = {e.name: e.value for e in workload.env}
    assert env["LMCACHE_LOCAL_CPU"] == "True" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "20"
    assert env["LMCACHE_REMOTE_URL"] == "lm://cache:80" and env["LMCACHE_REMOTE_SERDE"] == "naive"
    assert env["VLLM_USE_V1"] == "1" and env["PYTHONHASHSEED"] == "0" and env["HF_TOKEN"] is None
    assert "LMCACHE_LOCAL_DISK" not in env


def test_deployment_config_gives_image_resources_and_replicas() -> None:
    [workload], _ = workloads(("runtime.yaml", _RUNTIME))
    assert workload.image == "docker.io/lmcache/vllm-openai:v0.3.5"
    assert (workload.memory_limit_gib, workload.memory_request_gib, workload.gpu_count) == (64, 64, 2)
    assert workload.replicas == 2 and workload.pod_elsewhere


def test_the_connector_reaches_the_effective_configuration() -> None:
    resolved = effective(("runtime.yaml", _RUNTIME))
    assert [c.name for c in resolved.connectors] == ["LMCacheConnectorV1"]
    assert resolved.facts["tp"] == 2
