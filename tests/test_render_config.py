"""render_config: operator stories per backend and format. Every output is parsed back here too
(shlex, json, yaml), and the injection tests run the rendered shell for real with a fake `vllm`
on PATH that records its argv, so a quoting mistake would show up as a changed argv or a file
the payload created."""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from vllm_caching_mcp.advice.backend import ChooseBackendRequest, choose_backend
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.render import RenderConfigRequest, RenderConfigResult, render_config, shell_words
from vllm_caching_mcp.knowledge import SAFE_DUMPER, SAFE_LOADER, Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.tools import ToolInputError, run_tool

GIB = 2**30
SIZE = {"kv_offloading_size_gib": 8}


def render(knowledge: Knowledge, **arguments: Any) -> RenderConfigResult:
    arguments.setdefault("model", "Qwen/Qwen3-8B")
    arguments.setdefault("name", "vllm")  # the names these tests look for; the default has its own test
    return render_config(RenderConfigRequest.model_validate(arguments), knowledge)


def file(result: RenderConfigResult, name: str) -> str:
    return next(f.content for f in result.files if f.name == name)


def argv_of(script: str) -> tuple[dict[str, str], list[str]]:
    words = shell_words(script)
    env = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isupper():
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def ktc(argv: list[str]) -> dict[str, Any]:
    return json.loads(argv[argv.index("--kv-transfer-config") + 1])  # type: ignore[no-any-return]


def manifests(result: RenderConfigResult) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(result.files[0].content) if d]


def workload(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] in ("Deployment", "DaemonSet") and d["metadata"]["name"] == name)


def container(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]["containers"][0]  # type: ignore[no-any-return]


# --- native CPU ---------------------------------------------------------------------------------


def test_native_cpu_on_0_33_with_tp4_and_400_gib(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_cpu",
        version="0.33.0",
        parallelism={"tensor_parallel_size": 4},
        sizes={"kv_offloading_size_gib": 400},
    )
    env, argv = argv_of(file(result, "vllm.sh"))
    assert env == {}
    assert argv == [
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--tensor-parallel-size",
        "4",
        "--kv-offloading-size",
        "400",
        "--kv-offloading-backend",
        "native",
    ]
    assert any(v.name == "sizes.kv_offloading_size_gib" and v.origin == "user" for v in result.values)
    assert any("flag" in c for c in result.checks)


def test_native_cpu_on_0_19_adds_the_hma_flag_and_on_0_22_it_does_not(knowledge: Knowledge) -> None:
    old = render(knowledge, backend="native_cpu", version="0.19.0", sizes={"kv_offloading_size_gib": 10})
    assert "--disable-hybrid-kv-cache-manager" in argv_of(file(old, "vllm.sh"))[1]
    new = render(knowledge, backend="native_cpu", version="0.22.0", sizes={"kv_offloading_size_gib": 10})
    assert "--disable-hybrid-kv-cache-manager" not in argv_of(file(new, "vllm.sh"))[1]


def test_native_cpu_on_0_13_needs_num_cpu_blocks(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^sizes\.num_cpu_blocks: "):
        render(knowledge, backend="native_cpu", version="0.13.0", sizes={"kv_offloading_size_gib": 10})
    result = render(
        knowledge, backend="native_cpu", version="0.13.0", sizes={"kv_offloading_size_gib": 10, "num_cpu_blocks": 4096}
    )
    argv = argv_of(file(result, "vllm.sh"))[1]
    assert "--kv-offloading-size" not in argv
    assert ktc(argv) == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"num_cpu_blocks": 4096},
    }


def test_native_cpu_in_docker_uses_vllm_as_entrypoint(knowledge: Knowledge) -> None:
    result = render(
        knowledge, backend="native_cpu", version="0.30.0", sizes={"kv_offloading_size_gib": 64}, format="docker_run"
    )
    words = shell_words(file(result, "vllm.sh"))
    assert words[:2] == ["docker", "run"]
    assert words[words.index("--entrypoint") + 1] == "vllm"
    image_at = words.index("vllm/vllm-openai:v0.30.0")
    assert words[image_at + 1 :] == [
        "serve",
        "Qwen/Qwen3-8B",
        "--kv-offloading-size",
        "64",
        "--kv-offloading-backend",
        "native",
    ]


# --- native multi-tier -----------------------------------------------------------------------------


def test_fs_tier_on_0_22_1_is_named_fs_python_and_sized_in_bytes(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.22.1",
        tiers=["fs"],
        sizes={"kv_offloading_size_gib": 100},
        paths={"disk": ["/mnt/nvme0/kv"]},
        format="kv_transfer_config",
    )
    config = json.loads(file(result, "vllm.json"))
    assert config == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec",
            "cpu_bytes_to_use": 107374182400,  # 100 × 2^30
            "secondary_tiers": [{"type": "fs_python", "root_dir": "/mnt/nvme0/kv"}],
        },
    }


def test_fs_tier_on_0_23_is_named_fs(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.23.0",
        tiers=["fs"],
        sizes={"kv_offloading_size_gib": 1},
        paths={"disk": ["/kv"]},
    )
    tiers = ktc(argv_of(file(result, "vllm.sh"))[1])["kv_connector_extra_config"]["secondary_tiers"]
    assert tiers == [{"type": "fs", "root_dir": "/kv"}]


def test_obj_tier_on_0_22_1_is_refused_with_its_first_release(knowledge: Knowledge) -> None:
    with pytest.raises(
        AdviceError, match=r"^tiers: the obj secondary tier is not in vLLM 0\.22\.1; it first ships in 0\.23\.0"
    ):
        render(
            knowledge,
            backend="native_tiering",
            version="0.22.1",
            tiers=["obj"],
            sizes={"kv_offloading_size_gib": 1},
            object_store={"bucket": "kv", "endpoint_override": "http://minio:9000"},
        )


def test_obj_tier_on_0_25_warns_that_static_keys_are_needed(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.25.1",
        tiers=["obj"],
        sizes={"kv_offloading_size_gib": 8},
        object_store={"bucket": "kv", "endpoint_override": "http://m:9000"},
    )
    tier = ktc(argv_of(file(result, "vllm.sh"))[1])["kv_connector_extra_config"]["secondary_tiers"][0]
    assert tier == {"type": "obj", "store_config": {"bucket": "kv", "endpoint_override": "http://m:9000"}}
    assert any("access_key" in n and "0.26.0" in n for n in result.notes)


def test_p2p_tier_in_kubernetes_on_0_27(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.27.0",
        tiers=["p2p"],
        sizes={"kv_offloading_size_gib": 50},
        format="kubernetes",
        namespace="llm",
    )
    docs = manifests(result)
    c = container(workload(docs, "vllm-vllm"))
    env = {e["name"]: e for e in c["env"]}
    assert env["PYTHONHASHSEED"]["value"] == "0"  # the p2p tier refuses to start without it on 0.27.x
    assert env["VLLM_P2P_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    service = next(d for d in docs if d["kind"] == "Service")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert {"name": "p2p", "port": 5710, "targetPort": 5710} in service["spec"]["ports"]


def test_p2p_tier_on_0_25_writes_the_pod_ip_into_the_tier_entry(knowledge: Knowledge) -> None:
    # 0.25.x has no VLLM_P2P_SIDE_CHANNEL_HOST; the host key is advertised verbatim.
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.25.0",
        tiers=["p2p"],
        sizes={"kv_offloading_size_gib": 50},
        format="kubernetes",
    )
    c = container(workload(manifests(result), "vllm-vllm"))
    config = json.loads(c["args"][c["args"].index("--kv-transfer-config") + 1])
    assert config["kv_connector_extra_config"]["secondary_tiers"] == [{"type": "p2p", "host": "$(POD_IP)"}]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c["env"]


# --- LMCache -------------------------------------------------------------------------------------------


def test_lmcache_dram_and_disk_sizes_per_worker(knowledge: Knowledge) -> None:
    # 80 GiB total with TP 4 × PP 2 = 8 workers → LMCACHE_MAX_LOCAL_CPU_SIZE=10 GiB each.
    result = render(
        knowledge,
        backend="lmcache",
        version="0.33.0",
        lmcache_version="0.5.6",
        parallelism={"tensor_parallel_size": 4, "pipeline_parallel_size": 2},
        sizes={"kv_offloading_size_gib": 80, "disk_gib": 200},
        paths={"disk": ["/mnt/a", "/mnt/b"]},
    )
    env, argv = argv_of(file(result, "vllm.sh"))
    assert env == {
        "LMCACHE_LOCAL_CPU": "True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "10",
        "LMCACHE_LOCAL_DISK": "file:///mnt/a,file:///mnt/b",
        "LMCACHE_MAX_LOCAL_DISK_SIZE": "200",
    }
    assert ktc(argv) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    assert "--kv-offloading-backend" not in argv


def test_lmcache_disk_list_needs_lmcache_0_4_4(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^paths\.disk: .*0\.4\.4"):
        render(
            knowledge,
            backend="lmcache",
            lmcache_version="0.4.3",
            sizes={"kv_offloading_size_gib": 8, "disk_gib": 1},
            paths={"disk": ["/a", "/b"]},
        )


def test_lmcache_gds_buffer_key_by_lmcache_release(knowledge: Knowledge) -> None:
    common: dict[str, Any] = {
        "backend": "lmcache",
        "sizes": {"kv_offloading_size_gib": 8, "gds_buffer_mib": 256},
        "paths": {"gds": ["/mnt/gds0"]},
        "format": "lmcache_yaml",
    }
    new = yaml.safe_load(file(render(knowledge, lmcache_version="0.5.6", **common), "vllm.yaml"))
    old = yaml.safe_load(file(render(knowledge, lmcache_version="0.4.3", **common), "vllm.yaml"))
    assert new["gds_buffer_size"] == 256 and "cufile_buffer_size" not in new
    assert old["cufile_buffer_size"] == 256 and "gds_buffer_size" not in old
    assert new["gds_path"] == "/mnt/gds0" and new["local_cpu"] is True


def test_lmcache_p2p_has_every_required_setting_and_a_controller(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="lmcache_p2p",
        version="0.33.0",
        lmcache_version="0.5.6",
        parallelism={"tensor_parallel_size": 2},
        sizes={"kv_offloading_size_gib": 40},
        format="kubernetes",
        namespace="kv",
    )
    docs = manifests(result)
    env = {e["name"]: e for e in container(workload(docs, "vllm-vllm"))["env"]}
    for name, value in {
        "LMCACHE_ENABLE_P2P": "True",
        "LMCACHE_TRANSFER_CHANNEL": "nixl",
        "LMCACHE_ENABLE_CONTROLLER": "True",
        "LMCACHE_ENABLE_ASYNC_LOADING": "True",
        "LMCACHE_CONTROLLER_PULL_URL": "vllm-lmcache-controller.kv.svc:8300",
        "LMCACHE_CONTROLLER_REPLY_URL": "vllm-lmcache-controller.kv.svc:8400",
        "LMCACHE_LMCACHE_WORKER_PORTS": "8204,8205",
        "LMCACHE_P2P_INIT_PORTS": "8200,8201",
        "LMCACHE_P2P_LOOKUP_PORTS": "8202,8203",
        "LMCACHE_MAX_LOCAL_CPU_SIZE": "20",
        "PYTHONHASHSEED": "0",
    }.items():
        assert env[name]["value"] == value, name
    assert env["LMCACHE_P2P_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["LMCACHE_LMCACHE_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert workload(docs, "vllm-vllm")["spec"]["replicas"] == 2
    controller = container(workload(docs, "vllm-lmcache-controller"))
    assert controller["command"] == ["/opt/venv/bin/lmcache_controller"]
    assert json.loads(controller["args"][controller["args"].index("--monitor-ports") + 1]) == {
        "pull": 8300,
        "reply": 8400,
    }
    services = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Service"}
    assert services["vllm-vllm"]["clusterIP"] == "None"
    assert "clusterIP" not in services["vllm-lmcache-controller"]


def test_lmcache_mp_server_as_a_daemonset_and_vllm_pointing_at_the_host(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="lmcache_mp",
        version="0.33.0",
        lmcache_version="0.5.6",
        sizes={"lmcache_server_l1_gib": 60},
        format="kubernetes",
    )
    docs = manifests(result)
    server = workload(docs, "vllm-lmcache-server")
    assert server["kind"] == "DaemonSet" and server["spec"]["template"]["spec"]["hostNetwork"] is True
    s = container(server)
    # No vllm/vllm-openai tag is known to carry LMCache: LMCache's own image, its commands in /opt/venv/bin.
    assert s["image"] == "lmcache/standalone:nightly"
    assert [*s["command"], *s["args"]] == [
        "/opt/venv/bin/lmcache",
        "server",
        "--host",
        "0.0.0.0",
        "--port",
        "5555",
        "--l1-size-gb",
        "60",
        "--eviction-policy",
        "LRU",
    ]
    v = container(workload(docs, "vllm-vllm"))
    config = json.loads(v["args"][v["args"].index("--kv-transfer-config") + 1])
    assert config["kv_connector_extra_config"] == {"lmcache.mp.host": "tcp://$(HOST_IP)", "lmcache.mp.port": 5555}
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in v["env"]


def test_lmcache_mp_server_command_before_lmcache_0_4_3(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="lmcache_mp", lmcache_version="0.4.2", sizes={"kv_offloading_size_gib": 20})
    assert argv_of(file(result, "lmcache-server.sh"))[1][:3] == ["python3", "-m", "lmcache.v1.multiprocess.server"]


# --- P/D -------------------------------------------------------------------------------------------------


def test_nixl_1p1d_in_kubernetes(knowledge: Knowledge) -> None:
    result = render(
        knowledge, backend="nixl_pd", version="0.33.0", fabric="infiniband", format="kubernetes", namespace="pd"
    )
    docs = manifests(result)
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        c = container(workload(docs, f"vllm-{role}"))
        assert json.loads(c["args"][-1]) == {"kv_connector": "NixlConnector", "kv_role": kv_role}
        env = {e["name"]: e for e in c["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
        assert "cuda_copy" in env["UCX_TLS"]["value"] and "rc" in env["UCX_TLS"]["value"]
        svc = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == f"vllm-{role}")
        assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    proxy = container(workload(docs, "vllm-proxy"))
    assert proxy["args"][proxy["args"].index("--prefiller-hosts") + 1] == "vllm-prefill.pd.svc"
    assert proxy["args"][proxy["args"].index("--decoder-hosts") + 1] == "vllm-decode.pd.svc"


def test_nixl_1p1d_as_commands_with_hosts(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="nixl_pd", version="0.24.0", hosts={"prefill": "10.0.0.1", "decode": "10.0.0.2"})
    assert [f.name for f in result.files] == ["prefill.sh", "decode.sh", "proxy.sh"]
    env, _ = argv_of(file(result, "decode.sh"))
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "10.0.0.2" and env["UCX_TLS"] == "cuda_copy,sm,tcp"
    proxy = argv_of(file(result, "proxy.sh"))[1]
    assert proxy[proxy.index("--prefiller-hosts") + 1] == "10.0.0.1"


def test_mooncake_over_ethernet_uses_tcp(knowledge: Knowledge) -> None:
    result = render(knowledge, backend="mooncake_pd", version="0.33.0", fabric="ethernet", format="env_file")
    assert shell_words(file(result, "prefill.env")) == ["VLLM_MOONCAKE_BOOTSTRAP_PORT=8998"]
    configs = render(knowledge, backend="mooncake_pd", version="0.33.0", fabric="ethernet", format="kv_transfer_config")
    assert json.loads(file(configs, "prefill.json"))["kv_connector_extra_config"] == {"mooncake_protocol": "tcp"}
    rdma = render(knowledge, backend="mooncake_pd", version="0.33.0", fabric="roce", format="kv_transfer_config")
    assert "kv_connector_extra_config" not in json.loads(file(rdma, "decode.json"))


@pytest.mark.parametrize(
    ("version", "script"),
    [
        # 0.13.0-0.15.1: the connector reads remote_host/remote_port from prefill's answer, as NIXL's does
        ("0.14.1", "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"),
        ("0.20.2", "examples/online_serving/disaggregated_serving/mooncake_connector/mooncake_connector_proxy.py"),
        ("0.21.0", "examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py"),
    ],
)
def test_mooncake_gets_the_proxy_of_its_release(knowledge: Knowledge, version: str, script: str) -> None:
    hosts = {"prefill": "10.0.0.1", "decode": "10.0.0.2"}
    result = render(knowledge, backend="mooncake_pd", version=version, fabric="roce", hosts=hosts)
    assert [f.name for f in result.files] == ["prefill.sh", "decode.sh", "proxy.sh"]
    argv = argv_of(file(result, "proxy.sh"))[1]
    assert argv[:2] == ["python3", script.rsplit("/", 1)[-1]] and any(script in note for note in result.notes)
    assert argv[argv.index("--port") + 1] == "8192" and argv[argv.index("--host") + 1] == "0.0.0.0"
    if "toy_proxy" in script:
        assert argv[argv.index("--prefiller-hosts") + 1] == "10.0.0.1" and "--prefill" not in argv
    else:  # the proxy asks prefill's bootstrap server, on the port the prefill instance was given
        assert argv[argv.index("--prefill") + 1 :][:2] == ["http://10.0.0.1:8000", "8998"]
        assert argv[argv.index("--decode") + 1] == "http://10.0.0.2:8000"
        assert argv_of(file(result, "prefill.sh"))[0]["VLLM_MOONCAKE_BOOTSTRAP_PORT"] == "8998"
    assert any(c.id.startswith("proxy.") and c.evidence == "wheel" for c in result.citations)


def test_multiconnector_nixl_plus_cpu_offload(knowledge: Knowledge) -> None:
    result = render(
        knowledge,
        backend="multi_nixl_offload",
        version="0.33.0",
        sizes={"kv_offloading_size_gib": 2},
        format="kv_transfer_config",
    )
    assert json.loads(file(result, "decode.json")) == {
        "kv_connector": "MultiConnector",
        "kv_role": "kv_consumer",
        "kv_connector_extra_config": {
            "connectors": [
                {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
                {
                    "kv_connector": "OffloadingConnector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"cpu_bytes_to_use": 2 * GIB},
                },
            ]
        },
    }


# --- inputs from other tools --------------------------------------------------------------------------------


def test_render_a_choose_backend_result(knowledge: Knowledge) -> None:
    choice = choose_backend(ChooseBackendRequest(version="0.22.1", tiers=["cpu", "nvme"]), knowledge)
    result = render(
        knowledge,
        choice=choice.model_dump(mode="json"),
        sizes={"kv_offloading_size_gib": 16},
        paths={"disk": ["/nvme"]},
    )
    assert result.backend == "native_tiering" and result.version_context.version == "0.22.1"
    tiers = ktc(argv_of(file(result, "vllm.sh"))[1])["kv_connector_extra_config"]["secondary_tiers"]
    assert tiers == [{"type": "fs_python", "root_dir": "/nvme"}]


def test_size_offload_numbers_are_taken_and_checked(knowledge: Knowledge) -> None:
    sizes = {"kv_offloading_size_gib": 64.0, "cpu_bytes_to_use": 64 * GIB, "lmcache_max_local_cpu_size_gib": 16.0}
    result = render(
        knowledge, backend="lmcache", parallelism={"tensor_parallel_size": 4}, size_offload=sizes, format="env_file"
    )
    assert "LMCACHE_MAX_LOCAL_CPU_SIZE=16" in shell_words(file(result, "vllm.env"))
    with pytest.raises(AdviceError, match=r"^size_offload\.lmcache_max_local_cpu_size_gib: .*per worker"):
        render(knowledge, backend="lmcache", parallelism={"tensor_parallel_size": 2}, size_offload=sizes)
    with pytest.raises(AdviceError, match=r"^size_offload\.cpu_bytes_to_use: "):
        render(knowledge, backend="native_cpu", size_offload={"kv_offloading_size_gib": 1, "cpu_bytes_to_use": 10**9})


# --- injection: every free-text input -------------------------------------------------------------------------

# Printable hostile text: quoting must keep it one inert word. Text a format cannot carry at all (NUL,
# newlines, a leading '-') is refused before rendering; tests/test_render_injection.py covers that.
PAYLOADS = ["x; rm -rf /", "$(touch {canary})", 'it\'s "quoted" `touch {canary}`', "a --evil"]


def _fake_vllm(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script = bin_dir / "vllm"
    script.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_model_and_path_run_inert_in_the_shell(knowledge: Knowledge, tmp_path: Path, payload: str) -> None:
    canary = tmp_path / "pwned"
    text = payload.format(canary=canary)
    result = render(
        knowledge,
        backend="native_tiering",
        version="0.33.0",
        tiers=["fs"],
        model=f"org/{text}",
        sizes={"kv_offloading_size_gib": 1},
        paths={"disk": [f"/kv/{text}"]},
    )
    bin_dir = _fake_vllm(tmp_path)
    script = tmp_path / "run.sh"
    script.write_text(file(result, "vllm.sh"))
    subprocess.run(["sh", str(script)], check=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    seen = json.loads((tmp_path / "argv.json").read_text())["argv"]
    assert seen[:2] == ["serve", f"org/{text}"]
    assert ktc(seen)["kv_connector_extra_config"]["secondary_tiers"][0]["root_dir"] == f"/kv/{text}"
    assert "--evil" not in seen and not canary.exists()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_hosts_are_refused_naming_the_field(payload: str) -> None:
    text = payload.format(canary="/tmp/x")
    for output in ("vllm_serve", "env_file"):
        with pytest.raises(ToolInputError, match=r"^hosts\.prefill: must be a host name"):
            run_tool(
                "render_config",
                {"backend": "nixl_pd", "model": "m", "hosts": {"prefill": text}, "format": output},
            )


def test_a_host_reaches_the_env_prefix_and_the_env_file_as_given(knowledge: Knowledge, tmp_path: Path) -> None:
    host = "prefill-0.pool_a.example"
    result = render(knowledge, backend="nixl_pd", version="0.33.0", hosts={"prefill": host, "decode": "10.0.0.2"})
    bin_dir = _fake_vllm(tmp_path)
    script = tmp_path / "run.sh"
    script.write_text(file(result, "prefill.sh"))
    subprocess.run(["sh", str(script)], check=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    seen = json.loads((tmp_path / "argv.json").read_text())
    assert seen["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == host
    envfile = render(knowledge, backend="nixl_pd", version="0.33.0", hosts={"prefill": host}, format="env_file")
    (tmp_path / "p.env").write_text(file(envfile, "prefill.env"))
    out = subprocess.run(
        ["sh", "-c", f'set -a; . {shlex.quote(str(tmp_path / "p.env"))}; printf %s "$VLLM_NIXL_SIDE_CHANNEL_HOST"'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out == host


IMAGE = "registry.example:5000/team/vllm-openai:v0.33.0"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_values_in_kubernetes_and_docker_are_literal(knowledge: Knowledge, payload: str) -> None:
    text = payload.format(canary="/tmp/x")
    k8s = render(
        knowledge,
        backend="lmcache",
        model=f"m/{text}",
        sizes={"kv_offloading_size_gib": 4, "disk_gib": 1},
        paths={"disk": [f"/d/{text}"]},
        image=IMAGE,
        format="kubernetes",
    )
    raw = k8s.files[0].content
    c = container(workload(manifests(k8s), "vllm-vllm"))
    unescaped = [a.replace("$$", "$") for a in c["args"]]
    assert unescaped[1] == f"m/{text}" and c["image"] == IMAGE
    env = {e["name"]: e["value"].replace("$$", "$") for e in c["env"] if "value" in e}
    assert env["LMCACHE_LOCAL_DISK"] == f"file:///d/{text}"
    if "$(" in text:
        assert "$$(" in raw  # Kubernetes would expand a bare $(VAR)
    docker = render(
        knowledge,
        backend="lmcache",
        model=f"m/{text}",
        sizes={"kv_offloading_size_gib": 4},
        image=IMAGE,
        format="docker_run",
    )
    words = shell_words(file(docker, "vllm.sh"))
    assert words[words.index(IMAGE) + 2] == f"m/{text}"
    lm = render(
        knowledge,
        backend="lmcache",
        sizes={"kv_offloading_size_gib": 4, "disk_gib": 1},
        paths={"disk": [f"/d/{text}"]},
        format="lmcache_yaml",
    )
    assert yaml.safe_load(file(lm, "vllm.yaml"))["local_disk"] == f"file:///d/{text}"


def test_a_model_name_that_looks_like_a_flag_is_refused() -> None:
    arguments = {"backend": "native_cpu", "model": "--evil", "sizes": {"kv_offloading_size_gib": 1}}
    with pytest.raises(ToolInputError, match=r"^model: must not start with '-'"):
        run_tool("render_config", arguments)


@pytest.mark.parametrize("name", ["x\nkind: Secret", "vllm\n", "Vllm", "-vllm"])
def test_a_kubernetes_name_must_be_a_dns_label(name: str) -> None:
    with pytest.raises(ValidationError, match=r"name\n  must be a DNS label"):
        RenderConfigRequest.model_validate({"model": "m", "backend": "none", "name": name})
    with pytest.raises(ToolInputError, match=r"^namespace: must be a DNS label"):
        run_tool("render_config", {"model": "m", "backend": "none", "namespace": name})


def test_missing_size_names_the_field(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^sizes\.kv_offloading_size_gib: "):
        render(knowledge, backend="native_cpu")


def test_a_format_the_backend_has_no_use_for_is_refused(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^format: lmcache_yaml applies"):
        render(knowledge, backend="native_cpu", sizes={"kv_offloading_size_gib": 1}, format="lmcache_yaml")


def test_a_flag_the_release_lacks_is_caught(knowledge: Knowledge) -> None:
    # --kv-offloading-size first appears in 0.11.1; on 0.11.0 native offload needs num_cpu_blocks instead.
    with pytest.raises(AdviceError, match=r"^sizes\.num_cpu_blocks"):
        render(knowledge, backend="native_cpu", version="0.11.0", sizes={"kv_offloading_size_gib": 1})


def test_a_size_offload_result_brings_the_parallelism_it_was_sized_for(knowledge: Knowledge) -> None:
    sized = run_tool(
        "size_offload",
        {"model": "Qwen/Qwen3-32B", "version": "0.22.1", "tensor_parallel_size": 4, "host_ram_gib": 1024},
    ).model_dump(mode="json")
    per_worker = sized["offload"]["lmcache_max_local_cpu_size_gib"]
    result = render(knowledge, backend="lmcache", version="0.22.1", size_offload=sized, format="env_file")
    assert f"LMCACHE_MAX_LOCAL_CPU_SIZE={per_worker:g}" in shell_words(file(result, "vllm.env"))
    with pytest.raises(AdviceError, match=r"^parallelism\.tensor_parallel_size: is 2, but .* sized for 4"):
        render(knowledge, backend="lmcache", parallelism={"tensor_parallel_size": 2}, size_offload=sized)
    with pytest.raises(AdviceError, match=r"^size_offload\.tensor_parallel_size: "):
        render(knowledge, backend="lmcache", size_offload={**sized, "tensor_parallel_size": 512})


# --- purity ------------------------------------------------------------------------------------------------

_BACKEND_INPUTS: dict[str, dict[str, Any]] = {
    "none": {},
    "native_cpu": {},
    "native_tiering": {"tiers": ["fs", "obj", "p2p"], "paths": {"disk": ["/nvme"]}},
    "lmcache": {"paths": {"disk": ["/nvme"]}, "sizes": {"disk_gib": 10}},
    "lmcache_p2p": {"instances": 3},
    "lmcache_mp": {},
    "nixl_pd": {"fabric": "infiniband"},
    "mooncake_pd": {"fabric": "ethernet"},
    "multi_nixl_offload": {},
}


@pytest.mark.parametrize("backend", sorted(_BACKEND_INPUTS))
@pytest.mark.parametrize("output", ["vllm_serve", "kubernetes"])
def test_render_config_changes_neither_the_request_nor_the_knowledge(
    knowledge: Knowledge, backend: str, output: str
) -> None:
    """A request (with a size_offload result and a choice to fill in) and the knowledge are read, never written:
    the same request rendered twice gives the same files, and a cached knowledge serves every later call."""
    choice = choose_backend(ChooseBackendRequest(version="0.33.0", tiers=["cpu", "nvme"]), knowledge)
    arguments = {
        "model": "m",
        "format": output,
        "object_store": {"bucket": "b", "endpoint_override": "http://s3:9000"},
        **_BACKEND_INPUTS[backend],
        "size_offload": {"offload": {"kv_offloading_size_gib": 8.0}, "tensor_parallel_size": 2},
    }
    if backend == "native_tiering":  # the choice fills in the version and the tiers
        arguments |= {"choice": choice.model_dump(mode="json"), "tiers": None}
    else:
        arguments["backend"] = backend
    request = RenderConfigRequest.model_validate(arguments)
    request_before = copy.deepcopy(request.model_dump())
    knowledge_before = copy.deepcopy(knowledge.model_dump())
    first = render_config(request, knowledge)
    assert request.model_dump() == request_before
    assert knowledge.model_dump() == knowledge_before
    assert render_config(request, knowledge).files == first.files


# --- what the renderer reads from the knowledge ------------------------------------------------------------


def _edited(knowledge_copy: Path, edit: Any) -> Knowledge:
    """The knowledge with recipes.yaml (and features.yaml, lmcache.yaml) changed by ``edit``, templates included."""
    shutil.copytree(Path(load_knowledge().directory) / "templates", knowledge_copy / "templates")
    files = {name: knowledge_copy / name for name in ("recipes.yaml", "features.yaml", "lmcache.yaml")}
    data = {name: yaml.load(path.read_text(), Loader=SAFE_LOADER) for name, path in files.items()}
    edit(data)
    for name, path in files.items():
        path.write_text(yaml.dump(data[name], Dumper=SAFE_DUMPER, sort_keys=False))
    return load_knowledge(str(knowledge_copy))


def test_ports_and_the_eviction_policy_are_the_knowledges(knowledge_copy: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        facts = data["recipes.yaml"]["facts"]
        facts["vllm_http_port"]["port"] = 8100
        facts["pd_proxy_port"]["port"] = 9192
        facts["lmcache_mp_address"]["port"] = 6555
        facts["lmcache_server"]["eviction_policy"] = "ARC"
        facts["lmcache_p2p_ports"]["base"] = 7200
        facts["lmcache_controller"] |= {"http_port": 9001, "pull_port": 9300, "reply_port": 9400}

    edited = _edited(knowledge_copy, edit)
    nixl = render(edited, backend="nixl_pd", version="0.33.0", hosts={"prefill": "p", "decode": "d"})
    proxy = argv_of(file(nixl, "proxy.sh"))[1]
    assert proxy[proxy.index("--port") + 1] == "9192"
    assert proxy[proxy.index("--prefiller-ports") + 1] == proxy[proxy.index("--decoder-ports") + 1] == "8100"
    mooncake = render(edited, backend="mooncake_pd", version="0.33.0", hosts={"prefill": "p", "decode": "d"})
    assert argv_of(file(mooncake, "proxy.sh"))[1][-3:] == ["8998", "--decode", "http://d:8100"]
    mp = render(edited, backend="lmcache_mp", lmcache_version="0.5.6", sizes={"kv_offloading_size_gib": 8})
    server = argv_of(file(mp, "lmcache-server.sh"))[1]
    assert server[server.index("--port") + 1] == "6555" and server[-2:] == ["--eviction-policy", "ARC"]
    assert ktc(argv_of(file(mp, "vllm.sh"))[1])["kv_connector_extra_config"]["lmcache.mp.port"] == 6555
    p2p = render(
        edited, backend="lmcache_p2p", parallelism={"tensor_parallel_size": 2}, sizes={"kv_offloading_size_gib": 8}
    )
    second = argv_of(file(p2p, "vllm-1.sh"))[0]
    # instance 0 took 7200-7205 (init, lookup, worker for two ranks); instance 1 goes on from there
    assert (second["LMCACHE_P2P_INIT_PORTS"], second["LMCACHE_P2P_LOOKUP_PORTS"]) == ("7206,7207", "7208,7209")
    assert second["LMCACHE_LMCACHE_WORKER_PORTS"] == "7210,7211"
    assert second["LMCACHE_CONTROLLER_PULL_URL"] == "localhost:9300"
    controller = argv_of(file(p2p, "lmcache-controller.sh"))[1]
    assert controller[controller.index("--port") + 1] == "9001"
    assert json.loads(controller[-1]) == {"pull": 9300, "reply": 9400}


def test_the_lmcache_server_command_is_chosen_by_a_version_range(knowledge_copy: Path) -> None:
    """A range with an upper bound, read as a PEP 440 specifier (it was stripped of '>=' and read as a version)."""

    def edit(data: dict[str, Any]) -> None:
        data["recipes.yaml"]["facts"]["lmcache_server"]["command_versions"] = ">=0.4.3,<0.5.0"

    edited = _edited(knowledge_copy, edit)
    for lmcache, command in (("0.4.4", ["lmcache", "server"]), ("0.5.6", ["python3", "-m"])):
        result = render(edited, backend="lmcache_mp", lmcache_version=lmcache, sizes={"kv_offloading_size_gib": 8})
        assert argv_of(file(result, "lmcache-server.sh"))[1][: len(command)] == command, lmcache


def test_changes_are_found_by_their_kind_not_their_place(knowledge_copy: Path) -> None:
    """An earlier change listed first must not be taken for the one that made the obj tier's keys optional
    (0.26.0) or LMCache's disk setting a list (0.4.4)."""
    earlier = {"summary": "an unrelated change", "sources": ["pypi:vllm"], "verified_at": "2026-11-30"}

    def edit(data: dict[str, Any]) -> None:
        obj = next(f for f in data["features.yaml"]["features"] if f["id"] == "feature.tier-obj")
        obj["changes"].insert(0, {"version": "0.24.0", **earlier})
        disk = next(s for s in data["lmcache.yaml"]["settings"] if s["id"] == "lmcache.local_disk")
        disk["changes"].insert(0, {"version": "0.3.9", **earlier})

    edited = _edited(knowledge_copy, edit)
    store = {"bucket": "b", "endpoint_override": "http://s3:9000"}
    result = render(edited, backend="native_tiering", version="0.25.0", tiers=["obj"], object_store=store, sizes=SIZE)
    assert any("optional from 0.26.0" in note for note in result.notes), result.notes
    with pytest.raises(AdviceError, match=r"^paths\.disk: LMCache 0\.4\.3 takes one disk path; a list needs 0\.4\.4\+"):
        render(
            edited,
            backend="lmcache",
            lmcache_version="0.4.3",
            paths={"disk": ["/a", "/b"]},
            sizes={"kv_offloading_size_gib": 8, "disk_gib": 10},
        )


def test_the_p2p_tier_port_of_0_25_is_the_tier_entrys_default_and_cited(knowledge: Knowledge) -> None:
    result = render(
        knowledge, backend="native_tiering", version="0.25.0", tiers=["p2p"], sizes=SIZE, format="kubernetes"
    )
    ports = container(workload(manifests(result), "vllm-vllm"))["ports"]
    assert {"name": "p2p", "containerPort": 7777} in ports
    assert "spec.tier.p2p.port" in {c.id for c in result.citations}
    newer = render(
        knowledge, backend="native_tiering", version="0.26.0", tiers=["p2p"], sizes=SIZE, format="kubernetes"
    )
    assert {"name": "p2p", "containerPort": 5710} in container(workload(manifests(newer), "vllm-vllm"))["ports"]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: d["recipes.yaml"]["facts"]["pd_proxy_port"].update(port=70000),
            r"field 'facts\.pd_proxy_port\.port': Input should be less than or equal to 65535",
        ),
        (
            lambda d: d["recipes.yaml"]["facts"]["lmcache_server"].update(command_versions="0.4.3+"),
            r"field 'facts\.lmcache_server\.command_versions'",
        ),
        (
            lambda d: d["recipes.yaml"]["facts"]["ucx_tls_by_fabric"].pop("roce"),
            r"field 'facts\.ucx_tls_by_fabric\.roce': Field required",
        ),
        (
            lambda d: d["recipes.yaml"]["tier_types"][0].update(feature="feature.tier-nope"),
            r"tier_types 'fs': no knowledge entry has the id 'feature\.tier-nope'",
        ),
        (
            lambda d: d["recipes.yaml"]["tier_types"][1].update(serves="nvme"),
            r"tier_types: each of nvme, object_store, peers is the serves of one entry",
        ),
        (
            lambda d: d["features.yaml"]["features"][0]["changes"][0].update(kind="first"),
            r"features\.yaml: .*field 'changes\.0\.kind'",
        ),
    ],
)
def test_a_fact_of_the_wrong_shape_is_refused_at_load(knowledge_copy: Path, edit: Any, expected: str) -> None:
    with pytest.raises(KnowledgeError, match=expected):
        _edited(knowledge_copy, edit)
