"""Per-tool latency over stdio: p50 and p99 of 1,000 `tools/call` requests for every offline call.

    python benchmarks/bench_latency.py [--calls 1000] [--write]

One server process per run, warmed by one call per tool; each call is a request a coding agent
would send (arguments below): every offline tool, and the network tools asked with `offline: true`
(the stored snapshot, nothing sent). The baseline, measured in the same run against the same
process, is `tools/list` (a round trip that runs no tool code) and the bare server's trivial `echo`
tool (benchmarks/bare_server.py): the ratio shows what the tool itself costs over the SDK's round
trip. Goal (issue 29): p99 ≤ 10 ms for every offline call. With ``--write`` the figures go to
``latency.json``, which README's figures must agree with (tests/test_performance_figures.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from stdio_session import StdioSession  # noqa: E402

REPO = HERE.parent
MANIFEST = (REPO / "tests" / "data" / "deployments" / "tiered-fs-deployment.yaml").read_text(encoding="utf-8")
METRICS = (
    "# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total 1000\n"
    "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total 120\n"
    "# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total 40\n"
)
CALLS: dict[str, dict[str, Any]] = {
    "check_version": {"name": "--kv-offloading-size", "version": "0.22.1"},
    "choose_backend": {"version": "0.22.1", "tiers": ["cpu", "nvme"], "model": "Qwen/Qwen3-32B"},
    "size_offload": {"model": "Qwen/Qwen3-32B", "version": "0.22.1", "tensor_parallel_size": 2, "host_ram_gib": 1024},
    "render_config": {
        "backend": "native_cpu",
        "model": "Qwen/Qwen3-32B",
        "version": "0.22.1",
        "sizes": {"kv_offloading_size_gib": 200},
        "format": "kubernetes",
    },
    "review_deployment": {"documents": [{"name": "deploy.yaml", "text": MANIFEST}], "version": "0.22.1"},
    "diagnose": {"symptoms": ["offload_does_not_help"], "version": "0.22.1", "metrics_before": METRICS},
}
# The network tools, asked for the stored snapshot: no request is sent, so they are offline calls too.
OFFLINE_NETWORK_CALLS: dict[str, dict[str, Any]] = {
    "check_bug_status": {"offline": True, "version": "0.22.1"},
    "check_advisories": {"offline": True, "version": "0.22.1"},
    "inspect_image": {"image": "v0.22.1", "offline": True},
}
RESULTS = HERE / "latency.json"
GOAL_P99_S = 0.010


BASELINES = ("bare echo (baseline)", "tools/list (round trip)")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def timed(calls: int, send: Callable[[], Any]) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        send()
        out.append(time.perf_counter() - start)
    return out


def call(session: StdioSession, name: str, arguments: dict[str, Any]) -> None:
    result = session.request("tools/call", {"name": name, "arguments": arguments})
    if result.get("isError"):
        raise RuntimeError(f"{name}: {result['content'][0]['text']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help=f"write the figures to {RESULTS.name}")
    args = parser.parse_args()

    bare = StdioSession([sys.executable, str(HERE / "bare_server.py")])
    bare.initialize()
    echo = timed(args.calls, lambda: call(bare, "echo", {"text": "x"}))
    bare.close()

    ours = StdioSession([sys.executable, "-m", "vllm_caching_mcp.mcp_server"])
    ours.initialize()
    listed = {t["name"]: t for t in ours.request("tools/list")["tools"]}
    offline = [n for n, t in listed.items() if not (t.get("annotations") or {}).get("openWorldHint")]
    calls = {**CALLS, **OFFLINE_NETWORK_CALLS}
    missing = sorted((set(offline) | set(OFFLINE_NETWORK_CALLS)) - set(calls) | set(calls) - set(listed))
    if missing:
        print(f"no benchmark arguments for {', '.join(missing)}, or no such tool: fix CALLS")
    round_trip = timed(args.calls, lambda: ours.request("tools/list"))
    rows = [(BASELINES[0], echo), (BASELINES[1], round_trip)]
    for name, arguments in calls.items():
        if name in listed:
            call(ours, name, arguments)  # warm: first-call imports and caches
            label = f"{name} (offline)" if name in OFFLINE_NETWORK_CALLS else name
            rows.append((label, timed(args.calls, lambda name=name, arguments=arguments: call(ours, name, arguments))))
    ours.close()

    base_p50, _ = percentiles(echo)
    print(f"latency over stdio, {args.calls} calls each (Python {sys.version.split()[0]})")
    print(f"{'call':30} {'p50 ms':>8} {'p99 ms':>8} {'p50 × echo':>11} {'p99 ≤ 10 ms':>12}")
    figures: dict[str, dict[str, float]] = {}
    for label, samples in rows:
        p50, p99 = percentiles(samples)
        figures[label] = {"p50_ms": round(p50 * 1000, 2), "p99_ms": round(p99 * 1000, 2)}
        # The goal is for tools; tools/list carries every tool's schemas and is shown for scale.
        ok = "—" if label in BASELINES else "yes" if p99 <= GOAL_P99_S else "NO"
        print(f"{label:30} {p50 * 1000:8.2f} {p99 * 1000:8.2f} {p50 / base_p50:10.1f}× {ok:>12}")
    if args.write:
        tools = [v for k, v in figures.items() if k not in BASELINES]
        stored = {
            "calls": args.calls,
            "python": sys.version.split()[0],
            "rows": figures,
            "max_tool_p99_ms": max(t["p99_ms"] for t in tools),
        }
        RESULTS.write_text(json.dumps(stored, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
