"""Shared fixtures: the real knowledge, and a server process on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import knowledge_dir

REPO = Path(__file__).resolve().parents[1]

# Nothing the suite runs (the knowledge start-up cache, the HTTP clients' caches, servers spawned as
# subprocesses) writes into the real user cache: it all goes to one throwaway directory.
_CACHE = tempfile.mkdtemp(prefix="vllm-caching-mcp-tests-")
os.environ["XDG_CACHE_HOME"] = _CACHE
os.environ.pop("VLLM_CACHING_MCP_CACHE_DIR", None)
# The stand-in servers are on loopback; a proxy or CA bundle set for the machine must not reroute
# or distrust them (tests that want a proxy set one themselves).
for _name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"):
    os.environ.pop(_name, None)
    os.environ.pop(_name.lower(), None)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """The server runs on asyncio; anyio's own fixture would also run every async test on trio when
    trio happens to be installed, whatever its version."""
    return "asyncio"


@pytest.fixture(scope="session")
def knowledge() -> Knowledge:
    return load_knowledge()


@pytest.fixture
def knowledge_copy(tmp_path: Path) -> Path:
    """A writable copy of the real knowledge files, for tests that break one."""
    target = tmp_path / "knowledge"
    shutil.copytree(knowledge_dir(), target, ignore=shutil.ignore_patterns("templates", "*.md"))
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "vllm_caching_mcp.mcp_server", *args]


@contextlib.contextmanager
def running_server(*args: str, env: dict[str, str] | None = None, log: Path) -> Iterator[str]:
    """The real server on a free loopback port with ``args``; yields its base URL; stderr goes to ``log``."""
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            server_command("--transport", "streamable-http", "--port", str(port), *args),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "server did not answer /healthz within 30 s"
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server over streamable HTTP on 127.0.0.1, shared by the session; yields its endpoint URL."""
    with running_server(log=tmp_path_factory.mktemp("http-server") / "server.log") as url:
        yield f"{url}/mcp"


@pytest.fixture(scope="session")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding a non-editable install of this checkout, built once.

    The dependencies (and the build backend) come from the test runner's own site-packages, added as
    plain paths so nothing is downloaded; a plain path does not run the .pth files in it, so the
    editable install of this checkout stays invisible and only the wheel built here can be imported.
    """
    root = tmp_path_factory.mktemp("fresh-install")
    source = root / "src"
    for part in ("server", "knowledge", "pyproject.toml", "README.md"):
        item = REPO / part
        if item.is_dir():
            shutil.copytree(item, source / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(item, source / part)
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "test-runner-deps.pth").write_text("\n".join(sorted(outer)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(source)],
        check=True,
        capture_output=True,
    )
    return env_dir


@pytest.fixture
def resetting_server() -> Iterator[str]:
    """Accepts each connection and resets it (RST, not FIN) at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    listener.close()
