"""Many concurrent MCP clients against the streamable HTTP server: a driver shared by a test and a benchmark.

The server is stateless, so every JSON-RPC request is one POST that any replica could answer;
the driver sends `tools/call` (a mix of the offline tools, with arguments a coding agent would
send) and `tools/list` from ``clients`` concurrent connections, and counts as an error anything
but an HTTP 200 carrying a JSON-RPC result that is not a tool error. Used by
tests/test_http_load.py (CI-sized) and benchmarks/bench_http_load.py (50 clients, 10,000 calls).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from typing import Any

import httpx

MIX: list[tuple[str, dict[str, Any]]] = [
    ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"}),
    ("check_version", {"version": "0.22.1", "compare_to": "0.23.0"}),
    ("choose_backend", {"version": "0.22.1", "tiers": ["cpu"], "model": "Qwen/Qwen3-32B"}),
    ("size_offload", {"model": "Qwen/Qwen3-32B", "version": "0.22.1", "tensor_parallel_size": 2}),
    ("review_deployment", {"documents": [{"name": "serve.sh", "text": "vllm serve m --kv-offloading-size 64"}]}),
    ("diagnose", {"symptoms": ["low_hit_rate"], "version": "0.22.1"}),
    ("check_bug_status", {"offline": True}),
    ("tools/list", {}),
]


@dataclasses.dataclass
class LoadReport:
    calls: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)
    latencies: list[float] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def _payload(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message from a JSON or an SSE (`data: ...`) response body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


async def run_load(url: str, *, clients: int, calls: int, headers: dict[str, str] | None = None) -> LoadReport:
    """Send ``calls`` requests from ``clients`` concurrent connections to the MCP endpoint ``url``."""
    report = LoadReport()
    counter = itertools.count()
    base_headers = {"accept": "application/json, text/event-stream", **(headers or {})}

    async def client() -> None:
        async with httpx.AsyncClient(timeout=60, headers=base_headers) as http:
            while (n := next(counter)) < calls:
                name, arguments = MIX[n % len(MIX)]
                start = time.perf_counter()
                try:
                    response = await http.post(url, json=_payload(n, name, arguments))
                    message = _result(response) if response.status_code == 200 else {}
                except (httpx.HTTPError, ValueError, IndexError) as exc:
                    report.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                    continue
                finally:
                    report.latencies.append(time.perf_counter() - start)
                    report.calls += 1
                if response.status_code != 200:
                    report.errors.append(f"{name}: HTTP {response.status_code}")
                elif "result" not in message or message["result"].get("isError"):
                    report.errors.append(f"{name}: {json.dumps(message)[:200]}")

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    report.seconds = time.perf_counter() - started
    return report
