"""What the start-up cache buys: the stdio server started with it, without it, and the simpler ways.

    python benchmarks/bench_startup_cache.py [--runs 9]

Each row is a fresh server process over stdio (medians of ``--runs``): spawn → `initialize` →
`tools/list` answered (wall and CPU time), then → one `tools/call` answered. Rows:

- bare: benchmarks/bare_server.py, an MCPServer with one trivial tool on the same SDK (the baseline);
- first start: our server with an empty start-up cache (a new directory each start), which it fills;
- later start: our server with the cache an earlier start wrote (the normal case after one start);
- cache disabled: ``VLLM_CACHING_MCP_NO_STARTUP_CACHE=1``, neither read nor written;
- listing cached, knowledge not: the tool listing from the cache, the knowledge from its YAML files
  in every process that loads it (no_knowledge_cache/sitecustomize.py), to see what each half buys;
- the simpler ways, without any disk cache (see startup_variants.py): the knowledge loaded after
  `tools/list` instead of before; the listing built from the tools' pydantic models once.

Then the CLI, whose every run loads the knowledge: `vllm-caching check-version` with the cache
warm and disabled, against `vllm-caching --version` (the same imports, no knowledge loaded).

One untimed round first (bytecode, page cache, the warm cache directory); then the servers take
turns within each round, so a busy spell on a shared machine slows all of them alike.
The issue's rule: keep the cache only if no simpler way gets within 1.1 × bare to `tools/list`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cold_start import Sample, Server, start_once

HERE = Path(__file__).resolve().parent
OUR_CALL = ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"})
CACHE_DIR_ENV = "VLLM_CACHING_MCP_CACHE_DIR"


def servers(scratch: Path) -> dict[str, tuple[Server, Callable[[], dict[str, str]]]]:
    """Each row: the command and a function giving the environment of one start."""
    # Bytecode is written in the warm-up round even where the environment turns that off.
    base = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VLLM_CACHING_MCP_NO_STARTUP_CACHE")
    }
    ours = [sys.executable, "-m", "vllm_caching_mcp.mcp_server"]
    warm = scratch / "warm"
    with_knowledge_uncached = os.pathsep.join(
        p for p in (str(HERE / "no_knowledge_cache"), base.get("PYTHONPATH")) if p
    )

    def fresh() -> dict[str, str]:
        return {**base, CACHE_DIR_ENV: tempfile.mkdtemp(dir=scratch, prefix="empty-")}

    def variant(name: str) -> Server:
        return Server([sys.executable, str(HERE / "startup_variants.py"), name], OUR_CALL)

    return {
        "bare MCPServer (1 tool)": (
            Server([sys.executable, str(HERE / "bare_server.py")], ("echo", {"text": "x"})),
            fresh,
        ),
        "first start (cache empty)": (Server(ours, OUR_CALL), fresh),
        "later start (cache warm)": (Server(ours, OUR_CALL), lambda: {**base, CACHE_DIR_ENV: str(warm)}),
        "cache disabled": (Server(ours, OUR_CALL), lambda: {**fresh(), "VLLM_CACHING_MCP_NO_STARTUP_CACHE": "1"}),
        "listing cached, knowledge not": (
            Server(ours, OUR_CALL),
            lambda: {**base, CACHE_DIR_ENV: str(scratch / "listing-only"), "PYTHONPATH": with_knowledge_uncached},
        ),
        "no cache, knowledge deferred": (variant("lazy-knowledge"), fresh),
        "no cache, listing from models": (variant("pydantic-listing"), fresh),
    }


def measure(rows: dict[str, tuple[Server, Callable[[], dict[str, str]]]], runs: int) -> dict[str, Sample]:
    for server, env in rows.values():
        start_once(server, env())
    samples: dict[str, list[Sample]] = {name: [] for name in rows}
    for _ in range(runs):
        for name, (server, env) in rows.items():
            samples[name].append(start_once(server, env()))
    return {
        name: Sample(*(statistics.median(column) for column in zip(*taken, strict=True)))
        for name, taken in samples.items()
    }


CLI_QUESTION = ["check-version", "--name", "--kv-offloading-size", "--version", "0.22.1"]


def cli_seconds(arguments: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one `vllm-caching` process (CPU: user + system of the child)."""
    walls, cpus = [], []
    for _ in range(runs + 1):  # the first run writes bytecode and the warm cache; not counted
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "vllm_caching_mcp.cli", *arguments], env=env, check=True, capture_output=True
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls[1:]), statistics.median(cpus[1:])


def cli_rows(scratch: Path, runs: int) -> dict[str, tuple[float, float]]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CACHING_MCP_NO_STARTUP_CACHE"}
    env[CACHE_DIR_ENV] = str(scratch / "cli")
    return {
        "vllm-caching --version (baseline)": cli_seconds(["--version"], env, runs),
        "check-version, cache warm": cli_seconds(CLI_QUESTION, env, runs),
        "check-version, cache disabled": cli_seconds(
            CLI_QUESTION, {**env, "VLLM_CACHING_MCP_NO_STARTUP_CACHE": "1"}, runs
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-cache-") as scratch:
        results = measure(servers(Path(scratch)), args.runs)
        cli = cli_rows(Path(scratch), args.runs)
    bare = results["bare MCPServer (1 tool)"]
    python = sys.version.split()[0]
    print(f"start-up cache, median of {args.runs} alternating starts after one untimed round (Python {python})")
    print(
        f"{'server':30} {'initialize':>10} {'tools/list':>10} {'× bare':>6} "
        f"{'CPU':>7} {'× bare':>6} {'1st call':>8} {'× bare':>6} {'peak RSS':>9}"
    )
    for name, r in results.items():
        print(
            f"{name:30} {r.initialized * 1000:8.0f}ms {r.listed * 1000:8.0f}ms {r.listed / bare.listed:5.2f}× "
            f"{r.listed_cpu * 1000:5.0f}ms {r.listed_cpu / bare.listed_cpu:5.2f}× "
            f"{r.first_call * 1000:6.0f}ms {r.first_call / bare.first_call:5.2f}× {r.peak_rss:6.1f}MiB"
        )
    print(f"\nthe CLI, one question per process, median of {args.runs}")
    print(f"{'command':36} {'wall':>7} {'× base':>6} {'CPU':>7} {'× base':>6}")
    base_wall, base_cpu = next(iter(cli.values()))
    for name, (wall, cpu) in cli.items():
        print(f"{name:36} {wall * 1000:5.0f}ms {wall / base_wall:5.2f}× {cpu * 1000:5.0f}ms {cpu / base_cpu:5.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
