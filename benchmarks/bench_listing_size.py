"""How much a session's tools/list weighs, and what the compact schemas save.

    python benchmarks/bench_listing_size.py

An agent keeps the listed input schemas and descriptions in its context for the whole session;
this prints their size (compact JSON, bytes) as the SDK writes them and as the server lists
them, and the ratio, per tool and in total; and the listed total against the SDK's before issue 17
shortened the descriptions (which the SDK's column now shares). Sizes, not times: one run is the
measurement.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from vllm_caching_mcp.mcp_server import build_server

# The "SDK input+description" total of the nine tools on commit c64a307, before issue 17.
SDK_TOTAL_BEFORE_ISSUE_17 = 43_776


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def main() -> None:
    server = build_server(defer=False)
    raw = {t.name: t for t in anyio.run(MCPServer.list_tools, server)}
    listed = {t.name: t for t in anyio.run(server.list_tools)}
    rows = []
    for name, tool in listed.items():
        before = _size(raw[name].input_schema) + len((raw[name].description or "").encode())
        after = _size(tool.input_schema) + len((tool.description or "").encode())
        rows.append((name, before, after))
    print(f"{'tool':<20} {'SDK input+description':>22} {'listed':>8} {'ratio':>6}")
    for name, before, after in rows:
        print(f"{name:<20} {before:>22,} {after:>8,} {after / before:>6.2f}")
    total_before, total_after = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'total':<20} {total_before:>22,} {total_after:>8,} {total_after / total_before:>6.2f}")
    before_issue = total_after / SDK_TOTAL_BEFORE_ISSUE_17
    print(f"listed total against the SDK's {SDK_TOTAL_BEFORE_ISSUE_17:,} before issue 17: {before_issue:.2f}")
    full_before = _size([t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in raw.values()])
    full_after = _size([t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in listed.values()])
    print(f"whole tools/list result: {full_before:,} -> {full_after:,} bytes ({full_after / full_before:.2f})")


if __name__ == "__main__":
    main()
