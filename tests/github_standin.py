"""A stand-in for the GitHub API on 127.0.0.1, serving GitHub's documented response shapes.

REST: ``GET /repos/{owner}/{repo}/issues/{n}`` (issue with ``state``, ``state_reason``,
``closed_at``, ``closed_by``), ``.../issues/{n}/timeline`` (``cross-referenced`` events whose
source is a pull request, ``connected`` and ``closed`` events with their actor) and
``GET /repos/{owner}/{repo}/pulls/{n}`` (``merged``, ``merged_at``), each with an ETag and a 304
for a matching ``If-None-Match``. GraphQL: ``POST /graphql`` answering the client's aliased
``repository { issue { ... } }`` query from the same data.

Tests queue scripted replies (5xx, 403/429 with rate-limit headers, slow or oversized or
malformed bodies) in front of any path, and read back every request the server received.
Used by tests/test_github_client.py, tests/test_bugs.py and benchmarks/bench_bug_status.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import ssl
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standin_http import Reply, gzipped, send_reply, serve, stop_server
from vllm_caching_mcp.knowledge import Knowledge


@dataclasses.dataclass
class FakePull:
    repo: str
    number: int
    merged_at: str | None = None
    state: str = "closed"
    relation: str = "mentioned"  # mentioned (cross-reference), connected (sidebar), closes (closing reference)
    merged_in_timeline: bool = True  # False: the timeline omits merged_at, so the client must ask /pulls


@dataclasses.dataclass
class FakeIssue:
    repo: str
    number: int
    title: str
    state: str = "open"
    state_reason: str | None = None
    closed_at: str | None = None
    closed_by: str | None = None
    pulls: list[FakePull] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


def _user(login: str) -> dict[str, Any]:
    return {"login": login, "id": 1, "type": "Bot" if login.endswith("[bot]") else "User"}


class FakeGitHub:
    """Start with `start()` (returns the API base URL), stop with `stop()`; or use as a context manager."""

    def __init__(
        self, issues: list[FakeIssue] | None = None, *, latency: float = 0.0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.tls = tls  # serve https with this server context
        self.issues: dict[tuple[str, int], FakeIssue] = {(i.repo.lower(), i.number): i for i in issues or []}
        self.latency = latency
        self.scripted: dict[str, deque[Reply]] = {}
        self.requests: list[Seen] = []
        self.reflect_authorization = False  # a misbehaving server that echoes the token into titles and PR names
        self.compress = False  # gzip every JSON answer to a client that accepts gzip, as GitHub's API does
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.base = ""

    @classmethod
    def from_knowledge(cls, knowledge: Knowledge, **kwargs: Any) -> FakeGitHub:
        """Every tracked bug as the snapshot stores it, so a live answer equals the snapshot."""
        issues = []
        for bug in knowledge.bugs:
            s = bug.snapshot
            closed_at = f"{(s.closed_at or s.checked_at).isoformat()}T12:00:00Z" if s.state == "closed" else None
            login = s.closed_by if s.closed_by and " " not in s.closed_by else None
            pulls = [
                FakePull(
                    repo=p.ref[3:].split("#")[0],
                    number=int(p.ref.split("#")[1]),
                    merged_at=f"{(s.closed_at or s.checked_at).isoformat()}T08:00:00Z" if p.merged else None,
                    state="closed" if p.merged is not None else "open",
                    merged_in_timeline=p.merged is not None,
                )
                for p in s.linked_pulls
            ]
            issues.append(FakeIssue(bug.repo, bug.number, bug.title, s.state, s.state_reason, closed_at, login, pulls))
        return cls(issues, **kwargs)

    # -- control ---------------------------------------------------------------------------------

    def add(self, issue: FakeIssue) -> None:
        self.issues[(issue.repo.lower(), issue.number)] = issue

    def issue(self, repo: str, number: int) -> FakeIssue:
        return self.issues[(repo.lower(), number)]

    def script(self, path: str, *replies: Reply) -> None:
        """Serve ``replies`` (in order) to the next requests whose path (without query) is ``path``."""
        with self._lock:
            self.scripted.setdefault(path, deque()).extend(replies)

    def count(self, method: str | None = None) -> int:
        return sum(1 for r in self.requests if method is None or r.method == method)

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self._server = serve(Handler, tls=self.tls)
        scheme = "https" if self.tls is not None else "http"
        self.base = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        return self.base

    def stop(self) -> None:
        stop_server(self._server)
        self._server = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        request_body = handler.rfile.read(length) if length else b""
        path = handler.path.split("?")[0]
        with self._lock:
            self.requests.append(Seen(method, handler.path, {k.lower(): v for k, v in handler.headers.items()}))
            queue = self.scripted.get(path)
            reply = queue.popleft() if queue else None
        if self.latency:
            time.sleep(self.latency)
        if reply is None:
            reply = self._answer(method, path, handler, request_body)
        send_reply(handler, reply)

    def _json(self, handler: BaseHTTPRequestHandler, data: Any) -> Reply:
        body = json.dumps(data).encode()
        etag = '"' + hashlib.sha1(body).hexdigest() + '"'
        headers = {"Content-Type": "application/json; charset=utf-8", "ETag": etag, "X-RateLimit-Remaining": "4999"}
        if handler.headers.get("If-None-Match") == etag:
            return Reply(304, b"", headers)
        if self.compress and "gzip" in handler.headers.get("Accept-Encoding", ""):
            return Reply(200, gzipped(body), {**headers, "Content-Encoding": "gzip"})
        return Reply(200, body, headers)

    def _answer(self, method: str, path: str, handler: BaseHTTPRequestHandler, body: bytes) -> Reply:
        not_found = Reply(404, b'{"message": "Not Found"}', {"Content-Type": "application/json"})
        if method == "POST" and path == "/graphql":
            return self._graphql(handler, body)
        m = re.match(r"^/repos/([^/]+/[^/]+)/(issues|pulls)/(\d+)(/timeline)?$", path)
        if not m or method != "GET":
            return not_found
        repo, kind, number, timeline = m[1], m[2], int(m[3]), m[4]
        if kind == "pulls":
            pull = self._find_pull(repo, number)
            if pull is None:
                return not_found
            merged = pull.merged_at is not None
            return self._json(
                handler, {"number": number, "state": pull.state, "merged": merged, **self._pull_times(pull)}
            )
        issue = self.issues.get((repo.lower(), number))
        if issue is None:
            return not_found
        if timeline:
            return self._json(handler, self._timeline(issue, handler))
        return self._json(handler, self._issue_json(issue, handler))

    def _pull_times(self, pull: FakePull) -> dict[str, Any]:
        return {"merged_at": pull.merged_at}

    def _find_pull(self, repo: str, number: int) -> FakePull | None:
        for issue in self.issues.values():
            for pull in issue.pulls:
                if pull.repo.lower() == repo.lower() and pull.number == number:
                    return pull
        return None

    def _echo(self, handler: BaseHTTPRequestHandler) -> str:
        """What a misbehaving server appends to the names it serves: the request's Authorization header."""
        return " " + str(handler.headers.get("Authorization")) if self.reflect_authorization else ""

    def _issue_json(self, issue: FakeIssue, handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        title = issue.title + self._echo(handler)
        return {
            "url": f"{self.base}/repos/{issue.repo}/issues/{issue.number}",
            "html_url": f"https://github.com/{issue.repo}/issues/{issue.number}",
            "number": issue.number,
            "title": title,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "closed_at": issue.closed_at,
            "closed_by": _user(issue.closed_by) if issue.closed_by else None,
            "user": _user("reporter"),
            "labels": [{"name": "bug"}],
        }

    def _timeline(self, issue: FakeIssue, handler: BaseHTTPRequestHandler) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = [{"event": "labeled", "actor": _user("reporter"), "label": {"name": "bug"}}]
        for pull in issue.pulls:
            if pull.relation == "connected":
                # Documented shape: the common event fields only; REST does not say which PR.
                events.append({"id": 7, "event": "connected", "actor": _user("maintainer"), "commit_id": None})
                continue
            pr: dict[str, Any] = {"url": f"{self.base}/repos/{pull.repo}/pulls/{pull.number}"}
            if pull.merged_in_timeline:
                pr["merged_at"] = pull.merged_at
            events.append(
                {
                    "event": "cross-referenced",
                    "actor": _user("contributor"),
                    "created_at": "2026-05-01T00:00:00Z",
                    "source": {
                        "type": "issue",
                        "issue": {
                            "number": pull.number,
                            "state": pull.state,
                            "url": f"{self.base}/repos/{pull.repo}/issues/{pull.number}",
                            "repository": {"full_name": pull.repo + self._echo(handler)},
                            "pull_request": pr,
                        },
                    },
                }
            )
        if issue.state == "closed":
            events.append(
                {
                    "event": "closed",
                    "actor": _user(issue.closed_by or "ghost"),
                    "commit_id": None,
                    "state_reason": issue.state_reason,
                    "created_at": issue.closed_at,
                }
            )
        return events

    def _graphql(self, handler: BaseHTTPRequestHandler, body: bytes) -> Reply:
        if not handler.headers.get("Authorization"):
            return Reply(401, b'{"message": "This endpoint requires you to be authenticated."}')
        variables = json.loads(body)["variables"]
        data: dict[str, Any] = {"rateLimit": {"cost": 1, "remaining": 4999, "resetAt": "2026-12-01T00:00:00Z"}}
        index = 0
        while f"o{index}" in variables:
            repo = f"{variables[f'o{index}']}/{variables[f'r{index}']}"
            issue = self.issues.get((repo.lower(), variables[f"n{index}"]))
            data[f"i{index}"] = {"issue": self._graphql_issue(issue, handler) if issue else None}
            index += 1
        return Reply(200, json.dumps({"data": data}).encode(), {"Content-Type": "application/json"})

    def _graphql_issue(self, issue: FakeIssue, handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        echo = self._echo(handler)

        def pull_node(pull: FakePull) -> dict[str, Any]:
            return {
                "__typename": "PullRequest",
                "number": pull.number,
                "merged": pull.merged_at is not None,
                "mergedAt": pull.merged_at,
                "state": "MERGED" if pull.merged_at else pull.state.upper(),
                "repository": {"nameWithOwner": pull.repo + echo},
            }

        nodes: list[dict[str, Any]] = []
        for pull in issue.pulls:
            if pull.relation == "connected":
                nodes.append({"__typename": "ConnectedEvent", "subject": pull_node(pull)})
            elif pull.relation == "mentioned":
                nodes.append({"__typename": "CrossReferencedEvent", "source": pull_node(pull)})
        if issue.state == "closed":
            login = issue.closed_by or "ghost"
            bot = login.endswith("[bot]")
            nodes.append(
                {
                    "__typename": "ClosedEvent",
                    "createdAt": issue.closed_at,
                    "actor": {"__typename": "Bot" if bot else "User", "login": login.removesuffix("[bot]")},
                    "closer": None,
                }
            )
        return {
            "title": issue.title + echo,
            "state": issue.state.upper(),
            "stateReason": issue.state_reason.upper() if issue.state_reason else None,
            "closedAt": issue.closed_at,
            "url": f"https://github.com/{issue.repo}/issues/{issue.number}",
            "closedByPullRequestsReferences": {"nodes": [pull_node(p) for p in issue.pulls if p.relation == "closes"]},
            "timelineItems": {"nodes": nodes},
        }
