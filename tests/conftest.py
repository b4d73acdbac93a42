"""Shared fixtures: the real knowledge, and a server process on a free loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_caching_mcp.knowledge import Knowledge, knowledge_dir, load_knowledge

REPO = Path(__file__).resolve().parents[1]


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
