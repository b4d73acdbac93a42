"""What a fixed set of realistic calls costs an agent's context: each answer's size over the wire.

    python benchmarks/bench_answer_sizes.py [--write]

Each call is one an operator's agent makes (a flag's status, an upgrade's changes, a backend for a
topology, a sizing, a render, a review of a small and of a 208-workload manifest, a diagnosis, the
bug and advisory snapshots, an image's metadata), made through the real SDK client against the server
in process; the size is the tools/call result as JSON (structured content and text together), as it
reaches the agent. Sizes, not times: one run is the measurement. With ``--write`` the median and the
maximum are written to ``benchmarks/answer_sizes.json``, which README's figures must match
(tests/test_answer_sizes.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from vllm_caching_mcp.mcp_server import build_server

RESULTS = Path(__file__).with_name("answer_sizes.json")
_REPLICA = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm-{0}}}
spec:
  selector: {{matchLabels: {{app: vllm-{0}}}}}
  template:
    metadata: {{labels: {{app: vllm-{0}}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.22.1
        args: ["--model", "m", "--kv-offloading-size", "64", "--cpu-offload-gb", "10"]
"""
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"}),
    ("check_version", {"name": "--disable-hybrid-kv-cache-manager", "version": "0.33.0"}),
    ("check_version", {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "lmcache_version": "0.5.6"}),
    ("check_version", {"name": "kv_buffer_size", "version": "0.33.0"}),
    ("check_version", {"name": "--enable-prefix-caching", "version": "0.13.0"}),
    ("check_version", {"version": "0.22.1", "compare_to": "0.23.0"}),
    ("check_version", {"version": "0.11.0", "compare_to": "0.33.0", "connectors": ["OffloadingConnector"]}),
    ("choose_backend", {"version": "0.22.1", "tiers": ["cpu"], "model": "llama-3.1-70b"}),
    ("choose_backend", {"version": "0.33.0", "tiers": ["cpu", "nvme"], "topology": {"nodes": 2}}),
    ("size_offload", {"model": "llama-3.1-70b", "gpu": "H200", "tensor_parallel_size": 8, "host_ram_gib": 2048}),
    ("size_offload", {"model": "deepseek-v3", "gpu": "B200", "tensor_parallel_size": 8, "version": "0.33.0"}),
    (
        "render_config",
        {"backend": "native_cpu", "model": "meta-llama/Llama-3.1-70B-Instruct", "version": "0.22.1",
         "sizes": {"kv_offloading_size_gib": 800}, "format": "kubernetes"},
    ),
    (
        "review_deployment",
        {"documents": [{"name": "serve.sh", "text": "vllm serve m --kv-offloading-size 64 --cpu-offload-gb 10\n"}]},
    ),
    ("review_deployment", {"documents": [{"name": "big.yaml", "text": "".join(map(_REPLICA.format, range(208)))}]}),
    ("diagnose", {"symptoms": ["ttft_high"], "version": "0.33.0"}),
    ("check_bug_status", {"offline": True}),
    ("check_advisories", {"offline": True, "version": "0.22.1"}),
    ("inspect_image", {"image": "v0.22.1", "offline": True}),
]  # fmt: skip


async def _sizes() -> list[int]:
    sizes = []
    async with Client(build_server()) as client:
        for name, arguments in CALLS:
            result = await client.call_tool(name, arguments)  # a refusal (a name that does not exist) counts too
            sizes.append(len(result.model_dump_json(by_alias=True, exclude_none=True).encode()))
    return sizes


def measure() -> dict[str, Any]:
    sizes = anyio.run(_sizes)
    return {"calls": len(sizes), "median_bytes": int(statistics.median(sizes)), "max_bytes": max(sizes), "sizes": sizes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write the figures to {RESULTS.name}")
    args = parser.parse_args()
    figures = measure()
    for (name, arguments), size in zip(CALLS, figures["sizes"], strict=True):
        print(f"{size:>9,} B  {name} {json.dumps(arguments)[:70]}")
    print(f"{figures['calls']} calls: median {figures['median_bytes']:,} B, max {figures['max_bytes']:,} B")
    if args.write:
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
