"""Where memory goes under streamable-HTTP load: the Python heap (tracemalloc) and RSS, round by round.

    python benchmarks/bench_http_memory.py [--clients 20] [--calls 800] [--rounds 3]

bench_http_load.py sees RSS and PSS only, which move with the allocator's arenas as well as with
live objects. This runs the real server (`serve_http`, stateless, loopback) on a thread of this
process and the load (tests/http_load.py) from the main thread, so tracemalloc sees every
allocation the server keeps. The server is built without worker processes, so the offline tools
answer on its threads, their allocations in view too (the real server runs them in workers; see
bench_http_load.py for the memory of that process tree). After an untimed warm-up round it
records, after each round, the bytes tracemalloc counts as live and RSS, then prints the sites
whose live bytes grew most from the first round to the last. A leak is live bytes growing round
after round in proportion to the calls; the baseline is the first measured round of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_http_load import free_port  # noqa: E402
from stdio_session import memory_mib  # noqa: E402

import http_load  # noqa: E402
from vllm_caching_mcp import mcp_server  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    options = mcp_server.http_options(
        mcp_server.argument_parser().parse_args(["--transport", "streamable-http", "--port", str(port)]), {}
    )
    server = mcp_server.build_server(defer=False)
    sock = mcp_server.listen(options.host, options.port)
    threading.Thread(target=mcp_server.serve_http, args=(server, options, sock), daemon=True).start()
    time.sleep(1)
    logging.disable(logging.INFO)  # the access log would be most of what is allocated
    url = f"http://127.0.0.1:{port}/mcp"

    def load() -> http_load.LoadReport:
        report = asyncio.run(http_load.run_load(url, clients=args.clients, calls=args.calls))
        gc.collect()
        return report

    warm = load()
    tracemalloc.start(1)
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, http_load.__file__),
        tracemalloc.Filter(False, "*/httpx/*"),
        tracemalloc.Filter(False, "*/httpcore/*"),
    ]
    snapshots, errors = [], len(warm.errors)
    print(f"streamable HTTP in-process, {args.clients} clients, {args.calls} mixed calls a round")
    print(f"{'round':>5} {'errors':>6} {'live Python heap':>17} {'RSS':>10}")
    for number in range(1, args.rounds + 1):
        report = load()
        errors += len(report.errors)
        snapshots.append(tracemalloc.take_snapshot().filter_traces(ignore))
        live = tracemalloc.get_traced_memory()[0]
        print(f"{number:5d} {len(report.errors):6d} {live / 1024:13.1f} KiB {memory_mib(os.getpid()):6.1f} MiB")
    growth = snapshots[-1].compare_to(snapshots[0], "lineno")
    total = sum(s.size_diff for s in growth)
    calls = args.calls * (args.rounds - 1)
    print(
        f"live heap from round 1 to round {args.rounds}: {total / 1024:+.1f} KiB over {calls} calls "
        f"({total / max(calls, 1):+.1f} B a call); largest changes:"
    )
    for stat in sorted(growth, key=lambda s: -abs(s.size_diff))[:8]:
        frame = stat.traceback[0]
        print(f"  {stat.size_diff / 1024:+8.1f} KiB {stat.count_diff:+6d} blocks  {frame.filename}:{frame.lineno}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
