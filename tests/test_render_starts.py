"""render_config output that starts the first time: every render passes its own review and the
Kubernetes API schemas, sizes /dev/shm and memory for what the release keeps there, carries the token,
a model cache and probes, requests RDMA where the fabric has it, and gives every process on one host
its own ports."""

from __future__ import annotations

import itertools
import json
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from reading import known_moving_tag
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.deployment import Document
from vllm_caching_mcp.advice.ports import deployment_ports, layouts_at
from vllm_caching_mcp.advice.render import RenderConfigRequest, RenderConfigResult, render_config, shell_words
from vllm_caching_mcp.advice.review import ReviewRequest, review_deployment
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.versions import parse_version

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
BACKENDS: dict[str, dict[str, Any]] = {
    "none": {},
    "native_cpu": {"sizes": {"kv_offloading_size_gib": 64}},
    "native_tiering": {"sizes": {"kv_offloading_size_gib": 64}, "tiers": ["fs"], "paths": {"disk": ["/mnt/kv"]}},
    "lmcache": {"sizes": {"kv_offloading_size_gib": 64}},
    "lmcache_p2p": {"sizes": {"kv_offloading_size_gib": 64}},
    "lmcache_mp": {"sizes": {"kv_offloading_size_gib": 64}},
    "nixl_pd": {"fabric": "infiniband"},
    "mooncake_pd": {"fabric": "roce"},
    "multi_nixl_offload": {"sizes": {"kv_offloading_size_gib": 64}},
}
# A spread of releases: the shorthand's first, the tiering spec's, the CPU tier's first in /dev/shm,
# the first that checks its free space, and the newest.
RELEASES = ("0.14.0", "0.22.0", "0.27.0", "0.28.0", "0.33.0")
FORMATS = ("vllm_serve", "docker_run", "kubernetes")
KUBERNETES = "1.37.0"
GIB = 2**30


def render(knowledge: Knowledge, **arguments: Any) -> RenderConfigResult:
    arguments.setdefault("model", MODEL)
    return render_config(RenderConfigRequest.model_validate(arguments), knowledge)


def documents(result: RenderConfigResult) -> list[dict[str, Any]]:
    return [d for f in result.files for d in yaml.safe_load_all(f.content) if d]


def workload(docs: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    return next(
        d for d in docs if d["kind"] in ("Deployment", "DaemonSet") and d["metadata"]["name"].endswith(f"-{suffix}")
    )


def pod(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def gib(quantity: str) -> float:
    assert quantity.endswith("Gi"), quantity
    return float(quantity.removesuffix("Gi"))


# --- every render reviews clean and is valid Kubernetes -----------------------------------------


def _renders() -> list[tuple[str, str, str]]:
    return list(itertools.product(RELEASES, sorted(BACKENDS), FORMATS))


@pytest.mark.parametrize(("version", "backend", "fmt"), _renders())
def test_every_render_passes_its_own_review(knowledge: Knowledge, version: str, backend: str, fmt: str) -> None:
    try:
        result = render(knowledge, backend=backend, version=version, format=fmt, **BACKENDS[backend])
    except AdviceError as exc:  # a backend the release does not have is refused, naming the field
        assert exc.field in ("version", "backend", "tiers", "sizes.num_cpu_blocks"), str(exc)
        return
    review = review_deployment(
        ReviewRequest(
            detail="full", documents=[Document(name=f.name, text=f.content) for f in result.files], version=version
        ),
        knowledge,
    )
    # Advisories are about the release, not the render: the security floor warning says so elsewhere.
    findings = [
        (f.rule_id, f.workload, f.message)
        for f in review.findings
        if f.severity in ("error", "warning") and not f.rule_id.startswith("advisory.") and not known_moving_tag(f)
    ]
    assert findings == []
    if fmt == "kubernetes":
        for document in documents(result):
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


# --- /dev/shm and memory -------------------------------------------------------------------------


def test_the_native_cpu_tier_of_0_33_gets_a_dev_shm_the_size_of_the_tier(knowledge: Knowledge) -> None:
    """0.33.0 keeps the CPU tier in /dev/shm and checks its free space at start-up: the 64 MiB default stops it."""
    result = render(
        knowledge,
        backend="native_cpu",
        version="0.33.0",
        parallelism={"tensor_parallel_size": 8},
        sizes={"kv_offloading_size_gib": 1638},
        format="kubernetes",
    )
    spec = pod(workload(documents(result), "vllm"))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory" and gib(shm["emptyDir"]["sizeLimit"]) >= 1638 + 1
    container = spec["containers"][0]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    resources = container["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert gib(resources["limits"]["memory"]) > gib(shm["emptyDir"]["sizeLimit"])
    assert any(c.id == "recipes.facts.shared_memory" for c in result.citations)


def test_before_0_27_the_native_tier_is_not_in_dev_shm(knowledge: Knowledge) -> None:
    result = render(
        knowledge, backend="native_cpu", version="0.26.0", sizes={"kv_offloading_size_gib": 400}, format="kubernetes"
    )
    spec = pod(workload(documents(result), "vllm"))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert gib(shm["emptyDir"]["sizeLimit"]) < 8  # only the headroom; the tier is pinned memory
    assert gib(spec["containers"][0]["resources"]["limits"]["memory"]) >= 400


def test_memory_covers_lmcache_on_every_worker_and_reports_the_host_ram_left(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="lmcache",
        version="0.33.0",
        parallelism={"tensor_parallel_size": 4},
        sizes={"lmcache_max_local_cpu_size_gib": 50},
        host_ram_gib=1024,
        format="kubernetes",
    )
    assert result.memory is not None
    vllm = next(c for c in result.memory.components if c.name == "vllm")
    assert vllm.pinned_gib == 200 and vllm.memory_gib > 200
    assert result.memory.host_ram_left_gib == 1024 - vllm.memory_gib
    limit = pod(workload(documents(result), "vllm"))["containers"][0]["resources"]["limits"]["memory"]
    assert gib(limit) == vllm.memory_gib


def test_a_host_too_small_for_the_render_is_refused_naming_the_field(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^host_ram_gib: 256 GiB is less than the \d+ GiB"):
        render(
            knowledge, backend="native_cpu", version="0.33.0", sizes={"kv_offloading_size_gib": 400}, host_ram_gib=256
        )


def test_a_size_offload_result_gives_the_host_ram_left(knowledge: Knowledge) -> None:
    size_offload = {
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "offload": {
            "kv_offloading_size_gib": 100,
            "cpu_bytes_to_use": 100 * GIB,
            "lmcache_max_local_cpu_size_gib": 100,
        },
        "host_ram_left_gib": 300,
    }
    result = render(knowledge, backend="native_cpu", version="0.33.0", size_offload=size_offload)
    assert result.memory is not None and result.memory.host_ram_left_gib is not None
    vllm = result.memory.components[0]
    assert result.memory.host_ram_left_gib == 300 - (vllm.memory_gib - 100)


def test_docker_shares_the_host_dev_shm_and_a_tier_past_half_the_ram_is_flagged(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_cpu",
        version="0.33.0",
        sizes={"kv_offloading_size_gib": 600},
        host_ram_gib=1024,
        format="docker_run",
    )
    assert "--ipc=host" in result.files[0].content
    assert any("half of 1024 GiB RAM" in n and "remount" in n for n in result.notes)


# --- token, model cache, probes ------------------------------------------------------------------


@pytest.mark.parametrize(("hf_token", "optional"), [("optional", True), ("required", False)])
def test_the_token_comes_from_a_secret(knowledge: Knowledge, hf_token: str, optional: bool) -> None:
    result = render(knowledge, backend="none", version="0.33.0", hf_token=hf_token, format="kubernetes")
    env = pod(workload(documents(result), "vllm"))["containers"][0]["env"]
    assert {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": optional}},
    } in env
    docker = render(knowledge, backend="none", version="0.33.0", format="docker_run").files[0].content
    words = shell_words(docker)
    assert words[words.index("HF_TOKEN") - 1] == "-e"  # the caller's own variable, never a value in the file
    assert "HF_TOKEN" not in render(knowledge, backend="none", version="0.33.0").files[0].content


def test_the_model_cache_is_a_pvc_by_default_and_a_host_path_on_request(knowledge: Knowledge) -> None:
    docs = documents(render(knowledge, backend="none", version="0.33.0", format="kubernetes"))
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    volume = next(v for v in pod(workload(docs, "vllm"))["volumes"] if v["name"] == "model-cache")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mounts = pod(workload(docs, "vllm"))["containers"][0]["volumeMounts"]
    assert {"name": "model-cache", "mountPath": "/root/.cache/huggingface"} in mounts
    host = documents(
        render(
            knowledge,
            backend="none",
            version="0.33.0",
            format="kubernetes",
            model_cache="host_path",
            model_cache_path="/data/hf",
        )
    )
    assert not any(d["kind"] == "PersistentVolumeClaim" for d in host)
    volume = next(v for v in pod(workload(host, "vllm"))["volumes"] if v["name"] == "model-cache")
    assert volume["hostPath"]["path"] == "/data/hf"
    with pytest.raises(AdviceError, match=r"^model_cache_path: "):
        render(knowledge, backend="none", version="0.33.0", format="kubernetes", model_cache="host_path")
    docker = render(knowledge, backend="none", version="0.33.0", format="docker_run").files[0].content
    assert "-v vllm-model-cache:/root/.cache/huggingface" in docker


@pytest.mark.parametrize(("model", "minutes"), [(MODEL, 60), ("Qwen/Qwen3-8B", 20), ("org/unnamed", 60)])
def test_probes_on_health_with_a_start_up_budget_for_loading(knowledge: Knowledge, model: str, minutes: int) -> None:
    container = pod(workload(documents(render(knowledge, backend="none", model=model, format="kubernetes")), "vllm"))[
        "containers"
    ][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    startup = container["startupProbe"]
    assert startup["failureThreshold"] * startup["periodSeconds"] == minutes * 60


# --- RDMA, proxy, shared tier, images, names -----------------------------------------------------


@pytest.mark.parametrize("backend", ["nixl_pd", "mooncake_pd", "multi_nixl_offload"])
def test_rdma_fabrics_request_the_devices_and_ipc_lock(knowledge: Knowledge, backend: str) -> None:
    extra = {"sizes": {"kv_offloading_size_gib": 8}} if backend == "multi_nixl_offload" else {}
    docs = documents(
        render(knowledge, backend=backend, fabric="infiniband", rdma_resource="rdma/hca", format="kubernetes", **extra)
    )
    for role in ("prefill", "decode"):
        container = pod(workload(docs, role))["containers"][0]
        assert container["resources"]["limits"]["rdma/hca"] == container["resources"]["requests"]["rdma/hca"] == 1
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    plain = documents(render(knowledge, backend=backend, fabric="ethernet", format="kubernetes", **extra))
    assert "securityContext" not in pod(workload(plain, "prefill"))["containers"][0]
    docker = render(knowledge, backend=backend, fabric="roce", format="docker_run", **extra).files[0].content
    assert "--cap-add IPC_LOCK --device /dev/infiniband" in docker


TOY_PROXY_URL = (
    "https://raw.githubusercontent.com/vllm-project/vllm/v0.33.0/tests/v1/kv_connector/nixl_integration/"
    "toy_proxy_server.py"
)


def test_the_proxy_pod_fetches_its_script_from_the_release_tag(knowledge: Knowledge) -> None:
    """No ConfigMap the manifest does not create: an init container downloads the script into an emptyDir."""
    result = render(knowledge, backend="nixl_pd", version="0.33.0", format="kubernetes")
    docs = documents(result)
    assert not any(d["kind"] == "ConfigMap" for d in docs)
    spec = pod(workload(docs, "proxy"))
    assert next(v for v in spec["volumes"] if v["name"] == "proxy-script") == {"name": "proxy-script", "emptyDir": {}}
    (fetch,) = spec["initContainers"]
    assert fetch["image"] == "curlimages/curl:8.14.1"
    assert fetch["command"] == ["curl", "-fsSL", "--create-dirs", "-o", "/opt/proxy/toy_proxy_server.py", TOY_PROXY_URL]
    assert fetch["volumeMounts"] == [{"name": "proxy-script", "mountPath": "/opt/proxy"}]
    proxy = spec["containers"][0]
    assert proxy["args"][0] == "/opt/proxy/toy_proxy_server.py"
    assert {"name": "proxy-script", "mountPath": "/opt/proxy", "readOnly": True} in proxy["volumeMounts"]
    assert any("egress to raw.githubusercontent.com" in n and "proxy_source config_map" in n for n in result.notes)
    assert any(c.id == "recipes.facts.pd_proxy_fetch" for c in result.citations)


def test_the_proxy_script_can_come_from_a_config_map_instead(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="nixl_pd", version="0.33.0", format="kubernetes", proxy_source="config_map")
    spec = pod(workload(documents(result), "proxy"))
    volume = next(v for v in spec["volumes"] if v["name"] == "proxy-script")
    assert volume == {"name": "proxy-script", "configMap": {"name": "llama-3-1-70b-instruct-nixl-pd-proxy"}}
    assert "initContainers" not in spec
    assert any(
        f"kubectl create configmap {volume['configMap']['name']}" in n and TOY_PROXY_URL in n for n in result.notes
    )
    with pytest.raises(ValidationError, match="proxy_source"):
        RenderConfigRequest.model_validate({"model": MODEL, "backend": "nixl_pd", "proxy_source": "host_path"})


def test_the_docker_proxy_downloads_its_script_and_mounts_the_file(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="nixl_pd", version="0.33.0", format="docker_run")
    words = shell_words(next(f for f in result.files if f.name == "proxy.sh").content)
    script = "/opt/proxy/toy_proxy_server.py"
    fetch = ["curl", "-fsSL", "--create-dirs", "-o", script, TOY_PROXY_URL, "||", "exit", "1"]
    assert words[: words.index("docker")] == fetch
    assert words[words.index("-v") + 1] == f"{script}:{script}"
    assert any("egress to raw.githubusercontent.com" in n for n in result.notes)


# --- GPUs of P/D roles on one host --------------------------------------------------------------


def _gpu_warnings(result: RenderConfigResult) -> list[str]:
    return [w for w in result.version_context.warnings if "GPUs, more than" in w]


def _gpus(result: RenderConfigResult, role: str) -> str:
    words = shell_words(next(f for f in result.files if f.name == f"{role}.sh").content)
    if "docker" in words:
        return words[words.index("--gpus") + 1]
    return next(w for w in words if w.startswith("CUDA_VISIBLE_DEVICES=")).split("=", 1)[1]


@pytest.mark.parametrize("backend", ["nixl_pd", "mooncake_pd", "multi_nixl_offload"])
def test_prefill_and_decode_on_one_host_get_their_own_gpus(knowledge: Knowledge, backend: str) -> None:
    extra: dict[str, Any] = {"sizes": {"kv_offloading_size_gib": 8}} if backend == "multi_nixl_offload" else {}
    arguments = {"backend": backend, "version": "0.33.0", "parallelism": {"tensor_parallel_size": 4}, **extra}
    docker = render(knowledge, format="docker_run", **arguments)
    assert (_gpus(docker, "prefill"), _gpus(docker, "decode")) == ('"device=0,1,2,3"', '"device=4,5,6,7"')
    shell = render(knowledge, **arguments)
    assert (_gpus(shell, "prefill"), _gpus(shell, "decode")) == ("0,1,2,3", "4,5,6,7")
    assert _gpu_warnings(shell) == _gpu_warnings(docker) == []
    apart = render(knowledge, hosts={"prefill": "10.0.0.1", "decode": "10.0.0.2"}, **arguments)
    assert (_gpus(apart, "prefill"), _gpus(apart, "decode")) == ("0,1,2,3", "0,1,2,3")


def test_roles_needing_more_gpus_than_one_host_has_are_warned_of(knowledge: Knowledge) -> None:
    arguments = {"backend": "nixl_pd", "version": "0.33.0", "parallelism": {"tensor_parallel_size": 8}}
    assumed = render(knowledge, format="docker_run", **arguments)
    assert _gpus(assumed, "decode") == '"device=8,9,10,11,12,13,14,15"'
    (warning,) = _gpu_warnings(assumed)
    assert "16 GPUs, more than the 8 of one host (gpus_per_host not given: 8 assumed)" in warning
    given = render(knowledge, gpus_per_host=16, **arguments)
    assert _gpu_warnings(given) == []
    small = render(knowledge, gpus_per_host=4, parallelism={"tensor_parallel_size": 4}, backend="nixl_pd")
    assert "more than the 4 of one host:" in _gpu_warnings(small)[0]


def test_the_shared_fs_tier_is_a_read_write_many_claim(knowledge: Knowledge) -> None:
    arguments = {
        "backend": "native_tiering",
        "version": "0.33.0",
        "tiers": ["fs", "p2p"],
        "paths": {"disk": ["/mnt/kv"]},
        "sizes": {"kv_offloading_size_gib": 64, "disk_gib": 2000},
        "format": "kubernetes",
    }
    docs = documents(render(knowledge, **arguments))
    tier = next(d for d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"].endswith("-kv-tier"))
    assert (
        tier["spec"]["accessModes"] == ["ReadWriteMany"]
        and tier["spec"]["resources"]["requests"]["storage"] == "2000Gi"
    )
    spec = pod(workload(docs, "vllm"))
    assert workload(docs, "vllm")["spec"]["replicas"] == 2
    assert not any("hostPath" in v for v in spec["volumes"])
    host = documents(render(knowledge, **arguments, shared_tier_volume="host_path"))
    assert any(v.get("hostPath", {}).get("path") == "/mnt/kv" for v in pod(workload(host, "vllm"))["volumes"])


def test_lmcache_helpers_run_from_lmcache_s_image_unless_one_is_given(knowledge: Knowledge) -> None:
    docs = documents(render(knowledge, backend="lmcache_p2p", sizes={"kv_offloading_size_gib": 8}, format="kubernetes"))
    controller = pod(workload(docs, "lmcache-controller"))["containers"][0]
    assert controller["image"] == "lmcache/standalone:nightly"
    assert controller["command"] == ["/opt/venv/bin/lmcache_controller"]
    own = documents(
        render(
            knowledge,
            backend="lmcache_p2p",
            sizes={"kv_offloading_size_gib": 8},
            lmcache_image="registry:5000/team/lmcache:0.5.6",
            format="kubernetes",
        )
    )
    controller = pod(workload(own, "lmcache-controller"))["containers"][0]
    assert controller["image"] == "registry:5000/team/lmcache:0.5.6" and controller["command"] == ["lmcache_controller"]


def test_names_default_to_model_and_backend_and_can_be_given(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="native_cpu", sizes={"kv_offloading_size_gib": 8}, format="kubernetes")
    assert workload(documents(result), "vllm")["metadata"]["name"] == "llama-3-1-70b-instruct-native-cpu-vllm"
    long = render(
        knowledge,
        backend="multi_nixl_offload",
        model="org/" + "x" * 80,
        sizes={"kv_offloading_size_gib": 8},
        format="kubernetes",
    )
    for d in documents(long):
        assert len(d["metadata"]["name"]) <= 63
    given = render(knowledge, backend="none", name="chat", format="kubernetes")
    assert workload(documents(given), "vllm")["metadata"]["name"] == "chat-vllm"


# --- ports on one host ---------------------------------------------------------------------------


def _listening(script: str, span: dict[str, int]) -> list[int]:
    """Every port the process of one rendered script listens on (``span``: the ports a side channel's base
    variable opens, as the release's layout in knowledge/ports.yaml counts them)."""
    words = shell_words(script)
    env = dict(w.split("=", 1) for w in words if "=" in w and w.split("=", 1)[0].isupper())
    for i, word in enumerate(words):
        if word == "-e" and "=" in words[i + 1]:
            name, _, value = words[i + 1].partition("=")
            env[name] = value
    ports: list[int] = []
    # The process's own --port (docker run writes none of its own); vllm serve's default without one.
    at = len(words) - 1 - words[::-1].index("--port") if "--port" in words else None
    ports.append(int(words[at + 1]) if at is not None else 8000)
    if "--monitor-ports" in words:
        ports += json.loads(words[words.index("--monitor-ports") + 1]).values()
    for name in ("LMCACHE_P2P_INIT_PORTS", "LMCACHE_P2P_LOOKUP_PORTS", "LMCACHE_LMCACHE_WORKER_PORTS"):
        ports += [int(p) for p in env.get(name, "").split(",") if p]
    for name in ("VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_MOONCAKE_BOOTSTRAP_PORT"):
        if name in env:
            ports += range(int(env[name]), int(env[name]) + span.get(name, 1))
    return ports


SHARED_HOST = [
    (
        "lmcache_p2p",
        {"instances": instances, "parallelism": {"tensor_parallel_size": tp}, "sizes": {"kv_offloading_size_gib": 64}},
    )
    for instances, tp in ((2, 1), (10, 1), (11, 2), (16, 8))
] + [
    (
        backend,
        {"parallelism": {"tensor_parallel_size": tp, "data_parallel_size": dp}, "sizes": {"kv_offloading_size_gib": 8}},
    )
    for backend in ("nixl_pd", "mooncake_pd", "multi_nixl_offload")
    for tp, dp in ((1, 1), (8, 1), (4, 2))
]


@pytest.mark.parametrize("fmt", ["vllm_serve", "docker_run"])
@pytest.mark.parametrize(("backend", "extra"), SHARED_HOST)
def test_no_two_processes_on_one_host_share_a_port(
    knowledge: Knowledge, fmt: str, backend: str, extra: dict[str, Any]
) -> None:
    result = render(knowledge, backend=backend, version="0.33.0", format=fmt, **extra)
    parallelism = extra.get("parallelism", {})
    tp, dp = parallelism.get("tensor_parallel_size", 1), parallelism.get("data_parallel_size", 1)
    span: dict[str, int] = {}
    for connector in ("NixlConnector", "MooncakeConnector"):
        for layout in layouts_at(knowledge, connector, parse_version("0.33.0")):
            uses = deployment_ports(knowledge, "0.33.0", [connector], tensor_parallel_size=tp, data_parallel_size=dp)
            span[layout.base_env or ""] = len({u.port for u in uses if u.layout == layout.id})
    seen: dict[int, str] = {}
    for f in result.files:
        for port in _listening(f.content, span):
            assert port not in seen, f"{f.name} and {seen.get(port)} both listen on {port}"
            seen[port] = f.name
    assert len(result.files) >= 2


@pytest.mark.parametrize(("version", "opened"), [("0.11.0", [5557, 5558, 5559, 5560]), ("0.33.0", [5600])])
def test_the_side_channel_ports_a_prefill_pod_opens_follow_the_release_s_layout(
    knowledge: Knowledge, version: str, opened: list[int]
) -> None:
    """0.11.0 binds one NIXL side channel per TP worker, later releases one per engine (knowledge/ports.yaml)."""
    result = render(
        knowledge, backend="nixl_pd", version=version, format="kubernetes", parallelism={"tensor_parallel_size": 4}
    )
    container = pod(workload(documents(result), "prefill"))["containers"][0]
    side = [p["containerPort"] for p in container["ports"] if str(p.get("name", "")).startswith("side-channel")]
    assert side == opened
