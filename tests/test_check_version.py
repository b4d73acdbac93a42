"""check_version, asked the way operators ask. Expected values are the released code's, not memory's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from vllm_caching_mcp.advice.check_version import (
    BRIEF_BYTES,
    CheckVersionRequest,
    CheckVersionResult,
    EntryStatus,
    check_version,
)
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool


def ask(**arguments: Any) -> CheckVersionResult:
    result = run_tool("check_version", arguments)
    assert isinstance(result, CheckVersionResult)
    return result


def one(name: str, version: str | None = None, **extra: Any) -> EntryStatus:
    result = ask(name=name, version=version, **extra)
    assert len(result.matches) == 1, [m.id for m in result.matches]
    return result.matches[0]


# --- connectors -----------------------------------------------------------------------------


def test_on_0_20_2_does_the_native_offloading_connector_support_hma() -> None:
    assert one("OffloadingConnector", "0.20.2").hma_support == "no"


def test_on_0_21_0_native_offload_supports_hma() -> None:
    assert one("OffloadingConnector", "0.21.0").hma_support == "yes"


def test_is_p2p_nccl_connector_still_there_in_0_24() -> None:
    status = one("P2pNcclConnector", "0.24.0")
    assert status.status == "removed" and status.removed == "0.24.0"
    assert one("P2pNcclConnector", "0.23.0").status == "available"


def test_nixl_gains_hma_in_0_18() -> None:
    assert one("NixlConnector", "0.17.1").hma_support == "no"
    assert one("NixlConnector", "0.18.0").hma_support == "yes"


def test_lmcache_in_process_connector_never_supports_hma() -> None:
    for version in ("0.11.0", "0.22.1", "0.33.0"):
        assert one("LMCacheConnectorV1", version).hma_support == "no"


def test_lmcache_mp_connector_hma_depends_on_the_lmcache_package_from_0_22() -> None:
    assert one("LMCacheMPConnector", "0.21.0").hma_support == "no"
    assert one("LMCacheMPConnector", "0.22.0").hma_support == "conditional"


def test_multiconnector_supports_hma_only_if_every_child_does() -> None:
    assert one("MultiConnector", "0.21.0").hma_support == "conditional"


def test_nixl_push_and_pull_variants_arrive_in_0_24() -> None:
    assert one("NixlPushConnector", "0.23.0").status == "not_yet"
    assert one("NixlPullConnector", "0.24.0").status == "available"


def test_simple_cpu_offload_connector_appears_in_0_19() -> None:
    assert one("SimpleCPUOffloadConnector", "0.18.1").status == "not_yet"


# --- native multi-tier offload ----------------------------------------------------------------


def test_can_i_use_native_multi_tier_offload_on_0_21() -> None:
    status = one("feature.native-multi-tier-offload", "0.21.0")
    assert status.status == "not_yet" and status.introduced == "0.22.0"


def test_on_0_22_1_the_filesystem_tier_is_called_fs_python() -> None:
    assert one("secondary_tiers[].type", "0.22.1").accepted_values == ["example", "fs_python"]
    assert "fs" in (one("secondary_tiers[].type", "0.23.0").accepted_values or [])


def test_p2p_tier_arrives_in_0_25_not_0_22() -> None:
    assert one("feature.tier-p2p", "0.24.0").status == "not_yet"
    assert "p2p" in (one("secondary_tiers[].type", "0.25.0").accepted_values or [])


def test_object_store_tier_is_there_in_0_23() -> None:
    assert one("feature.tier-obj", "0.23.0").status == "available"


def test_per_request_offload_and_load_caps() -> None:
    assert one("max_offload_tokens", "0.22.1").status == "not_yet"
    assert one("max_offload_tokens", "0.23.0").status == "available"
    assert one("max_load_tokens", "0.30.0").status == "not_yet"


def test_cpu_bytes_to_use_is_bytes_in_total_across_ranks() -> None:
    status = one("spec.cpu-bytes-to-use", "0.33.0")
    assert status.unit == "bytes" and status.scope == "total_across_ranks"
    assert status.introduced == "0.14.0"


def test_offload_prompt_only_default_on_0_23() -> None:
    assert one("offload_prompt_only", "0.23.0").default is True


def test_p2p_side_channel_env_defaults_since_0_26() -> None:
    assert one("VLLM_P2P_SIDE_CHANNEL_PORT", "0.26.0").default == 5710
    assert one("VLLM_P2P_SIDE_CHANNEL_HOST", "0.25.1").status == "not_yet"


def test_nixl_side_channel_host_defaults_to_localhost() -> None:
    assert one("VLLM_NIXL_SIDE_CHANNEL_HOST", "0.33.0").default == "localhost"


def test_p2p_hash_seed_check_existed_only_in_0_27_and_0_28() -> None:
    assert one("feature.p2p-pythonhashseed-check", "0.27.0").status == "available"
    assert one("feature.p2p-pythonhashseed-check", "0.29.0").status == "removed"


# --- metrics ----------------------------------------------------------------------------------


def test_old_gpu_prefix_cache_metric_is_gone_in_0_12() -> None:
    assert one("vllm:gpu_prefix_cache_hits", "0.12.0").status == "removed"
    assert one("vllm:prefix_cache_hits_total", "0.11.0").status == "available"


def test_external_prefix_cache_metrics_start_in_0_11_1() -> None:
    assert one("vllm:external_prefix_cache_hits", "0.11.0").status == "not_yet"
    assert one("vllm:external_prefix_cache_hits_total", "0.11.1").status == "available"


def test_kv_offload_stores_skipped_starts_in_0_24() -> None:
    assert one("vllm:kv_offload_stores_skipped", "0.23.0").status == "not_yet"


def test_kv_offload_config_info_is_new_in_0_33() -> None:
    assert one("vllm:kv_offload_config_info", "0.32.0").status == "not_yet"


# --- LMCache settings --------------------------------------------------------------------------


def test_lmcache_max_local_cpu_size_is_gib_per_process() -> None:
    status = one("LMCACHE_MAX_LOCAL_CPU_SIZE")
    assert status.unit == "GiB" and status.scope == "per_process" and status.component == "lmcache"


def test_lmcache_use_experimental_does_nothing_on_current_lmcache() -> None:
    status = one("LMCACHE_USE_EXPERIMENTAL", lmcache_version="0.5.6")
    assert status.status == "removed" and status.removed == "0.3.12"


def test_cufile_buffer_size_was_replaced_in_lmcache_0_4_4() -> None:
    assert one("LMCACHE_CUFILE_BUFFER_SIZE", lmcache_version="0.4.4").status == "removed"
    assert one("LMCACHE_GDS_BUFFER_SIZE", lmcache_version="0.4.3").status == "not_yet"


def test_local_disk_path_sharding_needs_lmcache_0_4_4() -> None:
    assert one("LMCACHE_LOCAL_DISK_PATH_SHARDING", lmcache_version="0.4.3").status == "not_yet"


def test_lmcache_answer_names_the_lmcache_release_it_assumed() -> None:
    result = ask(name="LMCACHE_LOCAL_CPU")
    assert result.lmcache_context is not None and result.lmcache_context.assumed
    assert result.lmcache_context.version == result.lmcache_context.newest_known


# --- two releases --------------------------------------------------------------------------------


def test_what_changes_for_kv_caching_from_0_22_1_to_0_23_0() -> None:
    result = ask(version="0.22.1", compare_to="0.23.0")
    assert result.direction == "upgrade"
    ids = {e.id for c in result.changes for e in c.entries}
    assert {"feature.tier-obj", "feature.per-request-max-offload-tokens", "spec.offload-prompt-only"} <= ids
    assert all(c.version == "0.23.0" for c in result.changes)


def test_upgrade_from_0_23_to_0_24_lists_the_p2p_nccl_removal() -> None:
    events = ask(version="0.23.0", compare_to="0.24.0", events=True).changes_between
    assert any(e.id == "connector.p2p-nccl" and e.event == "removed" for e in events)


def test_downgrade_lists_the_same_changes_marked_as_downgrade() -> None:
    up = ask(version="0.27.1", compare_to="0.33.0", events=True)
    down = ask(version="0.33.0", compare_to="0.27.1", events=True)
    assert down.direction == "downgrade"
    assert [e.id for e in up.changes_between] == [e.id for e in down.changes_between]
    assert up.changes_between


def test_compare_one_name_between_two_releases() -> None:
    result = ask(name="secondary_tiers[].type", version="0.22.1", compare_to="0.25.0", events=True)
    assert [e.version for e in result.changes_between] == ["0.23.0", "0.25.0"]
    assert result.matches_at_compare[0].accepted_values == ["example", "fs", "p2p", "obj"]


# --- versions and names ------------------------------------------------------------------------


def test_no_version_assumes_the_newest_and_says_so() -> None:
    result = ask(name="OffloadingConnector")
    assert result.version_context.assumed
    assert "newest release the knowledge covers" in result.version_context.warnings[0]


def test_a_version_newer_than_the_knowledge_gets_a_staleness_warning() -> None:
    result = ask(name="OffloadingConnector", version="0.99.0")
    assert any("newer than the newest release" in w for w in result.version_context.warnings)


def test_a_version_that_was_never_released_is_flagged() -> None:
    result = ask(name="OffloadingConnector", version="0.22.7")
    assert not result.version_context.is_known_release
    assert any("not a published release" in w for w in result.version_context.warnings)


def test_a_blank_version_counts_as_not_given() -> None:
    assert ask(name="OffloadingConnector", version=" ").version_context.assumed


@pytest.mark.parametrize("version", ["latest", "0.x", "v", "0.22.1; rm -rf /"])
def test_a_malformed_version_is_a_clear_error(version: str) -> None:
    with pytest.raises(ToolInputError, match=r"^version: .* is not a release version"):
        ask(name="OffloadingConnector", version=version)


def test_a_misspelling_gets_did_you_mean() -> None:
    with pytest.raises(ToolInputError, match=r"Did you mean: .*OffloadingConnector"):
        ask(name="OffloadingConector")


def test_a_question_without_a_name_or_second_version_is_an_error() -> None:
    with pytest.raises(ToolInputError, match=r"^name: "):
        ask(version="0.22.1")


def test_every_answer_cites_its_sources() -> None:
    status = one("OffloadingConnector", "0.33.0")
    assert status.citation.sources and status.citation.evidence == "wheel"


# --- CLI flags ---------------------------------------------------------------------------------


def test_kv_offloading_size_is_gib_in_total_across_ranks_since_0_11_1() -> None:
    status = one("--kv-offloading-size", "0.22.1")
    assert (status.status, status.introduced, status.unit, status.scope) == (
        "available",
        "0.11.1",
        "GiB",
        "total_across_ranks",
    )
    assert any(c.version == "0.23.0" for c in status.later_changes)


def test_kv_offloading_backend_accepts_native_and_lmcache_only() -> None:
    status = one("--kv-offloading-backend", "0.33.0")
    assert status.accepted_values == ["native", "lmcache"]
    assert status.default == "native"
    assert one("--kv-offloading-backend", "0.13.0").default is None


def test_on_0_12_the_hybrid_manager_flag_is_a_plain_boolean_and_from_0_13_auto() -> None:
    assert one("--disable-hybrid-kv-cache-manager", "0.12.0").default is False
    assert one("--disable-hybrid-kv-cache-manager", "0.13.0").default is None


def test_calculate_kv_scales_is_deprecated_in_0_19_and_gone_in_0_28() -> None:
    assert one("--calculate-kv-scales", "0.18.1").status == "available"
    assert one("--calculate-kv-scales", "0.27.1").status == "deprecated"
    status = one("--calculate-kv-scales", "0.28.0")
    assert status.status == "removed" and status.removed == "0.28.0"


def test_cpu_offload_gb_is_weights_per_gpu_not_kv() -> None:
    status = one("--cpu-offload-gb", "0.33.0")
    assert status.scope == "per_gpu" and status.unit == "GiB"
    assert "weight" in status.summary.lower()


def test_gpu_memory_utilization_default_moved_to_0_92_in_0_20() -> None:
    assert one("--gpu-memory-utilization", "0.19.1").default == 0.9
    assert one("--gpu-memory-utilization", "0.20.0").default == 0.92


def test_max_model_len_auto_needs_0_14() -> None:
    assert "auto" not in str(one("--max-model-len", "0.13.0").accepted_values)
    assert "auto" in str(one("--max-model-len", "0.14.0").accepted_values)


def test_fastsafetensors_is_a_load_format_already_in_0_11() -> None:
    assert "fastsafetensors" in (one("--load-format", "0.11.0").accepted_values or [])


def test_swap_space_is_removed_in_0_18() -> None:
    assert one("--swap-space", "0.18.0").status == "removed"


def test_xxhash_prefix_hashing_arrives_in_0_13() -> None:
    assert "xxhash" not in (one("--prefix-caching-hash-algo", "0.12.0").accepted_values or [])
    assert "xxhash" in (one("--prefix-caching-hash-algo", "0.13.0").accepted_values or [])


def test_negated_flag_finds_the_flag() -> None:
    assert one("--no-enable-prefix-caching", "0.25.1").id == "flag.enable-prefix-caching"


def test_a_dashed_name_that_is_only_a_metric_is_not_taken_for_a_flag() -> None:
    with pytest.raises(ToolInputError, match=r"vllm:kv_offload_size is a metric, not a flag"):
        ask(name="--kv-offload-size")


def test_block_size_names_both_the_flag_and_the_offload_key() -> None:
    ids = {m.id for m in ask(name="block_size").matches}
    assert ids == {"flag.block-size", "spec.block-size"}
    assert {m.id for m in ask(name="--block-size").matches} == {"flag.block-size"}


def test_every_gate_in_the_knowledge_answers_right_on_both_sides_of_its_boundary() -> None:
    knowledge = load_knowledge()
    checked = 0
    for entry in knowledge.gated():
        releases = knowledge.release_versions(entry.component)
        for field, expected in (("introduced", "available"), ("deprecated", "deprecated"), ("removed", "removed")):
            boundary = getattr(entry, field)
            if boundary is None:
                continue
            at = boundary
            status = one(entry.id, **_version_argument(entry.component, str(at)))
            if field == "introduced" and entry.deprecated == boundary:
                expected = "deprecated"
            assert status.status == expected, (entry.id, field, boundary)
            earlier = [r for r in releases if r < at]
            if earlier:
                assert one(entry.id, **_version_argument(entry.component, str(earlier[-1]))).status != expected
            checked += 1
    assert checked > 100


def _version_argument(component: str, version: str) -> dict[str, str]:
    return {"lmcache_version": version} if component == "lmcache" else {"version": version}


def test_check_version_changes_neither_the_request_nor_the_knowledge() -> None:
    knowledge = load_knowledge()
    request = CheckVersionRequest(name="secondary_tiers[].type", version="0.22.1", compare_to="0.25.0")
    request_before, knowledge_before = copy.deepcopy(request.model_dump()), copy.deepcopy(knowledge.model_dump())
    first = check_version(request, knowledge)
    assert request.model_dump() == request_before
    assert knowledge.model_dump() == knowledge_before
    assert check_version(request, knowledge) == first


# --- any name: the inventories and the ranked search (issue 17) ------------------------------------


def test_an_environment_variable_no_release_reads_gets_a_definite_no_and_the_loader_flag() -> None:
    result = ask(name="VLLM_USE_FASTSAFETENSOR", version="0.33.0")
    assert not result.matches and not result.inventory_matches and result.not_found is not None
    assert "No vLLM release from 0.11.0 to 0.34.0 reads" in result.not_found.answer
    assert "--load-format fastsafetensors" in [s.name for s in result.not_found.suggestions]


def test_free_text_gets_ranked_suggestions_not_an_error() -> None:
    found = ask(name="hybrid kv cache manager").not_found
    assert found is not None and "--disable-hybrid-kv-cache-manager" in [s.name for s in found.suggestions[:3]]
    found = ask(name="fastsafetensors").not_found
    assert found is not None and found.suggestions[0].name == "--load-format fastsafetensors"


def test_a_class_name_is_found_in_the_inventory_with_its_releases() -> None:
    (match,) = ask(name="TieringOffloadingSpec", version="0.21.0").inventory_matches
    assert (match.kind, match.status, match.introduced) == ("class", "not_yet", "0.22.0")
    assert match.where == "vllm/v1/kv_offload/tiering/spec.py"
    assert ask(name="CPUOffloadingSpec", version="0.19.0").inventory_matches[0].status == "available"


def test_parallel_strategy_is_in_vllm_from_0_20_and_in_lmcache_from_0_4_4() -> None:
    result = ask(name="ParallelStrategy", version="0.33.0", lmcache_version="0.4.3")
    by_package = {m.package: m for m in result.inventory_matches}
    assert by_package["vllm"].introduced == "0.20.0" and by_package["vllm"].status == "available"
    assert by_package["lmcache"].introduced == "0.4.4" and by_package["lmcache"].status == "not_yet"


def test_an_untracked_serve_option_answers_from_the_cli_inventory() -> None:
    (match,) = ask(name="--enable-log-requests", version="0.33.0").inventory_matches
    assert match.kind == "cli_flag" and match.status == "available"


def test_an_untracked_lmcache_key_is_found_by_its_environment_variable() -> None:
    # The engine schema answers LMCache keys (with type and default); the name inventory's bare existence steps back.
    result = ask(name="LMCACHE_BLEND_CHECK_LAYERS")
    (match,) = result.schema_matches
    assert (
        match.kind == "lmcache_key" and match.env_name == "LMCACHE_BLEND_CHECK_LAYERS" and match.status == "available"
    )
    assert not [m for m in result.inventory_matches if m.kind == "lmcache_config"]


def test_a_misspelt_tracked_name_is_still_an_error_that_says_it_is_in_no_release() -> None:
    with pytest.raises(ToolInputError, match=r"not an option of `vllm serve` in any release.*Did you mean"):
        ask(name="--kv-offlaoding-size")


# --- coverage edges -------------------------------------------------------------------------------


def test_a_release_older_than_the_coverage_is_unknown_not_available() -> None:
    status = one("OffloadingConnector", "0.10.2")
    assert status.status == "unknown" and "older than 0.11.0" in status.answer
    assert one("--kv-offloading-size", "0.10.2").status == "not_yet"


def test_in_every_covered_release_is_not_said_of_an_entry_removed_later() -> None:
    for name, version, removed in (("P2pNcclConnector", "0.23.0", "0.24.0"), ("--swap-space", "0.17.1", "0.18.0")):
        answer = one(name, version).answer
        assert "every covered release" not in answer and f"removed in {removed}" in answer


def test_a_minor_line_is_taken_as_its_newest_patch_and_the_answer_says_so() -> None:
    result = ask(name="OffloadingConnector", version="v0.22")
    assert result.version_context.version == "0.22.1" and result.asked_as == "v0.22"
    assert result.summary().startswith("vLLM 0.22.1 (taken for 'v0.22': the newest 0.22.x release)")


def test_a_release_newer_than_the_knowledge_shows_in_the_status_line() -> None:
    result = ask(name="OffloadingConnector", version="0.99")
    assert "newer than 0.34.0" in result.matches[0].answer
    assert "newer than 0.34.0" in result.summary().splitlines()[0]


def test_a_deprecation_older_than_the_coverage_says_when_it_was() -> None:
    status = one("vllm:gpu_cache_usage_perc", "0.11.0")
    assert status.status == "deprecated" and status.deprecated == "0.9.2"
    assert "deprecated since 0.9.2, before the releases covered" in status.answer
    assert "deprecated in 0.3.0 or earlier" in one("LMCACHE_USE_EXPERIMENTAL", lmcache_version="0.3.1").answer


# --- compare_to as release notes ----------------------------------------------------------------


def test_compare_to_merges_one_upstream_change_into_one_entry_of_the_notes() -> None:
    result = ask(version="0.22.1", compare_to="0.23.0")
    assert result.change_summary[0].startswith(f"{len(result.changes)} changes (23 entries)")
    assert len(result.changes) <= 10
    lmcache = [c for c in result.changes if c.component == "lmcache"]
    assert len(lmcache) == 1
    assert {"connector.lmcache-mp", "flag.kv-offloading-backend"} <= {e.id for e in lmcache[0].entries}
    assert not result.changes_between  # the entry-level events only on request


def test_compare_to_filters_by_component_and_by_the_deployments_connectors() -> None:
    only = ask(version="0.20.2", compare_to="0.33.0", components=["lmcache"])
    assert only.changes and {c.component for c in only.changes} == {"lmcache"}
    native = ask(version="0.20.2", compare_to="0.33.0", connectors=["OffloadingConnector"])
    assert {c.component for c in native.changes} <= {"native_offload", "hma", "metrics", "flags"}
    with pytest.raises(ToolInputError, match=r"^connectors: no known KV connector"):
        ask(version="0.20.2", compare_to="0.33.0", connectors=["NoSuchConnector"])


def test_the_long_upgrade_answer_is_about_half_its_old_size() -> None:
    result = ask(version="0.20.2", compare_to="0.33.0")
    assert len(result.model_dump_json()) < 100_000  # 156 KB before the notes were grouped
    assert len(result.changes) < 120


def test_whether_the_release_images_carry_lmcache_is_answered_by_name() -> None:
    # Read in the release sdists: the release pipeline builds vllm/vllm-openai with INSTALL_KV_CONNECTORS=true.
    for name in ("INSTALL_KV_CONNECTORS", "lmcache in the vllm-openai image"):
        result = run_tool("check_version", {"name": name, "version": "0.33.0"})
        entry = result.matches[0]  # type: ignore[attr-defined]
        assert entry.id == "feature.release-image-kv-connectors" and entry.status == "available"
        assert "INSTALL_KV_CONNECTORS=true" in entry.summary and "not fixed by the vLLM tag" in entry.summary
        assert any(s.startswith("sdist:vllm==0.33.0:.buildkite/release-pipeline.yaml") for s in entry.citation.sources)


def test_a_one_name_answer_is_a_few_kilobytes(knowledge: Knowledge) -> None:
    """Every tracked name at three releases: each answer carried the whole advisory list (11-22 KB, 60-80 %
    of it the security block). Counted, with the change in force and the next one, the median is under
    4 KB and no answer reaches 8 KB; detail: full still gives everything."""
    sizes, over = [], []
    for name in sorted({s.name for s in knowledge.settings} | {c.name for c in knowledge.connectors}):
        for version in ("0.13.0", "0.22.1", "0.33.0"):
            result = run_tool("check_version", {"name": name, "version": version})
            size = result.structured_bytes() + len(result.summary().encode())
            sizes.append(size)
            # Over 4 KB only a name that several entries track (--block-size and the offload spec's block_size),
            # each given in brief, the schema's further readings counted.
            if size > BRIEF_BYTES:
                over.append((name, version, size))
                assert len(result.matches) > 1 and size <= 5 * 1024, over[-1]  # type: ignore[attr-defined]
                assert "not listed (detail: full lists them)" in result.summary()
    sizes.sort()
    assert sizes[len(sizes) // 2] <= 3072 and len(over) <= 4, (sizes[len(sizes) // 2], over)
    full = run_tool("check_version", {"name": "--kv-offloading-size", "version": "0.22.1", "detail": "full"})
    assert full.model_dump(mode="json")["security"]["listed"] == "all"


def test_an_lmcache_name_asked_without_a_vllm_release_carries_no_vllm_advisories() -> None:
    """The advisories of a vLLM release nobody named say nothing about an LMCache setting; LMCache's do."""
    result = run_tool("check_version", {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "lmcache_version": "0.5.6"})
    wire = result.structured()
    assert "security" not in wire and wire["lmcache_security"]["version"] == "0.5.6"
    assert "security (stored advisory snapshot" in result.summary() and "vLLM 0.34.0: " not in result.summary()
    # A vLLM name, or an LMCache name with the vLLM release given, still carries vLLM's.
    for asked in ({"name": "--kv-offloading-size"}, {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "version": "0.22.1"}):
        assert run_tool("check_version", asked).structured()["security"]["package"] == "vllm"


def test_compare_to_pages_its_changes_and_the_pages_together_are_every_change() -> None:
    """0.11.0 -> 0.33.0 answered 94 KB at once; now in pages of about 16 KB of changes, which together are
    exactly the changes detail: full lists."""
    asked = {"version": "0.11.0", "compare_to": "0.33.0"}
    first = run_tool("check_version", asked).model_dump(mode="json")
    pages = first["changes_pages"]
    assert pages > 1 and first["changes_page"] == 1
    every = [first["changes"]] + [
        run_tool("check_version", {**asked, "page": n}).model_dump(mode="json")["changes"] for n in range(2, pages + 1)
    ]
    full = run_tool("check_version", {**asked, "detail": "full"}).model_dump(mode="json")["changes"]
    assert [c for page in every for c in page] == full
    for page in every:
        assert len(json.dumps(page)) <= 24 * 1024
    assert f"page 1 of {pages} of the changes; page=2 gives the next" in run_tool("check_version", asked).summary()
    with pytest.raises(
        ToolInputError, match=rf"page: the changes take {pages} page\(s\); give a page from 1 to {pages}"
    ):
        run_tool("check_version", {**asked, "page": pages + 1})


def test_the_connector_filter_leaves_out_other_connectors_changes() -> None:
    """Asked for NixlConnector, the answer listed OffloadingConnector's HMA change among the NIXL ones."""
    asked = {"version": "0.11.0", "compare_to": "0.33.0", "connectors": ["NixlConnector"], "detail": "full"}
    summaries = [c["summary"] for c in run_tool("check_version", asked).model_dump(mode="json")["changes"]]
    assert not [s for s in summaries if "OffloadingConnector" in s and "NixlConnector" not in s]
    assert any("NixlConnector" in s for s in summaries)
    unfiltered = run_tool("check_version", {k: v for k, v in asked.items() if k != "connectors"})
    assert any("OffloadingConnector" in c.summary for c in unfiltered.changes)  # type: ignore[attr-defined]


def test_an_lmcache_server_option_is_answered_with_its_command_and_span(knowledge: Knowledge) -> None:
    result = check_version(CheckVersionRequest(name="--cpu-buffer-size", lmcache_version="0.5.6"), knowledge)
    spans = {(m.where, m.status, m.introduced, m.removed) for m in result.inventory_matches}
    assert ("python -m lmcache.v1.multiprocess.server", "removed", "0.3.10", "0.3.14") in spans
    assert result.not_found is None
    live = check_version(CheckVersionRequest(name="--cpu-buffer-size", lmcache_version="0.3.12"), knowledge)
    assert any(m.status == "available" for m in live.inventory_matches)


def test_a_default_that_moves_with_a_change_is_in_its_summary() -> None:
    """0.14.0's native shorthand: the feature says cpu_bytes_to_use, and --kv-offloading-backend's default went
    from None to native in the same change; an upgrade's notes say both."""
    result = run_tool("check_version", {"version": "0.13.0", "compare_to": "0.14.0"})
    [native] = [c for c in result.changes if c.component == "native_offload"]  # type: ignore[attr-defined]
    assert "cpu_bytes_to_use" in native.summary and "--kv-offloading-backend: default None → 'native'" in native.summary


def test_an_upgrade_lists_what_the_engine_schema_adds_and_removes() -> None:
    """0.28.0 -> 0.33.0: KVTransferConfig loses kv_buffer_size, kv_ip, kv_parallel_size and kv_rank in 0.32.0,
    and forbids unknown fields there (read in the wheels: knowledge/engine_schema.yaml); a P/D config that still
    sets one does not start. They come with the last page of the changes; connectors' keys are counted unless
    the deployment's connectors are named."""
    asked = {"version": "0.28.0", "compare_to": "0.33.0"}
    first = run_tool("check_version", asked)
    pages = first.changes_pages  # type: ignore[attr-defined]
    assert pages > 1 and first.schema_changes == [] and "they come with the last page" in first.summary()  # type: ignore[attr-defined]
    result = run_tool("check_version", {**asked, "page": pages})
    [kv] = [c for c in result.schema_changes if c.owner == "KVTransferConfig"]  # type: ignore[attr-defined]
    removed = ["kv_buffer_size", "kv_ip", "kv_parallel_size", "kv_rank"]
    assert (kv.version, kv.removed, kv.refused) == ("0.32.0", removed, True)
    assert "KVTransferConfig fields: removed kv_buffer_size" in result.summary()
    assert result.schema_changes_left_out > 0 and "detail: full all of them" in result.summary()  # type: ignore[attr-defined]
    named = run_tool("check_version", {**asked, "connectors": ["OffloadingConnector"], "detail": "full"})
    owners = {c.owner for c in named.schema_changes}  # type: ignore[attr-defined]
    assert "OffloadingConnector" in owners and not owners & {"NixlConnector", "MooncakeStoreConnector"}
    assert any("sync_load_budget_bytes" in c.added for c in named.schema_changes)  # type: ignore[attr-defined]
    # a downgrade lists the same changes; nothing changes between a release and itself
    downgrade = run_tool("check_version", {"version": "0.33.0", "compare_to": "0.28.0", "detail": "full"})
    assert any(c.owner == "KVTransferConfig" for c in downgrade.schema_changes)  # type: ignore[attr-defined]
    same = run_tool("check_version", {"version": "0.33.0", "compare_to": "0.33.0"})
    assert same.schema_changes == []  # type: ignore[attr-defined]
