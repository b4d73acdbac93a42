"""The stdio server started the simpler ways the start-up cache was judged against (bench_startup_cache.py).

    python benchmarks/startup_variants.py lazy-knowledge     # no disk cache; the knowledge loads after tools/list
    python benchmarks/startup_variants.py pydantic-listing   # no disk cache; the listing built from the models

Both run with the start-up cache switched off (``VLLM_CACHING_MCP_NO_STARTUP_CACHE``, which the
tool worker processes inherit), then start the real server (`mcp_server.main`) with one piece
replaced, as a prototype of that way:

- lazy-knowledge: the server registers every tool with the SDK before it starts, as a start-up
  without a cached listing does, but does not load the knowledge (the workers load their own; the
  network tools load it on their first call). A broken knowledge file would no longer stop start-up.
- pydantic-listing: `tools/list` is answered from a listing built once from each tool's request and
  result models (`model_json_schema`), with no SDK registration and no knowledge; each tool
  registers on its first call or on the warm-up thread, as after a cached start-up. (The input
  schemas differ from the SDK's in their titles only; the output schemas are the same.)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp_types import Tool, ToolAnnotations

from vllm_caching_mcp import mcp_server
from vllm_caching_mcp.tools import all_tools


def _register_only(server: Any) -> None:
    server.register_all()


def _listing_from_models(inputs: object) -> list[Tool]:
    return [
        Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.request.model_json_schema(),
            output_schema=spec.result.model_json_schema(),
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=spec.open_world,
            ),
        )
        for spec in all_tools()
    ]


VARIANTS = {
    "lazy-knowledge": lambda: setattr(mcp_server._Server, "load", _register_only),
    "pydantic-listing": lambda: setattr(mcp_server, "_cached_listing", _listing_from_models),
}


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in VARIANTS:
        print(f"usage: startup_variants.py {{{','.join(VARIANTS)}}}", file=sys.stderr)
        return 2
    os.environ["VLLM_CACHING_MCP_NO_STARTUP_CACHE"] = "1"  # read when a cache is used; the workers inherit it
    VARIANTS[sys.argv[1]]()
    return mcp_server.main([])


if __name__ == "__main__":
    sys.exit(main())
