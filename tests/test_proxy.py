"""Sites behind a proxy: HTTPS_PROXY / HTTP_PROXY / NO_PROXY and the site's certificate authorities.

A real forward proxy on 127.0.0.1 (tests/proxy_standin.py) stands between the clients and the
stand-in GitHub and registry; https goes through it as a CONNECT tunnel to a stand-in serving TLS
with a certificate from a throwaway authority (trustme), trusted through SSL_CERT_FILE.
"""

from __future__ import annotations

import base64
import re
import socket
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import free_port
from github_standin import FakeGitHub, FakeIssue, Reply
from proxy_standin import FakeProxy
from registry_standin import FakeRegistry, vllm_openai_config
from vllm_caching_mcp.github import ConfigError, Deadline, GitHubClient, GitHubError, GitHubSettings, IssueRef
from vllm_caching_mcp.http_client import NetworkPath, tls_context
from vllm_caching_mcp.registry import RegistryClient, RegistrySettings, parse_image_reference
from vllm_caching_mcp.tools import run_tool

TOKEN = "ghp_PLANTEDproxyTOKEN0123456789abcdefXYZ"
PROXY_PASSWORD = "PLANTED-proxy-password-41c7"
ISSUE = IssueRef("vllm-project", "vllm", 39702)
ISSUE_PATH = "/repos/vllm-project/vllm/issues/39702"
SLACK = 4.0  # interpreter and thread scheduling on a loaded 2-core machine, past the deadline a test gives


def closed_issue() -> FakeIssue:
    return FakeIssue("vllm-project/vllm", 39702, "[Bug]: offload crash", state="closed", state_reason="completed")


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(authority: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "site-ca.pem"
    authority.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub([closed_issue()])
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def tls_github(authority: trustme.CA) -> Iterator[FakeGitHub]:
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    fake = FakeGitHub([closed_issue()], tls=server_context)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def proxy() -> Iterator[FakeProxy]:
    with FakeProxy() as fake:
        yield fake


def github_client(env: dict[str, str], tmp_path: Path) -> GitHubClient:
    settings = GitHubSettings.from_env(env, cache_dir=tmp_path / "cache", timeout=3.0, max_retries=1, backoff_base=0.01)
    return GitHubClient(settings, sleep=lambda _: None)


def ask_github(env: dict[str, str], tmp_path: Path) -> Any:
    with github_client(env, tmp_path) as client:
        return client.issue_status(ISSUE, Deadline(8))


def refusal(env: dict[str, str], tmp_path: Path) -> GitHubError:
    with pytest.raises(GitHubError) as caught:
        ask_github(env, tmp_path)
    return caught.value


# -- reading the environment ------------------------------------------------------------------------


def test_lower_case_wins_and_a_bare_host_port_means_http() -> None:
    path = NetworkPath.from_env({"https_proxy": "proxy.corp:3128", "HTTPS_PROXY": "http://other:1", "NO_PROXY": "x"})
    assert path.proxies == {"https": "http://proxy.corp:3128"} and path.no_proxy == "x"
    assert path.proxy_for(httpx.URL("https://api.github.com/repos")) == httpx.URL("http://proxy.corp:3128")
    assert path.proxy_for(httpx.URL("http://api.github.com/repos")) is None  # no HTTP_PROXY, no ALL_PROXY
    assert NetworkPath.from_env({"ALL_PROXY": "http://p:8080"}).proxy_for(httpx.URL("http://a/")) is not None
    assert NetworkPath.from_env({}) == NetworkPath()


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "direct"),
    [
        ("*", "api.github.com", None, True),
        ("github.com", "api.github.com", None, True),
        ("github.com", "github.com", None, True),
        (".github.com", "github.com", None, True),
        ("github.com", "notgithub.com", None, False),
        ("registry.corp:5000", "registry.corp", 5000, True),
        ("registry.corp:5000", "registry.corp", 443, False),
        ("10.0.0.7, ::1", "::1", None, True),
        ("[::1]:8080", "::1", 8080, True),
        ("10.0.0.0/8", "10.42.0.17", None, True),
        ("10.0.0.0/8", "192.168.1.2", None, False),
        ("fd00::/8", "fd12::1", 443, True),
        ("10.0.0.0/8", "ten.example.com", None, False),
        ("", "api.github.com", None, False),
    ],
)
def test_no_proxy_is_read_as_curl_reads_it(no_proxy: str, host: str, port: int | None, direct: bool) -> None:
    assert NetworkPath(no_proxy=no_proxy).goes_direct(host, port) is direct


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"HTTPS_PROXY": f"socks5://user:{PROXY_PASSWORD}@proxy:1080"}, "HTTPS_PROXY"),
        ({"http_proxy": f"ftp://user:{PROXY_PASSWORD}@proxy"}, "HTTP_PROXY"),
        ({"SSL_CERT_FILE": "/nonexistent/ca.pem"}, "SSL_CERT_FILE"),
        ({"SSL_CERT_DIR": "/nonexistent/certs"}, "SSL_CERT_DIR"),
    ],
)
def test_an_unusable_setting_is_named_without_repeating_its_secret(env: dict[str, str], variable: str) -> None:
    for settings in (GitHubSettings, RegistrySettings):
        with pytest.raises(ConfigError) as caught:
            settings.from_env(env)
        message = str(caught.value)
        assert message.startswith(f"{variable}:") and PROXY_PASSWORD not in message
        if variable.endswith("PROXY"):
            assert "http://host:port" in message


def test_the_proxy_password_is_not_in_the_settings_repr() -> None:
    env = {"HTTPS_PROXY": f"http://site:{PROXY_PASSWORD}@proxy.corp:3128", "GITHUB_TOKEN": TOKEN}
    for settings in (GitHubSettings.from_env(env), RegistrySettings.from_env(env)):
        assert PROXY_PASSWORD not in repr(settings) and TOKEN not in repr(settings)


def test_a_netrc_file_sends_no_credentials(github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login someone password {PROXY_PASSWORD}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    assert ask_github({"VLLM_CACHING_MCP_GITHUB_API": github.base}, tmp_path).state == "closed"
    assert github.requests and all("authorization" not in seen.headers for seen in github.requests)


# -- through the proxy -------------------------------------------------------------------------------


def test_plain_http_goes_through_the_proxy_with_the_credentials_in_its_url(github: FakeGitHub, tmp_path: Path) -> None:
    with FakeProxy(credentials=f"site:{PROXY_PASSWORD}") as proxy:
        env = {
            "VLLM_CACHING_MCP_GITHUB_API": github.base,
            "HTTP_PROXY": f"http://site:{PROXY_PASSWORD}@{proxy.address}",
        }
        got = ask_github(env, tmp_path)
    assert got.origin == "live" and got.state == "closed"
    assert proxy.seen[0].target == github.base + ISSUE_PATH  # absolute form: a forward proxy
    expected = "Basic " + base64.b64encode(f"site:{PROXY_PASSWORD}".encode()).decode()
    assert f"Proxy-Authorization: {expected}" in proxy.everything_seen()


def test_a_proxy_that_wants_other_credentials_is_named_once_without_the_password(
    github: FakeGitHub, tmp_path: Path
) -> None:
    with FakeProxy(credentials="site:right") as proxy:
        env = {
            "VLLM_CACHING_MCP_GITHUB_API": github.base,
            "http_proxy": f"http://site:{PROXY_PASSWORD}@{proxy.address}",
        }
        error = refusal(env, tmp_path)
    assert error.reason == "proxy_refused" and len(proxy.seen) == 1  # not retried: waiting will not cure it
    assert f"the proxy {proxy.address} refused to reach 127.0.0.1 (HTTP 407)" in str(error)
    assert "user:password@host:port" in str(error) and PROXY_PASSWORD not in str(error)
    assert github.requests == []


def test_https_is_tunnelled_and_the_proxy_never_sees_the_token(
    tls_github: FakeGitHub, proxy: FakeProxy, ca_file: Path, tmp_path: Path
) -> None:
    env = {
        "VLLM_CACHING_MCP_GITHUB_API": tls_github.base,
        "GITHUB_TOKEN": TOKEN,
        "HTTPS_PROXY": proxy.address,
        "SSL_CERT_FILE": str(ca_file),
    }
    got = ask_github(env, tmp_path)
    assert got.origin == "live" and got.state == "closed"
    assert {(seen.method, seen.target) for seen in proxy.seen} == {
        ("CONNECT", tls_github.base.removeprefix("https://"))
    }
    assert TOKEN not in proxy.everything_seen() and ISSUE_PATH not in proxy.everything_seen()
    assert tls_github.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_tls_headers_dripped_through_the_tunnel_end_at_the_deadline(
    tls_github: FakeGitHub, proxy: FakeProxy, ca_file: Path, tmp_path: Path
) -> None:
    env = {"VLLM_CACHING_MCP_GITHUB_API": tls_github.base, "HTTPS_PROXY": proxy.address, "SSL_CERT_FILE": str(ca_file)}
    tls_github.script(ISSUE_PATH, *[Reply(200, b"{}", drip="head")] * 3)
    settings = GitHubSettings.from_env(env, cache_dir=tmp_path / "cache", timeout=10.0, max_retries=1)
    started = time.monotonic()
    with GitHubClient(settings, sleep=time.sleep) as client, pytest.raises(GitHubError) as caught:
        # time for CONNECT and the TLS handshake on a loaded machine; the dripped head lasts a minute
        client.issue_status(ISSUE, Deadline(1.5))
    assert time.monotonic() - started < 1.5 + SLACK  # the deadline, plus scheduling slack on a loaded machine
    assert caught.value.reason == "timeout" and tls_github.requests


def test_without_the_sites_authority_the_tunnelled_server_is_not_trusted(
    tls_github: FakeGitHub, proxy: FakeProxy, tmp_path: Path
) -> None:
    env = {"VLLM_CACHING_MCP_GITHUB_API": tls_github.base, "HTTPS_PROXY": proxy.address}
    error = refusal(env, tmp_path)
    assert error.reason == "network_error" and "certificate" in str(error) and proxy.seen
    assert tls_github.requests == []


def test_no_proxy_sends_the_request_direct(github: FakeGitHub, proxy: FakeProxy, tmp_path: Path) -> None:
    env = {"VLLM_CACHING_MCP_GITHUB_API": github.base, "HTTP_PROXY": proxy.address, "NO_PROXY": "localhost,127.0.0.1"}
    assert ask_github(env, tmp_path).origin == "live"
    assert proxy.seen == [] and github.requests


def test_a_proxy_that_is_not_there_is_named_as_the_thing_unreachable(github: FakeGitHub, tmp_path: Path) -> None:
    port = free_port()
    error = refusal({"VLLM_CACHING_MCP_GITHUB_API": github.base, "HTTP_PROXY": f"127.0.0.1:{port}"}, tmp_path)
    assert error.reason == "connection_refused"
    assert f"cannot connect to the proxy 127.0.0.1:{port} for 127.0.0.1: connection refused" in str(error)
    assert github.requests == []


@pytest.fixture
def silent_proxy() -> Iterator[str]:
    """Accepts connections and never answers: a proxy that hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_a_proxy_that_hangs_costs_no_more_than_the_deadline(silent_proxy: str, tmp_path: Path) -> None:
    env = {"VLLM_CACHING_MCP_GITHUB_API": "https://api.github.com", "HTTPS_PROXY": silent_proxy}
    settings = GitHubSettings.from_env(env, cache_dir=tmp_path / "cache", timeout=0.4, max_retries=5)
    started = time.monotonic()
    with GitHubClient(settings, sleep=time.sleep) as client, pytest.raises(GitHubError) as caught:
        client.issue_status(ISSUE, Deadline(1))  # room for two tries or more: the proxy never answers
    assert time.monotonic() - started < 1 + SLACK  # the deadline, plus scheduling slack on a loaded machine
    assert caught.value.reason == "timeout"
    assert re.search(rf"did not answer within \d\.\d s through the proxy {silent_proxy}\b", str(caught.value))


def test_each_request_of_a_redirect_chain_is_routed_on_its_own(proxy: FakeProxy, tmp_path: Path) -> None:
    with FakeRegistry() as registry:
        registry.add_image("vllm/vllm-openai", "v0.22.1", {"amd64": vllm_openai_config()})
        registry.redirect_blobs_to = "localhost"  # the config blob comes from another origin, as from a CDN
        env = {
            "VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{registry.port}",
            "HTTP_PROXY": proxy.address,
            "NO_PROXY": "localhost",
            "DOCKER_CONFIG": str(tmp_path / "no-docker-config"),
        }
        settings = RegistrySettings.from_env(env, cache_dir=tmp_path / "cache", max_retries=0)
        with RegistryClient(settings) as client:
            image = client.inspect(parse_image_reference("vllm/vllm-openai:v0.22.1"), Deadline(8))
        cdn = registry.seen("/cdn/")
    assert image.config and len(cdn) == 1 and cdn[0].host.startswith("localhost")
    through_proxy = [seen.target for seen in proxy.seen]
    assert through_proxy and all("/v2/" in target or "/token" in target for target in through_proxy)
    assert not any("/cdn/" in target for target in through_proxy)


def test_a_refusing_proxy_gives_the_snapshot_with_the_reason(
    github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProxy(credentials="site:right") as proxy:
        for name, value in {
            "VLLM_CACHING_MCP_GITHUB_API": github.base,
            "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path / "cache"),
            "HTTP_PROXY": f"http://site:{PROXY_PASSWORD}@{proxy.address}",
        }.items():
            monkeypatch.setenv(name, value)
        result: Any = run_tool("check_bug_status", {"bugs": ["vllm-project/vllm#39702"]})
    [bug] = result.bugs
    assert bug.provenance.source == "snapshot" and bug.provenance.fallback_reason == "proxy_refused"
    assert "HTTP 407" in (bug.provenance.detail or "") and result.requests_made == 1
    assert PROXY_PASSWORD not in result.model_dump_json() and PROXY_PASSWORD not in result.summary()


# -- the server as deployed ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_server_reads_the_proxy_and_authority_from_its_environment(
    tls_github: FakeGitHub, proxy: FakeProxy, ca_file: Path, tmp_path: Path
) -> None:
    env = {
        "VLLM_CACHING_MCP_GITHUB_API": tls_github.base,
        "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path / "cache"),
        "GITHUB_TOKEN": TOKEN,
        "https_proxy": f"http://{proxy.address}",
        "SSL_CERT_FILE": str(ca_file),
    }
    target = StdioServerParameters(command=sys.executable, args=["-m", "vllm_caching_mcp.mcp_server"], env=env)
    async with Client(target) as client:
        result: Any = await client.call_tool("check_bug_status", {"bugs": ["vllm-project/vllm#39702"]})
    assert not result.is_error, result.content[0].text
    bug = result.structured_content["bugs"][0]
    assert bug["provenance"]["source"] == "live" and bug["state"] == "closed"
    assert proxy.seen and all(seen.method == "CONNECT" for seen in proxy.seen)
    assert TOKEN not in proxy.everything_seen()


def test_a_tls_context_is_built_once_per_process_and_only_when_a_request_is_sent(
    tls_github: FakeGitHub, ca_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each client loaded its certificate authorities when it was built: 80 % of an offline call's 37 ms."""
    built: list[object] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(kwargs.get("cafile"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    tls_context.cache_clear()
    env = {"VLLM_CACHING_MCP_GITHUB_API": tls_github.base, "SSL_CERT_FILE": str(ca_file)}
    with github_client(env, tmp_path) as client:
        client.offline = True
        with pytest.raises(GitHubError):
            client.issue_status(ISSUE, Deadline(8))
    assert built == []  # nothing was sent, so no authority was loaded
    for _ in range(2):
        assert ask_github(env, tmp_path / str(len(built))).origin == "live"
    assert built == [str(ca_file)]  # two clients, two requests each: one context
