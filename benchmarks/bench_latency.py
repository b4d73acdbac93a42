"""Per-tool latency over stdio: p50 and p99 of 1,000 `tools/call` requests for every offline tool.

    python benchmarks/bench_latency.py [--calls 1000]

One server process per run, warmed by one call per tool; each call is a request a coding agent
would send (arguments below). The baseline, measured in the same run against the same process,
is `tools/list` (a round trip that runs no tool code) and the bare server's trivial `echo` tool
(benchmarks/bare_server.py): the ratio shows what the tool itself costs over the SDK's round
trip. Goal (issue 10): p99 < 5 ms for every offline tool.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()

    bare = StdioSession([sys.executable, str(HERE / "bare_server.py")])
    bare.initialize()
    echo = timed(args.calls, lambda: call(bare, "echo", {"text": "x"}))
    bare.close()

    ours = StdioSession([sys.executable, "-m", "vllm_caching_mcp.mcp_server"])
    ours.initialize()
    listed = {t["name"]: t for t in ours.request("tools/list")["tools"]}
    offline = [n for n, t in listed.items() if not (t.get("annotations") or {}).get("openWorldHint")]
    missing = sorted(set(offline) - set(CALLS))
    if missing:
        print(f"no benchmark arguments for {', '.join(missing)}: add them to CALLS")
    round_trip = timed(args.calls, lambda: ours.request("tools/list"))
    rows = [(BASELINES[0], echo), (BASELINES[1], round_trip)]
    for name in offline:
        if name in CALLS:
            call(ours, name, CALLS[name])  # warm: first-call imports and caches
            rows.append((name, timed(args.calls, lambda name=name: call(ours, name, CALLS[name]))))
    ours.close()

    base_p50, _ = percentiles(echo)
    print(f"latency over stdio, {args.calls} calls each (Python {sys.version.split()[0]})")
    print(f"{'call':26} {'p50 ms':>8} {'p99 ms':>8} {'p50 × echo':>11} {'p99 < 5 ms':>11}")
    for label, samples in rows:
        p50, p99 = percentiles(samples)
        # The goal is for tools; tools/list carries every tool's schemas (~90 kB) and is shown for scale.
        ok = "—" if label in BASELINES else "yes" if p99 < 0.005 else "NO"
        print(f"{label:26} {p50 * 1000:8.2f} {p99 * 1000:8.2f} {p50 / base_p50:10.1f}× {ok:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
