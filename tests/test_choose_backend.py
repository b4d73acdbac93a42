"""choose_backend, asked the way operators ask. One test per branch of the decision tree, with the
release boundaries the knowledge records (read from the wheels): native CPU offload shorthand
works from 0.14.0; OffloadingConnector supports HMA from 0.21.0; native multi-tier from 0.22.0
with the fs tier named fs_python in 0.22.x and fs from 0.23.0; obj from 0.23.0; p2p from 0.25.0;
MooncakeConnector from 0.13.0; NixlConnector HMA from 0.18.0."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from vllm_caching_mcp.advice.backend import ChooseBackendRequest, ChooseBackendResult, choose_backend
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.knowledge import SAFE_DUMPER, SAFE_LOADER, Knowledge, load_knowledge

HYBRID = {"hybrid_attention": True}


def ask(knowledge: Knowledge, **arguments: Any) -> ChooseBackendResult:
    return choose_backend(ChooseBackendRequest.model_validate(arguments), knowledge)


def decided(result: ChooseBackendResult) -> str:
    steps = [s for s in result.decision_path if s.decided]
    assert len(steps) == 1, result.decision_path
    return steps[0].question


def flags(result: ChooseBackendResult) -> dict[str, str | None]:
    return {r.name: r.value for r in result.requirements if r.kind == "flag"}


def env(result: ChooseBackendResult) -> dict[str, str | None]:
    return {r.name: r.value for r in result.requirements if r.kind == "env"}


# --- GPU only and CPU DRAM only ---------------------------------------------------------------


def test_i_only_want_gpu_prefix_caching_no_offload(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", tiers=[])
    assert result.recommendation.backend == "none"
    assert result.recommendation.tiers == []
    assert "GPU" in result.decision_path[-1].answer


def test_single_node_dram_tier_on_0_33_is_native_offload_shorthand_without_hma_flag(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", tiers=["cpu"])
    rec = result.recommendation
    assert (rec.backend, rec.connector, rec.spec, rec.tiers) == (
        "native_cpu",
        "OffloadingConnector",
        "CPUOffloadingSpec",
        ["cpu"],
    )
    assert flags(result) == {"--kv-offloading-size": "<GiB, total across ranks>", "--kv-offloading-backend": "native"}
    assert "CPU DRAM tier only" in decided(result)
    assert {a.backend for a in result.alternatives} >= {"lmcache", "lmcache_mp"}


def test_on_0_19_does_native_offload_need_disable_hybrid_kv_cache_manager(knowledge: Knowledge) -> None:
    # 0.19.0 is inside pitfall.hma-flag-missing-with-shorthand (<0.22.0) and OffloadingConnector has no HMA (<0.21.0).
    assert "--disable-hybrid-kv-cache-manager" in flags(ask(knowledge, version="0.19.0"))
    assert "--disable-hybrid-kv-cache-manager" not in flags(ask(knowledge, version="0.21.0"))


def test_on_0_13_the_native_shorthand_is_broken_so_use_kv_transfer_config(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.13.0")
    assert result.recommendation.backend == "native_cpu"
    assert "--kv-offloading-size" not in flags(result)
    assert "num_cpu_blocks" in (flags(result)["--kv-transfer-config"] or "")
    gate = next(g for g in result.version_gates if g.id == "feature.kv-offloading-cli-shorthand")
    assert gate.first_release == "0.14.0" and gate.present is False
    assert "pitfall.native-backend-before-0.14" in {a.id for a in result.avoid}


def test_hybrid_model_with_cpu_offload_on_0_20_2_cannot_keep_hma(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.20.2", traits=HYBRID)
    assert result.recommendation.backend == "none"
    gate = next(g for g in result.version_gates if g.name == "OffloadingConnector HMA support")
    assert gate.first_release == "0.21.0" and not gate.present
    assert any("0.21.0" in n for n in result.notes)
    assert any(a.backend == "native_cpu" and "0.21.0" in a.why_not for a in result.alternatives)


def test_hybrid_model_with_cpu_offload_on_0_21_uses_native(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.21.0", traits=HYBRID)
    assert result.recommendation.backend == "native_cpu"
    assert "--disable-hybrid-kv-cache-manager" not in flags(result)


# --- tiers beyond DRAM --------------------------------------------------------------------------


def test_nvme_tier_on_0_21_has_no_native_multi_tier_so_lmcache(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.21.0", tiers=["cpu", "nvme"])
    assert result.recommendation.backend == "lmcache"
    assert result.recommendation.connector == "LMCacheConnectorV1"
    assert result.recommendation.tiers == ["cpu", "disk"]
    gate = next(g for g in result.version_gates if g.id == "feature.native-multi-tier-offload")
    assert (gate.first_release, gate.present) == ("0.22.0", False)
    assert any(a.backend == "native_tiering" and "0.22.0" in a.why_not for a in result.alternatives)
    assert {"LMCACHE_LOCAL_DISK", "LMCACHE_MAX_LOCAL_DISK_SIZE", "LMCACHE_LOCAL_CPU"} <= set(env(result))
    # LMCache#2942 was closed by a bot without a fix; it still bites a disk tier.
    assert any(b.id == "LMCache/LMCache#2942" and b.status == "closed_without_fix" for b in result.bugs)


def test_nvme_tier_on_0_22_1_is_native_with_the_fs_python_tier_name(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.22.1", tiers=["cpu", "nvme"])
    rec = result.recommendation
    assert (rec.backend, rec.spec, rec.tiers) == ("native_tiering", "TieringOffloadingSpec", ["cpu", "fs_python"])
    assert "Tiers beyond CPU DRAM" in decided(result)


def test_nvme_tier_on_0_23_uses_the_fs_tier_name(knowledge: Knowledge) -> None:
    assert ask(knowledge, version="0.23.0", tiers=["cpu", "nvme"]).recommendation.tiers == ["cpu", "fs"]


def test_object_store_tier_on_0_22_1_is_not_native_yet(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.22.1", tiers=["cpu", "object_store"])
    assert result.recommendation.backend == "lmcache"
    gate = next(g for g in result.version_gates if g.id == "feature.tier-obj")
    assert (gate.first_release, gate.present) == ("0.23.0", False)
    on_23 = ask(knowledge, version="0.23.0", tiers=["cpu", "object_store"])
    assert on_23.recommendation.tiers == ["cpu", "obj"]
    assert any(r.name == "nixl" for r in on_23.requirements if r.kind == "package")


def test_hybrid_model_wanting_nvme_on_0_21_keeps_dram_only(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.21.0", tiers=["cpu", "nvme"], traits=HYBRID)
    assert result.recommendation.backend == "native_cpu"
    assert any(a.backend == "lmcache" and "3106" in a.why_not for a in result.alternatives)
    assert any("0.22.0" in n for n in result.notes)


# --- LMCache-only needs ------------------------------------------------------------------------


def test_i_need_cacheblend_so_lmcache_in_process(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", constraints={"lmcache_features": True})
    assert result.recommendation.backend == "lmcache"
    assert "LMCache-only features" in decided(result)
    assert "pitfall.lmcache-backend-means-mp-server" in {a.id for a in result.avoid}


def test_gpudirect_storage_goes_to_lmcache_gds(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", tiers=["cpu", "nvme"], constraints={"gpudirect_storage": True})
    assert result.recommendation.backend == "lmcache"
    assert result.recommendation.tiers == ["cpu", "gds"]
    assert {"LMCACHE_GDS_PATH", "LMCACHE_GDS_BUFFER_SIZE"} <= set(env(result))


def test_lmcache_features_with_a_hybrid_model_needs_mp_mode(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", constraints={"lmcache_features": True}, traits=HYBRID)
    assert result.recommendation.backend == "lmcache_mp"
    assert any(r.name == "lmcache>=0.4.7" for r in result.requirements)  # pin.lmcache-mp-hma
    assert {b.id for b in result.bugs} >= {"LMCache/LMCache#3106", "LMCache/LMCache#2845"}
    # Before 0.22.0 LMCacheMPConnector has no HMA support at all.
    assert ask(
        knowledge, version="0.21.0", constraints={"lmcache_features": True}, traits=HYBRID
    ).recommendation.backend != ("lmcache_mp")


# --- shared caches -------------------------------------------------------------------------------


def test_four_instances_on_one_node_share_a_cache_lmcache_mp(knowledge: Knowledge) -> None:
    topology = {"instances_per_node": 4, "share_cache_across_instances": True}
    result = ask(knowledge, version="0.33.0", topology=topology)
    assert result.recommendation.backend == "lmcache_mp"
    assert result.recommendation.connector == "LMCacheMPConnector"
    assert any(r.kind == "process" and "lmcache server" in r.name for r in result.requirements)


def test_cache_work_out_of_the_engine_process_is_lmcache_mp(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.30.0", constraints={"isolate_cache_from_engine": True})
    assert result.recommendation.backend == "lmcache_mp"


def test_shared_cache_on_one_node_without_extra_pods_is_a_shared_fs_tier(knowledge: Knowledge) -> None:
    topology = {"instances_per_node": 2, "share_cache_across_instances": True}
    result = ask(knowledge, version="0.28.0", topology=topology, constraints={"no_extra_pods": True})
    assert result.recommendation.backend == "native_tiering"
    assert result.recommendation.tiers == ["cpu", "fs"]
    # Up to 0.28.0 block hashes are seeded per process unless PYTHONHASHSEED is fixed.
    assert env(result).get("PYTHONHASHSEED") == "0"
    assert "PYTHONHASHSEED" not in env(
        ask(knowledge, version="0.29.0", topology=topology, constraints={"no_extra_pods": True})
    )


def test_peers_on_other_nodes_on_0_24_need_lmcache_p2p(knowledge: Knowledge) -> None:
    topology = {"nodes": 2, "share_cache_across_instances": True}
    result = ask(knowledge, version="0.24.0", topology=topology, tiers=["cpu", "peers"])
    assert result.recommendation.backend == "lmcache_p2p"
    names = set(env(result))
    assert {
        "LMCACHE_ENABLE_P2P",
        "LMCACHE_ENABLE_ASYNC_LOADING",
        "LMCACHE_P2P_HOST",
        "LMCACHE_TRANSFER_CHANNEL",
    } <= names
    gate = next(g for g in result.version_gates if g.id == "feature.tier-p2p")
    assert (gate.first_release, gate.present) == ("0.25.0", False)


def test_peers_on_0_27_use_the_native_p2p_tier_which_needs_pythonhashseed(knowledge: Knowledge) -> None:
    topology = {"nodes": 2, "share_cache_across_instances": True}
    result = ask(knowledge, version="0.27.0", topology=topology, tiers=["cpu", "peers"])
    assert result.recommendation.backend == "native_tiering"
    assert result.recommendation.tiers == ["cpu", "p2p"]
    assert env(result)["PYTHONHASHSEED"] == "0"  # feature.p2p-pythonhashseed-check: 0.27.0 – 0.28.0
    assert "VLLM_P2P_SIDE_CHANNEL_HOST" in env(result)
    on_29 = ask(knowledge, version="0.29.0", topology=topology, tiers=["cpu", "peers"])
    assert "PYTHONHASHSEED" not in env(on_29)


def test_peers_with_the_lmcache_controller_wanted_stay_on_lmcache_p2p(knowledge: Knowledge) -> None:
    topology = {"nodes": 3, "share_cache_across_instances": True}
    result = ask(
        knowledge, version="0.33.0", topology=topology, tiers=["cpu", "peers"], constraints={"lmcache_features": True}
    )
    assert result.recommendation.backend == "lmcache_p2p"


# --- prefill/decode disaggregation -----------------------------------------------------------------


def test_disaggregated_prefill_is_nixl_1p1d(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", pd_disaggregation=True, tiers=[], fabric="nvlink")
    rec = result.recommendation
    assert (rec.backend, rec.connector, rec.roles) == ("nixl_pd", "NixlConnector", ["kv_producer", "kv_consumer"])
    assert env(result)["UCX_TLS"] == "cuda_copy,cuda_ipc,sm,tcp"
    assert any(r.name == "nixl>=1.5.0" for r in result.requirements)  # pin.nixl-min-1-5 from 0.33.0
    assert "pitfall.nixl-side-channel-service-address" in {a.id for a in result.avoid}


def test_disaggregated_across_nodes_on_infiniband_is_mooncake(knowledge: Knowledge) -> None:
    result = ask(
        knowledge, version="0.33.0", pd_disaggregation=True, tiers=[], fabric="infiniband", topology={"nodes": 2}
    )
    assert result.recommendation.backend == "mooncake_pd"
    assert "RDMA" in decided(result)
    # MooncakeConnector first ships in 0.13.0.
    old = ask(knowledge, version="0.12.0", pd_disaggregation=True, tiers=[], fabric="roce", topology={"nodes": 2})
    assert old.recommendation.backend == "nixl_pd"
    assert any(g.id == "connector.mooncake" and g.first_release == "0.13.0" for g in old.version_gates)
    proxies = {
        version: next(
            r
            for r in ask(
                knowledge, version=version, pd_disaggregation=True, tiers=[], fabric="infiniband", topology={"nodes": 2}
            ).requirements
            if r.kind == "process"
        )
        for version in ("0.15.1", "0.33.0")
    }
    assert (
        proxies["0.15.1"].name == "P/D proxy (toy_proxy_server.py)"
        and proxies["0.15.1"].source == "proxy.mooncake-via-nixl-toy"
    )
    assert proxies["0.33.0"].value == "examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py"


def test_disaggregated_with_cpu_overflow_is_multiconnector(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.33.0", pd_disaggregation=True, tiers=["cpu"])
    assert result.recommendation.backend == "multi_nixl_offload"
    assert result.recommendation.connector == "MultiConnector"


def test_hybrid_model_with_pd_and_cpu_tier_on_0_20_drops_the_cpu_tier(knowledge: Knowledge) -> None:
    # OffloadingConnector and MultiConnector lack HMA before 0.21.0; one non-HMA child turns HMA off.
    result = ask(knowledge, version="0.20.2", pd_disaggregation=True, tiers=["cpu"], traits=HYBRID)
    assert result.recommendation.backend == "nixl_pd"
    assert any(a.backend == "multi_nixl_offload" for a in result.alternatives)


# --- models, bugs, input errors -------------------------------------------------------------------


def test_a_model_name_from_the_knowledge_gives_its_traits(knowledge: Knowledge) -> None:
    hybrid = next((m for m in knowledge.models if getattr(m, "linear_attention_layers", 0)), None)
    if hybrid is None:
        pytest.skip("models.yaml has no hybrid model yet")
    result = ask(knowledge, version="0.20.2", model=hybrid.name)
    assert result.model == hybrid.id and result.traits.hybrid_attention
    assert result.recommendation.backend == "none"


def test_native_offload_on_0_19_reports_the_dcp_crash_fixed_in_0_21(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.19.0")
    bug = next(b for b in result.bugs if b.id == "vllm-project/vllm#40259")
    assert bug.status == "fixed_in_later_release" and bug.fixed_in == "vllm 0.21.0"
    assert not any(b.id == "vllm-project/vllm#40259" for b in ask(knowledge, version="0.21.0").bugs)


def test_every_answer_cites_its_sources(knowledge: Knowledge) -> None:
    result = ask(knowledge, version="0.22.1", tiers=["cpu", "nvme"])
    ids = {c.id for c in result.citations}
    assert {"connector.offloading", "feature.native-multi-tier-offload", "recipe.native-tiering"} <= ids
    assert all(c.sources for c in result.citations)
    assert "fs_python" in result.summary()


def test_an_unknown_model_name_asks_for_traits(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^model: .*traits"):
        ask(knowledge, model="no-such-model-xyz")


def test_a_bad_version_names_the_field(knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^version: "):
        ask(knowledge, version="latest")


def test_an_unknown_tier_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"tiers"):
        ChooseBackendRequest.model_validate({"tiers": ["tape"]})


def test_the_tier_a_caller_wants_and_the_feature_that_ships_it_are_read_from_the_knowledge(
    knowledge_copy: Path,
) -> None:
    """recipes.yaml tier_types says which native tier serves a wanted tier and which feature gates it; no
    second copy of that map in code (here the fs tier is re-pointed at the obj tier's feature, from 0.23.0)."""
    path = knowledge_copy / "recipes.yaml"
    data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    next(t for t in data["tier_types"] if t["kind"] == "fs")["feature"] = "feature.tier-obj"
    path.write_text(yaml.dump(data, Dumper=SAFE_DUMPER, sort_keys=False))
    edited = load_knowledge(str(knowledge_copy))
    assert ask(edited, version="0.23.0", tiers=["cpu", "nvme"]).recommendation.backend == "native_tiering"
    result = ask(edited, version="0.22.1", tiers=["cpu", "nvme"])
    assert result.recommendation.backend == "lmcache"
    gate = next(g for g in result.version_gates if g.id == "feature.tier-obj")
    assert not gate.present and gate.effect == "the fs tier first ships in 0.23.0"


# --- the pitfalls to avoid: listed where their conditions hold, each with its reason ------------


def test_native_offload_on_0_21_lists_no_hma_flag_pitfall_since_the_connector_keeps_hma(knowledge: Knowledge) -> None:
    # pitfall.hma-flag-missing-with-shorthand needs a connector without HMA; OffloadingConnector has it from 0.21.0.
    result = ask(knowledge, version="0.21.0")
    ids = {a.id for a in result.avoid}
    assert "pitfall.hma-flag-missing-with-shorthand" not in ids
    # What depends on settings the choice does not make (host RAM, VLLM_USE_SIMPLE_KV_OFFLOAD) is a check, not an error.
    assert all(a.holds == "yes" for a in result.avoid if a.severity == "error")
    assert "avoid:" not in result.summary()


def test_a_pitfall_the_choice_cannot_settle_is_a_check_at_warning_with_what_decides_it(knowledge: Knowledge) -> None:
    # On 0.20.2 the shorthand's connector has no HMA: the rule holds exactly when the flag is left out.
    note = next(a for a in ask(knowledge, version="0.20.2").avoid if a.id == "pitfall.hma-flag-missing-with-shorthand")
    assert (note.holds, note.severity, note.rule_severity) == ("check", "warning", "error")
    assert note.check is not None and note.check.startswith("holds when --disable-hybrid-kv-cache-manager is not given")


def test_every_avoid_item_carries_the_rules_why_premises_and_sources(knowledge: Knowledge) -> None:
    for arguments in ({"version": "0.20.2"}, {"version": "0.33.0", "pd_disaggregation": True, "tiers": []}):
        result = ask(knowledge, **arguments)
        assert result.avoid
        for note in result.avoid:
            rule = knowledge.by_id[note.id]
            assert note.why == rule.why and note.why  # type: ignore[union-attr]
            assert note.premises == list(rule.premises)  # type: ignore[union-attr]
            assert note.sources == list(rule.sources) and note.sources


def test_the_per_rank_size_pitfall_needs_more_than_one_rank(knowledge: Knowledge) -> None:
    one_rank = ask(knowledge, version="0.33.0")
    assert "pitfall.kv-offloading-size-per-rank" not in {a.id for a in one_rank.avoid}
    eight = ask(knowledge, version="0.33.0", topology={"tensor_parallel_size": 8})
    note = next(a for a in eight.avoid if a.id == "pitfall.kv-offloading-size-per-rank")
    assert note.holds == "check"


def test_a_pitfall_about_a_connector_not_chosen_is_not_listed(knowledge: Knowledge) -> None:
    # pitfall.prefix-caching-disabled is about SimpleCPUOffloadConnector; the native tiers use OffloadingConnector.
    result = ask(knowledge, version="0.22.1", tiers=["cpu", "nvme"])
    assert "pitfall.prefix-caching-disabled" not in {a.id for a in result.avoid}


def test_a_pitfall_reachable_through_the_shorthand_is_a_check_naming_it(knowledge: Knowledge) -> None:
    # From 0.23.0 --kv-offloading-backend lmcache gives LMCacheMPConnector, not the in-process connector chosen here.
    result = ask(knowledge, version="0.33.0", constraints={"lmcache_features": True})
    note = next(a for a in result.avoid if a.id == "pitfall.lmcache-backend-means-mp-server")
    assert note.holds == "check" and note.check is not None and "--kv-offloading-backend lmcache" in note.check


def test_a_pitfall_the_choice_meets_outright_keeps_its_severity(knowledge: Knowledge) -> None:
    # Traits override the model's: told the model is not hybrid, the tool picks LMCacheConnectorV1, which the
    # rule says a Qwen3-Next model breaks.
    result = ask(
        knowledge,
        version="0.33.0",
        model="qwen3-next-80b-a3b",
        traits={"hybrid_attention": False, "sliding_window": False},
        constraints={"lmcache_features": True},
    )
    assert result.recommendation.backend == "lmcache"
    note = next(a for a in result.avoid if a.id == "pitfall.lmcache-v1-hybrid-model")
    assert (note.holds, note.severity, note.check) == ("yes", "error", None)
    assert f"avoid: {note.title}" in result.summary()


def test_no_internal_words_in_answers(knowledge: Knowledge) -> None:
    asked: list[dict[str, Any]] = [
        {"version": "0.33.0", "pd_disaggregation": True, "tiers": [], "fabric": "infiniband", "topology": {"nodes": 2}},
        {"version": "0.33.0", "pd_disaggregation": True, "tiers": [], "fabric": "nvlink"},
        {"version": "0.21.0", "tiers": ["cpu", "nvme"], "traits": HYBRID},
        {
            "version": "0.24.0",
            "tiers": ["cpu", "peers"],
            "topology": {"nodes": 2, "share_cache_across_instances": True},
        },
    ]
    for arguments in asked:
        result = ask(knowledge, **arguments)
        text = (result.model_dump_json() + result.summary()).lower()
        for word in ("the seed", "seed's", "decision tree", "issue 17"):
            assert word not in text, (arguments, word)


def _field_names(model: type[BaseModel]) -> set[str]:
    """Every field name in ``model`` and the models its fields hold, however nested."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(name)
        for inner in typing.get_args(info.annotation) or (info.annotation,):
            for leaf in typing.get_args(inner) or (inner,):
                if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                    names |= _field_names(leaf)
    return names


def test_the_summary_points_only_to_fields_the_result_has(knowledge: Knowledge) -> None:
    fields = _field_names(ChooseBackendResult)
    asked: list[dict[str, Any]] = [
        {"version": "0.13.0"},
        {"version": "0.20.2", "model": "gemma-3-27b"},
        {"version": "0.33.0", "constraints": {"lmcache_features": True}, "lmcache_version": "0.4.4"},
        {"version": "0.21.0", "tiers": []},
    ]
    for arguments in asked:
        summary = ask(knowledge, **arguments).summary()
        pointed = set(re.findall(r"`([a-z_]+)`", summary)) | set(re.findall(r"\bsee ([a-z_]+)\b", summary))
        assert pointed <= fields, (arguments, pointed - fields)


def test_a_hybrid_model_before_offloading_connector_has_hma_is_pointed_at_the_simple_connector(
    knowledge: Knowledge,
) -> None:
    """0.19.0-0.20.x: OffloadingConnector lacks SupportsHMA (from 0.21.0), SimpleCPUOffloadConnector has it
    (knowledge connector.simple-cpu-offload), selected by VLLM_USE_SIMPLE_KV_OFFLOAD=1 with the shorthand."""
    said = ask(knowledge, version="0.20.0", tiers=["cpu"], model="nemotron-h-8b").summary()
    assert "SimpleCPUOffloadConnector does" in said and "VLLM_USE_SIMPLE_KV_OFFLOAD=1" in said
    assert "no connector in this release" not in said
    before = ask(knowledge, version="0.18.1", tiers=["cpu"], model="nemotron-h-8b").summary()
    assert "no connector in this release offloads" in before


def test_a_pd_backend_names_the_ports_its_connector_binds(knowledge: Knowledge) -> None:
    """From 0.11.1 NIXL's side channel is one port per engine, VLLM_NIXL_SIDE_CHANNEL_PORT (5600) + the DP index;
    0.11.0 bound 5557 + DP rank × TP + TP rank (knowledge/ports.yaml)."""
    new = ask(knowledge, version="0.34.0", tiers=[], pd_disaggregation=True, topology={"nodes": 2})
    [port] = [r for r in new.requirements if r.kind == "port"]
    assert port.value == "VLLM_NIXL_SIDE_CHANNEL_PORT (default 5600) + DP index"
    assert port.source == "ports.nixl-side-channel-per-engine"
    old = ask(knowledge, version="0.11.0", tiers=[], pd_disaggregation=True, topology={"nodes": 2})
    ports = [r.value for r in old.requirements if r.kind == "port"]
    assert ports == ["VLLM_NIXL_SIDE_CHANNEL_PORT (default 5557) + DP rank × TP + TP rank"]
