"""On PYTHONPATH, every process of the server (the tool worker processes too) loads the knowledge from
its YAML files at each start, while the tool listing stays cached: bench_startup_cache.py's row
"listing cached, knowledge not". A benchmark prototype only."""

from vllm_caching_mcp import startup_cache

_load_or_build = startup_cache.load_or_build


def _listing_only(name, inputs, expected, build):  # type: ignore[no-untyped-def]
    return build() if name == "knowledge" else _load_or_build(name, inputs, expected, build)


startup_cache.load_or_build = _listing_only
