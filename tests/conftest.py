"""Shared fixtures: the real knowledge, and a server process on a free loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import knowledge_dir

REPO = Path(__file__).resolve().parents[1]

# Nothing the suite runs (the knowledge start-up cache, the HTTP clients' caches, servers spawned as
# subprocesses) writes into the real user cache: it all goes to one throwaway directory.
_CACHE = tempfile.mkdtemp(prefix="vllm-caching-mcp-tests-")
os.environ["XDG_CACHE_HOME"] = _CACHE
os.environ.pop("VLLM_CACHING_MCP_CACHE_DIR", None)


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


@pytest.fixture(scope="session")
def http_server() -> Iterator[str]:
    """The real server over streamable HTTP on 127.0.0.1; yields its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        server_command("--transport", "streamable-http", "--port", str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("server did not start listening within 30 s")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


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
