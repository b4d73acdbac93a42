"""Registry credentials go to the registry they belong to and nowhere else, whatever image an agent names.

Credentials from the environment belong to the configured mirror (scheme, host and port), or to
Docker Hub (registry-1.docker.io and its token service auth.docker.io) when no mirror is set; a
docker config entry to its own registry; a token realm gets them only on the registry's own
origin or one VLLM_CACHING_MCP_REGISTRY_REALM_HOSTS names. Stand-in registries on 127.0.0.1,
one per port, play the mirror, the registry an image names and a token service elsewhere.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from registry_standin import FakeRegistry, vllm_openai_config
from vllm_caching_mcp.http_client import Deadline, Secret
from vllm_caching_mcp.registry import (
    REALM_HOSTS_ENV,
    ConfigError,
    Credentials,
    RegistryClient,
    RegistryError,
    RegistrySettings,
    parse_image_reference,
)

REPO = "vllm/vllm-openai"
USER, PASSWORD, TOKEN = "svc-puller", "PLANTED-scope-password-91c0", "PLANTED-scope-token-5b7e2d"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture
def mirror() -> Iterator[FakeRegistry]:
    with FakeRegistry(auth="none") as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        yield fake


@pytest.fixture
def elsewhere() -> Iterator[FakeRegistry]:
    """The registry an image names when it is not the mirror: anonymous pulls through a bearer token."""
    with FakeRegistry() as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        yield fake


def settings_from(env: dict[str, str], tmp_path: Path, **overrides: Any) -> RegistrySettings:
    values: dict[str, Any] = {"cache_dir": tmp_path / "cache", "docker_config": None, "max_retries": 0}
    values.update(overrides)
    return RegistrySettings.from_env(env, **values)


def authorizations(fake: FakeRegistry) -> list[str]:
    return [r.headers["authorization"] for r in fake.requests if "authorization" in r.headers]


@pytest.mark.parametrize(
    "env",
    [
        {"VLLM_CACHING_MCP_REGISTRY_TOKEN": TOKEN},
        {"VLLM_CACHING_MCP_REGISTRY_USER": USER, "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD},
    ],
    ids=["token", "user and password"],
)
def test_environment_credentials_do_not_go_to_a_registry_the_image_names(
    env: dict[str, str], mirror: FakeRegistry, elsewhere: FakeRegistry, tmp_path: Path
) -> None:
    settings = settings_from({**env, "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{mirror.port}"}, tmp_path)
    with RegistryClient(settings) as client:
        meta = client.inspect(parse_image_reference(f"127.0.0.1:{elsewhere.port}/{REPO}:v0.22.1"), Deadline(10))
    # the challenge was answered with an anonymous token: no Basic to /token, no planted token anywhere
    assert elsewhere.seen("/token") and all(a.startswith("Bearer fake-") for a in authorizations(elsewhere))
    assert meta.credentials_source is None
    assert any(f"not sent to 127.0.0.1:{elsewhere.port}" in note for note in meta.notes), meta.notes


def test_environment_credentials_do_not_answer_another_registrys_basic_challenge(
    mirror: FakeRegistry, tmp_path: Path
) -> None:
    env = {
        "VLLM_CACHING_MCP_REGISTRY_USER": USER,
        "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD,
        "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{mirror.port}",
    }
    with FakeRegistry(auth="basic", user=USER, password=PASSWORD) as other:
        other.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        with RegistryClient(settings_from(env, tmp_path)) as client, pytest.raises(RegistryError) as refused:
            client.inspect(parse_image_reference(f"127.0.0.1:{other.port}/{REPO}:v0.22.1"), Deadline(10))
    assert refused.value.reason == "unauthorized"
    assert authorizations(other) == []


def test_the_mirror_still_gets_the_environment_credentials(tmp_path: Path) -> None:
    with FakeRegistry(auth="basic", user=USER, password=PASSWORD) as fake:
        fake.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        env = {
            "VLLM_CACHING_MCP_REGISTRY_USER": USER,
            "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD,
            "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{fake.port}",
        }
        with RegistryClient(settings_from(env, tmp_path)) as client:
            meta = client.inspect(parse_image_reference("v0.22.1"), Deadline(10))
        # the mirror named by its own address is the mirror too
        with RegistryClient(settings_from(env, tmp_path / "again")) as client:
            direct = client.inspect(parse_image_reference(f"127.0.0.1:{fake.port}/{REPO}:v0.22.1"), Deadline(10))
    assert meta.credentials_source == direct.credentials_source == "environment"
    assert BASIC in authorizations(fake)


@pytest.mark.parametrize("listed", [False, True], ids=["not listed", "listed in REALM_HOSTS"])
def test_a_token_realm_on_the_registrys_host_but_another_port_gets_credentials_only_when_listed(
    listed: bool, tmp_path: Path
) -> None:
    with FakeRegistry() as registry, FakeRegistry(auth="none") as realm:
        realm.tokens = registry.tokens  # the token service issues what the registry accepts
        registry.realm = f"http://127.0.0.1:{realm.port}/token"
        registry.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        env = {
            "VLLM_CACHING_MCP_REGISTRY_USER": USER,
            "VLLM_CACHING_MCP_REGISTRY_PASSWORD": PASSWORD,
            "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}",
        }
        if listed:
            env[REALM_HOSTS_ENV] = f"http://127.0.0.1:{realm.port}"
        with RegistryClient(settings_from(env, tmp_path)) as client:
            meta = client.inspect(parse_image_reference("v0.22.1"), Deadline(10))
    [token_request] = realm.seen("/token")
    assert token_request.headers.get("authorization") == (BASIC if listed else None)
    refused_note = any(f"not sent to the token service at 127.0.0.1:{realm.port}" in n for n in meta.notes)
    assert refused_note is not listed


def test_docker_config_credentials_go_only_to_their_own_registry(
    mirror: FakeRegistry, elsewhere: FakeRegistry, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    config.write_text(json.dumps({"auths": {f"127.0.0.1:{mirror.port}": {"auth": auth}}}))
    env = {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{mirror.port}"}
    with RegistryClient(settings_from(env, tmp_path, docker_config=config)) as client:
        mirrored = client.inspect(parse_image_reference("v0.22.1"), Deadline(10))
        named = client.inspect(parse_image_reference(f"127.0.0.1:{elsewhere.port}/{REPO}:v0.22.1"), Deadline(10))
    assert mirrored.credentials_source == f"docker config (127.0.0.1:{mirror.port})"
    assert named.credentials_source is None
    assert all(a.startswith("Bearer fake-") for a in authorizations(elsewhere))


# --- without a mirror: Docker Hub -------------------------------------------------------------------


def test_without_a_mirror_environment_credentials_belong_to_docker_hub_and_its_token_service() -> None:
    settings = RegistrySettings(credentials=Credentials("environment", username=USER, password=Secret(PASSWORD)))
    hub = "https://registry-1.docker.io"
    assert settings.credentials_belong_to(hub)
    assert not settings.credentials_belong_to("https://registry-1.docker.io:5000")
    assert not settings.credentials_belong_to("https://ghcr.io")
    assert not settings.credentials_belong_to("http://registry-1.docker.io")
    assert settings.realm_is_trusted("https://auth.docker.io/token", hub)
    assert settings.realm_is_trusted(f"{hub}/token", hub)
    assert not settings.realm_is_trusted("https://auth.docker.io:8443/token", hub)
    # Docker Hub's token service is Docker Hub's: another registry naming it as its realm gets nothing
    assert not settings.realm_is_trusted("https://auth.docker.io/token", "https://ghcr.io")
    assert settings.realm_is_trusted("https://ghcr.io/token", "https://ghcr.io")
    with RegistryClient(settings) as client:
        for text, expected in (
            ("v0.22.1", "environment"),
            (f"registry-1.docker.io/{REPO}:v0.22.1", "environment"),
            (f"docker.io/{REPO}:v0.22.1", "environment"),
            (f"ghcr.io/{REPO}:v0.22.1", None),
            (f"registry-1.docker.io:5000/{REPO}:v0.22.1", None),
        ):
            creds = client.credentials_for(parse_image_reference(text))
            assert (creds.source if creds else None) == expected, text


def test_with_a_mirror_docker_hub_gets_no_environment_credentials() -> None:
    settings = RegistrySettings(
        mirror="https://harbor.example.com/dockerhub-proxy",
        credentials=Credentials("environment", token=Secret(TOKEN)),
    )
    assert settings.credentials_belong_to("https://harbor.example.com")
    assert settings.credentials_belong_to("https://harbor.example.com:443")
    assert not settings.credentials_belong_to("https://registry-1.docker.io")
    assert not settings.realm_is_trusted("https://auth.docker.io/token", "https://harbor.example.com")
    with RegistryClient(settings) as client:
        assert client.credentials_for(parse_image_reference("v0.22.1")) is settings.credentials
        assert client.credentials_for(parse_image_reference(f"harbor.example.com/{REPO}:v1")) is settings.credentials
        assert client.credentials_for(parse_image_reference(f"harbor.example.com:8443/{REPO}:v1")) is None


# --- VLLM_CACHING_MCP_REGISTRY_REALM_HOSTS ---------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "origin"),
    [
        ("auth.example.com", "https://auth.example.com:443"),
        ("Auth.Example.com:8443", "https://auth.example.com:8443"),
        ("https://auth.example.com", "https://auth.example.com:443"),
        ("https://auth.example.com:8443/", "https://auth.example.com:8443"),
        ("http://127.0.0.1:5001", "http://127.0.0.1:5001"),
        ("[::1]:5001", "https://[::1]:5001"),
    ],
)
def test_realm_hosts_entries_are_origins(entry: str, origin: str) -> None:
    assert RegistrySettings.from_env({REALM_HOSTS_ENV: f" {entry} ,"}).realm_hosts == (origin,)


@pytest.mark.parametrize(
    "entry",
    [
        "auth.example.com/token",
        "https://auth.example.com/token",
        "http://auth.example.com",
        "ftp://auth.example.com",
        "user@auth.example.com",
        "https://user:pw@auth.example.com",
        "*.example.com",
        "https://auth.example.com?x=1",
        "auth.example.com:99999",
        "https://",
    ],
)
def test_a_realm_hosts_entry_that_is_not_an_origin_is_refused_by_name(entry: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RegistrySettings.from_env({REALM_HOSTS_ENV: f"auth.good.example, {entry}"})
    message = str(refused.value)
    assert message.startswith(f"{REALM_HOSTS_ENV}: ") and "https://host[:port]" in message
    assert "\n" not in message
    # named, unless it carries credentials, which an error must not repeat
    assert (entry in message) is ("@" not in entry)
