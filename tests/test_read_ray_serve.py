"""Ray Serve LLM: a KubeRay RayService whose serveConfigV2 builds ray.serve.llm applications, and a Serve
config file of its own: each LLMConfig is a vLLM engine, its engine_kwargs the engine's options."""

from __future__ import annotations

import pytest

from reading import effective, flags, read, workloads
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.deployment.read import NothingToReview

_RAY_SERVICE = """\
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: chat
spec:
  serveConfigV2: |
    applications:
      - name: llm
        import_path: ray.serve.llm:build_openai_app
        runtime_env:
          env_vars: {HF_HUB_OFFLINE: "0"}
        args:
          llm_configs:
            - model_loading_config:
                model_id: llama
                model_source: meta-llama/Llama-3.1-70B-Instruct
              accelerator_type: A100
              deployment_config:
                autoscaling_config: {min_replicas: 1, max_replicas: 3}
              runtime_env:
                env_vars:
                  VLLM_LOGGING_LEVEL: DEBUG
              engine_kwargs:
                tensor_parallel_size: 4
                pipeline_parallel_size: 2
                max_model_len: 32768
                enable_prefix_caching: false
                kv_transfer_config:
                  kv_connector: LMCacheConnectorV1
                  kv_role: kv_both
            - ./models/other.yaml
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {num-gpus: "0"}
      template:
        spec:
          containers:
            - name: ray-head
              image: rayproject/ray-llm:2.50.0-py311-cu128
    workerGroupSpecs:
      - groupName: gpu
        replicas: 2
        template:
          spec:
            containers:
              - name: ray-worker
                image: rayproject/ray-llm:2.50.0-py311-cu128
                env:
                  - {name: LMCACHE_CHUNK_SIZE, value: "256"}
                resources:
                  limits: {nvidia.com/gpu: "4", memory: 400Gi}
                  requests: {nvidia.com/gpu: "4", memory: 400Gi}
---
apiVersion: v1
kind: Service
metadata:
  name: chat-serve
spec:
  ports: [{port: 8000}]
"""


def test_each_llm_config_of_a_ray_service_is_an_engine_with_its_kwargs_as_options() -> None:
    deployment = read(("rayservice.yaml", _RAY_SERVICE))
    [workload] = deployment.workloads
    assert workload.name == "RayService/chat application llm model meta-llama/Llama-3.1-70B-Instruct"
    assert workload.model == "meta-llama/Llama-3.1-70B-Instruct"
    got = flags(workload)
    assert got["--tensor-parallel-size"] == "4" and got["--max-model-len"] == "32768"
    assert got["--no-enable-prefix-caching"] is True
    assert got["--kv-transfer-config"] == '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'
    # positions point into the embedded Serve config's lines
    where = {f.name: f.location for f in workload.flags}
    assert where["--tensor-parallel-size"].line == 24
    assert where["--tensor-parallel-size"].path == (
        "spec.serveConfigV2:applications[0].args.llm_configs[0].engine_kwargs.tensor_parallel_size"
    )
    assert workload.model_location is not None and workload.model_location.line == 16
    assert "./models/other.yaml" in " ".join(deployment.notes)
    assert deployment.services == ["chat-serve"]  # the Service beside it is read by the manifest reader


def test_the_gpu_worker_group_gives_image_resources_and_environment() -> None:
    [workload], _ = workloads(("rayservice.yaml", _RAY_SERVICE))
    assert workload.image == "rayproject/ray-llm:2.50.0-py311-cu128" and workload.image_location is not None
    assert workload.image_location.line == 47
    assert workload.gpu_count == 4 and workload.memory_limit_gib == 400
    assert workload.nodes == 2  # TP 4 x PP 2 over pods of 4 GPUs
    assert workload.replicas == 3 and workload.gpu_label == "A100"
    assert workload.pod_elsewhere
    env = {e.name: e.value for e in workload.env}
    assert env == {"LMCACHE_CHUNK_SIZE": "256", "HF_HUB_OFFLINE": "0", "VLLM_LOGGING_LEVEL": "DEBUG"}


def test_the_engine_kwargs_reach_the_effective_configuration() -> None:
    resolved = effective(("rayservice.yaml", _RAY_SERVICE))
    assert [c.name for c in resolved.connectors] == ["LMCacheConnectorV1"]
    assert resolved.facts["world_size"] == 8


_SERVE_CONFIG = """\
proxy_location: EveryNode
http_options: {host: 0.0.0.0, port: 8000}
applications:
  - name: pd
    route_prefix: /
    import_path: ray.serve.llm:build_pd_openai_app
    args:
      prefill_config:
        model_loading_config: {model_id: qwen, model_source: Qwen/Qwen2.5-7B-Instruct}
        deployment_config: {num_replicas: 2}
        engine_kwargs:
          kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_both}
      decode_config:
        model_loading_config: {model_id: qwen}
        engine_kwargs:
          max_num_seqs: 64
          enforce_eager: true
"""


def test_a_serve_config_file_of_its_own_is_read() -> None:
    found, _ = workloads(("serve_config.yaml", _SERVE_CONFIG))
    assert [w.name for w in found] == [
        "Ray Serve application pd model Qwen/Qwen2.5-7B-Instruct",
        "Ray Serve application pd model qwen",
    ]
    prefill, decode = found
    assert prefill.replicas == 2 and prefill.source == "command-line" and prefill.image is None
    assert flags(decode) == {"--max-num-seqs": "64", "--enforce-eager": True}
    assert decode.flags[0].location.line == 16


def test_a_ray_service_without_a_serve_config_is_left_to_the_manifest_reader() -> None:
    text = (
        _RAY_SERVICE.split("  serveConfigV2: |", 1)[0]
        + "  rayClusterConfig:"
        + _RAY_SERVICE.split("  rayClusterConfig:", 1)[1]
    )
    with pytest.raises(NothingToReview):  # its containers run Ray, not vLLM
        read(("rayservice.yaml", text))


def test_a_serve_config_that_is_not_yaml_is_an_error_naming_the_field() -> None:
    text = _RAY_SERVICE.replace("    applications:\n", "    applications: [\n", 1)
    expected = r"rayservice.yaml:7 \(spec.serveConfigV2\): the Ray Serve config in it: .*line 8"
    with pytest.raises(AdviceError, match=expected):
        read(("rayservice.yaml", text))


def test_a_ray_service_whose_serve_config_has_no_llm_app_is_left_to_the_manifest_reader() -> None:
    text = """\
apiVersion: ray.io/v1
kind: RayService
metadata: {name: other}
spec:
  serveConfigV2: |
    applications:
      - {name: app, import_path: my_app:app}
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
            - name: head
              image: vllm/vllm-openai:v0.10.0
              args: [--model, m, --max-model-len, "4096"]
"""
    [workload], _ = workloads(("rayservice.yaml", text))
    assert workload.name.startswith("RayService/other") and flags(workload)["--max-model-len"] == "4096"


_RAY_JOB = """\
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: bench
spec:
  entrypoint: >-
    vllm serve Qwen/Qwen2.5-72B-Instruct --tensor-parallel-size 8
    --pipeline-parallel-size 2 --distributed-executor-backend ray
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers:
            - {name: head, image: "vllm/vllm-openai:v0.10.2"}
    workerGroupSpecs:
      - replicas: 2
        template:
          spec:
            containers:
              - name: worker
                image: vllm/vllm-openai:v0.10.2
                resources:
                  limits: {nvidia.com/gpu: 8}
"""


def test_a_ray_job_entrypoint_that_starts_vllm_is_read_on_its_cluster() -> None:
    [workload], _ = workloads(("rayjob.yaml", _RAY_JOB))
    assert workload.name == "RayJob/bench entrypoint vllm #1"
    assert workload.model == "Qwen/Qwen2.5-72B-Instruct"
    assert flags(workload)["--pipeline-parallel-size"] == "2"
    assert (workload.image, workload.gpu_count, workload.nodes) == ("vllm/vllm-openai:v0.10.2", 8, 2)
