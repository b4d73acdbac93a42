"""A stand-in Hugging Face Hub on 127.0.0.1, serving the shapes huggingface_hub reads.

Endpoints: ``GET /api/models/<owner>/<name>/revision/<rev>`` (``sha``, ``siblings`` with
``rfilename``, ``gated``) and ``GET /<owner>/<name>/resolve/<rev>/<file>`` (the file, with
``X-Repo-Commit``). Errors carry the Hub's ``X-Error-Code`` header: ``RepoNotFound`` (401 without
a token, 404 with one, as the Hub hides private repositories), ``GatedRepo`` (401 without a token,
403 with one lacking access), ``EntryNotFound`` (404). A repository may be ``renamed_to`` another
(a 307 to the new name, as the Hub redirects a moved repository), and a file may be ``on_cdn``: a
302 to a second stand-in on another port, as the Hub sends large files from its CDN, which records
the headers it receives. Both answer a ``Range`` request with 206 and the bytes asked for. Tests
queue scripted replies (5xx, slow, dripped) in front of any request and read back every request each
server received.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from standin_http import Reply, send_reply, serve, stop_server


@dataclasses.dataclass
class FakeRepo:
    files: dict[str, bytes]
    sha: str = "3f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a098"
    gated: bool = False
    tokens: frozenset[str] = frozenset()  # tokens with access to a gated repository
    renamed_to: str | None = None
    on_cdn: frozenset[str] = frozenset()


@dataclasses.dataclass
class Seen:
    path: str
    headers: dict[str, str]


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.scripted: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.cdn_requests: list[Seen] = []
        self.server: ThreadingHTTPServer | None = None
        self.cdn: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        assert self.cdn is not None
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def add(self, repo: str, files: dict[str, Any], **options: Any) -> FakeRepo:
        encoded = {name: body if isinstance(body, bytes) else json.dumps(body).encode() for name, body in files.items()}
        self.repos[repo] = FakeRepo(encoded, **options)
        return self.repos[repo]

    def start(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                send_reply(self, hub.scripted.popleft() if hub.scripted else hub.answer(self.path, self.headers))

        class CdnHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub.cdn_requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                repo, _, name = unquote(self.path.lstrip("/")).partition("/-/")
                found = hub.repos.get(repo)
                body = found.files.get(name) if found else None
                send_reply(self, _ranged(body, self.headers) if body is not None else Reply(404, b"{}"))

        self.server = serve(Handler)
        self.cdn = serve(CdnHandler)
        return self

    def stop(self) -> None:
        stop_server(self.server)
        stop_server(self.cdn)

    def answer(self, path: str, headers: Any) -> Reply:
        token = (headers.get("Authorization") or "").removeprefix("Bearer ") or None
        parts = unquote(urlsplit(path).path).strip("/").split("/")
        api = parts[:2] == ["api", "models"]
        if api:
            parts = parts[2:]
        if len(parts) < 4 or parts[2] not in ("revision", "resolve"):
            return Reply(404, b"{}")
        repo_id = "/".join(parts[:2])
        repo = self.repos.get(repo_id)
        if repo is None:
            return _error(404 if token else 401, "RepoNotFound")
        if repo.renamed_to is not None:
            rest = "/".join(parts[2:])
            where = f"/api/models/{repo.renamed_to}/{rest}" if api else f"/{repo.renamed_to}/{rest}"
            return Reply(307, b"", {"Location": where})
        if api:
            listing = {"id": repo_id, "sha": repo.sha, "gated": "manual" if repo.gated else False}
            listing["siblings"] = [{"rfilename": name} for name in repo.files]
            return Reply(200, json.dumps(listing).encode(), {"Content-Type": "application/json"})
        if repo.gated and token not in repo.tokens:
            return _error(403 if token else 401, "GatedRepo")
        name = "/".join(parts[4:])
        if name not in repo.files:
            return _error(404, "EntryNotFound")
        if name in repo.on_cdn:
            return Reply(302, b"", {"Location": f"{self.cdn_url}/{repo_id}/-/{name}"})
        reply = _ranged(repo.files[name], headers)
        reply.headers.update({"X-Repo-Commit": repo.sha})
        return reply


def _ranged(body: bytes, headers: Any) -> Reply:
    """The whole file, or the bytes a ``Range: bytes=A-B`` header asks for (206), as the Hub and its CDN serve."""
    asked = headers.get("Range") or ""
    if not asked.startswith("bytes="):
        return Reply(200, body, {"Content-Type": "application/json"})
    first, _, last = asked.removeprefix("bytes=").partition("-")
    start, end = int(first), min(int(last), len(body) - 1)
    return Reply(206, body[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(body)}"})


def _error(status: int, code: str) -> Reply:
    return Reply(status, json.dumps({"error": code}).encode(), {"X-Error-Code": code})
