"""Which TCP ports a deployment's KV connectors bind, from its release, parallelism and settings.

The layouts are data (knowledge/ports.yaml, read in the wheels): a base that an environment variable
or an extra-config key overrides, and how each engine (data-parallel rank) and tensor-parallel rank
offsets it. ``deployment_ports`` answers "which ports do I open for TP 4 x DP 2 with NixlConnector on
0.33.0". A pure function: render_config opens the side-channel ports it gives, and the review checks
the ports of the objects around a server (and of the servers that share its host) against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from ..knowledge import Knowledge, PortLayout
from ..versions import Version, in_range, parse_version


class PortUse(BaseModel):
    port: int
    connector: str
    what: str
    dp_rank: int | None = Field(description="the engine (data-parallel rank) that binds it; null: one per deployment")
    tp_rank: int | None = Field(description="the tensor-parallel worker that binds it; null: one per engine")
    listener: str
    set_by: str = Field(description="the setting the base came from, or 'default'")
    layout: str = Field(description="the ports.yaml entry")
    sources: list[str]


def layouts_at(knowledge: Knowledge, connector: str, version: Version) -> list[PortLayout]:
    return [p for p in knowledge.port_layouts if p.connector == connector and in_range(p.versions, version)]


def deployment_ports(
    knowledge: Knowledge,
    version: Version | str,
    connectors: Iterable[str],
    *,
    tensor_parallel_size: int = 1,
    data_parallel_size: int = 1,
    env: Mapping[str, str] | None = None,
    extra_config: Mapping[str, Any] | None = None,
) -> list[PortUse]:
    """Every port the named connectors bind (or, for LMCache MP, connect to), engine by engine and rank by rank.

    ``env`` holds the engine's environment (VLLM_NIXL_SIDE_CHANNEL_PORT, ...), ``extra_config`` its
    kv_connector_extra_config; a value that is not a port number is refused with the setting named."""
    if tensor_parallel_size < 1 or data_parallel_size < 1:
        raise ValueError("tensor_parallel_size and data_parallel_size must be 1 or more")
    release = version if isinstance(version, Version) else parse_version(version)
    env, extra_config = env or {}, extra_config or {}
    found: list[PortUse] = []
    for connector in connectors:
        for layout in layouts_at(knowledge, connector, release):
            if (
                layout.unless
                and layout.unless.split(" ", 1)[0].removeprefix("kv_connector_extra_config.") in extra_config
            ):
                continue
            base, set_by = _base(layout, env, extra_config)
            found += _expand(layout, base, set_by, tensor_parallel_size, data_parallel_size)
    return found


def _base(layout: PortLayout, env: Mapping[str, str], extra_config: Mapping[str, Any]) -> tuple[int, str]:
    if layout.base_env and layout.base_env in env:
        raw, where = env[layout.base_env], layout.base_env
    elif layout.base_extra_config and layout.base_extra_config in extra_config:
        raw, where = extra_config[layout.base_extra_config], f"kv_connector_extra_config.{layout.base_extra_config}"
    else:
        return layout.base_default, "default"
    try:
        port = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{where}: {raw!r} is not a port number (1-65535)") from None
    if not 0 < port < 65536:
        raise ValueError(f"{where}: {port} is not a port number (1-65535)")
    return port, where


def _expand(layout: PortLayout, base: int, set_by: str, tp: int, dp: int) -> list[PortUse]:
    dp_stride = tp if layout.dp_stride == "tp" else int(layout.dp_stride)
    engines = range(dp) if dp_stride else [None]
    ranks = range(tp) if layout.tp_stride else [None]
    uses = []
    for dp_rank in engines:
        for tp_rank in ranks:
            port = base + (dp_rank or 0) * dp_stride + (tp_rank or 0) * layout.tp_stride
            if port >= 65536:
                raise ValueError(f"{set_by}: {base} leaves no room for {dp} engines x {tp} ranks below 65536")
            uses.append(
                PortUse(
                    port=port,
                    connector=layout.connector,
                    what=layout.what,
                    dp_rank=dp_rank,
                    tp_rank=tp_rank,
                    listener=layout.listener,
                    set_by=set_by,
                    layout=layout.id,
                    sources=list(layout.sources),
                )
            )
    return uses


def clashes(uses: Iterable[PortUse]) -> dict[int, list[PortUse]]:
    """Ports two uses bind on one host (same engine, or one per deployment): the review's 'a port used twice'."""
    by_port: dict[int, list[PortUse]] = {}
    for use in uses:
        by_port.setdefault(use.port, []).append(use)
    return {port: found for port, found in by_port.items() if len(found) > 1}
