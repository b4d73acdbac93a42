"""The registry client against a stand-in registry on 127.0.0.1: what an operator asking about an
image tag depends on — authentication, manifest negotiation, platform choice, failures, secrets."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port
from registry_standin import (
    LAYER_SIZES_AMD64,
    MANIFEST_LIST,
    OCI_INDEX,
    FakeRegistry,
    Reply,
    canonical,
    digest_of,
    vllm_openai_config,
)
from vllm_caching_mcp.http_client import Deadline, Secret
from vllm_caching_mcp.registry import (
    ConfigError,
    Credentials,
    ImageRef,
    InvalidImageReference,
    PlatformMissing,
    RegistryClient,
    RegistryError,
    RegistrySettings,
    credentials_from_docker_config,
    parse_challenge,
    parse_image_reference,
)

PASSWORD = "PLANTED-registry-password-7f3a9c"
REPO = "vllm/vllm-openai"
SLACK = 4.0  # interpreter and thread scheduling on a loaded 2-core machine, past what a test allows the client
STALL = 30.0  # how long a slow stand-in holds its reply: far past any allowance here


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with FakeRegistry() as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config(), "arm64": vllm_openai_config(arch="arm64")})
        fake.add_image(REPO, "v0.19.0-cu130", {"amd64": vllm_openai_config(cuda="13.0.1")}, oci=True)
        yield fake


def client_for(fake: FakeRegistry, tmp_path: Path, **settings: Any) -> RegistryClient:
    values: dict[str, Any] = {
        "mirror": f"http://127.0.0.1:{fake.port}",
        "cache_dir": tmp_path / "cache",
        "docker_config": None,
        "max_retries": 2,
        "timeout": 2.0,
    }
    values.update(settings)
    return RegistryClient(RegistrySettings(**values), sleep=Sleeps())


def ref(text: str) -> ImageRef:
    return parse_image_reference(text)


# --- references ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("v0.22.1", "docker.io", "vllm/vllm-openai", "v0.22.1", None),
        ("latest", "docker.io", "vllm/vllm-openai", "latest", None),
        ("vllm/vllm-openai", "docker.io", "vllm/vllm-openai", "latest", None),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", None),
        ("docker.io/vllm/vllm-openai:v0.19.0-cu130", "docker.io", "vllm/vllm-openai", "v0.19.0-cu130", None),
        ("harbor.example.com:8443/ai/vllm-openai:v1", "harbor.example.com:8443", "ai/vllm-openai", "v1", None),
        ("localhost:5000/vllm", "localhost:5000", "vllm", "latest", None),
        (f"vllm/vllm-openai@sha256:{'a' * 64}", "docker.io", "vllm/vllm-openai", None, f"sha256:{'a' * 64}"),
    ],
)
def test_image_references_are_read_like_docker_pull_reads_them(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    assert parse_image_reference(text) == ImageRef(registry, repository, tag, digest)


@pytest.mark.parametrize(
    "text",
    [
        "v0.22.1; rm -rf /",
        "$(touch /tmp/x)",
        "vllm/vllm-openai:v1`id`",
        "Vllm/Upper:tag",
        "vllm/vllm-openai@sha256:short",
        "../../etc/passwd:x",
        "",
        "a" * 600,
    ],
)
def test_anything_that_is_not_a_reference_is_refused(text: str) -> None:
    with pytest.raises(InvalidImageReference):
        parse_image_reference(text)


def test_a_bearer_challenge_is_parsed_with_quoted_and_bare_values() -> None:
    challenge = parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull",x=y'
    )
    assert challenge is not None and challenge.scheme == "bearer"
    assert challenge.params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:a/b:pull",
        "x": "y",
    }


# --- the happy path -------------------------------------------------------------------------------


def test_a_tag_is_read_through_anonymous_bearer_auth_index_manifest_and_config(
    registry: FakeRegistry, tmp_path: Path
) -> None:
    with client_for(registry, tmp_path) as client:
        meta = client.inspect(ref("v0.22.1"), Deadline(10))
    # 401 challenge, token, index, amd64 manifest, config blob: five requests, and not one layer.
    paths = [r.path for r in registry.requests]
    index_digest = digest_of(registry.tags[(REPO, "v0.22.1")])
    assert paths == [
        f"/v2/{REPO}/manifests/v0.22.1",
        "/token",
        f"/v2/{REPO}/manifests/v0.22.1",
        f"/v2/{REPO}/manifests/{meta.manifest_digest}",
        f"/v2/{REPO}/blobs/{meta.config_digest}",
    ]
    token_request = registry.requests[1]
    assert token_request.query == {"service": ["registry.docker.io"], "scope": [f"repository:{REPO}:pull"]}
    assert "authorization" not in token_request.headers  # anonymous
    assert registry.requests[2].headers["authorization"].startswith("Bearer fake-")
    assert (
        MANIFEST_LIST in registry.requests[2].headers["accept"] and OCI_INDEX in registry.requests[2].headers["accept"]
    )
    assert meta.top_digest == index_digest and meta.top_media_type == MANIFEST_LIST
    assert meta.platform == "linux/amd64" and meta.platforms == ("linux/amd64", "linux/arm64/v8")
    assert meta.layer_sizes == tuple(LAYER_SIZES_AMD64)
    assert meta.config["config"]["Entrypoint"] == ["vllm", "serve"]
    assert meta.origin == "live" and meta.fallback is None and client.requests_made == 5


def test_an_oci_index_and_arm64_are_read_the_same_way(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path) as client:
        oci = client.inspect(ref("v0.19.0-cu130"), Deadline(10))
        arm = client.inspect(ref("v0.22.1"), Deadline(10), arch="arm64")
    assert oci.top_media_type == OCI_INDEX and oci.config["config"]["Env"][2] == "CUDA_VERSION=13.0.1"
    assert arm.platform == "linux/arm64/v8" and arm.config["architecture"] == "arm64"


def test_a_reference_by_digest_skips_the_tag(registry: FakeRegistry, tmp_path: Path) -> None:
    index_digest = digest_of(registry.tags[(REPO, "v0.22.1")])
    with client_for(registry, tmp_path) as client:
        meta = client.inspect(ref(f"vllm/vllm-openai@{index_digest}"), Deadline(10))
    assert meta.top_digest == index_digest
    assert not any(r.path.endswith("/v0.22.1") for r in registry.requests)


def test_a_registry_named_in_the_reference_is_asked_directly(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path, mirror=None) as client:
        meta = client.inspect(ref(f"127.0.0.1:{registry.port}/vllm/vllm-openai:v0.22.1"), Deadline(10))
    assert meta.endpoint == f"http://127.0.0.1:{registry.port}/v2/vllm/vllm-openai"


def test_a_mirror_with_a_project_prefix_gets_the_prefixed_repository(tmp_path: Path) -> None:
    # Harbor proxy-cache projects and Artifactory remote repositories put Docker Hub under a prefix.
    with FakeRegistry(auth="none") as fake:
        fake.add_image(f"dockerhub-proxy/{REPO}", "v0.22.1", {"amd64": vllm_openai_config()})
        with client_for(fake, tmp_path, mirror=f"http://127.0.0.1:{fake.port}/dockerhub-proxy") as client:
            meta = client.inspect(ref("v0.22.1"), Deadline(10))
    assert fake.requests[0].path == f"/v2/dockerhub-proxy/{REPO}/manifests/v0.22.1"
    assert meta.platform == "linux/amd64"


def test_a_blob_redirect_to_another_origin_is_followed_without_the_authorization_header(
    registry: FakeRegistry, tmp_path: Path
) -> None:
    registry.redirect_blobs_to = "localhost"  # another origin, as Docker Hub's CDN is
    with client_for(registry, tmp_path) as client:
        meta = client.inspect(ref("v0.22.1"), Deadline(10))
    cdn = registry.seen("/cdn/")
    assert len(cdn) == 1 and cdn[0].host.startswith("localhost") and "authorization" not in cdn[0].headers
    assert meta.config["os"] == "linux"


# --- what goes wrong ---------------------------------------------------------------------------


def test_an_index_without_the_wanted_arch_names_what_is_available(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path) as client, pytest.raises(PlatformMissing) as caught:
        client.inspect(ref("v0.19.0-cu130"), Deadline(10), arch="arm64")
    assert caught.value.wanted == "linux/arm64" and caught.value.available == ["linux/amd64"]  # no unknown/unknown


def test_an_unknown_tag_is_not_found(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path) as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v9.9.9"), Deadline(10))
    assert caught.value.reason == "not_found" and "MANIFEST_UNKNOWN" in str(caught.value).upper()


def test_server_errors_are_retried_with_backoff_then_succeed(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.script(f"/v2/{REPO}/manifests/v0.22.1", Reply(503, b"busy"), Reply(502, b"bad gateway"))
    client = client_for(registry, tmp_path)
    with client:
        meta = client.inspect(ref("v0.22.1"), Deadline(10))
    sleeps = client._sleep
    assert isinstance(sleeps, Sleeps) and len(sleeps.calls) == 2
    # full jitter: attempt n waits a random time in [0, 0.5 * 2**n]
    assert 0 <= sleeps.calls[0] <= 0.5 and 0 <= sleeps.calls[1] <= 1.0
    assert meta.origin == "live"


def test_a_registry_that_keeps_failing_gives_up_after_the_retries(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.script(f"/v2/{REPO}/manifests/v0.22.1", *[Reply(500, b"") for _ in range(3)])
    with client_for(registry, tmp_path) as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v0.22.1"), Deadline(10))
    assert caught.value.reason == "server_error" and "3 times" in str(caught.value)


def test_a_slow_registry_times_out_and_the_client_then_stops_asking(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.script(f"/v2/{REPO}/manifests/v0.22.1", *[Reply(200, b"{}", delay=STALL) for _ in range(3)])
    with client_for(registry, tmp_path, timeout=0.3, max_retries=1) as client:
        with pytest.raises(RegistryError) as caught:
            client.inspect(ref("v0.22.1"), Deadline(10))
        before = len(registry.requests)
        with pytest.raises(RegistryError) as again:
            client.inspect(ref("v0.19.0-cu130"), Deadline(10))
    assert caught.value.reason == "timeout" and again.value.reason == "timeout"
    assert len(registry.requests) == before  # the network is known down: no second wait


@pytest.mark.parametrize("path", ["/token", f"/v2/{REPO}/manifests/v0.22.1"], ids=["token service", "manifest"])
def test_headers_dripped_a_byte_at_a_time_end_at_the_deadline(
    path: str, registry: FakeRegistry, tmp_path: Path
) -> None:
    # The manifest's first answer (the 401 challenge) is quick; the drip comes on the reused connection.
    challenge = f'Bearer realm="http://127.0.0.1:{registry.port}/token",service="registry.docker.io"'
    first = [Reply(401, b"{}", {"WWW-Authenticate": challenge})]
    registry.script(path, *(first if path != "/token" else []), *[Reply(200, b"{}", drip="head")] * 3)
    started = time.monotonic()
    with client_for(registry, tmp_path, timeout=10.0) as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v0.22.1"), Deadline(1.5))  # time to reach the third request on a loaded machine
    assert time.monotonic() - started < 1.5 + SLACK  # the deadline, plus scheduling slack on a loaded machine
    assert caught.value.reason == "timeout"
    assert registry.seen(path)


def test_an_unreachable_registry_is_reported_with_its_reason(tmp_path: Path) -> None:
    settings = RegistrySettings(mirror=f"http://127.0.0.1:{free_port()}", cache_dir=tmp_path, max_retries=0)
    with RegistryClient(settings) as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v0.22.1"), Deadline(5))
    assert caught.value.reason == "connection_refused"


def test_content_that_does_not_match_its_digest_is_refused(registry: FakeRegistry, tmp_path: Path) -> None:
    meta_client = client_for(registry, tmp_path / "first")
    with meta_client:
        meta = meta_client.inspect(ref("v0.22.1"), Deadline(10))
    tampered = canonical({**vllm_openai_config(), "architecture": "amd64", "tampered": True})
    registry.blobs[meta.config_digest] = tampered
    with client_for(registry, tmp_path / "second") as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v0.22.1"), Deadline(10))
    assert caught.value.reason == "bad_response" and "digest" in str(caught.value)


# --- the cache --------------------------------------------------------------------------------------


def test_a_second_look_within_the_ttl_asks_nothing(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path) as client:
        first = client.inspect(ref("v0.22.1"), Deadline(10))
    count = len(registry.requests)
    with client_for(registry, tmp_path) as client:
        second = client.inspect(ref("v0.22.1"), Deadline(10))
        assert client.requests_made == 0
    assert len(registry.requests) == count
    assert second.origin == "cache" and second.config == first.config and second.top_digest == first.top_digest


def test_when_the_registry_is_down_a_stale_cache_answers_and_says_why(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path) as client:
        client.inspect(ref("v0.22.1"), Deadline(10))
    settings = RegistrySettings(
        mirror=f"http://127.0.0.1:{registry.port}", cache_dir=tmp_path / "cache", cache_ttl=0, docker_config=None
    )
    registry.stop()
    with RegistryClient(settings, sleep=Sleeps()) as client:
        meta = client.inspect(ref("v0.22.1"), Deadline(10))
    assert meta.origin == "cache" and meta.fallback is not None and meta.fallback.reason == "connection_refused"
    assert meta.config["config"]["Entrypoint"] == ["vllm", "serve"]


def test_offline_mode_asks_nothing(registry: FakeRegistry, tmp_path: Path) -> None:
    with client_for(registry, tmp_path, offline=True) as client, pytest.raises(RegistryError) as caught:
        client.inspect(ref("v0.22.1"), Deadline(10))
    assert caught.value.reason == "offline_requested" and registry.requests == []


# --- credentials ------------------------------------------------------------------------------------


def test_credentials_from_the_environment_go_to_the_token_service_and_never_show(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore included
    with FakeRegistry(user="operator", password=PASSWORD) as fake:
        fake.add_image("team/private-vllm", "v1", {"amd64": vllm_openai_config()})
        base = f"http://127.0.0.1:{fake.port}"
        env = {"VLLM_CACHING_MCP_REGISTRY_USER": "operator", "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD}
        settings = RegistrySettings.from_env(env, mirror=base, cache_dir=tmp_path / "cache", docker_config=None)
        texts = [repr(settings)]
        with RegistryClient(settings) as client:
            meta = client.inspect(ref("team/private-vllm:v1"), Deadline(10))
            texts.append(repr(meta))
        basic = "Basic " + base64.b64encode(f"operator:{PASSWORD}".encode()).decode()
        assert fake.seen("/token")[0].headers["authorization"] == basic  # they were used
        # A wrong password: the error must not carry it either.
        wrong = RegistrySettings.from_env(
            {**env, "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD + "-wrong"},
            mirror=base,
            cache_dir=tmp_path / "other",
            docker_config=None,
        )
        with RegistryClient(wrong) as client, pytest.raises(RegistryError) as refused:
            client.inspect(ref("team/private-vllm:v1"), Deadline(10))
        texts.append(str(refused.value))
    assert refused.value.reason in ("unauthorized", "forbidden")
    texts.append(caplog.text)
    texts += [p.read_text() for p in (tmp_path / "cache").glob("*.json")]
    encoded = base64.b64encode(f"operator:{PASSWORD}".encode()).decode()
    for text in texts:
        assert PASSWORD not in text and encoded not in text


def test_a_basic_challenge_is_answered_with_the_credentials(tmp_path: Path) -> None:
    # registry:2 with htpasswd, or Artifactory with basic auth
    with FakeRegistry(auth="basic", user="ci", password=PASSWORD) as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        creds = Credentials("environment", username="ci", password=Secret(PASSWORD))
        with client_for(fake, tmp_path, credentials=creds) as client:
            meta = client.inspect(ref("v0.22.1"), Deadline(10))
    assert meta.credentials_source == "environment" and fake.seen("/token") == []


def test_credentials_are_not_sent_to_a_token_realm_on_another_host(tmp_path: Path) -> None:
    with FakeRegistry() as fake:
        fake.realm_host = "localhost"  # the challenge names a realm on another host
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        creds = Credentials("environment", username="ci", password=Secret(PASSWORD))
        with client_for(fake, tmp_path, credentials=creds) as client:
            meta = client.inspect(ref("v0.22.1"), Deadline(10))
    assert "authorization" not in fake.seen("/token")[0].headers
    assert any("not sent to the token service at localhost" in n for n in meta.notes)


def test_docker_config_auths_entries_are_read_and_helpers_reported(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    auth = base64.b64encode(f"robot$ci:{PASSWORD}".encode()).decode()
    config.write_text(
        json.dumps(
            {
                "auths": {"https://index.docker.io/v1/": {"auth": auth}, "harbor.example.com": {}},
                "credHelpers": {"harbor.example.com": "ecr-login"},
            }
        )
    )
    hub, _ = credentials_from_docker_config(config, "docker.io")
    assert hub is not None and hub.username == "robot$ci" and hub.password is not None
    assert hub.password.reveal() == PASSWORD and PASSWORD not in repr(hub)
    none, helper_note = credentials_from_docker_config(config, "harbor.example.com")
    assert none is None and helper_note is not None and "'ecr-login'" in helper_note and "does not run" in helper_note


def test_docker_config_credentials_are_used_for_the_mirror_host(tmp_path: Path) -> None:
    with FakeRegistry(user="mirror-user", password=PASSWORD) as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        config = tmp_path / "config.json"
        auth = base64.b64encode(f"mirror-user:{PASSWORD}".encode()).decode()
        config.write_text(json.dumps({"auths": {f"127.0.0.1:{fake.port}": {"auth": auth}}}))
        with client_for(fake, tmp_path, docker_config=config) as client:
            meta = client.inspect(ref("v0.22.1"), Deadline(10))
    assert meta.credentials_source == f"docker config (127.0.0.1:{fake.port})"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"VLLM_CACHING_MCP_REGISTRY_MIRROR": "http://harbor.example.com"}, "VLLM_CACHING_MCP_REGISTRY_MIRROR"),
        ({"VLLM_CACHING_MCP_REGISTRY_MIRROR": "https://u:p@harbor.example.com"}, "VLLM_CACHING_MCP_REGISTRY_MIRROR"),
        ({"VLLM_CACHING_MCP_REGISTRY_USER": "only-user"}, "VLLM_CACHING_MCP_REGISTRY_PASSWORD"),
        ({"VLLM_CACHING_MCP_REGISTRY_CA_BUNDLE": "/nonexistent/ca.pem"}, "VLLM_CACHING_MCP_REGISTRY_CA_BUNDLE"),
    ],
)
def test_unusable_settings_name_their_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        RegistrySettings.from_env(env)


def test_tls_verification_is_on_unless_turned_off() -> None:
    assert RegistrySettings.from_env({}).verify_tls is True
    insecure = RegistrySettings.from_env({"VLLM_CACHING_MCP_REGISTRY_INSECURE": "1"})
    assert insecure.verify_tls is False
    with RegistryClient(insecure) as client:
        assert any("TLS certificate verification is off" in n for n in client.notes)
