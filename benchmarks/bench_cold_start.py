"""Cold start and peak memory of this server against baselines measured in the same run.

    python benchmarks/bench_cold_start.py [--runs 9] [--time-server /path/to/mcp-server-time] [--write]

For each server, over ``--runs`` fresh processes (medians): spawn → `initialize` answered →
`tools/list` answered (wall time, and the child's CPU time by then), then → one `tools/call`
answered, and the peak RSS (VmHWM) after that call. The first call is reported because this
server defers loading its tools until they are needed: the column shows what is deferred rather
than hiding it. A second after the first call, when the server has registered its tools, the whole
process tree (the server, the tool workers' zygote, the worker) is measured: CPU time, summed RSS
(which counts a page that a worker shares with the zygote once in each) and summed PSS (each shared
page split between its sharers: what the tree takes from the machine). ``vllm-caching-mcp`` is
started as the installed command starts it (`serve.py`); the row "zygote after the SDK" starts
`mcp_server.py` directly, where the zygote is spawned only after the SDK is imported, as before
issue 29. With ``--write`` the medians and ratios go to ``cold_start.json``, which README's figures
must agree with (tests/test_performance_figures.py). Baselines:

- bare: benchmarks/bare_server.py, an MCPServer with one trivial tool on the same SDK and Python;
- mcp-server-time: the SDK's reference server, if ``--time-server`` (or ``mcp-server-time`` on
  PATH) is given; it usually runs on its own environment and SDK version, so it is a reference
  point rather than a like-for-like baseline. Skipped with a message when absent.

One untimed round first, for every server alike: it writes bytecode and this server's start-up
cache (the state after installation and one start), and warms the page cache. The servers take
turns within each round, so a busy spell on a shared machine slows all of them alike. CPU time
is steadier than wall time there; both are printed.

Goals: ours ≤ 1.1 × bare for tools/list answered (issue 10); the first call ≤ 1.2 × bare and the
process tree's memory ≤ 2 × bare (issue 29).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stdio_session import StdioSession

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "cold_start.json"
# After the first call: the server registers its tools 0.2 s after tools/list, on a thread.
SETTLE_S = 1.0


class Server(NamedTuple):
    command: list[str]
    first_call: tuple[str, dict[str, Any]]


class Sample(NamedTuple):
    initialized: float
    listed: float
    listed_cpu: float
    first_call: float
    peak_rss: float
    tools: int
    tree_cpu: float
    tree_rss: float
    tree_pss: float


def start_once(server: Server, env: dict[str, str]) -> Sample:
    session = StdioSession(server.command, env)
    session.initialize()
    initialized = time.perf_counter() - session.started
    tools = len(session.request("tools/list")["tools"])
    listed = time.perf_counter() - session.started
    listed_cpu = session.cpu_seconds()
    name, arguments = server.first_call
    result = session.request("tools/call", {"name": name, "arguments": arguments})
    if result.get("isError"):
        raise RuntimeError(f"{name}: {result['content'][0]['text']}")
    first_call = time.perf_counter() - session.started
    rss = session.peak_rss_mib()
    time.sleep(SETTLE_S)
    tree_cpu, tree_rss, tree_pss = session.tree()
    session.close()
    return Sample(initialized, listed, listed_cpu, first_call, rss, tools, tree_cpu, tree_rss, tree_pss)


def measure(servers: dict[str, Server], runs: int) -> dict[str, Sample]:
    # Bytecode is written in the warm-up round even where the environment turns that off.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for server in servers.values():
        start_once(server, env)
    samples: dict[str, list[Sample]] = {name: [] for name in servers}
    for _ in range(runs):
        for name, server in servers.items():
            samples[name].append(start_once(server, env))
    return {
        name: Sample(*(statistics.median(column) for column in zip(*rows, strict=True)))
        for name, rows in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--time-server", help="command of the reference mcp-server-time (default: on PATH)")
    parser.add_argument("--write", action="store_true", help=f"write the figures to {RESULTS.name}")
    args = parser.parse_args()
    first_call = ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"})
    servers = {
        "bare MCPServer (1 tool)": Server([sys.executable, str(HERE / "bare_server.py")], ("echo", {"text": "x"})),
        "vllm-caching-mcp": Server([sys.executable, "-m", "vllm_caching_mcp.serve"], first_call),
        "zygote after the SDK": Server([sys.executable, "-m", "vllm_caching_mcp.mcp_server"], first_call),
    }
    time_server = args.time_server or shutil.which("mcp-server-time")
    if time_server:
        servers["mcp-server-time (reference)"] = Server([time_server], ("get_current_time", {"timezone": "UTC"}))
    else:
        print("mcp-server-time: not installed, skipped (pip install mcp-server-time, or pass --time-server)")
    results = measure(servers, args.runs)
    bare = results["bare MCPServer (1 tool)"]
    python = sys.version.split()[0]
    print(f"cold start, median of {args.runs} alternating runs after one untimed round (Python {python})")
    print(
        f"{'server':28} {'tools':>5} {'initialize':>10} {'tools/list':>10} {'× bare':>6} "
        f"{'CPU':>7} {'× bare':>6} {'1st call':>8} {'× bare':>6} {'peak RSS':>9} {'× bare':>6}"
    )
    for name, r in results.items():
        print(
            f"{name:28} {r.tools:5.0f} {r.initialized * 1000:8.0f}ms {r.listed * 1000:8.0f}ms "
            f"{r.listed / bare.listed:5.2f}× {r.listed_cpu * 1000:5.0f}ms {r.listed_cpu / bare.listed_cpu:5.2f}× "
            f"{r.first_call * 1000:6.0f}ms {r.first_call / bare.first_call:5.2f}× "
            f"{r.peak_rss:6.1f}MiB {r.peak_rss / bare.peak_rss:5.2f}×"
        )
    print(f"\nthe whole process tree {SETTLE_S:g} s after the first call")
    print(f"{'server':28} {'CPU':>7} {'× bare':>6} {'RSS sum':>9} {'× bare':>6} {'PSS sum':>9} {'× bare':>6}")
    for name, r in results.items():
        print(
            f"{name:28} {r.tree_cpu * 1000:5.0f}ms {r.tree_cpu / bare.tree_cpu:5.2f}× "
            f"{r.tree_rss:6.1f}MiB {r.tree_rss / bare.tree_rss:5.2f}× "
            f"{r.tree_pss:6.1f}MiB {r.tree_pss / bare.tree_pss:5.2f}×"
        )
    if args.write:
        RESULTS.write_text(json.dumps(_figures(results, args.runs), indent=2) + "\n", encoding="utf-8")
    return 0


def _figures(results: dict[str, Sample], runs: int) -> dict[str, Any]:
    """Each server's medians and its ratios to the bare server of the same run, rounded as printed."""
    bare = results["bare MCPServer (1 tool)"]
    rows = {}
    for name, r in results.items():
        rows[name] = {
            "tools_list_ms": round(r.listed * 1000),
            "tools_list_x_bare": round(r.listed / bare.listed, 2),
            "tools_list_cpu_x_bare": round(r.listed_cpu / bare.listed_cpu, 2),
            "first_call_ms": round(r.first_call * 1000),
            "first_call_x_bare": round(r.first_call / bare.first_call, 2),
            "peak_rss_mib": round(r.peak_rss, 1),
            "peak_rss_x_bare": round(r.peak_rss / bare.peak_rss, 2),
            "tree_cpu_x_bare": round(r.tree_cpu / bare.tree_cpu, 2),
            "tree_rss_mib": round(r.tree_rss, 1),
            "tree_rss_x_bare": round(r.tree_rss / bare.tree_rss, 2),
            "tree_pss_mib": round(r.tree_pss, 1),
            "tree_pss_x_bare": round(r.tree_pss / bare.tree_pss, 2),
        }
    return {"runs": runs, "python": sys.version.split()[0], "cores": os.cpu_count(), "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
