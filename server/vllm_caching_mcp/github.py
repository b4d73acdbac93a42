"""A small GitHub client for issue status: REST and GraphQL over httpx, cached on disk, never hanging.

What `check_bug_status` and `scripts/refresh_bugs.py` need from GitHub, and nothing more:

- REST: an issue (state, ``state_reason``, ``closed_by``), its timeline (``closed`` events with
  their actor, ``cross-referenced`` events from pull requests, ``connected`` events) and, where
  the timeline does not say, a pull request's merged state;
- GraphQL: every tracked issue in one request, used only when a token is present (GitHub does
  not answer GraphQL without one).

Only the configured API base is ever contacted: callers pass validated `IssueRef`s, paths are
built here, and a redirect or pagination link to any other origin is refused. The token comes
from ``GITHUB_TOKEN`` or ``GH_TOKEN``, is sent only in the ``Authorization`` header, and is
scrubbed (with anything shaped like a GitHub token) from every error text this module produces
and from every string of an `IssueStatus`: a server may echo it into a title or a pull request's
name. It is registered with `redact`, so the tools' answers and the logs are scrubbed of it too.

Failure is an answer, not a crash: every request has a timeout bounded by the caller's
deadline; 5xx and connection errors are retried with exponential backoff and full jitter;
primary and secondary rate limits are read from ``X-RateLimit-Remaining``/``X-RateLimit-Reset``
and ``Retry-After`` and waited out only when the wait fits in the deadline; once the network is
found down, later requests in the same client fail at once instead of each paying the timeout.
A failure raises `GitHubError` with a `reason` the caller reports, after the disk cache has had
its chance to answer (see `GitHubClient.get_json`).

The disk cache (``$XDG_CACHE_HOME/vllm-caching-mcp``) keeps each response with its ETag: within
the TTL it answers without a request; after it, a conditional request that comes back ``304``
refreshes it (GitHub does not count an authorised 304 against the rate limit). Writes are atomic
(temporary file, then ``os.replace``), so concurrent processes never read half a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import __version__, redact

# Re-exported: callers (advice/bugs.py, scripts, tests) have always imported these from here.
from .http_client import (
    LOOPBACK_HOSTS,
    NETWORK_DOWN,
    SHAPE_ERRORS,
    HttpError,
    NetworkPath,
    RawResponse,
    RetryingClient,
    Secret,
    load_json,
    make_http_client,
)
from .http_client import CacheEntry as CacheEntry
from .http_client import ConfigError as ConfigError
from .http_client import Deadline as Deadline
from .http_client import DiskCache as DiskCache
from .http_client import FailureReason as FailureReason
from .http_client import default_cache_dir as default_cache_dir
from .lazy_import import lazy_import

if TYPE_CHECKING:
    import httpx
else:  # loaded on the first network call, not at server start-up
    httpx = lazy_import("httpx")

log = logging.getLogger(__name__)

API_BASE_ENV = "VLLM_CACHING_MCP_GITHUB_API"
CACHE_TTL_ENV = "VLLM_CACHING_MCP_CACHE_TTL"
TOKEN_ENVS = ("GITHUB_TOKEN", "GH_TOKEN")
DEFAULT_API_BASE = "https://api.github.com"
DEFAULT_TTL_SECONDS = 3600.0

# GitHub logins: letters, digits and single hyphens, at most 39 characters; apps end in "[bot]".
_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")
_REPO = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_SHORT_REF = re.compile(r"^(?P<owner>[^/#\s]+)/(?P<repo>[^/#\s]+)#(?P<number>\d{1,10})$")
_ISSUE_PATH = re.compile(r"^/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/(?P<number>\d{1,10})/?$")
_TOKEN_SHAPES = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})\b")
_MAX_ISSUE_NUMBER = 2_000_000_000

# Known accounts that close stale issues without being GitHub Apps (apps carry "[bot]" already).
KNOWN_STALE_BOTS = frozenset({"stale-bot", "k8s-triage-robot", "fejta-bot", "issue-janitor"})


def is_bot_login(login: str | None, account_type: str | None = None) -> bool:
    """Whether a closing account is a bot: a GitHub App (``[bot]``, type ``Bot``) or a known stale bot."""
    if not login:
        return False
    return login.endswith("[bot]") or account_type == "Bot" or login.lower() in KNOWN_STALE_BOTS


class GitHubError(HttpError):
    """A request that could not be answered; ``reason`` is machine-readable, the text is token-free."""


class InvalidReference(ValueError):
    """Text that is not ``owner/repo#N`` or an issue URL on an allowed host."""


@dataclasses.dataclass(frozen=True, order=True)
class IssueRef:
    """A validated issue reference; its parts are safe to put in a URL path."""

    owner: str
    repo: str
    number: int

    def __post_init__(self) -> None:
        if not _OWNER.match(self.owner):
            raise InvalidReference(
                f"{self.owner!r} is not a GitHub owner (letters, digits and single hyphens, 1-39 characters)"
            )
        if not _REPO.match(self.repo) or self.repo in (".", ".."):
            raise InvalidReference(
                f"{self.repo!r} is not a repository name (letters, digits, '.', '_', '-', 1-100 characters)"
            )
        if not 0 < self.number <= _MAX_ISSUE_NUMBER:
            raise InvalidReference(f"{self.number} is not an issue number (1-{_MAX_ISSUE_NUMBER})")

    @property
    def full_repo(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}#{self.number}"


def parse_issue_ref(text: str, *, web_hosts: Iterable[str] = ("github.com",)) -> IssueRef:
    """``owner/repo#N``, or ``https://HOST/owner/repo/issues/N`` where HOST is one of ``web_hosts``."""
    cleaned = text.strip()
    short = _SHORT_REF.match(cleaned)
    if short:
        return IssueRef(short["owner"], short["repo"], int(short["number"]))
    if "://" not in cleaned:
        raise InvalidReference(f"{text!r} is neither 'owner/repo#N' nor an issue URL")
    try:
        url = httpx.URL(cleaned)
    except httpx.InvalidURL:
        raise InvalidReference(f"{text!r} is not a valid URL") from None
    hosts = {h.lower() for h in web_hosts}
    if url.scheme != "https" or (url.host or "").lower() not in hosts or url.userinfo or url.port not in (None, 443):
        raise InvalidReference(f"{text!r}: issue URLs are accepted only as https:// on {', '.join(sorted(hosts))}")
    path = _ISSUE_PATH.match(url.path)
    if not path or url.query:
        raise InvalidReference(f"{text!r} is not an issue URL of the form https://HOST/OWNER/REPO/issues/N")
    return IssueRef(path["owner"], path["repo"], int(path["number"]))


class Token(Secret):
    """The API token; its text leaves this object only for the Authorization header."""

    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class GitHubSettings:
    """Where to ask, how long to wait, where to cache; build it with `from_env`."""

    api_base: str = DEFAULT_API_BASE
    cache_dir: Path | None = None
    cache_ttl: float = DEFAULT_TTL_SECONDS
    token: Token | None = dataclasses.field(default=None, repr=False)
    timeout: float = 10.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_body_bytes: int = 4 * 1024 * 1024
    max_timeline_pages: int = 3
    offline: bool = False
    network: NetworkPath = dataclasses.field(default_factory=NetworkPath)

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_base", validate_api_base(self.api_base))
        if self.cache_ttl < 0:
            raise ConfigError(f"{CACHE_TTL_ENV}: the cache TTL must be zero or more seconds")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> GitHubSettings:
        """Settings from the environment; keyword arguments (``cache_dir=...``) take precedence."""
        env = os.environ if env is None else env
        token_text = next((env[name].strip() for name in TOKEN_ENVS if env.get(name, "").strip()), None)
        ttl_text = env.get(CACHE_TTL_ENV)
        try:
            ttl = float(ttl_text) if ttl_text else DEFAULT_TTL_SECONDS
        except ValueError:
            raise ConfigError(f"{CACHE_TTL_ENV}: {ttl_text!r} is not a number of seconds") from None
        values: dict[str, Any] = {
            "api_base": env.get(API_BASE_ENV) or DEFAULT_API_BASE,
            "cache_dir": default_cache_dir(env),
            "cache_ttl": ttl,
            "token": Token(token_text) if token_text else None,
            "network": NetworkPath.from_env(env),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @functools.cached_property
    def web_host(self) -> str:
        """The host whose issue URLs belong to this API: github.com, or the Enterprise server."""
        host = httpx.URL(self.api_base).host
        return "github.com" if host == "api.github.com" else host

    @property
    def graphql_url(self) -> str:
        # github.com: /graphql beside the REST root; Enterprise: /api/v3 (REST) vs /api/graphql.
        if self.api_base.endswith("/api/v3"):
            return self.api_base[: -len("/v3")] + "/graphql"
        return self.api_base + "/graphql"


def validate_api_base(text: str) -> str:
    """An https:// API root (plain http only on loopback, for tests); no credentials, query or fragment."""
    try:
        url = httpx.URL(text.strip().rstrip("/"))
    except httpx.InvalidURL:
        raise ConfigError(f"{API_BASE_ENV}: {text!r} is not a URL") from None
    loopback = (url.host or "") in LOOPBACK_HOSTS
    if url.scheme not in ("https", "http") or (url.scheme == "http" and not loopback) or not url.host:
        raise ConfigError(
            f"{API_BASE_ENV}: {text!r} must be an https:// address (plain http is allowed only for 127.0.0.1)"
        )
    if url.userinfo or url.query or url.fragment:
        raise ConfigError(f"{API_BASE_ENV}: {text!r} must not carry credentials, a query or a fragment")
    return str(url).rstrip("/")


# ---------------------------------------------------------------------------------------------
# What the client returns


@dataclasses.dataclass(frozen=True)
class Fetched:
    """A JSON body and where it came from; ``fallback`` is set when a failure was covered by the cache."""

    body: Any
    origin: Literal["live", "cache"]
    age_seconds: float = 0.0
    fallback: GitHubError | None = None
    next_url: str | None = None


Relation = Literal["closes", "closed_it", "connected", "mentioned"]


@dataclasses.dataclass(frozen=True)
class PullLink:
    """A pull request linked to an issue, and how: it closes it (GitHub's closing reference),
    it closed it (merged at the moment the issue closed), it was connected in the sidebar, or it
    merely mentions the issue."""

    repo: str
    number: int
    relation: Relation
    merged: bool | None
    merged_at: dt.datetime | None = None
    state: str | None = None

    @property
    def ref(self) -> str:
        return f"pr:{self.repo}#{self.number}"


@dataclasses.dataclass(frozen=True)
class IssueStatus:
    ref: IssueRef
    title: str
    state: Literal["open", "closed"]
    state_reason: str | None
    closed_at: dt.datetime | None
    closed_by: str | None
    closed_by_is_bot: bool
    html_url: str
    pulls: tuple[PullLink, ...]
    unnamed_links: int
    origin: Literal["live", "cache"]
    age_seconds: float
    fallback: GitHubError | None
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# The client


class GitHubClient(RetryingClient[GitHubError]):
    """Issue status from GitHub; one instance per tool call (it remembers that the network is down)."""

    service = "GitHub"
    error_type = GitHubError
    settings_type = GitHubSettings

    def __init__(
        self,
        settings: GitHubSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._api = httpx.URL(settings.api_base)
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": f"vllm-caching-mcp/{__version__}",
        }
        if settings.token is not None:
            headers["Authorization"] = f"Bearer {settings.token.reveal()}"
        verify = settings.network.verify()
        http = make_http_client(settings.network, headers=headers, transport=transport, verify=verify)
        super().__init__(settings, http, offline=settings.offline, sleep=sleep)
        self.cache = DiskCache(settings.cache_dir, self.scrub, label="GitHub")

    @property
    def has_token(self) -> bool:
        return self.settings.token is not None

    def scrub(self, text: str) -> str:
        """The text without the token, any other secret of the process, or anything shaped like a GitHub token."""
        return _TOKEN_SHAPES.sub(redact.MASK, redact.redact(text))

    def _clean(self, status: IssueStatus) -> IssueStatus:
        """Live text is the server's to choose (titles, logins, pull requests' names): keep the token out of it."""
        return redact.redact_value(status, self.scrub)

    # -- URLs -----------------------------------------------------------------------------------

    def _url(self, path_or_url: str) -> str:
        """A URL under the API base; anything else (another host, scheme or port) is refused."""
        if path_or_url.startswith("/"):
            return self.settings.api_base + path_or_url
        url = httpx.URL(path_or_url)
        same_origin = (url.scheme, url.host, url.port) == (self._api.scheme, self._api.host, self._api.port)
        if not same_origin or not url.path.startswith(self._api.path.rstrip("/") + "/"):
            raise self._fail("bad_response", f"refusing to follow a link outside the API base ({url.host})")
        return str(url)

    # -- how GitHub speaks: rate limits, redirects, statuses ------------------------------------

    def _rate_limit_wait(self, response: RawResponse) -> float | None:
        """How long GitHub asks us to wait, or None when a 403/429 is not about rate limits."""
        headers = response.headers
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return 60.0
        if headers.get("x-ratelimit-remaining") == "0":
            try:
                return max(0.0, float(headers.get("x-ratelimit-reset", "0")) - time.time()) + 1.0
            except ValueError:
                return 60.0
        if response.status == 429 or b"rate limit" in response.body[:2000].lower():
            return 60.0  # secondary limit without Retry-After: GitHub asks for at least a minute
        return None

    def _note_rate_limit(self, headers: httpx.Headers) -> None:
        # A success that spends the last request still blocks the next one until the reset.
        if headers.get("x-ratelimit-remaining") == "0":
            with contextlib.suppress(ValueError):
                reset = float(headers.get("x-ratelimit-reset", "0")) + 1.0
                self._blocked_until = max(self._blocked_until, reset)

    def _redirect(self, url: str, location: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        # A renamed or transferred repository answers with a redirect inside the API.
        return self._url(str(httpx.URL(url).join(location))), headers

    def _status_error(self, status: int, response: RawResponse) -> GitHubError:
        if status in (403, 429):
            return self._fail("forbidden", f"GitHub refused the request (HTTP {status})")
        if status == 401:
            return self._fail("unauthorized", "GitHub rejected the token (HTTP 401); check GITHUB_TOKEN / GH_TOKEN")
        if status in (404, 410):
            return self._fail("not_found", f"GitHub has no such resource (HTTP {status})")
        return self._fail("http_error", f"GitHub answered HTTP {status}")

    # -- cached JSON -----------------------------------------------------------------------------

    def _cached_call(
        self, method: str, url: str, deadline: Deadline, body: bytes | None, *, max_age: float | None
    ) -> Fetched:
        key = DiskCache.key(method, url, body or b"")
        entry = self.cache.get(key)
        ttl = self.settings.cache_ttl if max_age is None else max_age
        if entry is not None and entry.age() < ttl:
            return Fetched(entry.body, "cache", entry.age(), next_url=entry.next_url)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if entry is not None and entry.etag:
            headers["If-None-Match"] = entry.etag
        try:
            response = self._request(method, url, deadline, headers=headers, body=body)
            if response.status == 304:
                if entry is None:
                    raise self._fail("bad_response", "GitHub answered 304 to a request that was not conditional")
                entry.stored_at = time.time()
                self.cache.put(key, entry)
                return Fetched(entry.body, "live", 0.0, next_url=entry.next_url)
            try:
                parsed = load_json(response.body)
            except ValueError as exc:
                raise self._fail("bad_response", f"GitHub's response is {exc}") from None
        except GitHubError as exc:
            if entry is not None and exc.reason not in ("not_found", "unauthorized"):
                return Fetched(entry.body, "cache", entry.age(), fallback=exc, next_url=entry.next_url)
            raise
        self.cache.put(key, CacheEntry(parsed, response.headers.get("etag"), time.time(), response.next_url))
        return Fetched(parsed, "live", 0.0, next_url=response.next_url)

    def get_json(self, path_or_url: str, deadline: Deadline, *, max_age: float | None = None) -> Fetched:
        """GET a REST resource under the API base, from the cache when fresh enough."""
        return self._cached_call("GET", self._url(path_or_url), deadline, None, max_age=max_age)

    def graphql(
        self, query: str, variables: Mapping[str, Any], deadline: Deadline, *, max_age: float | None = None
    ) -> Fetched:
        if self.settings.token is None:
            raise self._fail("unauthorized", "GitHub GraphQL needs a token (GITHUB_TOKEN or GH_TOKEN)")
        body = json.dumps({"query": query, "variables": dict(variables)}, sort_keys=True).encode()
        fetched = self._cached_call("POST", self.settings.graphql_url, deadline, body, max_age=max_age)
        if not isinstance(fetched.body, dict):
            raise self._fail("bad_response", "GitHub's GraphQL response is not a JSON object")
        errors = fetched.body.get("errors") or []
        if any(isinstance(e, dict) and e.get("type") == "RATE_LIMITED" for e in errors):
            raise self._fail("rate_limited", "GitHub GraphQL rate limit reached")
        if fetched.body.get("data") is None:
            raise self._fail("bad_response", "GitHub's GraphQL response has no data")
        return fetched

    # -- issue status ----------------------------------------------------------------------------

    def issue_statuses(
        self, refs: list[IssueRef], deadline: Deadline, *, max_age: float | None = None
    ) -> dict[IssueRef, IssueStatus | GitHubError]:
        """Every issue's status: one GraphQL request with a token, else REST one issue after another
        (GitHub asks clients not to send REST requests in parallel)."""
        results: dict[IssueRef, IssueStatus | GitHubError] = {}
        if not refs:
            return results
        if self.has_token:
            try:
                return self._graphql_statuses(refs, deadline, max_age=max_age)
            except GitHubError as exc:
                if exc.reason in NETWORK_DOWN:
                    return dict.fromkeys(refs, exc)
                log.info("GraphQL batch failed (%s); asking REST instead", exc.reason)
        for ref in refs:
            try:
                results[ref] = self.issue_status(ref, deadline, max_age=max_age)
            except GitHubError as exc:
                results[ref] = exc
        return results

    def issue_status(self, ref: IssueRef, deadline: Deadline, *, max_age: float | None = None) -> IssueStatus:
        """One issue through REST: the issue, its timeline, and merged state of PRs the timeline leaves open."""
        base = f"/repos/{ref.owner}/{ref.repo}/issues/{ref.number}"
        issue = self.get_json(base, deadline, max_age=max_age)
        parts = [issue]
        events: list[Any] = []
        page: str | None = f"{base}/timeline?per_page=100"
        for _ in range(self.settings.max_timeline_pages):
            if page is None:
                break
            fetched = self.get_json(page, deadline, max_age=max_age)
            parts.append(fetched)
            if not isinstance(fetched.body, list):
                raise self._fail("bad_response", f"the timeline of {ref} is not a JSON list")
            events.extend(fetched.body)
            page = fetched.next_url
        notes: list[str] = []
        if page is not None:
            notes.append(f"the timeline has more than {self.settings.max_timeline_pages} pages; later events not read")
        try:
            status = _status_from_rest(ref, issue.body, events)
        except SHAPE_ERRORS as exc:
            raise self._fail("bad_response", f"GitHub's answer for {ref} is malformed ({type(exc).__name__})") from None
        pulls = []
        for pull in status.pulls:
            if pull.merged is None:
                try:
                    fetched = self.get_json(f"/repos/{pull.repo}/pulls/{pull.number}", deadline, max_age=max_age)
                    parts.append(fetched)
                    pull = _with_pull_details(pull, fetched.body)
                except (GitHubError, InvalidReference, *SHAPE_ERRORS) as exc:
                    reason = exc.reason if isinstance(exc, GitHubError) else "bad_response"
                    notes.append(f"merged state of {pull.ref} unknown ({reason})")
            pulls.append(pull)
        return self._clean(_with_origin(dataclasses.replace(status, pulls=tuple(pulls), notes=tuple(notes)), parts))

    def _graphql_statuses(
        self, refs: list[IssueRef], deadline: Deadline, *, max_age: float | None
    ) -> dict[IssueRef, IssueStatus | GitHubError]:
        query, variables = _graphql_query(refs)
        fetched = self.graphql(query, variables, deadline, max_age=max_age)
        data = fetched.body["data"]
        if not isinstance(data, dict):
            raise self._fail("bad_response", "GitHub's GraphQL data is not a JSON object")
        results: dict[IssueRef, IssueStatus | GitHubError] = {}
        for index, ref in enumerate(refs):
            repository = data.get(f"i{index}")
            issue = repository.get("issue") if isinstance(repository, dict) else None
            if not isinstance(issue, dict):
                results[ref] = self._fail("not_found", f"GitHub has no issue {ref}")
                continue
            try:
                status = _status_from_graphql(ref, issue)
            except SHAPE_ERRORS:
                results[ref] = self._fail("bad_response", f"GitHub's GraphQL answer for {ref} is malformed")
                continue
            results[ref] = self._clean(_with_origin(status, [fetched]))
        return results


def _with_origin(status: IssueStatus, parts: list[Fetched]) -> IssueStatus:
    """Live when every part was fetched or revalidated now; otherwise cache, as old as its oldest part."""
    fallback = next((p.fallback for p in parts if p.fallback is not None), None)
    if all(p.origin == "live" for p in parts):
        return dataclasses.replace(status, origin="live", age_seconds=0.0, fallback=None)
    age = max(p.age_seconds for p in parts if p.origin == "cache")
    return dataclasses.replace(status, origin="cache", age_seconds=age, fallback=fallback)


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _lower(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) else None


def _status_from_rest(ref: IssueRef, issue: Any, events: list[Any]) -> IssueStatus:
    if not isinstance(issue, dict) or issue.get("state") not in ("open", "closed"):
        raise GitHubError("bad_response", f"GitHub's answer for {ref} is not an issue")
    closed_at = _parse_time(issue.get("closed_at"))
    closer = issue.get("closed_by") if isinstance(issue.get("closed_by"), dict) else None
    pulls: dict[tuple[str, int], PullLink] = {}
    unnamed = 0
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "closed" and isinstance(event.get("actor"), dict):
            closer = closer if issue.get("closed_by") else event["actor"]
        elif kind == "cross-referenced":
            source = event.get("source") or {}
            linked = source.get("issue") if isinstance(source, dict) else None
            if isinstance(linked, dict) and isinstance(linked.get("pull_request"), dict):
                link = _pull_from_rest_issue(linked, closed_at)
                if link is not None:
                    pulls.setdefault((link.repo, link.number), link)
        elif kind == "connected":
            # The REST timeline says a pull request was linked, not which one (GraphQL does).
            unnamed += 1
    if issue["state"] == "open":
        closer = None  # a reopened issue may still name whoever closed it before
    login = closer.get("login") if closer else None
    return IssueStatus(
        ref=ref,
        title=str(issue.get("title") or ""),
        state=issue["state"],
        state_reason=_lower(issue.get("state_reason")),
        closed_at=closed_at,
        closed_by=login if isinstance(login, str) else None,
        closed_by_is_bot=is_bot_login(login, closer.get("type") if closer else None),
        html_url=str(issue.get("html_url") or ""),
        pulls=tuple(pulls.values()),
        unnamed_links=unnamed,
        origin="live",
        age_seconds=0.0,
        fallback=None,
    )


_REPO_FROM_API_URL = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/(?:issues|pulls)/\d+$")


def _pull_from_rest_issue(linked: dict[str, Any], closed_at: dt.datetime | None) -> PullLink | None:
    repository = linked.get("repository")
    full = repository.get("full_name") if isinstance(repository, dict) else None
    if not isinstance(full, str):
        match = _REPO_FROM_API_URL.search(str(linked.get("url") or ""))
        full = match["repo"] if match else None
    number = linked.get("number")
    if not isinstance(full, str) or not isinstance(number, int):
        return None
    pr = linked["pull_request"]
    merged: bool | None = None
    merged_at = None
    if "merged_at" in pr:
        merged_at = _parse_time(pr.get("merged_at"))
        merged = merged_at is not None
    elif linked.get("state") == "open":
        merged = False
    return PullLink(full, number, _relation("mentioned", merged_at, closed_at), merged, merged_at, linked.get("state"))


def _relation(default: Relation, merged_at: dt.datetime | None, closed_at: dt.datetime | None) -> Relation:
    # GitHub closes an issue in the same second it merges the PR that says "fixes #N".
    if merged_at is not None and closed_at is not None and abs((merged_at - closed_at).total_seconds()) <= 120:
        return "closed_it"
    return default


def _with_pull_details(pull: PullLink, body: Any) -> PullLink:
    if not isinstance(body, dict):
        raise GitHubError("bad_response", f"{pull.ref} is not a pull request")
    merged_at = _parse_time(body.get("merged_at"))
    merged = bool(body.get("merged")) if "merged" in body else merged_at is not None
    return dataclasses.replace(pull, merged=merged, merged_at=merged_at, state=body.get("state"))


_PULL_FIELDS = "... on PullRequest { number merged mergedAt state repository { nameWithOwner } }"
_ISSUE_FIELDS = (
    "title state stateReason closedAt url "
    "closedByPullRequestsReferences(first: 10, includeClosedPrs: true) { nodes { number merged mergedAt state "
    "repository { nameWithOwner } } } "
    "timelineItems(last: 100, itemTypes: [CLOSED_EVENT, CROSS_REFERENCED_EVENT, CONNECTED_EVENT]) { nodes { "
    "__typename "
    "... on ClosedEvent { createdAt actor { __typename login } closer { __typename " + _PULL_FIELDS + " } } "
    "... on CrossReferencedEvent { source { __typename " + _PULL_FIELDS + " } } "
    "... on ConnectedEvent { subject { __typename " + _PULL_FIELDS + " } } "
    "} }"
)


def _graphql_query(refs: list[IssueRef]) -> tuple[str, dict[str, Any]]:
    """One query for all issues, each under alias ``i<N>``; values travel as variables, not text."""
    params: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for i, ref in enumerate(refs):
        params.append(f"$o{i}: String!, $r{i}: String!, $n{i}: Int!")
        fields.append(f"i{i}: repository(owner: $o{i}, name: $r{i}) {{ issue(number: $n{i}) {{ {_ISSUE_FIELDS} }} }}")
        variables.update({f"o{i}": ref.owner, f"r{i}": ref.repo, f"n{i}": ref.number})
    query = f"query({', '.join(params)}) {{ {' '.join(fields)} rateLimit {{ cost remaining resetAt }} }}"
    return query, variables


def _pull_from_graphql(node: Any, relation: Relation, closed_at: dt.datetime | None) -> PullLink | None:
    if not isinstance(node, dict) or node.get("__typename", "PullRequest") != "PullRequest":
        return None
    repo = (node.get("repository") or {}).get("nameWithOwner")
    if not isinstance(repo, str) or not isinstance(node.get("number"), int):
        return None
    merged_at = _parse_time(node.get("mergedAt"))
    merged = node.get("merged") if isinstance(node.get("merged"), bool) else None
    if relation == "mentioned":
        relation = _relation(relation, merged_at, closed_at)
    return PullLink(repo, node["number"], relation, merged, merged_at, _lower(node.get("state")))


def _status_from_graphql(ref: IssueRef, issue: dict[str, Any]) -> IssueStatus:
    state = _lower(issue["state"])
    if state not in ("open", "closed"):
        raise ValueError(state)
    closed_at = _parse_time(issue.get("closedAt"))
    pulls: dict[tuple[str, int], PullLink] = {}
    closer_login: str | None = None
    closer_bot = False

    def add(link: PullLink | None) -> None:
        if link is None:
            return
        key = (link.repo, link.number)
        rank: dict[str, int] = {"closes": 0, "closed_it": 1, "connected": 2, "mentioned": 3}
        if key not in pulls or rank[link.relation] < rank[pulls[key].relation]:
            pulls[key] = link

    for node in (issue.get("closedByPullRequestsReferences") or {}).get("nodes") or []:
        add(_pull_from_graphql(node, "closes", closed_at))
    for node in (issue.get("timelineItems") or {}).get("nodes") or []:
        kind = node.get("__typename") if isinstance(node, dict) else None
        if kind == "ClosedEvent":
            actor = node.get("actor") or {}
            login = actor.get("login")
            if isinstance(login, str):
                # GraphQL names an app "github-actions"; REST and the web say "github-actions[bot]".
                closer_bot = is_bot_login(login, actor.get("__typename"))
                closer_login = f"{login}[bot]" if actor.get("__typename") == "Bot" and "[" not in login else login
            add(_pull_from_graphql(node.get("closer"), "closed_it", closed_at))
        elif kind == "CrossReferencedEvent":
            add(_pull_from_graphql(node.get("source"), "mentioned", closed_at))
        elif kind == "ConnectedEvent":
            add(_pull_from_graphql(node.get("subject"), "connected", closed_at))
    return IssueStatus(
        ref=ref,
        title=str(issue.get("title") or ""),
        state=state,  # type: ignore[arg-type]
        state_reason=_lower(issue.get("stateReason")),
        closed_at=closed_at,
        closed_by=closer_login if state == "closed" else None,
        closed_by_is_bot=closer_bot if state == "closed" else False,
        html_url=str(issue.get("url") or ""),
        pulls=tuple(pulls.values()),
        unnamed_links=0,
        origin="live",
        age_seconds=0.0,
        fallback=None,
    )
