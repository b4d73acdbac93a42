"""Cold start and peak memory of this server against baselines measured in the same run.

    python benchmarks/bench_cold_start.py [--runs 7] [--time-server /path/to/mcp-server-time]

For each server: spawn → `initialize` answered → `tools/list` answered, the median of ``--runs``
fresh processes, plus the peak RSS (VmHWM) after tools/list. Baselines:

- bare: benchmarks/bare_server.py, an MCPServer with one trivial tool on the same SDK and Python;
- mcp-server-time: the SDK's reference server, if ``--time-server`` (or ``mcp-server-time`` on
  PATH) is given; it usually runs on its own environment and SDK version, so it is a reference
  point rather than a like-for-like baseline. Skipped with a message when absent.

Goal (issue 10): ours ≤ 1.1 × bare for tools/list answered.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stdio_session import StdioSession

HERE = Path(__file__).resolve().parent


def start_once(command: list[str]) -> tuple[float, float, float, int]:
    """Seconds to initialize and to tools/list, peak RSS MiB, and the number of tools, for one spawn."""
    session = StdioSession(command)
    session.initialize()
    init = time.perf_counter() - session.started
    tools = len(session.request("tools/list")["tools"])
    listed = time.perf_counter() - session.started
    rss = session.peak_rss_mib()
    session.close()
    return init, listed, rss, tools


def measure(servers: dict[str, list[str]], runs: int) -> dict[str, tuple[float, float, float, int]]:
    """Median figures per server. The servers take turns within each round, so a busy spell on a
    shared machine slows all of them alike instead of landing on one side of the comparison."""
    samples: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in servers}
    for _ in range(runs):
        for name, command in servers.items():
            samples[name].append(start_once(command))
    return {
        name: (
            statistics.median(s[0] for s in rows),
            statistics.median(s[1] for s in rows),
            statistics.median(s[2] for s in rows),
            rows[-1][3],
        )
        for name, rows in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--time-server", help="command of the reference mcp-server-time (default: on PATH)")
    args = parser.parse_args()
    servers = {
        "bare MCPServer (1 tool)": [sys.executable, str(HERE / "bare_server.py")],
        "vllm-caching-mcp": [sys.executable, "-m", "vllm_caching_mcp.mcp_server"],
    }
    time_server = args.time_server or shutil.which("mcp-server-time")
    if time_server:
        servers["mcp-server-time (reference)"] = [time_server]
    else:
        print("mcp-server-time: not installed, skipped (pip install mcp-server-time, or pass --time-server)")
    results = measure(servers, args.runs)
    bare = results["bare MCPServer (1 tool)"]
    print(f"cold start, median of {args.runs} alternating runs (Python {sys.version.split()[0]})")
    print(
        f"{'server':30} {'tools':>5} {'initialize':>11} {'tools/list':>11} {'× bare':>7} {'peak RSS':>9} {'× bare':>7}"
    )
    for name, (init, listed, rss, tools) in results.items():
        print(
            f"{name:30} {tools:5d} {init * 1000:9.0f}ms {listed * 1000:9.0f}ms {listed / bare[1]:6.2f}× "
            f"{rss:6.1f}MiB {rss / bare[2]:6.2f}×"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
