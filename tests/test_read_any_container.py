"""The generic fallback (issue 32): a container anywhere in a Kubernetes-shaped object whose command or
arguments start vLLM is a vLLM workload, whatever object holds it (custom resources, kustomize patches
that carry only args); Dynamo's own options are not vLLM's; KServe's LLMInferenceService reads its vLLM
arguments from VLLM_ADDITIONAL_ARGS."""

from __future__ import annotations

import pytest

from reading import flags, review, workloads
from vllm_caching_mcp.advice.deployment.read import NothingToReview

DYNAMO = """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: pd}
spec:
  services:
    Frontend:
      replicas: 1
      extraPodSpec:
        mainContainer: {image: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1", command: [python3, -m, dynamo.frontend]}
    Prefill:
      replicas: 2
      resources: {limits: {gpu: "1"}}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen3-8B, --is-prefill-worker, --connector, nixl, lmcache, --max-model-len, "8192",
                 --dyn-reasoning-parser, qwen3, --migration-limit=3]
"""


def test_a_dynamo_worker_is_read_with_only_vllm_options() -> None:
    [w], notes = workloads(("graph.yaml", DYNAMO))
    assert flags(w) == {"--model": "Qwen/Qwen3-8B", "--max-model-len": "8192"}
    assert w.replicas == 2 and "Prefill" in w.name and w.location.line is not None
    assert not any("no vLLM server" in n for n in notes)


def test_containers_at_any_depth_of_a_custom_resource_are_read() -> None:
    manifest = """
apiVersion: ray.io/v1
kind: RayService
metadata: {name: rs}
spec:
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
          - {name: head, image: rayproject/ray-ml:2.40.0, command: [ray, start, --head]}
    workerGroupSpecs:
    - replicas: 3
      template:
        spec:
          containers:
          - name: worker
            image: rayproject/ray-ml:2.40.0
            command: [bash, -c, "pip list && python3 -m vllm.entrypoints.openai.api_server --model m -tp 2"]
"""
    [w], _ = workloads(("ray.yaml", manifest))
    assert flags(w)["-tp"] == "2" and w.replicas == 3 and "workerGroupSpecs" in w.name


def test_a_kustomize_patch_with_only_args_is_a_vllm_workload() -> None:
    patch = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: server
        args:
        - Qwen/Qwen3-8B
        - --tensor-parallel-size=2
        - --kv-transfer-config
        - '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
"""
    [w], _ = workloads(("patch-decode.yaml", patch))
    assert flags(w)["--tensor-parallel-size"] == "2" and "--kv-transfer-config" in flags(w)
    # the pod is the base's: its /dev/shm is not known here, so no shm rule judges the 64 MiB default
    assert w.pod_elsewhere
    shm_rules = {"pitfall.shm-too-small-for-workers", "pitfall.offload-tier-over-shm"}
    assert not shm_rules & {f.rule_id for f in review(("patch-decode.yaml", patch), version="0.33.0").findings}
    # a patch may set the image too (llm-d's tiered-cache overlays do): with no selector and no pod labels, which a
    # Deployment the API server takes must have, it is still a patch
    imaged = patch.replace("      - name: server\n", "      - name: server\n        image: vllm/vllm-openai:v0.33.0\n")
    [patched], notes = workloads(("patch-decode.yaml", imaged))
    assert patched.pod_elsewhere and any("read as a patch" in n for n in notes)
    selected = "spec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n"
    full = imaged.replace("spec:\n  template:\n", selected)
    [whole], _ = workloads(("decode.yaml", full))
    assert not whole.pod_elsewhere
    assert "pitfall.shm-too-small-for-workers" in {f.rule_id for f in review(("decode.yaml", full)).findings}


def test_args_of_another_program_are_not_taken_for_vllm() -> None:
    manifest = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: cache}
spec:
  template:
    spec:
      containers:
      - {name: redis, image: "redis:7", args: [--port, "6379"]}
      - {name: sidecar, args: [--config, /etc/proxy.yaml]}
      - {name: lmcache, image: "lmcache/standalone:v0.3", args: [--model, m]}
"""
    with pytest.raises(NothingToReview, match="no vLLM server found"):
        workloads(("cache.yaml", manifest))


def test_an_llminferenceservice_gives_vllm_its_additional_args() -> None:
    manifest = """
apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata: {name: qwen}
spec:
  model: {uri: "hf://Qwen/Qwen2.5-7B-Instruct", name: Qwen/Qwen2.5-7B-Instruct}
  replicas: 2
  template:
    containers:
    - name: main
      env:
      - name: VLLM_ADDITIONAL_ARGS
        value: >-
          --kv_transfer_config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
          --max-model-len 4096
      resources: {limits: {nvidia.com/gpu: "1"}}
  prefill:
    replicas: 1
    template:
      containers:
      - name: main
        env: [{name: VLLM_ADDITIONAL_ARGS, value: "--enforce-eager"}]
"""
    decode, prefill = workloads(("llmisvc.yaml", manifest))[0]
    assert flags(decode)["--max-model-len"] == "4096" and flags(decode)["--port"] == "8001"
    assert '"NixlConnector"' in str(flags(decode)["--kv-transfer-config"]) and decode.replicas == 2
    assert decode.gpu_count == 1 and prefill.replicas == 1 and "--enforce-eager" in flags(prefill)


def test_containers_keyed_by_name_in_chart_values_are_read() -> None:
    # bjw-s app-template: controllers.<name>.containers.<name>, the image as {repository, tag}
    values = (
        "controllers:\n  vllm:\n    containers:\n      app:\n"
        "        image:\n          repository: vllm/vllm-openai\n          tag: v0.20.0\n"
        "        args: [--model, Qwen/Qwen3-8B, --tensor-parallel-size, '2']\n"
        "        resources:\n          limits:\n            nvidia.com/gpu: 1\n"
    )
    [workload], _ = workloads(("values.yaml", values))
    assert (workload.image, flags(workload)["--model"]) == ("vllm/vllm-openai:v0.20.0", "Qwen/Qwen3-8B")
    rules = [f.rule_id for f in review(("values.yaml", values)).findings]
    assert "pitfall.world-size-over-visible-gpus" in rules
