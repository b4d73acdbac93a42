"""A small Hugging Face Hub client: a model repository's file list and its small JSON files, never weights.

What `size_offload` needs to size a model named by its Hub id (``Qwen/Qwen3-8B``), the way vLLM
finds the same files when it is started with that id:

- ``GET {endpoint}/api/models/{repo}/revision/{revision}``: the commit and the repository's files,
  which say whether the repository is in Mistral format (``params.json`` beside
  ``consolidated*.safetensors``: vLLM's ``is_mistral_model_repo``) and whether a safetensors index
  is there to read the parameter bytes from;
- ``GET {endpoint}/{repo}/resolve/{commit}/{file}``: ``config.json``, ``params.json``,
  ``model.safetensors.index.json`` (its ``metadata.total_size``).

It follows the Hub's own conventions, as ``huggingface_hub`` reads them from the environment:
``HF_ENDPOINT`` (a mirror; default https://huggingface.co), ``HF_TOKEN`` (or the older
``HUGGING_FACE_HUB_TOKEN``, or the token file ``hf auth login`` writes: ``$HF_TOKEN_PATH``, else
``$HF_HOME/token``, else ``~/.cache/huggingface/token``) and ``HF_HUB_OFFLINE``. The exchanges
themselves are the project's shared ones (`http_client.RetryingClient`: the caller's deadline over
each whole exchange, bounded bodies, retries, the site's proxies and certificate authorities), which
``huggingface_hub``'s own download functions would not give: they have no deadline over a whole call
and read proxies their own way. The token goes only to the endpoint's origin: a redirect to another
host (the Hub sends large files from a CDN) is followed without it.

Each answer is cached on disk (``$XDG_CACHE_HOME/vllm-caching-mcp/hub``) for the TTL
(``VLLM_CACHING_MCP_CACHE_TTL``); with the Hub out of reach, or offline, a cached answer of any age
is used and the result says so, with its age.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .http_client import (
    NETWORK_DOWN,
    CacheEntry,
    ConfigError,
    Deadline,
    DiskCache,
    HttpError,
    NetworkPath,
    RawResponse,
    RetryingClient,
    Secret,
    default_cache_dir,
    is_loopback,
    load_json,
    make_http_client,
)
from .lazy_import import lazy_import

if TYPE_CHECKING:
    import httpx
else:  # loaded on the first network call, not at server start-up
    httpx = lazy_import("httpx")

ENDPOINT_ENV = "HF_ENDPOINT"
TOKEN_ENV = "HF_TOKEN"
LEGACY_TOKEN_ENV = "HUGGING_FACE_HUB_TOKEN"
TOKEN_PATH_ENV = "HF_TOKEN_PATH"
HF_HOME_ENV = "HF_HOME"
OFFLINE_ENV = "HF_HUB_OFFLINE"
CACHE_TTL_ENV = "VLLM_CACHING_MCP_CACHE_TTL"
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TTL_SECONDS = 3600.0
DEFAULT_REVISION = "main"
# huggingface_hub's constants: what HF_HUB_OFFLINE takes as true (constants._is_true).
_TRUE = frozenset({"1", "on", "yes", "true"})
# huggingface_hub's validate_repo_id, for a model repository named with its owner: name parts of word
# characters, '-' and '.', at most 96 each, no '--' or '..', no '.git' ending.
_REPO_PART = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"^{_REPO_PART}/{_REPO_PART}$")
_REVISION = re.compile(r"^[\w.\-/]{1,200}$")
MAX_JSON_BYTES = 4 * 1024 * 1024  # a config.json is tens of KiB, a safetensors index a few MiB at most


class HubError(HttpError):
    """A failure to get a file from the Hub; ``reason`` says which kind (not_found, unauthorized, ...)."""


def is_repo_id(text: str) -> bool:
    """Whether ``text`` is spelled as a Hub model repository id, owner/name."""
    return bool(_REPO_ID.match(text)) and "--" not in text and ".." not in text and not text.endswith(".git")


def _validated_endpoint(text: str) -> str:
    """An https:// origin with an optional path (plain http only on loopback); no credentials or query."""
    try:
        url = httpx.URL(text.strip().rstrip("/"))
    except httpx.InvalidURL:
        raise ConfigError(f"{ENDPOINT_ENV}: {text!r} is not a URL") from None
    if url.scheme not in ("https", "http") or not url.host or (url.scheme == "http" and not is_loopback(url.host)):
        raise ConfigError(f"{ENDPOINT_ENV}: {text!r} must be an https:// address (http only for 127.0.0.1)")
    if url.userinfo or url.query or url.fragment:
        raise ConfigError(f"{ENDPOINT_ENV}: {text!r} must not carry credentials, a query or a fragment")
    return str(url).rstrip("/")


def _origin(url: str | httpx.URL) -> tuple[str, str, int]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def _token_from_env(env: Mapping[str, str]) -> tuple[Secret | None, str | None]:
    """The token and where it came from, looked for where huggingface_hub looks (constants.py, get_token)."""
    for name in (TOKEN_ENV, LEGACY_TOKEN_ENV):
        value = env.get(name, "").strip()
        if value:
            return Secret(value), name
    path_text = env.get(TOKEN_PATH_ENV) or (str(Path(env[HF_HOME_ENV]) / "token") if env.get(HF_HOME_ENV) else None)
    if path_text is None:
        home = env.get("HOME")
        if not home:
            return None, None
        path_text = str(Path(home) / ".cache" / "huggingface" / "token")
    try:
        value = Path(path_text).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError, RuntimeError):
        return None, None
    return (Secret(value), "the token file") if value else (None, None)


@dataclasses.dataclass(frozen=True)
class HubSettings:
    """Where to ask, with which token, how long to wait; build it with `from_env`."""

    endpoint: str = DEFAULT_ENDPOINT
    token: Secret | None = dataclasses.field(default=None, repr=False)
    token_source: str | None = None
    cache_dir: Path | None = None
    cache_ttl: float = DEFAULT_TTL_SECONDS
    offline: bool = False
    timeout: float = 10.0
    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_cap: float = 4.0
    max_body_bytes: int = MAX_JSON_BYTES
    network: NetworkPath = dataclasses.field(default_factory=NetworkPath)

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoint", _validated_endpoint(self.endpoint))
        if self.cache_ttl < 0:
            raise ConfigError(f"{CACHE_TTL_ENV}: the cache TTL must be zero or more seconds")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> HubSettings:
        env = os.environ if env is None else env
        ttl_text = env.get(CACHE_TTL_ENV)
        try:
            ttl = float(ttl_text) if ttl_text else DEFAULT_TTL_SECONDS
        except ValueError:
            raise ConfigError(f"{CACHE_TTL_ENV}: {ttl_text!r} is not a number of seconds") from None
        token, source = _token_from_env(env)
        values: dict[str, Any] = {
            "endpoint": env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT,
            "token": token,
            "token_source": source,
            "cache_dir": default_cache_dir(env) / "hub",
            "cache_ttl": ttl,
            "offline": env.get(OFFLINE_ENV, "").strip().lower() in _TRUE,
            "network": NetworkPath.from_env(env),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class HubFile:
    """One JSON document from a repository, and whether it came from the Hub or the on-disk cache."""

    body: Any
    url: str
    origin: str  # "hub" or "cache"
    age_seconds: float
    failure: str | None = None  # why the cache answered where the Hub was asked


@dataclasses.dataclass(frozen=True)
class RepoListing:
    commit: str | None
    files: tuple[str, ...]
    gated: bool
    origin: str
    age_seconds: float
    failure: str | None = None


class HubClient(RetryingClient[HubError]):
    """A model repository's small files from one Hub endpoint; one instance per tool call."""

    error_type = HubError
    settings_type = HubSettings

    def __init__(
        self,
        settings: HubSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        host = httpx.URL(settings.endpoint).host
        self.service = "the Hugging Face Hub" if settings.endpoint == DEFAULT_ENDPOINT else f"the Hub at {host}"
        http = make_http_client(
            settings.network,
            headers={"User-Agent": f"vllm-caching-mcp/{__version__}"},
            transport=transport,
            verify=settings.network.verify(None),
        )
        super().__init__(settings, http, offline=settings.offline, sleep=sleep)
        self.cache = DiskCache(settings.cache_dir, self.scrub, label="Hub")

    # -- redirects and statuses -------------------------------------------------------------------

    def _redirect(self, url: str, location: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        """Follow a renamed repository (same origin) or a file served from a CDN, the token only to the
        endpoint's own origin."""
        target = httpx.URL(url).join(location)
        if target.scheme != "https" and not (target.scheme == "http" and is_loopback(target.host)):
            raise self._fail("bad_response", f"refusing a redirect to a non-https address ({target.host})")
        if _origin(target) != _origin(self.settings.endpoint):
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        return str(target), headers

    def _status_error(self, status: int, response: RawResponse) -> HubError:
        """What the Hub's status and X-Error-Code mean (huggingface_hub.utils hf_raise_for_status)."""
        code = response.headers.get("x-error-code", "")
        with_token = self.settings.token is not None
        if code == "GatedRepo":
            how = (
                "the token set has no access yet: accept the conditions on the model's page with that account"
                if with_token
                else f"request access on the model's page, then set {TOKEN_ENV} to a token of that account"
            )
            return self._fail("forbidden", f"the repository is gated (HTTP {status}): {how}")
        if code == "RepoNotFound" or (status == 401 and not code):
            private = (
                f" (or it is private and the token from {self.settings.token_source} has no access to it)"
                if with_token
                else f" (or it is private or gated: set {TOKEN_ENV} to a token that can read it)"
            )
            return self._fail("not_found", f"{self.service} has no such model repository{private}")
        if code == "RevisionNotFound":
            return self._fail("not_found", f"{self.service} has no such revision of the repository")
        if code == "EntryNotFound" or status == 404:
            return self._fail("not_found", f"{self.service} has no such file in the repository (HTTP {status})")
        if status == 401:
            return self._fail("unauthorized", f"{self.service} refused the token from {self.settings.token_source}")
        if status == 403:
            return self._fail("forbidden", f"{self.service} refused the request (HTTP 403)")
        return self._fail("http_error", f"{self.service} answered HTTP {status}")

    def _rate_limit_wait(self, response: RawResponse) -> float | None:
        # A 403 from the Hub is an access decision (gated, disabled), never a rate limit; 429 is.
        return super()._rate_limit_wait(response) if response.status == 429 else None

    # -- files ------------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        token = self.settings.token
        return {"Authorization": f"Bearer {token.reveal()}"} if token is not None else {}

    def get_json(self, url: str, deadline: Deadline) -> HubFile:
        """The JSON at ``url``: from the cache within the TTL, else asked; a stale entry covers the Hub being
        out of reach (or offline mode), never a refusal (a gated or missing repository stays an error)."""
        key = DiskCache.key("GET", url)
        entry = self.cache.get(key)
        if entry is not None and entry.age() < self.settings.cache_ttl:
            return HubFile(entry.body, url, "cache", entry.age())
        try:
            response = self._request("GET", url, deadline, headers=self._headers())
        except HubError as exc:
            if entry is not None and (exc.reason in NETWORK_DOWN or exc.reason in _UNREACHABLE):
                return HubFile(entry.body, url, "cache", entry.age(), exc.detail)
            raise
        try:
            body = load_json(response.body)
        except ValueError as exc:
            raise self._fail("bad_response", f"{self.service}'s answer is {exc}") from None
        if not isinstance(body, dict):
            raise self._fail("bad_response", f"{self.service}'s answer is not a JSON object")
        commit = response.headers.get("x-repo-commit")
        self.cache.put(key, CacheEntry(body, commit, time.time()))
        return HubFile(body, url, "hub", 0.0)

    def safetensors_bytes(self, url: str, deadline: Deadline) -> HubFile:
        """The tensor bytes of the .safetensors file at ``url``, from its header alone: two range requests (the
        8-byte little-endian header length, then the JSON header), never the tensors. The header's largest
        data_offsets end is the bytes every tensor takes. Cached like a JSON file, as {"total_size": N}."""
        key = DiskCache.key("GET safetensors-header", url)
        entry = self.cache.get(key)
        if entry is not None and entry.age() < self.settings.cache_ttl:
            return HubFile(entry.body, url, "cache", entry.age())
        try:
            length = int.from_bytes(self._range(url, 0, 7, deadline), "little")
            if not 2 <= length <= self.settings.max_body_bytes:
                raise self._fail("bad_response", f"the safetensors header would be {length} bytes")
            header = load_json(self._range(url, 8, 8 + length - 1, deadline))
        except HubError as exc:
            if entry is not None and (exc.reason in NETWORK_DOWN or exc.reason in _UNREACHABLE):
                return HubFile(entry.body, url, "cache", entry.age(), exc.detail)
            raise
        except ValueError as exc:
            raise self._fail("bad_response", f"the safetensors header is {exc}") from None
        ends = [
            t["data_offsets"][1]
            for name, t in (header.items() if isinstance(header, dict) else ())
            if name != "__metadata__"
            and isinstance(t, dict)
            and isinstance(t.get("data_offsets"), list)
            and len(t["data_offsets"]) == 2
            and isinstance(t["data_offsets"][1], int)
        ]
        if not ends or max(ends) <= 0:
            raise self._fail("bad_response", "the safetensors header lists no tensor with data_offsets")
        body = {"total_size": max(ends)}
        self.cache.put(key, CacheEntry(body, None, time.time()))
        return HubFile(body, url, "hub", 0.0)

    def _range(self, url: str, first: int, last: int, deadline: Deadline) -> bytes:
        headers = {**self._headers(), "Range": f"bytes={first}-{last}"}
        response = self._request("GET", url, deadline, headers=headers)
        if response.status != 206 or len(response.body) != last - first + 1:
            raise self._fail("bad_response", f"{self.service} did not answer the range request with those bytes")
        return response.body

    def listing(self, repo: str, deadline: Deadline, revision: str = DEFAULT_REVISION) -> RepoListing:
        """The repository's commit and file names (``/api/models/{repo}/revision/{revision}``)."""
        url = f"{self.settings.endpoint}/api/models/{repo}/revision/{urllib.parse.quote(revision, safe='')}"
        found = self.get_json(url, deadline)
        siblings = found.body.get("siblings")
        names = tuple(
            s["rfilename"]
            for s in (siblings if isinstance(siblings, list) else [])
            if isinstance(s, dict) and isinstance(s.get("rfilename"), str)
        )
        sha = found.body.get("sha")
        commit = sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha) else None
        gated = found.body.get("gated") not in (None, False)
        return RepoListing(commit, names, gated, found.origin, found.age_seconds, found.failure)

    def file_url(self, repo: str, filename: str, revision: str) -> str:
        quoted = urllib.parse.quote(revision, safe="")
        return f"{self.settings.endpoint}/{repo}/resolve/{quoted}/{urllib.parse.quote(filename)}"


# Reasons the Hub was not reached at all, besides the network being down: a stale cache answers for them.
_UNREACHABLE: frozenset[str] = frozenset({"offline_requested", "timeout", "deadline", "server_error"})


def valid_revision(text: str) -> bool:
    return bool(_REVISION.match(text)) and ".." not in text
