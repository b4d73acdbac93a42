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


def measure(command: list[str], runs: int) -> tuple[float, float, float, int]:
    """Median seconds to initialize and to tools/list, median peak RSS MiB, and the number of tools."""
    init, listed, rss = [], [], []
    tools = 0
    for _ in range(runs):
        session = StdioSession(command)
        session.initialize()
        init.append(time.perf_counter() - session.started)
        tools = len(session.request("tools/list")["tools"])
        listed.append(time.perf_counter() - session.started)
        rss.append(session.peak_rss_mib())
        session.close()
    return statistics.median(init), statistics.median(listed), statistics.median(rss), tools


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
    results = {name: measure(cmd, args.runs) for name, cmd in servers.items()}
    bare = results["bare MCPServer (1 tool)"]
    print(f"cold start, median of {args.runs} runs (Python {sys.version.split()[0]})")
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
