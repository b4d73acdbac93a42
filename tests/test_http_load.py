"""Many agents on one server: concurrent clients over streamable HTTP get answers, never errors.

CI-sized (10 clients × 20 calls); benchmarks/bench_http_load.py runs the same driver at 50 clients
and 10,000 calls with memory before and after.
"""

from __future__ import annotations

import asyncio

from http_load import MIX, run_load


def test_ten_concurrent_clients_get_two_hundred_answers_without_an_error(http_server: str) -> None:
    report = asyncio.run(run_load(http_server, clients=10, calls=200))
    assert report.calls == 200
    assert report.errors == []
    assert len({name for name, _ in MIX}) >= 7  # every offline tool and tools/list took part
