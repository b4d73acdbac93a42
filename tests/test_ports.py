"""Ports a deployment's KV connectors bind, computed from knowledge/ports.yaml: the operator's "which ports do
I open for TP 4 x DP 2" at the releases where the layout changed."""

from __future__ import annotations

import pytest

from vllm_caching_mcp.advice.ports import clashes, deployment_ports
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return load_knowledge()


def _ports(knowledge: Knowledge, version: str, connector: str, **kwargs: object) -> list[int]:
    uses = deployment_ports(knowledge, version, [connector], tensor_parallel_size=4, data_parallel_size=2, **kwargs)  # type: ignore[arg-type]
    return [u.port for u in uses]


def test_nixl_opened_one_port_per_tp_rank_in_0_11_0_and_one_per_engine_from_0_11_1(knowledge: Knowledge) -> None:
    assert _ports(knowledge, "0.11.0", "NixlConnector") == list(range(5557, 5565))
    assert _ports(knowledge, "0.11.1", "NixlConnector") == [5600, 5601]
    uses = deployment_ports(knowledge, "0.33.0", ["NixlConnector"], tensor_parallel_size=4, data_parallel_size=2)
    assert [(u.dp_rank, u.tp_rank) for u in uses] == [(0, None), (1, None)]
    assert any(s.startswith("wheel:vllm==0.33.0:") for s in uses[0].sources)


def test_the_base_follows_its_environment_variable_and_a_bad_one_is_refused(knowledge: Knowledge) -> None:
    uses = deployment_ports(
        knowledge, "0.33.0", ["NixlConnector"], data_parallel_size=2, env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "6000"}
    )
    assert [u.port for u in uses] == [6000, 6001] and uses[0].set_by == "VLLM_NIXL_SIDE_CHANNEL_PORT"
    with pytest.raises(ValueError, match="VLLM_NIXL_SIDE_CHANNEL_PORT: 'six' is not a port number"):
        deployment_ports(knowledge, "0.33.0", ["NixlConnector"], env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "six"})
    with pytest.raises(ValueError, match="no room"):
        deployment_ports(
            knowledge, "0.11.0", ["NixlConnector"], tensor_parallel_size=8, env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "65530"}
        )


def test_mooncake_moved_from_a_port_per_rank_to_one_bootstrap_server_in_0_16_0(knowledge: Knowledge) -> None:
    assert _ports(knowledge, "0.13.0", "MooncakeConnector") == list(range(8998, 9006))
    assert _ports(knowledge, "0.16.0", "MooncakeConnector") == [8998]
    # A bootstrap server elsewhere: this deployment starts none.
    assert _ports(knowledge, "0.33.0", "MooncakeConnector", extra_config={"bootstrap_server_address": "h:1"}) == []
    assert _ports(knowledge, "0.12.0", "MooncakeConnector") == []  # no MooncakeConnector before 0.13.0


def test_lmcache_mp_uses_its_extra_config_port(knowledge: Knowledge) -> None:
    assert _ports(knowledge, "0.33.0", "LMCacheMPConnector") == [5555]
    assert _ports(knowledge, "0.33.0", "LMCacheMPConnector", extra_config={"lmcache.mp.port": 7000}) == [7000]
    # The default agrees with what the connector reads, as the engine schema extracted it.
    (entry,) = [e for e in knowledge.engine_schema.extra_config if e.key == "lmcache.mp.port"]
    (layout,) = [p for p in knowledge.port_layouts if p.id == "ports.lmcache-mp-server"]
    assert entry.default == str(layout.base_default)


def test_a_port_two_connectors_bind_is_a_clash(knowledge: Knowledge) -> None:
    uses = deployment_ports(
        knowledge, "0.33.0", ["NixlConnector", "LMCacheMPConnector"], env={"VLLM_NIXL_SIDE_CHANNEL_PORT": "5555"}
    )
    assert list(clashes(uses)) == [5555]
    assert clashes(deployment_ports(knowledge, "0.33.0", ["NixlConnector", "LMCacheMPConnector"])) == {}
