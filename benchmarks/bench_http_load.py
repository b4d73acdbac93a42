"""Soak over streamable HTTP: 50 concurrent clients, 10,000 mixed calls, zero errors, memory before/after.

    python benchmarks/bench_http_load.py [--clients 50] [--calls 10000] [--rounds 2]

Starts `vllm-caching-mcp --transport streamable-http` on a free 127.0.0.1 port, warms it with one
round of the mix (tests/http_load.py: every offline tool, check_bug_status offline, tools/list),
records RSS, then runs the load ``--rounds`` times, recording RSS after each: memory that keeps
growing round after round is a leak, memory that settles after the first is caches and
allocator arenas. The offline tools run in worker processes (forked from one zygote), so the
memory of the whole process tree is printed too, as PSS: each shared page counted once.
Baseline, in the same run: the bare server (benchmarks/bare_server.py --http) answering its
trivial `echo` tool under the same clients and call count.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from stdio_session import memory_mib  # noqa: E402

import http_load  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(command: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{command[0]} did not listen on {port} within 60 s")


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def tree_pss_mib(pid: int) -> float:
    """The proportional set size of ``pid`` and every process under it (its zygote and workers), MiB."""
    total = 0
    for member in [pid, *_descendants(pid)]:
        try:
            rollup = Path(f"/proc/{member}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:"))
    return total / 1024


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def line(label: str, report: http_load.LoadReport, baseline: http_load.LoadReport | None) -> str:
    rate = report.calls / report.seconds
    ratio = f"{(baseline.calls / baseline.seconds) / rate:6.2f}×" if baseline else "  1.00×"
    return (
        f"{label:28} {report.calls:6d} calls {len(report.errors):4d} errors {rate:8.0f} calls/s "
        f"p50 {report.percentile(0.5) * 1000:6.1f} ms p99 {report.percentile(0.99) * 1000:7.1f} ms  "
        f"time × bare {ratio}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    port = free_port()
    bare = start([sys.executable, str(HERE / "bare_server.py"), "--http", str(port)], port)
    saved_mix = http_load.MIX
    http_load.MIX = [("echo", {"text": "x"})]
    try:
        baseline = asyncio.run(
            http_load.run_load(f"http://127.0.0.1:{port}/mcp", clients=args.clients, calls=args.calls)
        )
    finally:
        http_load.MIX = saved_mix
        stop(bare)

    port = free_port()
    command = [sys.executable, "-m", "vllm_caching_mcp.mcp_server", "--transport", "streamable-http"]
    ours = start([*command, "--port", str(port)], port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        asyncio.run(http_load.run_load(url, clients=len(http_load.MIX), calls=len(http_load.MIX) * 4))
        rss = [memory_mib(ours.pid)]
        pss = [tree_pss_mib(ours.pid)]
        rounds = []
        for _ in range(args.rounds):
            rounds.append(asyncio.run(http_load.run_load(url, clients=args.clients, calls=args.calls)))
            rss.append(memory_mib(ours.pid))
            pss.append(tree_pss_mib(ours.pid))
    finally:
        stop(ours)

    print(f"streamable HTTP, {args.clients} concurrent clients, 127.0.0.1 (Python {sys.version.split()[0]})")
    print(line("bare echo (baseline)", baseline, None))
    for number, report in enumerate(rounds, 1):
        print(line(f"vllm-caching-mcp, round {number}", report, baseline))
    print("RSS MiB after warm-up, then after each round: " + " → ".join(f"{r:.1f}" for r in rss))
    print("PSS MiB of the server and its workers, the same moments: " + " → ".join(f"{p:.1f}" for p in pss))
    errors = [e for report in rounds for e in report.errors]
    for error in errors[:10]:
        print(f"error: {error}")
    return 1 if errors or baseline.errors else 0


if __name__ == "__main__":
    sys.exit(main())
