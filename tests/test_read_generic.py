"""vLLM recognised by what it is written with, not by the shape that holds it: arguments that are vLLM's
options whatever the image, any YAML mapping that holds vLLM's arguments or a `vllm serve` command, a
`vllm serve --config` file, and a vLLM image that runs a script the files do not hold."""

from __future__ import annotations

import pytest

from reading import KNOWLEDGE, flags, read, review, workloads
from vllm_caching_mcp.advice.deployment.flags import VLLM_OPTION_NAMES
from vllm_caching_mcp.advice.deployment.launch import looks_like_vllm_args
from vllm_caching_mcp.advice.deployment.read import NothingToReview

OPTIONS = VLLM_OPTION_NAMES(KNOWLEDGE)
M = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


@pytest.mark.parametrize(
    "words",
    [
        ["--model=org/m", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"],
        ["org/m", "--max_num_seqs=64", "--enforce-eager"],  # a positional model counts, underscores read as dashes
        # a fork's own option among five of vLLM's
        [
            "--model",
            "m",
            "--device",
            "hpu",
            "--tensor-parallel-size",
            "2",
            "--max-model-len",
            "4096",
            "--dtype",
            "bf16",
        ],
        ["--max-num-batched-token=4096", "--max-num-seqs=8", "--block-size=16"],  # a unique prefix is the option
    ],
)
def test_arguments_that_are_vllm_options(words: list[str]) -> None:
    assert looks_like_vllm_args(words, OPTIONS)


@pytest.mark.parametrize(
    "words",
    [
        # SGLang: --model-path, --tp-size, --mem-fraction-static are its own
        ["--model-path", "org/m", "--tp-size", "2", "--mem-fraction-static", "0.8", "--port", "30000"],
        # SGLang with the names it shares with vLLM only: nothing tells it apart
        ["--model", "org/m", "--tensor-parallel-size", "2", "--port", "30000", "--host", "0.0.0.0"],
        # TGI's launcher
        ["--model-id", "org/m", "--num-shard", "2", "--max-input-length", "4000", "--max-total-tokens", "8000"],
        # llama.cpp's server
        ["-m", "/models/m.gguf", "--ctx-size", "8192", "--n-gpu-layers", "99", "--port", "8080"],
        ["--max-model-len", "8192", "--gpu-memory-utilization", "0.9"],  # two options are too few to tell
        ["--config", "/etc/app.yaml", "--log-level", "debug", "--port", "9000"],  # a web app's
    ],
)
def test_arguments_of_other_servers_are_not_vllm(words: list[str]) -> None:
    assert not looks_like_vllm_args(words, OPTIONS)


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - name: server
          image: registry.example.com/ai/gaudi-runtime:1.2.0
          args:
            - --model=org/model-7b
            - --device
            - hpu
            - --tensor-parallel-size
            - "1"
            - --max-model-len
            - "6144"
            - --dtype
            - bfloat16
          resources:
            limits: {habana.ai/gaudi: 1}
"""


def test_a_container_of_any_image_whose_arguments_are_vllm_options() -> None:
    [workload], notes = workloads(("deploy.yaml", DEPLOYMENT))
    assert flags(workload)["--model"] == "org/model-7b"
    assert flags(workload)["--max-model-len"] == "6144"
    assert [f.location.line for f in workload.flags if f.name == "--max-model-len"] == [16]
    assert any("read as a vLLM server by its arguments" in n and "4 of 5" in n for n in notes)


SGLANG = DEPLOYMENT.replace(
    """          args:
            - --model=org/model-7b
            - --device
            - hpu
            - --tensor-parallel-size
            - "1"
            - --max-model-len
            - "6144"
            - --dtype
            - bfloat16
""",
    """          args: [--model-path, org/m, --tp-size, "2", --mem-fraction-static, "0.85", --context-length, "8192"]
""",
)
TGI = DEPLOYMENT.replace("- --model=org/model-7b", "- --model-id=org/m").replace(
    "--max-model-len", "--max-input-length"
)


@pytest.mark.parametrize("text", [SGLANG, TGI])
def test_containers_of_other_servers_are_not_read(text: str) -> None:
    with pytest.raises(NothingToReview):
        read(("deploy.yaml", text))


KUBEAI_MODEL = """apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: big-model
spec:
  features: [TextGeneration]
  url: hf://org/big-model-fp8
  engine: VLLM
  args:
    - --max-model-len=32768
    - --tensor-parallel-size=8
    - --enable-prefix-caching
    - --max-num-seqs=64
  env:
    VLLM_ATTENTION_BACKEND: FLASHINFER
  minReplicas: 0
  resourceProfile: nvidia-gpu-h100:8
"""


def test_a_custom_resource_with_vllm_arguments() -> None:
    [workload], _ = workloads(("model.yaml", KUBEAI_MODEL))
    assert workload.model == "org/big-model-fp8" and workload.model_location.line == 7
    assert flags(workload)["--tensor-parallel-size"] == "8"
    assert [(e.name, e.value, e.location.line) for e in workload.env] == [("VLLM_ATTENTION_BACKEND", "FLASHINFER", 15)]
    assert (workload.gpu_count, workload.accelerator, workload.gpu_location.line) == (8, "nvidia.com/gpu", 17)
    assert workload.pod_elsewhere


VALUES_WITH_COMMAND = """replicaCount: 1
image:
  repository: vllm/vllm-openai
  tag: latest
shm:
  sizeLimit: 4Gi
command: "vllm serve __MODEL__ --max_model_len {{ .Values.maxLen }}"
resources:
  limits:
    nvidia.com/gpu: 2
livenessProbe:
  httpGet: {path: /health, port: 8000}
  initialDelaySeconds: 30
env:
  - name: HF_HOME
    value: /cache
"""


def test_chart_values_whose_command_runs_vllm_serve() -> None:
    deployment = read(("values.yaml", VALUES_WITH_COMMAND))
    [workload] = deployment.workloads
    assert (workload.image, workload.image_location.line) == ("vllm/vllm-openai:latest", 4)
    assert workload.model is None  # the placeholder is a value not known, not a model
    assert any("__MODEL__" in u and "placeholder" in u for u in workload.unresolved)
    assert flags(workload)["--max-model-len"] == "{{.Values.maxLen}}"  # one word, not known
    assert (workload.gpu_count, workload.gpu_location.line) == (2, 10)
    assert [(e.name, e.value) for e in workload.env] == [("HF_HOME", "/cache")]
    checks = {(h.check, h.location.line) for h in workload.hygiene}
    assert ("liveness-kills-model-load", 12) in checks and ("floating-image-tag", 4) in checks


VALUES_WITH_EXTRA_ARGS = """engine:
  image:
    registry: docker.io
    repository: acme/vllm-gaudi
  server:
    extraArgs: ["--block-size", "128", "--max-num-seqs", "256"]
    startupProbe:
      failureThreshold: 300
"""


def test_extra_args_of_a_vllm_image_in_any_chart() -> None:
    [workload], notes = workloads(("values.yaml", VALUES_WITH_EXTRA_ARGS))
    assert flags(workload) == {"--block-size": "128", "--max-num-seqs": "256"}
    assert workload.flags[0].location.line == 6
    assert workload.image is None  # no tag: the chart's default, not in the files
    assert not any(h.check == "floating-image-tag" for h in workload.hygiene)
    assert any("extraArgs are the arguments of a vLLM image" in n for n in notes)


def test_an_empty_argument_list_of_a_vllm_image() -> None:
    [workload], _ = workloads(("values.yaml", "image:\n  repository: acme/vllm\n  tag: v1.0.0\nextraCmdArgs: []\n"))
    assert workload.flags == [] and workload.image == "acme/vllm:v1.0.0"


NOT_LLM_VALUES = """image:
  repository: bitnami/redis
  tag: 7.2.4
extraArgs: ["--maxmemory", "2gb", "--port", "6379"]
master:
  args: ["--appendonly", "yes"]
  command: ["redis-server"]
env:
  - {name: REDIS_PASSWORD, value: x}
"""


@pytest.mark.parametrize(
    "text",
    [
        NOT_LLM_VALUES,
        # an SGLang chart's values
        "image: {repository: lmsysorg/sglang, tag: v0.5.2}\nargs: [--model-path, m, --tp-size, '2', --port, '30000']\n",
        # a vLLM image whose args start with something else than options
        "image: {repository: vllm/vllm-openai, tag: v0.11.0}\nargs: [python, app.py]\n",
    ],
)
def test_values_that_start_no_vllm(text: str) -> None:
    with pytest.raises(NothingToReview):
        read(("values.yaml", text))


def test_containers_of_a_manifest_are_left_to_the_manifest_reader() -> None:
    text = DEPLOYMENT.replace("registry.example.com/ai/gaudi-runtime:1.2.0", "vllm/vllm-openai:v0.11.0")
    text = text.replace("          args:", "          command: [/opt/start.sh]\n          args:")
    # the manifest reader reads a start script given vLLM's options as passing them on; the generic reader
    # does not read the container a second time
    deployment = read(("deploy.yaml", text))
    [workload] = deployment.workloads
    assert workload.source == "kubernetes" and deployment.unread == []
    assert any(
        "/opt/start.sh is a script the files do not hold, given `vllm serve` options" in n for n in deployment.notes
    )


CONFIG = """model: org/m-8b
max-model-len: 16384
tensor-parallel-size: 2
enable-prefix-caching: true
enable-chunked-prefill: false
kv-cache-dtype: fp8
api-key: []
compilation-config:
  cudagraph_mode: FULL
"""


def test_a_vllm_config_file() -> None:
    [workload], notes = workloads(("serving-args.yaml", CONFIG))
    got = flags(workload)
    assert got["--model"] == "org/m-8b" and got["--max-model-len"] == "16384"
    assert got["--enable-prefix-caching"] is True and got["--no-enable-chunked-prefill"] is True
    assert got["--compilation-config"] == '{"cudagraph_mode": "FULL"}'
    assert "--api-key" not in got  # an empty list gives nothing
    assert {f.name: f.location.line for f in workload.flags}["--kv-cache-dtype"] == 6
    assert any("vllm serve --config serving-args.yaml" in n for n in notes)


@pytest.mark.parametrize(
    "text",
    [
        "host: 0.0.0.0\nport: 8080\nlog-level: info\nworkers: 4\n",  # a web server's settings
        "max-connections: 10\nbuffer-size: 4k\nretry-count: 3\nmax-model-len: 2\n",  # option-like, mostly not vLLM's
    ],
)
def test_yaml_of_other_settings_is_no_config_file(text: str) -> None:
    with pytest.raises(NothingToReview):
        read(("settings.yaml", text))


@pytest.mark.parametrize(
    "command", ["[/usr/local/bin/ray, start, --block]", "[/bin/bash, -c, 'python3 app.py']", "[/opt/tool]"]
)
def test_a_vllm_image_running_something_known_or_unnamed_is_no_unread_script(command: str) -> None:
    text = DEPLOYMENT.replace("registry.example.com/ai/gaudi-runtime:1.2.0", "vllm/vllm-openai:v0.11.0")
    text = text.replace("          args:", f"          command: {command}\n          args:")
    text = text.replace("--model=org/model-7b", "--x=1")  # the args are not vLLM's either
    with pytest.raises(NothingToReview):
        read(("deploy.yaml", text))


def test_the_engine_an_operator_names_makes_its_arguments_vllm_s() -> None:
    text = "kind: Model\napiVersion: x/v1\nspec:\n  engine: VLLM\n  args: [--max-num-seqs=8]\n  env: [A=1]\n"
    [workload], _ = workloads(("model.yaml", text))
    assert flags(workload) == {"--max-num-seqs": "8"}
    assert [(e.name, e.value) for e in workload.env] == [("A", "1")]
    with pytest.raises(NothingToReview):  # another engine's arguments
        read(("model.yaml", text.replace("VLLM", "OLlama")))


def test_a_compose_service_of_any_image_whose_command_is_vllm_options() -> None:
    text = (
        "services:\n  llm:\n    image: acme/neuron-runtime:2.1\n"
        "    command: [--model, org/m, --max-num-seqs, '8', --block-size, '32', --max-model-len, '4096']\n"
    )
    [workload], notes = workloads(("compose.yaml", text))
    assert flags(workload)["--block-size"] == "32" and workload.flags[0].location.line == 4
    assert any("service llm read as a vLLM server by its arguments" in n for n in notes)
    with pytest.raises(NothingToReview):  # an SGLang service
        read(("compose.yaml", text.replace("--max-num-seqs", "--tp-size").replace("--block-size", "--page-size")))


def test_the_argument_lists_of_one_mapping_are_read_together() -> None:
    text = "image: vllm/vllm-openai:v0.11.0\nargs: [--model, m]\nextraArgs: [--max-num-seqs, '4']\n"
    [workload], _ = workloads(("values.yaml", text))
    assert flags(workload) == {"--model": "m", "--max-num-seqs": "4"}
    text = "server:\n  command: [vllm, serve]\n  args: [m, --max-num-seqs, '4']\n"
    [workload], _ = workloads(("values.yaml", text))
    assert workload.model == "m" and flags(workload) == {"--max-num-seqs": "4"}


def test_a_long_list_of_data_is_not_read_as_a_command() -> None:
    text = "allowedHosts:\n" + "".join(f"  - --host-{i}\n" for i in range(60_000))
    with pytest.raises(NothingToReview):  # not "a command of more than 50,000 words"
        read(("values.yaml", text))


def test_serve_first_is_the_subcommand_of_an_image_whose_entrypoint_is_vllm() -> None:
    command = "[serve, org/m, --max-num-seqs, '8', --block-size, '3']"
    text = f"services:\n  llm:\n    image: acme/x:1\n    command: {command}\n"
    [workload], _ = workloads(("compose.yaml", text))
    assert workload.model == "org/m" and flags(workload) == {"--max-num-seqs": "8", "--block-size": "3"}


CHART_VALUES = """\
vllm:
  replicaCount: 1
  image:
    repository: vllm/vllm-openai
    tag: "v0.22.1"
  model:
    name: Qwen/Qwen3-8B
    maxModelLen: 16384
  maxNumBatchedTokens: 1024
  enableChunkedPrefill: false
  tensorParallelSize: null
  task: ""
  resources:
    limits:
      nvidia.com/gpu: '1'
tokenizer:
  image: {repository: example/tokenizer, tag: v0.1}
  maxModelLen: 4096
"""


def test_chart_values_named_as_vllm_options_are_the_options_its_templates_pass() -> None:
    [w], notes = workloads(("values.yaml", CHART_VALUES))
    assert w.image == "vllm/vllm-openai:v0.22.1" and w.gpu_count == 1
    assert w.model == "Qwen/Qwen3-8B"  # `model.name`, passed as the positional model
    assert flags(w) == {
        "--max-model-len": "16384",
        "--max-num-batched-tokens": "1024",
        "--no-enable-chunked-prefill": True,
    }  # a null or empty value is the chart's default: not passed
    assert [f.location.line for f in w.flags if f.name == "--max-model-len"] == [8]
    assert any("named as `vllm serve` options of its image" in n for n in notes)


def test_chart_values_of_another_image_or_with_one_option_name_are_no_vllm_server() -> None:
    one = "app:\n  image: {repository: vllm/vllm-openai, tag: v0.22.1}\n  maxModelLen: 4096\n  replicaCount: 2\n"
    other = CHART_VALUES.replace("vllm/vllm-openai", "example/server").split("tokenizer:")[0]
    for text in (one, other):
        with pytest.raises(NothingToReview):
            read(("values.yaml", text))


def test_an_inference_config_a_configmap_holds_is_read_where_it_sits() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: params}\ndata:\n  inference_config.yaml: |\n"
        "    max_probe_steps: 6\n    vllm:\n      gpu-memory-utilization: 0.95\n      max-model-len: 131072\n"
        "      tensor-parallel-size: 2\n      enable-chunked-prefill: true\n"
    )
    [w], _ = workloads(("workspace.yaml", text))
    assert flags(w) == {
        "--gpu-memory-utilization": "0.95",
        "--max-model-len": "131072",
        "--tensor-parallel-size": "2",
        "--enable-chunked-prefill": True,
    }
    assert [f.location.line for f in w.flags if f.name == "--max-model-len"] == [9]


def test_a_ci_step_that_starts_vllm_is_read() -> None:
    action = (
        "runs:\n  using: composite\n  steps:\n    - name: Start\n      shell: bash\n      run: |\n"
        "        docker run -d -p 8000:8000 vllm/vllm-openai:v0.22.1 --model org/m --max-model-len 4096\n"
        "        curl -f http://localhost:8000/health\n    - name: Test\n      run: pip install pytest && pytest\n"
    )
    [w], _ = workloads(("action.yml", action))
    assert w.image == "vllm/vllm-openai:v0.22.1" and flags(w)["--max-model-len"] == "4096"


def test_chart_values_with_the_options_and_the_image_in_sections_of_their_own() -> None:
    """ai-on-eks' inference charts: `modelParameters` holds the options, `inference.modelServer.image` the image;
    the `model` value is the positional model (`--model` is a `vllm serve` option only from 0.11.1)."""
    values = (
        f"model: {M}\nmodelParameters:\n  gpuMemoryUtilization: 0.9\n  maxModelLen: 1024\n  tensorParallelSize: 4\n"
        "inference:\n  modelServer:\n    image:\n      repository: 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm\n"
        "      tag: 0.11.0-gpu-py312-cu128-ubuntu22.04-ec2\n"
    )
    [w], _ = workloads(("values.yaml", values))
    assert w.image == "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11.0-gpu-py312-cu128-ubuntu22.04-ec2"
    assert (w.model, flags(w)["--tensor-parallel-size"]) == (M, "4")
    result = review(("values.yaml", values))
    assert "pitfall.unknown-flag" not in {f.rule_id for f in result.findings}


def test_values_whose_image_below_is_another_server_s_are_not_read() -> None:
    values = "modelParameters:\n  maxModelLen: 1024\n  tensorParallelSize: 4\nserver:\n  image: ghcr.io/org/tgi:1\n"
    with pytest.raises(NothingToReview):
        read(("values.yaml", values))


def test_a_ci_step_s_server_ends_where_its_command_does() -> None:
    """`vllm serve … &` then a wait loop: the loop's words (`[ $t -gt 0 ]`, `curl -sSf`) are no options of it."""
    workflow = (
        "env:\n  VLLM_MODEL: org/m\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: |\n"
        "          nohup vllm serve ${{ env.VLLM_MODEL }} \\\n            --port 8000 --max-num-seqs 1 &\n\n"
        "          while [ $t -gt 0 ] && ! curl -sSf http://localhost:8000/health; do sleep 10; done\n"
    )
    [w], _ = workloads(("workflow.yml", workflow))
    assert flags(w) == {"--port": "8000", "--max-num-seqs": "1"}
    assert w.model == "org/m"  # ${{ env.VLLM_MODEL }}: the workflow's env sets it
    assert "pitfall.vllm-env-unread" not in {f.rule_id for f in review(("workflow.yml", workflow)).findings}


@pytest.mark.parametrize(
    "image", ["ghcr.io/org/dynamo-mocker-vllm:latest", "ghcr.io/llm-d/llm-d-inference-sim:v0.3.0", "org/vllm-mock:1"]
)
def test_a_mock_of_vllm_s_api_is_no_vllm_server(image: str) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: m}\nspec:\n  template:\n    spec:\n"
        f"      containers:\n        - name: engine\n          image: {image}\n"
    )
    with pytest.raises(NothingToReview):
        read(("mock.yaml", text))


DSTACK_SERVICE = """\
type: service
name: gpt-oss-120b
image: rocm/vllm-dev:open-mi300-08052025
commands:
  - pip list
  - |
    vllm serve openai/gpt-oss-120b \\
      --tensor-parallel-size 8 \\
      --no-enable-prefix-caching
port: 8000
"""


def test_a_list_of_script_lines_under_commands_is_read_line_by_line() -> None:
    # dstack's `commands:` (and a CI job's `script:`): each item is a line of shell, not one word of a command
    [w], notes = workloads(("service.dstack.yml", DSTACK_SERVICE))
    assert (w.model, flags(w)) == (
        "openai/gpt-oss-120b",
        {"--tensor-parallel-size": "8", "--no-enable-prefix-caching": True},
    )
    assert [f.location.line for f in w.flags] == [8, 9]
    assert any("its commands runs vLLM" in n for n in notes)


DSTACK_WITH_INSTALL = """\
type: service
env:
  - HF_TOKEN
  - MODEL_ID=meta-llama/Meta-Llama-3.1-8B-Instruct
  - MAX_MODEL_LEN=4096
commands:
  - pip install vllm
  - vllm serve $MODEL_ID
    --max-model-len $MAX_MODEL_LEN
port: 8000
"""


def test_script_lines_run_as_one_script_with_the_variables_their_env_sets() -> None:
    """The install on the line before `vllm serve` is part of the start, and `env` sets what the lines expand."""
    [w], _ = workloads(("service.dstack.yml", DSTACK_WITH_INSTALL))
    assert (w.model, flags(w)) == ("meta-llama/Meta-Llama-3.1-8B-Instruct", {"--max-model-len": "4096"})
    [hit] = [
        f
        for f in review(("service.dstack.yml", DSTACK_WITH_INSTALL)).findings
        if f.rule_id == "pitfall.install-at-start"
    ]
    assert hit.location.line == 7 and "pip install vllm: unpinned" in hit.message


CHART_VALUES_WITHOUT_GPU = """\
image:
  repository: vllm/vllm-openai
  tag: v0.22.1
model:
  name: Qwen/Qwen3-8B
maxModelLen: 16384
gpuMemoryUtilization: 0.9
# nvidia.com/gpu: 1  (a comment gives no GPU)
resources: {}
"""


def test_chart_values_whose_resources_name_no_gpu_give_the_server_none() -> None:
    # the chart's templates pass .Values.resources to the container: {} requests no GPU
    found = review(("values.yaml", CHART_VALUES_WITHOUT_GPU)).findings
    (hit,) = [f for f in found if f.rule_id == "pitfall.no-gpu-requested"]
    assert hit.location.line == 9
    # a key that may give GPUs another way (gpu: 1, requestGPU) leaves it to the chart
    with_gpu_key = CHART_VALUES_WITHOUT_GPU + "gpu: 1\n"
    assert "pitfall.no-gpu-requested" not in {f.rule_id for f in review(("values.yaml", with_gpu_key)).findings}


OPERATOR_WITH_SHARED_ENV = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelBooster
metadata: {name: pd}
spec:
  backend:
    env:
      - {name: LMCACHE_REMOTE_URL, value: "redis://redis:6379"}
      - {name: LMCACHE_CHUNK_SIZE, value: "256"}
    workers:
      - type: prefill
        image: lmcache/vllm-openai:v0.3.9
        env:
          - {name: LMCACHE_CHUNK_SIZE, value: "512"}
        config:
          served-model-name: Qwen/Qwen2.5-0.5B-Instruct
          tensor-parallel-size: 1
          gpu-memory-utilization: 0.9
          max-model-len: 4096
          kv-transfer-config: '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'
"""


def test_variables_an_operator_sets_above_its_workers_reach_them() -> None:
    [w], _ = workloads(("booster.yaml", OPERATOR_WITH_SHARED_ENV))
    env = {e.name: e.value for e in w.env}
    assert env["LMCACHE_REMOTE_URL"] == "redis://redis:6379"
    assert [e.value for e in w.env if e.name == "LMCACHE_CHUNK_SIZE"][-1] == "512"  # the worker's own wins


OPERATOR_RUNTIME = """apiVersion: inference.example.io/v1alpha1
kind: BackendRuntime
metadata: {name: vllm}
spec:
  command: [python3, -m, vllm.entrypoints.openai.api_server]
  image: vllm/vllm-openai
  version: v0.11.0
  lifecycle:
    preStop:
      exec:
        command:
          - /bin/sh
          - -c
          - |
            while curl -s http://localhost:8000/metrics | grep -q 'num_requests_running{.*} [1-9]'; do sleep 5; done
  recommendedConfigs:
    - name: default
      args: [--model, org/model, --port, "8080"]
  readinessProbe:
    httpGet: {path: /health, port: 8080}
"""


def test_the_probes_and_hooks_of_an_operators_resource_are_its_servers() -> None:
    """An operator copies the probes and hooks written beside the arguments into the server's container: a
    preStop drain that polls another port than --port never sees the server's requests."""
    [workload] = read(("runtime.yaml", OPERATOR_RUNTIME)).workloads
    assert {(p.what, p.number) for p in workload.probe_ports} == {
        ("lifecycle preStop exec", 8000),
        ("readinessProbe httpGet.port", 8080),
    }
    [hit] = [
        f for f in review(("runtime.yaml", OPERATOR_RUNTIME)).findings if f.rule_id == "pitfall.server-port-not-reached"
    ]
    assert hit.location.line == 15 and "lifecycle preStop exec 8000, but vLLM listens on --port 8080" in hit.message
    fixed = OPERATOR_RUNTIME.replace("localhost:8000", "localhost:8080")
    assert "pitfall.server-port-not-reached" not in {f.rule_id for f in review(("runtime.yaml", fixed)).findings}
