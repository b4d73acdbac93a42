"""SkyPilot task YAML: the `run:` (and `setup:`) scripts read as shell with `envs:` and SkyPilot's own
variables, the GPUs of `resources.accelerators`, the image of `image_id: docker:…`, the nodes and the
replicas of a SkyServe `service:`."""

from __future__ import annotations

from reading import flags, review, workloads

_DOCKER_TASK = """\
envs:
  MODEL_NAME: mistralai/Mistral-7B-Instruct-v0.3
  HF_TOKEN: null

resources:
  image_id: docker:vllm/vllm-openai:v0.10.1
  accelerators: {L4: 1}
  ports: 8000

service:
  readiness_probe: /v1/models
  replica_policy: {min_replicas: 1, max_replicas: 4}

run: |
  echo "starting"
  vllm serve $MODEL_NAME \\
    --max-model-len 8192 \\
    --gpu-memory-utilization 0.9
"""


def test_the_run_script_of_a_docker_task_is_a_workload_on_its_image() -> None:
    [workload], _ = workloads(("serve.yaml", _DOCKER_TASK))
    assert workload.name == "SkyPilot run vllm #1"
    assert workload.model == "mistralai/Mistral-7B-Instruct-v0.3"
    assert flags(workload) == {"--max-model-len": "8192", "--gpu-memory-utilization": "0.9"}
    assert workload.location.line == 16 and workload.flags[0].location.line == 17
    assert workload.image == "vllm/vllm-openai:v0.10.1"
    assert workload.image_location is not None and workload.image_location.line == 6
    assert (workload.gpu_label, workload.gpu_count, workload.replicas) == ("L4", 1, 4)
    token = next(e for e in workload.env if e.name == "HF_TOKEN")
    assert token.value is None and token.reference == "`sky launch --env HF_TOKEN`"


def test_the_image_tag_gives_the_release() -> None:
    [summary] = review(("serve.yaml", _DOCKER_TASK)).workloads
    assert (summary.vllm_version, summary.version_source) == ("0.10.1", "image-tag")


_MULTINODE = """\
name: vllm-multinode
resources:
  accelerators: A100-80GB:8
  ports: 8081
num_nodes: 2
envs:
  MODEL: meta-llama/Llama-3.1-405B-Instruct-FP8
setup: |
  pip install "vllm==0.10.0" ray
run: |
  if [ "${SKYPILOT_NODE_RANK}" = "0" ]; then
    ray start --head --port 6379
    vllm serve $MODEL \\
      --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE \\
      --pipeline-parallel-size $SKYPILOT_NUM_NODES \\
      --port 8081
  else
    ray start --address "$(echo "$SKYPILOT_NODE_IPS" | head -n1):6379" --block
  fi
"""


def test_skypilot_variables_give_the_parallel_sizes_of_a_multinode_task() -> None:
    [workload], _ = workloads(("multinode.sky.yaml", _MULTINODE))
    assert flags(workload) == {"--tensor-parallel-size": "8", "--pipeline-parallel-size": "2", "--port": "8081"}
    assert (workload.gpu_label, workload.gpu_count, workload.nodes) == ("A100-80GB", 8, 2)
    assert workload.image is None and workload.source == "command-line"
    assert workload.location.line == 13


def test_accelerator_candidates_keep_what_they_agree_on() -> None:
    text = _MULTINODE.replace("accelerators: A100-80GB:8", "accelerators: [A100-80GB:8, H100:8]")
    [workload], _ = workloads(("multinode.sky.yaml", text))
    assert (workload.gpu_label, workload.gpu_count) == (None, 8)


def test_a_docker_run_in_the_run_script_is_read_as_one() -> None:
    text = """\
resources:
  accelerators: H100:2
run: |
  docker run --gpus all --shm-size 16g vllm/vllm-openai:v0.9.2 \\
    --model Qwen/Qwen2.5-7B --tensor-parallel-size 2
"""
    [workload], _ = workloads(("task.yaml", text))
    assert workload.source == "docker-run" and workload.image == "vllm/vllm-openai:v0.9.2"
    assert workload.shm_gib == 16 and workload.gpu_count == 2
    assert flags(workload) == {"--model": "Qwen/Qwen2.5-7B", "--tensor-parallel-size": "2"}


def test_accelerators_written_as_a_flow_mapping_of_candidates() -> None:
    # YAML reads `{L4:1, A100:1}` as keys `L4:1`, `A100:1` with no values
    text = _DOCKER_TASK.replace("accelerators: {L4: 1}", "accelerators: {L4:1, A10G:1, A100-80GB:1}")
    [workload], _ = workloads(("serve.yaml", text))
    assert (workload.gpu_label, workload.gpu_count) == (None, 1)


def test_only_the_skypilot_variables_the_scripts_use_are_in_the_environment() -> None:
    [workload], _ = workloads(("serve.yaml", _DOCKER_TASK))
    assert not [e.name for e in workload.env if e.name.startswith("SKYPILOT_")]
    [multinode], _ = workloads(("multinode.sky.yaml", _MULTINODE))
    assert {e.name for e in multinode.env if e.name.startswith("SKYPILOT_")} == {
        "SKYPILOT_NODE_RANK", "SKYPILOT_NUM_GPUS_PER_NODE", "SKYPILOT_NUM_NODES", "SKYPILOT_NODE_IPS",
    }  # fmt: skip
