"""A minimal MCP client over stdio for benchmarks: raw JSON-RPC lines, so the client adds no cost.

Used by bench_cold_start.py and bench_latency.py (`memory_mib` by the HTTP benchmarks too). Reads the
child's peak RSS (VmHWM) and CPU time from /proc, and those of its whole process tree (the server and
the processes it started: the tool workers' zygote and the workers).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

PROTOCOL = "2025-06-18"


def memory_mib(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of a process from /proc/PID/status: VmRSS (resident now) or VmHWM (peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process descended from it, alive now."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:  # the task or the process ended meanwhile
                continue
    return found


def pss_mib(pid: int) -> float:
    """Proportional set size: the process's private pages plus its share of each page it shares (a
    forked worker shares most of its pages with the zygote, so summing RSS counts them twice)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds_of(pid: int) -> float:
    """User plus system CPU process ``pid`` has used so far (clock ticks, usually 10 ms each)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class StdioSession:
    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self._next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed stdout while answering {method}")
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply["result"])

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        self.notify("notifications/initialized")
        return result

    def peak_rss_mib(self) -> float:
        return memory_mib(self.proc.pid, "VmHWM")

    def cpu_seconds(self) -> float:
        """User plus system CPU the child has used so far (clock ticks, usually 10 ms each)."""
        return cpu_seconds_of(self.proc.pid)

    def tree(self) -> tuple[float, float, float]:
        """The whole process tree now: CPU seconds, summed RSS and summed PSS in MiB."""
        pids = process_tree(self.proc.pid)
        return (
            sum(cpu_seconds_of(p) for p in pids),
            sum(memory_mib(p) for p in pids),
            sum(pss_mib(p) for p in pids),
        )

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
