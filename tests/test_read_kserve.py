"""KServe InferenceService with a predictor.model served by KServe's vLLM-backed runtimes: the model's
args are vLLM's (huggingfaceserver's own options left out), with its env and resources."""

from __future__ import annotations

from reading import flags, read, workloads

_ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 3
    nodeSelector:
      nvidia.com/gpu.product: NVIDIA-A10G
    model:
      modelFormat:
        name: huggingface
      args:
        - --model_name=qwen
        - --backend
        - vllm
        - --max-model-len=8192
        - --enable-prefix-caching
        - --disable_lower_case
        - --tensor-parallel-size
        - "2"
      storageUri: hf://Qwen/Qwen2.5-7B-Instruct
      env:
        - {name: HF_HUB_OFFLINE, value: "1"}
      resources:
        limits: {nvidia.com/gpu: "2", memory: 64Gi}
        requests: {nvidia.com/gpu: "2", memory: 48Gi}
---
apiVersion: v1
kind: Secret
metadata: {name: hf}
stringData: {HF_TOKEN: x}
"""


def test_the_predictor_model_args_are_the_engine_options() -> None:
    [workload], _ = workloads(("isvc.yaml", _ISVC))
    assert workload.name == "InferenceService/qwen predictor"
    assert flags(workload) == {
        "--max-model-len": "8192",
        "--enable-prefix-caching": True,
        "--tensor-parallel-size": "2",
    }
    assert workload.flags[0].location.line == 18
    assert workload.model == "/mnt/models"  # where the storage initializer puts storageUri
    assert workload.model_location is not None and workload.model_location.line == 23


def test_the_predictor_gives_resources_env_gpu_and_replicas() -> None:
    [workload], _ = workloads(("isvc.yaml", _ISVC))
    assert (workload.gpu_count, workload.memory_limit_gib, workload.memory_request_gib) == (2, 64, 48)
    assert workload.gpu_label == "NVIDIA-A10G" and workload.replicas == 3
    assert [(e.name, e.value) for e in workload.env] == [("HF_HUB_OFFLINE", "1")]
    assert workload.pod_elsewhere and workload.image is None


def test_a_model_id_names_the_model() -> None:
    text = _ISVC.replace("        - --model_name=qwen\n", "        - --model_id=Qwen/Qwen2.5-7B-Instruct\n")
    [workload], _ = workloads(("isvc.yaml", text))
    assert workload.model == "Qwen/Qwen2.5-7B-Instruct"
    assert workload.model_location is not None and workload.model_location.line == 15


def test_a_model_format_no_vllm_runtime_serves_is_not_read_as_one() -> None:
    text = _ISVC.replace("name: huggingface", "name: sklearn")
    deployment = read(("isvc.yaml", text), ("serve.sh", "vllm serve m\n"))
    assert [w.name for w in deployment.workloads] == ["vllm #1"]


_RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: vllm-runtime
spec:
  supportedModelFormats:
    - {name: vLLM, autoSelect: true}
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.11.0
      command: [python, -m, vllm.entrypoints.openai.api_server]
      args: ["--port=8080", "--served-model-name={{.Name}}", "--model=/mnt/models"]
"""


def test_a_serving_runtime_template_placeholder_is_not_known_from_the_files() -> None:
    [workload], _ = workloads(("runtime.yaml", _RUNTIME))
    assert flags(workload)["--model"] == "/mnt/models"
    [served] = [f for f in workload.flags if f.name == "--served-model-name"]
    assert served.unresolved is not None and "filled in by KServe" in served.unresolved


_VLLM_ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: chat
spec:
  predictor:
    model:
      modelFormat: {name: vLLM}
      storageUri: pvc://models/llama
      args: ["--max-model-len=4096"]
      resources:
        limits: {nvidia.com/gpu: "1", memory: 24Gi}
"""


def test_an_inference_service_is_read_with_the_serving_runtime_that_serves_it() -> None:
    deployment = read(("runtime.yaml", _RUNTIME), ("isvc.yaml", _VLLM_ISVC))
    runtime, isvc = deployment.workloads  # the runtime is also reviewed as the template it is
    assert runtime.name.startswith("ClusterServingRuntime/vllm-runtime")
    assert isvc.name == "InferenceService/chat predictor" and isvc.image == "vllm/vllm-openai:v0.11.0"
    assert isvc.image_location is not None and isvc.image_location.file == "runtime.yaml"
    got = flags(isvc)
    assert (got["--port"], got["--model"], got["--max-model-len"]) == ("8080", "/mnt/models", "4096")
    where = {f.name: f.location.file for f in isvc.flags}
    assert (where["--port"], where["--max-model-len"]) == ("runtime.yaml", "isvc.yaml")
    assert (isvc.gpu_count, isvc.memory_limit_gib, isvc.pod_elsewhere) == (1, 24, False)
    assert any("read with the ClusterServingRuntime of runtime.yaml" in n for n in deployment.notes)


def test_a_runtime_that_does_not_serve_the_format_is_not_used() -> None:
    other = _RUNTIME.replace("{name: vLLM, autoSelect: true}", "{name: vLLM, autoSelect: false}")
    deployment = read(("runtime.yaml", other), ("isvc.yaml", _VLLM_ISVC))
    isvc = deployment.workloads[-1]
    assert isvc.image is None and isvc.pod_elsewhere and flags(isvc) == {"--max-model-len": "4096"}
