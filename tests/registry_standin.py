"""A stand-in OCI registry on 127.0.0.1, serving the distribution API's documented shapes.

Endpoints: ``GET /v2/<repo>/manifests/<tag|digest>`` (Docker manifest list v2 or OCI index, and
the per-platform manifests, served only when the ``Accept`` header lists their media type, with
``Docker-Content-Digest``), ``GET /v2/<repo>/blobs/<digest>`` (optionally redirected to another
origin, as Docker Hub redirects to its CDN), ``GET /token`` (a token service in the manner of
auth.docker.io: ``service`` and ``scope`` query parameters, optional Basic credentials, a JSON
``token``). With ``auth="bearer"`` every registry request without a valid token gets a ``401``
and ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``; with ``auth="basic"`` a Basic
challenge. Errors carry the spec's ``{"errors": [{"code": ...}]}`` body.

Tests queue scripted replies (5xx, slow, malformed) in front of any path and read back every
request the server received. ``reflect_authorization`` makes a misbehaving registry that copies the
request's ``Authorization`` header into the image config it serves (a label, an env value, a build
step); ``realm`` points the challenge at a token service elsewhere (another FakeRegistry sharing
``tokens``). Used by tests/test_registry.py, tests/test_inspect_image.py, tests/test_faults.py,
tests/test_credential_scope.py and tests/test_redaction.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import secrets
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from standin_http import Reply, send_reply, serve, stop_server

MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"

# Layer sizes of the fake amd64 image, in bytes (compressed, as the manifest lists them).
LAYER_SIZES_AMD64 = [30_439_021, 4_621_583, 1_873_200_117, 6_022_884_390, 912_004_771]
LAYER_SIZES_ARM64 = [28_001_902, 5_004_117, 1_700_230_001, 5_800_000_999]


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, indent=3).encode()


def vllm_openai_config(
    *, install_kv_connectors: str | None = "true", cuda: str = "12.9.1", python: str = "3.12", arch: str = "amd64"
) -> dict[str, Any]:
    """An image config shaped like the published vllm/vllm-openai images.

    Modelled on the structure of vLLM's docker/Dockerfile (an NVIDIA CUDA base that sets
    CUDA_VERSION, build args for CUDA and Python versions and INSTALL_KV_CONNECTORS with a default of
    false, a conditional `uv pip install --system -r requirements/kv_connectors.txt`, and
    ENTRYPOINT ["vllm", "serve"]) and on how BuildKit records steps (the ``RUN |N ARG=value ...``
    prefix); written for these tests, not copied from the Dockerfile or a real image.
    ``install_kv_connectors=None`` leaves the value out of the RUN prefix (an older builder).
    """
    created = "2026-06-05T18:22:41.093Z"
    args = f"CUDA_VERSION={cuda} PYTHON_VERSION={python}"
    count = 2
    if install_kv_connectors is not None:
        args += f" INSTALL_KV_CONNECTORS={install_kv_connectors}"
        count = 3
    history = [
        {"created": "2025-12-01T10:00:00Z", "created_by": "/bin/sh -c #(nop) ADD file:5f3c0a1d in / "},
        {"created": "2025-12-01T10:00:01Z", "created_by": '/bin/sh -c #(nop)  CMD ["/bin/bash"]', "empty_layer": True},
        {"created": "2026-01-10T08:00:00Z", "created_by": "ENV NVARCH=x86_64", "empty_layer": True},
        {"created": "2026-01-10T08:00:00Z", "created_by": f"ENV CUDA_VERSION={cuda}", "empty_layer": True},
        {
            "created": "2026-01-10T08:00:05Z",
            "created_by": "RUN /bin/sh -c apt-get update && apt-get install -y cuda-cudart-12-9 # buildkit",
        },
        {"created": created, "created_by": f"ARG CUDA_VERSION={cuda}", "empty_layer": True},
        {"created": created, "created_by": f"ARG PYTHON_VERSION={python}", "empty_layer": True},
        {"created": created, "created_by": "ARG INSTALL_KV_CONNECTORS=false", "empty_layer": True},
        {"created": created, "created_by": "ENV DEBIAN_FRONTEND=noninteractive", "empty_layer": True},
        {
            "created": created,
            "created_by": f"RUN |{count} {args} /bin/sh -c apt-get update -y && apt-get install -y "
            f"python{python} python{python}-venv && uv venv --python {python} # buildkit",
        },
        {
            "created": created,
            "created_by": f"RUN |{count} {args} /bin/sh -c uv pip install --system dist/*.whl --extra-index-url "
            "https://download.pytorch.org/whl/cu129 # buildkit",
        },
        {
            "created": created,
            "created_by": "COPY requirements/kv_connectors.txt requirements/kv_connectors.txt # buildkit",
        },
        {
            "created": created,
            "created_by": f'RUN |{count} {args} /bin/sh -c if [ "$INSTALL_KV_CONNECTORS" = "true" ]; then '
            "uv pip install --system -r requirements/kv_connectors.txt; fi # buildkit",
        },
        {"created": created, "created_by": "ENV VLLM_USAGE_SOURCE=production-docker-image", "empty_layer": True},
        {"created": created, "created_by": 'ENTRYPOINT ["vllm" "serve"]', "empty_layer": True},
    ]
    return {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {
            "Env": [
                "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
                "NVARCH=x86_64",
                f"CUDA_VERSION={cuda}",
                "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
                "NVIDIA_VISIBLE_DEVICES=all",
                "DEBIAN_FRONTEND=noninteractive",
                "VLLM_USAGE_SOURCE=production-docker-image",
            ],
            "Entrypoint": ["vllm", "serve"],
            "Cmd": None,
            "WorkingDir": "/vllm-workspace",
            "Labels": {
                "maintainer": "NVIDIA CORPORATION <cudatools@nvidia.com>",
                "org.opencontainers.image.ref.name": "ubuntu",
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [digest_of(str(i).encode()) for i in range(5)]},
        "history": history,
    }


def echoing_config(header: str) -> dict[str, Any]:
    """`vllm_openai_config` with ``header`` copied into a label, the PYTHON_VERSION env value and the end of
    the KV-connector install step (where inspect_image shortens the step's text, cutting the copy in two)."""
    config = vllm_openai_config()
    config["config"]["Labels"]["org.opencontainers.image.description"] = f"pulled with {header}"
    config["config"]["Env"].append(f"PYTHON_VERSION=3.12 {header}")
    install = next(step for step in config["history"] if "kv_connectors.txt; fi" in step["created_by"])
    install["created_by"] = install["created_by"].replace("# buildkit", f"&& echo {header} # buildkit")
    return config


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    host: str


class FakeRegistry:
    """Start with `start()` (returns ``host:port``), stop with `stop()`; or use as a context manager."""

    def __init__(self, *, auth: str = "bearer", index_type: str = MANIFEST_LIST, user: str | None = None,
                 password: str | None = None) -> None:  # fmt: skip
        self.auth = auth  # "bearer", "basic" or "none"
        self.index_type = index_type
        self.user, self.password = user, password  # when set, the token service demands them
        self.tokens: set[str] = set()
        self.tags: dict[tuple[str, str], bytes] = {}
        self.documents: dict[str, tuple[str, bytes]] = {}  # digest -> (media type, body)
        self.blobs: dict[str, bytes] = {}
        self.scripted: dict[str, deque[Reply]] = {}
        self.requests: list[Seen] = []
        self.redirect_blobs_to: str | None = None  # e.g. "localhost": another origin for blob downloads
        self.realm_host = "127.0.0.1"
        self.realm: str | None = None  # the token service's whole URL, when not this server's /token
        self.reflect_authorization = False  # copy the Authorization header into the config a tag serves
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    # -- content ---------------------------------------------------------------------------------

    def add_image(self, repo: str, tag: str, configs: dict[str, dict[str, Any]], *, oci: bool = False,
                  attestation: bool = True) -> str:  # fmt: skip
        """Push an index for ``{arch: config}``; returns the index digest."""
        entries = []
        for arch, config in configs.items():
            config_bytes = canonical(config)
            config_digest = digest_of(config_bytes)
            self.blobs[config_digest] = config_bytes
            sizes = LAYER_SIZES_AMD64 if arch == "amd64" else LAYER_SIZES_ARM64
            manifest_type = OCI_MANIFEST if oci else DOCKER_MANIFEST
            manifest = {
                "schemaVersion": 2,
                "mediaType": manifest_type,
                "config": {"mediaType": OCI_CONFIG if oci else DOCKER_CONFIG, "size": len(config_bytes),
                           "digest": config_digest},
                "layers": [
                    {"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": size,
                     "digest": digest_of(f"{arch}-layer-{i}".encode())}
                    for i, size in enumerate(sizes)
                ],
            }  # fmt: skip
            manifest_bytes = canonical(manifest)
            manifest_digest = digest_of(manifest_bytes)
            self.documents[manifest_digest] = (manifest_type, manifest_bytes)
            entries.append(
                {"mediaType": manifest_type, "size": len(manifest_bytes), "digest": manifest_digest,
                 "platform": {"architecture": arch, "os": "linux", **({"variant": "v8"} if arch == "arm64" else {})}}
            )  # fmt: skip
        if attestation:
            # buildx adds provenance as a manifest with platform unknown/unknown
            entries.append(
                {"mediaType": OCI_MANIFEST, "size": 566, "digest": digest_of(b"attestation" + tag.encode()),
                 "platform": {"architecture": "unknown", "os": "unknown"},
                 "annotations": {"vnd.docker.reference.type": "attestation-manifest"}}
            )  # fmt: skip
        index_type = OCI_INDEX if oci else self.index_type
        index_bytes = canonical({"schemaVersion": 2, "mediaType": index_type, "manifests": entries})
        index_digest = digest_of(index_bytes)
        self.documents[index_digest] = (index_type, index_bytes)
        self.tags[(repo, tag)] = index_bytes
        return index_digest

    def script(self, path: str, *replies: Reply) -> None:
        self.scripted.setdefault(path, deque()).extend(replies)

    def seen(self, prefix: str) -> list[Seen]:
        return [r for r in self.requests if r.path.startswith(prefix)]

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> str:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # a dripped reply goes out byte by byte

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                registry._handle(self)

        self._server = serve(Handler)
        self.port = self._server.server_address[1]
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_server(self._server)
        self._server = None

    def __enter__(self) -> FakeRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving -----------------------------------------------------------------------------------

    def _send(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        send_reply(h, reply)

    def _error(self, status: int, code: str, headers: dict[str, str] | None = None) -> Reply:
        body = json.dumps({"errors": [{"code": code, "message": code.lower().replace("_", " ")}]}).encode()
        return Reply(status, body, {"Content-Type": "application/json", **(headers or {})})

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        self.requests.append(
            Seen("GET", path, parse_qs(parts.query), {k.lower(): v for k, v in h.headers.items()},
                 h.headers.get("Host", ""))
        )  # fmt: skip
        queue = self.scripted.get(path)
        if queue:
            self._send(h, queue.popleft())
            return
        if path == "/token":
            self._send(h, self._token(h, parse_qs(parts.query)))
            return
        if path.startswith("/cdn/"):
            digest = path[len("/cdn/") :]
            blob = self.blobs.get(digest)
            reply = (
                Reply(200, blob, {"Content-Type": "application/octet-stream"})
                if blob
                else self._error(404, "BLOB_UNKNOWN")
            )
            self._send(h, reply)
            return
        if not path.startswith("/v2/"):
            self._send(h, self._error(404, "NOT_FOUND"))
            return
        repo, kind, reference = self._split(path)
        denied = self._check_auth(h, repo)
        if denied is not None:
            self._send(h, denied)
            return
        if kind == "manifests":
            self._send(h, self._manifest(h, repo, reference))
        elif kind == "blobs":
            if reference in self.blobs and self.redirect_blobs_to:
                location = f"http://{self.redirect_blobs_to}:{self.port}/cdn/{reference}"
                self._send(h, Reply(307, b"", {"Location": location}))
            elif reference in self.blobs:
                self._send(h, Reply(200, self.blobs[reference], {"Content-Type": "application/octet-stream",
                                                                   "Docker-Content-Digest": reference}))  # fmt: skip
            else:
                self._send(h, self._error(404, "BLOB_UNKNOWN"))
        else:
            self._send(h, self._error(404, "NOT_FOUND"))

    @staticmethod
    def _split(path: str) -> tuple[str, str, str]:
        rest = path[len("/v2/") :]
        for kind in ("manifests", "blobs"):
            marker = f"/{kind}/"
            if marker in rest:
                repo, _, reference = rest.rpartition(marker)
                return repo, kind, reference
        return rest, "", ""

    def _check_auth(self, h: BaseHTTPRequestHandler, repo: str) -> Reply | None:
        header = h.headers.get("Authorization", "")
        if self.auth == "none":
            return None
        if self.auth == "basic":
            if (
                self.user is not None
                and header == "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            ):
                return None
            return self._error(401, "UNAUTHORIZED", {"WWW-Authenticate": 'Basic realm="fake-registry"'})
        if header.startswith("Bearer ") and header[len("Bearer ") :] in self.tokens:
            return None
        realm = self.realm or f"http://{self.realm_host}:{self.port}/token"
        challenge = f'Bearer realm="{realm}",service="registry.docker.io",scope="repository:{repo}:pull"'
        return self._error(401, "UNAUTHORIZED", {"WWW-Authenticate": challenge})

    def _token(self, h: BaseHTTPRequestHandler, query: dict[str, list[str]]) -> Reply:
        if self.user is not None:
            expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            if h.headers.get("Authorization") != expected:
                return self._error(401, "UNAUTHORIZED")
        if query.get("service") != ["registry.docker.io"] or not query.get("scope"):
            return self._error(400, "UNSUPPORTED")
        token = "fake-" + secrets.token_hex(16)
        self.tokens.add(token)
        body = {"token": token, "access_token": token, "expires_in": 300, "issued_at": "2026-06-05T18:22:41Z"}
        return Reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _manifest(self, h: BaseHTTPRequestHandler, repo: str, reference: str) -> Reply:
        accepted = {a.split(";")[0].strip() for a in h.headers.get("Accept", "").split(",")}
        header = h.headers.get("Authorization")
        if self.reflect_authorization and header and not reference.startswith("sha256:"):
            self.add_image(repo, reference, {"amd64": echoing_config(header)})
        if reference.startswith("sha256:"):
            document = self.documents.get(reference)
        else:
            body = self.tags.get((repo, reference))
            document = self.documents.get(digest_of(body)) if body is not None else None
        if document is None:
            return self._error(404, "MANIFEST_UNKNOWN")
        media_type, body = document
        if media_type not in accepted:
            # Real registries answer a client that does not accept the index with a 404 or a
            # down-converted manifest; refusing makes Accept negotiation observable here.
            return self._error(404, "MANIFEST_UNKNOWN")
        return Reply(200, body, {"Content-Type": media_type, "Docker-Content-Digest": digest_of(body)})
