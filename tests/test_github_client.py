"""The GitHub client against a real HTTP server on 127.0.0.1 standing in for GitHub; nothing reaches the internet.

Each test is a situation the client meets in the field: a repeated call, an expired cache, a
flaky or slow server, a spent rate limit, a body too large or not JSON, a network that is not
there, a token that must not leak.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port
from github_standin import FakeGitHub, FakeIssue, FakePull, Reply
from vllm_caching_mcp.github import (
    CacheEntry,
    ConfigError,
    Deadline,
    DiskCache,
    GitHubClient,
    GitHubError,
    GitHubSettings,
    InvalidReference,
    IssueRef,
    IssueStatus,
    parse_issue_ref,
)

TOKEN = "ghp_PLANTEDtokenVALUE0123456789abcdefXYZ"
SLACK = 4.0  # interpreter and thread scheduling on a loaded 2-core machine, past what a test allows the client
STALL = 30.0  # how long a slow stand-in holds its reply: far past any allowance here
ISSUE = IssueRef("vllm-project", "vllm", 39702)
ISSUE_PATH = "/repos/vllm-project/vllm/issues/39702"


def closed_issue() -> FakeIssue:
    return FakeIssue(
        "vllm-project/vllm",
        39702,
        "[Bug]: SimpleCPUOffloadScheduler crashes",
        state="closed",
        state_reason="completed",
        closed_at="2026-05-19T10:00:00Z",
        closed_by="maintainer",
        pulls=[
            # merged 30 s before the issue closed: GitHub closed it on merge
            FakePull("vllm-project/vllm", 42289, merged_at="2026-05-19T09:59:30Z"),
            # a closed PR that only mentions it; the timeline omits merged_at, so /pulls is asked
            FakePull("vllm-project/vllm", 42000, state="closed", merged_in_timeline=False),
        ],
    )


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub([closed_issue()])
    server.start()
    yield server
    server.stop()


class Sleeps(list[float]):
    """A sleep that records instead of sleeping, so backoff and rate-limit waits are visible and fast."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class ClockSleeps(Sleeps):
    """Records each wait and moves the wall clock (``time.time``) on by it instead of sleeping: for
    waits the client checks against the wall clock (a rate-limit reset) before it asks again."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.passed = 0.0
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + self.passed)

    def __call__(self, seconds: float) -> None:
        super().__call__(seconds)
        self.passed += seconds


def client_for(base: str, cache: Path | None, sleep: Sleeps | None = None, **settings: Any) -> GitHubClient:
    values: dict[str, Any] = {"api_base": base, "cache_dir": cache, "backoff_base": 0.2, "timeout": 2.0}
    values.update(settings)
    return GitHubClient(GitHubSettings(**values), sleep=sleep if sleep is not None else Sleeps())


def status(client: GitHubClient, seconds: float = 10.0) -> IssueStatus:
    return client.issue_status(ISSUE, Deadline(seconds))


# --- what the client reads --------------------------------------------------------------------


def test_reads_state_closer_and_linked_pulls_from_issue_timeline_and_pulls(fake: FakeGitHub, tmp_path: Path) -> None:
    with client_for(fake.base, tmp_path) as client:
        got = status(client)
    assert (got.state, got.state_reason, got.closed_by, got.closed_by_is_bot) == (
        "closed",
        "completed",
        "maintainer",
        False,
    )
    assert got.closed_at is not None and got.closed_at.isoformat() == "2026-05-19T10:00:00+00:00"
    pulls = {p.number: p for p in got.pulls}
    assert pulls[42289].merged is True and pulls[42289].relation == "closed_it"  # merged within 2 min of closing
    assert pulls[42000].merged is False and pulls[42000].relation == "mentioned"  # answered by /pulls/42000
    # issue + timeline + one pull: three requests, all under the API base
    assert [r.path.split("?")[0] for r in fake.requests] == [
        ISSUE_PATH,
        ISSUE_PATH + "/timeline",
        "/repos/vllm-project/vllm/pulls/42000",
    ]
    assert got.origin == "live"


def test_a_connected_pull_request_is_counted_even_though_rest_does_not_name_it(tmp_path: Path) -> None:
    issue = FakeIssue("o/r", 5, "t", pulls=[FakePull("o/r", 6, relation="connected")])
    with FakeGitHub([issue]) as base, client_for(base, tmp_path) as client:
        got = client.issue_status(IssueRef("o", "r", 5), Deadline(5))
    assert got.unnamed_links == 1 and got.pulls == ()


def test_a_stale_bot_closing_is_recognised_as_a_bot(tmp_path: Path) -> None:
    issue = FakeIssue("o/r", 5, "t", "closed", "not_planned", "2026-07-30T00:00:00Z", "github-actions[bot]")
    with FakeGitHub([issue]) as base, client_for(base, tmp_path) as client:
        got = client.issue_status(IssueRef("o", "r", 5), Deadline(5))
    assert got.closed_by == "github-actions[bot]" and got.closed_by_is_bot


def test_graphql_fetches_every_issue_in_one_request_with_a_token(tmp_path: Path) -> None:
    issues = [
        closed_issue(),
        FakeIssue(
            "LMCache/LMCache", 2942, "deadlock", "closed", "not_planned", "2026-07-30T00:00:00Z", "github-actions[bot]"
        ),
        FakeIssue("o/r", 9, "open one", pulls=[FakePull("o/r", 10, relation="connected")]),
    ]
    refs = [ISSUE, IssueRef("LMCache", "LMCache", 2942), IssueRef("o", "r", 9), IssueRef("o", "r", 404)]
    with FakeGitHub(issues) as base, client_for(base, tmp_path, token=_token()) as client:
        got = client.issue_statuses(refs, Deadline(5))
        assert client.requests_made == 1
    first, second, third, missing = (got[r] for r in refs)
    assert isinstance(first, IssueStatus) and {p.number: p.relation for p in first.pulls}[42289] == "closed_it"
    # GraphQL calls the app "github-actions" with __typename Bot; reported as REST and the web name it
    assert isinstance(second, IssueStatus) and second.closed_by == "github-actions[bot]" and second.closed_by_is_bot
    assert isinstance(third, IssueStatus) and [(p.number, p.relation) for p in third.pulls] == [(10, "connected")]
    assert isinstance(missing, GitHubError) and missing.reason == "not_found"


# --- cache and conditional requests --------------------------------------------------------------


def test_a_repeated_call_within_the_ttl_makes_no_request(fake: FakeGitHub, tmp_path: Path) -> None:
    with client_for(fake.base, tmp_path, cache_ttl=600) as client:
        status(client)
    before = fake.count()
    with client_for(fake.base, tmp_path, cache_ttl=600) as client:
        again = status(client)
        assert client.requests_made == 0
    assert fake.count() == before
    assert again.origin == "cache" and again.age_seconds < 60


def test_after_the_ttl_a_conditional_request_gets_304_and_counts_as_live(fake: FakeGitHub, tmp_path: Path) -> None:
    with client_for(fake.base, tmp_path, cache_ttl=0) as client:
        status(client)
    first_round = len(fake.requests)
    with client_for(fake.base, tmp_path, cache_ttl=0) as client:
        again = status(client)
    revalidations = fake.requests[first_round:]
    assert len(revalidations) == 3
    assert all(r.headers.get("if-none-match", "").startswith('"') for r in revalidations)
    assert again.origin == "live" and again.state == "closed"


def test_concurrent_writers_never_leave_a_half_written_cache_file(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    key = DiskCache.key("GET", "http://127.0.0.1/x")
    bodies = [{"writer": n, "padding": "x" * 50_000} for n in range(6)]
    errors: list[str] = []

    def write(n: int) -> None:
        for _ in range(30):
            cache.put(key, CacheEntry(bodies[n], f'"{n}"', time.time()))

    def read() -> None:
        for _ in range(200):
            entry = cache.get(key)
            if entry is not None and entry.body not in bodies:
                errors.append("torn read")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)] + [
        threading.Thread(target=read) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not list(tmp_path.glob(".tmp-*"))  # no temporary files left behind


def test_cache_location_follows_xdg_and_can_be_overridden(tmp_path: Path) -> None:
    xdg = GitHubSettings.from_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert xdg.cache_dir == tmp_path / "xdg" / "vllm-caching-mcp"
    env_override = GitHubSettings.from_env({"XDG_CACHE_HOME": "/x", "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path / "c")})
    assert env_override.cache_dir == tmp_path / "c"
    assert GitHubSettings.from_env({}, cache_dir=tmp_path / "p").cache_dir == tmp_path / "p"


# --- failures the client rides out ----------------------------------------------------------------


def test_5xx_is_retried_with_growing_jittered_backoff_then_succeeds(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.script(ISSUE_PATH, Reply(502, b"bad gateway"), Reply(503, b"unavailable"))
    sleeps = Sleeps()
    with client_for(fake.base, tmp_path, sleeps) as client:
        got = status(client)
    assert got.origin == "live"
    assert len(sleeps) == 2
    # full jitter: attempt n waits a random time in [0, 0.2 * 2**n]
    assert 0 <= sleeps[0] <= 0.2 and 0 <= sleeps[1] <= 0.4


def test_5xx_every_time_gives_up_after_the_retries(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.script(ISSUE_PATH, *[Reply(500, b"oops")] * 5)
    with client_for(fake.base, tmp_path, max_retries=2) as client:
        with pytest.raises(GitHubError) as caught:
            status(client)
        assert client.requests_made == 3
    assert caught.value.reason == "server_error"


def test_primary_rate_limit_waits_until_reset_when_it_fits_the_deadline(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reset = int(time.time()) + 1
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset), "X-RateLimit-Limit": "60"}
    fake.script(ISSUE_PATH, Reply(403, b'{"message": "API rate limit exceeded"}', headers))
    sleeps = ClockSleeps(monkeypatch)
    with client_for(fake.base, tmp_path, sleeps) as client:
        got = status(client, seconds=20)
    assert got.origin == "live"
    # one wait, until the reset plus a second of margin (X-RateLimit-Reset has whole seconds), not a loop
    assert len(sleeps) == 1 and 0.5 <= sleeps[0] <= 2.5
    assert [r.path for r in fake.requests[:2]] == [ISSUE_PATH, ISSUE_PATH]


def test_primary_rate_limit_beyond_the_deadline_falls_back_at_once(fake: FakeGitHub, tmp_path: Path) -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)}
    fake.script(ISSUE_PATH, Reply(403, b'{"message": "API rate limit exceeded"}', headers))
    sleeps = Sleeps()
    with client_for(fake.base, tmp_path, sleeps) as client:
        with pytest.raises(GitHubError) as caught:
            status(client)
        # and the next issue is not even asked: the limit is known to be spent
        with pytest.raises(GitHubError):
            client.issue_status(IssueRef("o", "r", 1), Deadline(10))
        assert client.requests_made == 1
    assert caught.value.reason == "rate_limited" and sleeps == []


def test_secondary_rate_limit_honours_retry_after(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.script(ISSUE_PATH, Reply(429, b'{"message": "secondary rate limit"}', {"Retry-After": "1"}))
    sleeps = ClockSleeps(monkeypatch)
    with client_for(fake.base, tmp_path, sleeps) as client:
        assert status(client).origin == "live"
    assert len(sleeps) == 1 and 0.5 <= sleeps[0] <= 1.0


def test_secondary_rate_limit_without_retry_after_waits_a_minute_or_falls_back(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    fake.script(ISSUE_PATH, Reply(403, b'{"message": "You have exceeded a secondary rate limit."}'))
    with client_for(fake.base, tmp_path) as client, pytest.raises(GitHubError) as caught:
        status(client, seconds=10)  # a minute does not fit in ten seconds
    assert caught.value.reason == "rate_limited"


def test_a_plain_403_is_not_mistaken_for_a_rate_limit(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.script(ISSUE_PATH, Reply(403, b'{"message": "Resource not accessible"}'))
    with client_for(fake.base, tmp_path) as client, pytest.raises(GitHubError) as caught:
        status(client)
    assert caught.value.reason == "forbidden"


def test_a_slow_response_times_out_within_the_deadline(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.script(ISSUE_PATH, Reply(200, b"{}", delay=STALL), Reply(200, b"{}", delay=STALL))
    started = time.monotonic()
    with client_for(fake.base, tmp_path, timeout=0.3, max_retries=1) as client, pytest.raises(GitHubError) as caught:
        status(client)
    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 2 * 0.3 + SLACK  # two tries of 0.3 s each, not the stand-in's delay


@pytest.mark.parametrize(
    "path", [ISSUE_PATH, f"{ISSUE_PATH}/timeline"], ids=["on a new connection", "on a reused connection"]
)
def test_headers_dripped_a_byte_at_a_time_end_at_the_deadline(path: str, fake: FakeGitHub, tmp_path: Path) -> None:
    # Each byte arrives well inside the read timeout, which httpx restarts with every byte; the drip lasts a minute.
    fake.script(path, *[Reply(200, b"[]", drip="head")] * 3)
    started = time.monotonic()
    with client_for(fake.base, tmp_path, timeout=10.0) as client, pytest.raises(GitHubError) as caught:
        status(client, seconds=1.0)
    assert time.monotonic() - started < 1.0 + SLACK  # the deadline, plus scheduling slack on a loaded machine
    assert caught.value.reason == "timeout"


def test_malformed_json_is_a_bad_response(fake: FakeGitHub, tmp_path: Path) -> None:
    fake.script(ISSUE_PATH, Reply(200, b'{"state": "clo', {"Content-Type": "application/json"}))
    with client_for(fake.base, tmp_path) as client, pytest.raises(GitHubError) as caught:
        status(client)
    assert caught.value.reason == "bad_response" and "not valid JSON" in str(caught.value)


@pytest.mark.parametrize("no_length", [False, True], ids=["declared-length", "streamed"])
def test_an_oversized_body_is_refused(fake: FakeGitHub, tmp_path: Path, no_length: bool) -> None:
    fake.script(ISSUE_PATH, Reply(200, b"[" + b"0," * 40_000 + b"0]", no_length=no_length))
    with client_for(fake.base, tmp_path, max_body_bytes=16_384) as client, pytest.raises(GitHubError) as caught:
        status(client)
    assert caught.value.reason == "bad_response" and "larger than 16384 bytes" in str(caught.value)


def test_a_failed_refresh_is_answered_from_the_stale_cache_with_its_reason(tmp_path: Path) -> None:
    fake = FakeGitHub([closed_issue()])
    base = fake.start()
    with client_for(base, tmp_path, cache_ttl=0) as client:
        status(client)
    fake.stop()  # the server is gone: its port now refuses
    with client_for(fake.base, tmp_path, cache_ttl=0, max_retries=0) as client:
        got = status(client)
    assert got.origin == "cache" and got.fallback is not None
    assert got.fallback.reason == "connection_refused" and got.state == "closed"


def test_a_refused_port_is_reported_as_refused(tmp_path: Path) -> None:
    with (
        client_for(f"http://127.0.0.1:{free_port()}", tmp_path, max_retries=0) as client,
        pytest.raises(GitHubError) as caught,
    ):
        status(client)
    assert caught.value.reason == "connection_refused"


def test_an_unresolvable_host_is_reported_as_a_dns_failure(tmp_path: Path) -> None:
    with (
        client_for("https://api.github-standin.invalid", tmp_path, max_retries=0) as client,
        pytest.raises(GitHubError) as caught,
    ):
        status(client)
    assert caught.value.reason == "dns_failure"


def test_once_the_network_is_down_later_requests_fail_at_once(tmp_path: Path) -> None:
    sleeps = Sleeps()
    with client_for(f"http://127.0.0.1:{free_port()}", tmp_path, sleeps, max_retries=2) as client:
        results = client.issue_statuses([IssueRef("o", "r", n) for n in range(1, 6)], Deadline(10))
        assert client.requests_made == 3  # the first issue's three attempts; the other four never try
    assert {r.reason for r in results.values() if isinstance(r, GitHubError)} == {"connection_refused"}


def test_offline_mode_asks_nobody(fake: FakeGitHub, tmp_path: Path) -> None:
    with client_for(fake.base, tmp_path, offline=True) as client, pytest.raises(GitHubError) as caught:
        status(client)
    assert caught.value.reason == "offline_requested" and fake.requests == []


# --- only the configured API base --------------------------------------------------------------


def test_a_redirect_to_another_host_is_not_followed(fake: FakeGitHub, tmp_path: Path) -> None:
    elsewhere = FakeGitHub([closed_issue()])
    other = elsewhere.start()
    try:
        fake.script(ISSUE_PATH, Reply(301, b"", {"Location": f"{other}{ISSUE_PATH}"}))
        with client_for(fake.base, tmp_path) as client, pytest.raises(GitHubError) as caught:
            status(client)
    finally:
        elsewhere.stop()
    assert caught.value.reason == "bad_response" and elsewhere.requests == []


def test_a_redirect_inside_the_api_is_followed(fake: FakeGitHub, tmp_path: Path) -> None:
    # a transferred repository: GitHub answers 301 to the issue's new home
    fake.add(FakeIssue("new-owner/vllm", 39702, "moved", "open"))
    fake.script(ISSUE_PATH, Reply(301, b"", {"Location": "/repos/new-owner/vllm/issues/39702"}))
    with client_for(fake.base, tmp_path) as client:
        assert status(client).title == "moved"


@pytest.mark.parametrize(
    "text",
    [
        "vllm-project/vllm#abc",
        "vllm-project/vllm#0",
        "../etc#1",
        "vllm-project/..#1",
        "-bad-/vllm#1",
        "https://evil.example.com/vllm-project/vllm/issues/1",
        "http://github.com/vllm-project/vllm/issues/1",
        "https://github.com/vllm-project/vllm/pull/1",
        "https://user:pw@github.com/vllm-project/vllm/issues/1",
        "https://github.com/vllm-project/vllm/issues/1?x=https://evil",
        "vllm-project/vllm/issues/1",
    ],
)
def test_references_other_than_owner_repo_number_or_an_issue_url_are_refused(text: str) -> None:
    with pytest.raises(InvalidReference):
        parse_issue_ref(text)


def test_issue_urls_on_github_com_and_the_enterprise_host_are_accepted() -> None:
    assert parse_issue_ref("https://github.com/LMCache/LMCache/issues/2942") == IssueRef("LMCache", "LMCache", 2942)
    settings = GitHubSettings(api_base="https://ghe.example.com/api/v3", cache_dir=None)
    assert settings.web_host == "ghe.example.com" and settings.graphql_url == "https://ghe.example.com/api/graphql"
    ref = parse_issue_ref("https://ghe.example.com/team/repo/issues/7", web_hosts=[settings.web_host])
    assert ref == IssueRef("team", "repo", 7)


@pytest.mark.parametrize(
    "base", ["http://api.github.com", "ftp://x", "https://user:pw@api.github.com", "https://api.github.com/?q=1"]
)
def test_an_api_base_that_could_leak_the_token_is_refused(base: str) -> None:
    with pytest.raises(ConfigError, match="VLLM_CACHING_MCP_GITHUB_API"):
        GitHubSettings(api_base=base)


# --- the token never shows ------------------------------------------------------------------------


def _token() -> Any:
    from vllm_caching_mcp.github import Token

    return Token(TOKEN)


def test_the_token_is_sent_but_never_appears_in_results_logs_or_errors(
    fake: FakeGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore included
    fake.reflect_authorization = True  # a server that echoes the header back into the title
    settings = GitHubSettings.from_env({"GH_TOKEN": TOKEN}, api_base=fake.base, cache_dir=tmp_path, max_retries=0)
    texts: list[str] = [repr(settings)]
    with GitHubClient(settings) as client:
        got = status(client)
        texts.append(repr(got))
        fake.script(ISSUE_PATH.replace("39702", "1"), Reply(401, b'{"message": "Bad credentials"}'))
        with pytest.raises(GitHubError) as caught:
            client.issue_status(IssueRef("vllm-project", "vllm", 1), Deadline(5))
        texts.append(str(caught.value))
    with GitHubClient(
        GitHubSettings.from_env({"GITHUB_TOKEN": TOKEN}, api_base=f"http://127.0.0.1:{free_port()}"),
        sleep=Sleeps(),  # the retries' backoff is not what is asked here
    ) as c:
        with pytest.raises(GitHubError) as refused:
            c.issue_status(ISSUE, Deadline(5))
        texts.append(str(refused.value))
    texts.append(caplog.text)
    texts += [p.read_text() for p in tmp_path.glob("*.json")]
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"  # it was used
    assert "***" in got.title  # the echo was scrubbed
    for text in texts:
        assert TOKEN not in text


def test_cache_ttl_from_the_environment_must_be_a_number() -> None:
    with pytest.raises(ConfigError, match="VLLM_CACHING_MCP_CACHE_TTL"):
        GitHubSettings.from_env({"VLLM_CACHING_MCP_CACHE_TTL": "an hour"})


def test_the_stand_in_serves_github_shapes(fake: FakeGitHub) -> None:
    """Guard on the stand-in itself: fields the client relies on are where GitHub documents them."""
    import httpx

    base = fake.base
    issue = httpx.get(f"{base}{ISSUE_PATH}").json()
    timeline = httpx.get(f"{base}{ISSUE_PATH}/timeline").json()
    assert {"state", "state_reason", "closed_at", "closed_by", "title", "html_url"} <= set(issue)
    kinds = [e["event"] for e in timeline]
    assert "cross-referenced" in kinds and kinds[-1] == "closed"
    assert json.loads(json.dumps(timeline))[1]["source"]["issue"]["pull_request"]["merged_at"] == "2026-05-19T09:59:30Z"
