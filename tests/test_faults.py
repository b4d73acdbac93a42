"""A flaky or hostile GitHub or registry never stalls an agent or leaks its credentials.

check_bug_status is called the way the server calls it (`tools.run_tool`, settings from the
environment), against the stand-in GitHub on 127.0.0.1 scripted to misbehave on every request:
a reply held past the deadline, status line and headers or the body sent a byte at a time, a body cut
short, connection resets, a storm of 5xx, 403 and 429 rate limits whose reset is an hour away, a
redirect loop, malformed JSON and bodies larger than the client reads. Every call must return
within its deadline (plus a little for Python) with the tracked bug's stored snapshot, and the
planted token must appear in no result, summary or log line — even when the server echoes it back.

inspect_image gets the same treatment from the stand-in registry (tests/registry_standin.py), with
a password planted in the environment and a token service that demands it: each fault is served
at the tag's manifest (before any credential is used) and at the config blob (after the token is
issued, on a connection already used), plus connection resets. The answer is the documented
"could not reach the registry (reason)" result, or an error naming `image` when the registry
refuses access; neither the password, its Basic form nor an issued token shows anywhere.

Echoing peers close the file: a GitHub and a registry that answer properly but copy the
``Authorization`` header they were sent into what they serve (issue titles, pull requests' names,
image labels, env values, build steps), for every kind of credential: the answer is live and
carries ``***`` where the copy was.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from github_standin import FakeGitHub, Reply
from registry_standin import FakeRegistry, canonical, digest_of, vllm_openai_config
from registry_standin import Reply as RegistryReply
from standin_http import gzip_bombs, serve, stop_server
from vllm_caching_mcp import cli
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool

TOKEN = "ghp_PLANTEDfaultTOKEN0123456789abcdefXYZ"
BUG = "vllm-project/vllm#40259"
DEADLINE = 1.0  # the least the tool accepts: a fault that is waited out costs the suite this long
SLACK = 4.0  # interpreter and thread scheduling on a loaded CI machine; each fault would hold a call far longer
STALL = 30.0  # how long a hanging stand-in holds its reply
LIVE_DEADLINE = 3.0  # for the answers that must come live: time for every request on a loaded machine
PATHS = ("/graphql", "/repos/vllm-project/vllm/issues/40259", "/repos/vllm-project/vllm/issues/40259/timeline")
HOUR = str(int(time.time()) + 3600)

PADDED = b'{"data": null, "pad": "' + b"x" * 600 + b'"}'  # dripped, it takes a minute: far past DEADLINE + SLACK

FAULTS: dict[str, list[Reply]] = {
    "hang": [Reply(200, b"{}", delay=STALL)] * 3,
    "slow headers": [Reply(200, PADDED, drip="head")] * 3,
    "slow body": [Reply(200, PADDED, drip="body")] * 3,
    "partial body": [Reply(200, PADDED, truncated=True)] * 10,
    "redirect loop": [Reply(302, b"", {"Location": "?again"})] * 10,
    "5xx storm": [Reply(503, b"unavailable")] * 40,
    "403 rate limit": [Reply(403, b"{}", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": HOUR})] * 10,
    "429 retry-after": [Reply(429, b"{}", {"retry-after": "3600", "x-ratelimit-reset": HOUR})] * 10,
    "malformed JSON": [Reply(200, b'{"data": {"repository": ')] * 10,
    "oversized body": [Reply(200, b"[" + b"0," * (3 * 1024 * 1024) + b"0]")] * 3,
    "oversized, no length": [Reply(200, b" " * (5 * 1024 * 1024) + b"{}", no_length=True)] * 3,
    **{name: [Reply(200, body, {"Content-Encoding": coding})] * 3 for name, (body, coding) in gzip_bombs().items()},
    "encoding not asked for": [Reply(200, b"{}", {"Content-Encoding": "br"})] * 3,
    "not gzip": [Reply(200, b"{}", {"Content-Encoding": "gzip"})] * 3,
    "JSON nested 100,000 deep": [Reply(200, b"[" * 100_000 + b"]" * 100_000)] * 3,
    # JSON of the wrong shape everywhere: GraphQL data a list, an issue whose closing date is no date
    "wrong shapes": [Reply(200, b'{"data": [1, 2], "state": "closed", "closed_at": "yesterday", "closed_by": 5}')] * 3,
}


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    yield


def ask_within_deadline(deadline: float = DEADLINE) -> tuple[dict[str, object], str, float]:
    start = time.monotonic()
    result = run_tool("check_bug_status", {"bugs": [BUG], "deadline_seconds": deadline})
    return result.model_dump(mode="json"), result.summary(), time.monotonic() - start


def assert_snapshot_without_token(data: dict[str, object], summary: str, logs: str) -> None:
    [bug] = data["bugs"]  # type: ignore[misc]
    assert bug["provenance"]["source"] == "snapshot", bug["provenance"]
    assert bug["state"] is not None
    for text in (str(data), summary, logs):
        assert TOKEN not in text


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_misbehaving_github_gives_the_snapshot_within_the_deadline(
    fault: str,
    knowledge: Knowledge,
    environment: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    github = FakeGitHub.from_knowledge(knowledge)
    github.reflect_authorization = True
    for path in PATHS:
        github.script(path, *FAULTS[fault])
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", github.start())
    try:
        data, summary, elapsed = ask_within_deadline()
    finally:
        github.stop()
    assert github.requests, "the fault was never reached: the call did not go to the stand-in"
    assert elapsed < DEADLINE + SLACK, f"{fault}: {elapsed:.1f} s"
    assert_snapshot_without_token(data, summary, caplog.text)


def test_connection_resets_give_the_snapshot_within_the_deadline(
    resetting_server: str, environment: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", resetting_server)
    data, summary, elapsed = ask_within_deadline()
    assert elapsed < DEADLINE + SLACK, f"{elapsed:.1f} s"
    assert_snapshot_without_token(data, summary, caplog.text)


# --- inspect_image against a misbehaving registry ------------------------------------------------

REGISTRY_USER = "svc-puller"
REGISTRY_PASSWORD = "PLANTED-registry-password-7f3a9c0e"
REPO = "vllm/vllm-openai"
TAG_PATH = f"/v2/{REPO}/manifests/v0.22.1"
CONFIG = canonical(vllm_openai_config())
BLOB_PATH = f"/v2/{REPO}/blobs/{digest_of(CONFIG)}"
# The tag's index is fetched before any credential is used; the config blob last, with the token.
STAGES = {"tag manifest": TAG_PATH, "config blob": BLOB_PATH}
REGISTRY_DEADLINE = 1.5  # the config blob is asked after three other requests: time to reach it on a loaded machine
MANY = 20  # more replies than the client will ever ask for


def registry_fault(fault: str, genuine: bytes, realm: str) -> list[RegistryReply]:
    """What the stand-in answers, on every request to the faulty path, for ``fault``."""
    challenge = {
        "WWW-Authenticate": f'Bearer realm="{realm}",service="registry.docker.io",scope="repository:{REPO}:pull"'
    }
    denied = b'{"errors": [{"code": "DENIED", "message": "requested access to the resource is denied"}]}'
    too_many = b'{"errors": [{"code": "TOOMANYREQUESTS", "message": "pull rate limit exceeded"}]}'
    docker_hub_limit = {"ratelimit-limit": "100;w=21600", "ratelimit-remaining": "0;w=21600"}
    replies = {
        "hang": [RegistryReply(200, genuine, delay=STALL)],
        "slow headers": [RegistryReply(200, genuine, drip="head")],
        "slow body": [RegistryReply(200, genuine, drip="body")],
        "partial body": [RegistryReply(200, genuine, truncated=True)],
        "redirect loop": [RegistryReply(307, b"", {"Location": "?again"})],
        "5xx storm": [RegistryReply(503, b"<html>503 Service Unavailable</html>")],
        "401 after the token": [RegistryReply(401, b'{"errors": [{"code": "UNAUTHORIZED"}]}', challenge)],
        "403 denied": [RegistryReply(403, denied)],
        "403 retry-after": [RegistryReply(403, b"{}", {"retry-after": "3600"})],
        "429 retry-after": [RegistryReply(429, too_many, {"retry-after": "3600"})],
        "429 docker hub limit": [RegistryReply(429, too_many, docker_hub_limit)],
        "malformed JSON": [RegistryReply(200, b'{"schemaVersion": 2, "manifests": [')],
        "oversized body": [RegistryReply(200, b'{"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}')],
        "oversized, no length": [RegistryReply(200, b" " * (5 * 1024 * 1024) + b"{}", no_length=True)],
        # the genuine bytes plus one space: still valid JSON, but not what the digest names
        "digest mismatch": [RegistryReply(200, genuine + b" ", {"Docker-Content-Digest": digest_of(genuine)})],
        **{
            name: [RegistryReply(200, body, {"Content-Encoding": coding})]
            for name, (body, coding) in gzip_bombs().items()
        },
        "encoding not asked for": [RegistryReply(200, genuine, {"Content-Encoding": "zstd"})],
        "JSON nested 100,000 deep": [RegistryReply(200, b"[" * 100_000 + b"]" * 100_000)],
        "wrong shapes": [RegistryReply(200, wrong_shapes(genuine), {"Content-Type": _media_type(genuine)})],
    }[fault]
    return replies * MANY


def _media_type(genuine: bytes) -> str:
    return str(json.loads(genuine).get("mediaType") or "application/json")


def wrong_shapes(genuine: bytes) -> bytes:
    """The document with every list made a number and every object below the top one a number too:
    `"manifests": 7`, `"layers": 7`, `"config": 5`, `"history": 7`."""
    document = json.loads(genuine)
    return json.dumps(
        {k: 7 if isinstance(v, list) else 5 if isinstance(v, dict) else v for k, v in document.items()}
    ).encode()


# fault -> the failure_reason of the "could not reach the registry" answer, or None for an error on `image`
REGISTRY_FAULTS: dict[str, str | None] = {
    "hang": "timeout",
    "slow headers": "timeout",
    "slow body": "timeout",
    "partial body": "network_error",
    "redirect loop": "bad_response",
    "5xx storm": "server_error",
    "401 after the token": None,
    "403 denied": None,
    "403 retry-after": "rate_limited",
    "429 retry-after": "rate_limited",
    "429 docker hub limit": "rate_limited",
    "malformed JSON": "bad_response",
    "oversized body": "bad_response",
    "oversized, no length": "bad_response",
    "digest mismatch": "bad_response",
    "stacked gzip bomb": "bad_response",
    "gzip bomb": "bad_response",
    "encoding not asked for": "bad_response",
    "JSON nested 100,000 deep": "bad_response",
    "wrong shapes": "bad_response",
}


@pytest.fixture
def registry_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Registry credentials planted in the environment, as an operator sets them; yields the cache dir."""
    monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_USER", REGISTRY_USER)
    monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_PASSWORD", REGISTRY_PASSWORD)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    yield tmp_path / "cache"


def inspect_within_deadline(deadline: float = REGISTRY_DEADLINE) -> tuple[str, str, float]:
    """(result JSON or '', summary or the tool error's text, seconds taken)."""
    start = time.monotonic()
    try:
        result = run_tool("inspect_image", {"image": "v0.22.1", "deadline_seconds": deadline})
    except ToolInputError as exc:
        return "", str(exc), time.monotonic() - start
    return result.model_dump_json(), result.summary(), time.monotonic() - start


def assert_no_registry_secret(texts: list[str], issued_tokens: set[str]) -> None:
    basic = base64.b64encode(f"{REGISTRY_USER}:{REGISTRY_PASSWORD}".encode()).decode()
    for text in texts:
        for secret in (REGISTRY_PASSWORD, basic, *issued_tokens):
            assert secret not in text


@pytest.mark.parametrize("stage", STAGES, ids=list(STAGES))
@pytest.mark.parametrize("fault", REGISTRY_FAULTS, ids=list(REGISTRY_FAULTS))
def test_a_misbehaving_registry_gives_a_clear_answer_within_the_deadline(
    fault: str,
    stage: str,
    registry_environment: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeRegistry(user=REGISTRY_USER, password=REGISTRY_PASSWORD) as registry:
        registry.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        genuine = registry.tags[(REPO, "v0.22.1")] if stage == "tag manifest" else CONFIG
        registry.script(STAGES[stage], *registry_fault(fault, genuine, f"http://127.0.0.1:{registry.port}/token"))
        monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", f"http://127.0.0.1:{registry.port}")
        result_json, text, elapsed = inspect_within_deadline()
    assert registry.seen(STAGES[stage]), "the fault was never reached"
    if stage == "config blob":
        assert registry.tokens, "the blob was asked before any token was issued"
    assert elapsed < REGISTRY_DEADLINE + SLACK, f"{fault} at the {stage}: {elapsed:.1f} s"
    reason = REGISTRY_FAULTS[fault]
    if reason is None:
        assert not result_json and text.startswith("image: vllm/vllm-openai:v0.22.1: the registry refused access")
    else:
        assert json.loads(result_json)["provenance"] == {
            "source": "unavailable",
            "cache_age_seconds": None,
            "failure_reason": reason,
            "detail": json.loads(result_json)["provenance"]["detail"],
        }
        assert text.splitlines()[1].startswith(f"could not reach the registry ({reason.replace('_', ' ')}): ")
        assert "Traceback" not in text
    cached = [p.read_text() for p in registry_environment.rglob("*.json")]
    assert_no_registry_secret([result_json, text, caplog.text, *cached], registry.tokens)


def test_a_reset_registry_connection_gives_a_clear_answer_within_the_deadline(
    resetting_server: str,
    registry_environment: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", resetting_server)
    result_json, text, elapsed = inspect_within_deadline()
    assert elapsed < REGISTRY_DEADLINE + SLACK, f"{elapsed:.1f} s"
    assert json.loads(result_json)["provenance"]["failure_reason"] == "network_error"
    assert text.splitlines()[1].startswith("could not reach the registry (network error): ")
    assert_no_registry_secret([result_json, text, caplog.text], set())


# --- echoing peers --------------------------------------------------------------------------------


def secret_forms(*secrets: str) -> list[str]:
    """Each secret and its first 12 characters: a copy cut short (an answer shortens long text) leaks too."""
    return [form for secret in secrets for form in (secret, secret[:12])]


def test_an_echoing_github_gives_a_live_answer_without_the_token(
    knowledge: Knowledge,
    environment: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    github = FakeGitHub.from_knowledge(knowledge)
    github.reflect_authorization = True  # into issue titles and linked pull requests' names
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", github.start())
    try:
        data, summary, elapsed = ask_within_deadline(LIVE_DEADLINE)
        assert cli.main(["check-bug-status", "--bugs", BUG, "--deadline-seconds", str(LIVE_DEADLINE)]) == 0
    finally:
        github.stop()
    [bug] = data["bugs"]  # type: ignore[misc]
    assert bug["provenance"]["source"] == "live" and elapsed < LIVE_DEADLINE + SLACK
    assert "***" in bug["title"] and all("***" in pull["ref"] for pull in bug["linked_pulls"]), bug
    for text in (json.dumps(data), summary, capsys.readouterr().out, caplog.text):
        for secret in secret_forms(TOKEN):
            assert secret not in text


ECHO_USER, ECHO_PASSWORD = "echo-puller", "PLANTED-echo-password-0d9b44"
ECHO_TOKEN = "PLANTED-echo-token-6a1f0c93e2"


def docker_config_with_login(directory: Path, registry: str) -> str:
    """A docker config holding a login for ``registry``; returns its base64 ``auth``."""
    auth = base64.b64encode(f"{ECHO_USER}:{ECHO_PASSWORD}".encode()).decode()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"auths": {registry: {"auth": auth}}}))
    return auth


# how the registry authenticates -> the credentials planted in the environment or the docker config
ECHO_CREDENTIALS = {
    "environment token": ("bearer", {"VLLM_CACHING_MCP_REGISTRY_TOKEN": ECHO_TOKEN}),
    "environment password, token service": (
        "bearer",
        {"VLLM_CACHING_MCP_REGISTRY_USER": ECHO_USER, "VLLM_CACHING_MCP_REGISTRY_PASSWORD": ECHO_PASSWORD},
    ),
    "environment password, basic": (
        "basic",
        {"VLLM_CACHING_MCP_REGISTRY_USER": ECHO_USER, "VLLM_CACHING_MCP_REGISTRY_PASSWORD": ECHO_PASSWORD},
    ),
    "docker config login, basic": ("basic", {}),
}


@pytest.mark.parametrize("credentials", ECHO_CREDENTIALS, ids=list(ECHO_CREDENTIALS))
def test_an_echoing_registry_gives_a_live_answer_without_any_secret(
    credentials: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    auth, env = ECHO_CREDENTIALS[credentials]
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with FakeRegistry(auth=auth, user=ECHO_USER, password=ECHO_PASSWORD) as registry:
        registry.add_image(REPO, "v0.22.1", {"amd64": vllm_openai_config()})
        registry.reflect_authorization = True  # into a label, the PYTHON_VERSION env value and a build step
        registry.tokens.add(ECHO_TOKEN)  # the environment's token is one the registry accepts
        monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", f"http://127.0.0.1:{registry.port}")
        login = docker_config_with_login(tmp_path / "docker", f"127.0.0.1:{registry.port}")
        result_json, text, elapsed = inspect_within_deadline(LIVE_DEADLINE)
    sent = {r.headers["authorization"] for r in registry.seen(TAG_PATH) if "authorization" in r.headers}
    assert sent, "no credential was sent, so none was echoed"
    result = json.loads(result_json)
    assert result["provenance"]["source"] == "live" and elapsed < LIVE_DEADLINE + SLACK
    assert result["python_version"]["value"] in ("3.12 Bearer ***", "3.12 Basic ***"), result["python_version"]
    issued = registry.tokens - {ECHO_TOKEN}
    secrets = secret_forms(ECHO_PASSWORD, f"{ECHO_USER}:{ECHO_PASSWORD}", login, ECHO_TOKEN, *issued)
    cached = [p.read_text() for p in (tmp_path / "cache").rglob("*.json")]
    for found in (result_json, text, caplog.text, *cached):
        for secret in secrets:
            assert secret not in found


# --- the stand-ins themselves -------------------------------------------------------------------


@pytest.mark.parametrize("error", [ConnectionResetError, BrokenPipeError, ssl.SSLEOFError, ValueError])
def test_a_stand_in_says_nothing_when_a_client_hangs_up_and_everything_else_it_prints(
    error: type[Exception], capsys: pytest.CaptureFixture[str]
) -> None:
    """Clients that give up are what the tests above want: their resets must not fill CI's output
    with tracebacks from the stand-ins' threads, while a stand-in's own bug still shows."""

    class Failing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            raise error("raised by the handler")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = serve(Failing)
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(1) == b""  # closed unanswered, once the server has handled the error
    finally:
        stop_server(server)
    printed = capsys.readouterr().err
    if error is ValueError:
        assert "ValueError: raised by the handler" in printed
    else:
        assert printed == ""
