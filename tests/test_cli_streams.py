"""File arguments that are streams: a FIFO nobody writes to, a silent pipe, a directory never hold the CLI.

An attack run gave `review FIFO` and `--name @FIFO`: opening a named pipe waits for a writer, so
the command (and the pre-commit hook or CI job running it) blocked for ever. Files are now opened
without waiting; a named pipe with no writer is refused at once, a pipe or device that stops
delivering is refused after `cli.STREAM_READ_SECONDS`, and what does arrive is read as before
(process substitution `<(helm template .)` keeps working).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vllm_caching_mcp import cli

CLI = [sys.executable, "-m", "vllm_caching_mcp.cli"]


def test_a_named_pipe_nobody_writes_to_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "deploy.sh"
    os.mkfifo(fifo)
    for argv in (["review", "--", str(fifo)], ["check-version", "--name", f"@{fifo}"]):
        started = time.monotonic()
        out = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 2 and "a named pipe no program is writing to" in out.stderr, out.stderr
        assert time.monotonic() - started < 20


def test_a_named_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "serve.sh"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"echo 'vllm serve m --kv-offloading-size 10' > '{fifo}'"])
    try:
        time.sleep(0.3)  # the writer is waiting for a reader
        out = subprocess.run([*CLI, "review", "--", str(fifo)], capture_output=True, text=True, timeout=60)
    finally:
        writer.wait(timeout=10)
    assert out.returncode == 0 and "OffloadingConnector" in out.stdout, out.stdout + out.stderr


def test_process_substitution_is_read() -> None:
    out = subprocess.run(
        ["bash", "-c", 'exec "$@" <(sleep 0.5; echo "vllm serve m")', "bash", *CLI, "review"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "vllm #1" in out.stdout, out.stdout + out.stderr


def test_a_pipe_that_goes_silent_is_refused_after_the_read_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "STREAM_READ_SECONDS", 0.5)
    read_end, write_end = os.pipe()
    os.write(write_end, b"vllm serve m \\\n")
    keep_open = threading.Timer(5, os.close, args=(write_end,))  # the writer stays, silent
    keep_open.start()
    try:
        started = time.monotonic()
        with pytest.raises(cli.ToolInputError, match=r"files: cannot read '/dev/fd/\d+' \(nothing more arrived"):
            cli.read_file_option("files", f"/dev/fd/{read_end}")
        assert time.monotonic() - started < 3
    finally:
        keep_open.cancel()
        os.close(write_end)
        os.close(read_end)


def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(cli.ToolInputError, match="Is a directory"):
        cli.read_file_option("files", str(tmp_path))
