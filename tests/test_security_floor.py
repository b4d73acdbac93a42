"""Security floors in the offline tools: check_version, review_deployment (and its SARIF),
render_config, inspect_image and choose_backend report the stored advisories for the release they
name and the floor (the lowest release clear of every critical and high advisory).

The expected floor is computed here with advisories.floor, not written down: the snapshot grows."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reading import review
from registry_standin import FakeRegistry, vllm_openai_config
from vllm_caching_mcp import advisories
from vllm_caching_mcp.advice import image
from vllm_caching_mcp.advice.backend import ChooseBackendRequest, choose_backend
from vllm_caching_mcp.advice.check_version import CheckVersionRequest, check_version
from vllm_caching_mcp.advice.common import SecurityCheck
from vllm_caching_mcp.advice.image import InspectImageRequest, inspect_image
from vllm_caching_mcp.advice.render import RenderConfigRequest, render_config
from vllm_caching_mcp.advice.review import ReviewResult, to_sarif
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.registry import RegistryClient, RegistrySettings
from vllm_caching_mcp.versions import Version

OLD = "0.11.0"  # below the floor: high advisories that apply to every deployment hit it
API_KEY_BYPASS = "GHSA-94f4-hr76-p5j6"  # critical; only where --api-key / VLLM_API_KEY keeps callers out; fixed 0.22.0
BEFORE_KEY_FIX = "0.21.0"
# A deployment about which everything is known and nothing special is used (as in test_advisories.py).
PLAIN = advisories.DeploymentFacts().closed()


@pytest.fixture(scope="module")
def floor_release(knowledge: Knowledge) -> str:
    stored = advisories.stored(knowledge, "vllm")
    found = advisories.floor(stored, "vllm", knowledge.release_versions("vllm"), PLAIN).release
    assert found is not None and found > Version(OLD)
    return str(found)


def serious(check: SecurityCheck | None) -> list[str]:
    """The critical and high advisories that certainly apply (listed in full with detail: full, else by id)."""
    assert check is not None
    listed = [a.id for a in check.advisories if a.severity in ("critical", "high") and a.applies_here == "yes"]
    assert check.listed == "counts" or listed == check.serious_applying
    return list(check.serious_applying)


def source_text(knowledge: Knowledge) -> str:
    return f"stored advisory snapshot of {knowledge.advisories.checked_at}"


# --- check_version ------------------------------------------------------------------------------------


def test_check_version_names_the_advisories_and_the_floor_for_an_old_release(
    knowledge: Knowledge, floor_release: str
) -> None:
    result = check_version(CheckVersionRequest(name="--kv-transfer-config", version=OLD, detail="full"), knowledge)
    security = result.security
    assert security is not None and security.version == OLD and security.source == source_text(knowledge)
    assert security.security_floor == floor_release and security.below_floor is True
    assert serious(security) and security.serious_applying == serious(security)
    note = next(a for a in security.advisories if a.id == serious(security)[0])
    assert note.source.startswith("https://") and note.fixed_in is not None and note.applies
    assert f"floor {floor_release} (BELOW THE FLOOR)" in result.summary()
    assert source_text(knowledge) in result.summary()
    # a conditional advisory is listed, marked as depending on a condition the tool cannot see
    before_fix = check_version(
        CheckVersionRequest(name="--kv-transfer-config", version=BEFORE_KEY_FIX, detail="full"), knowledge
    )
    assert before_fix.security is not None
    keyed = next(a for a in before_fix.security.advisories if a.id == API_KEY_BYPASS)
    assert (keyed.severity, keyed.applies_here, keyed.fixed_in) == ("critical", "unknown", "0.22.0")


def test_by_default_the_advisories_are_counted_in_one_line(knowledge: Knowledge) -> None:
    """A one-flag question carried the whole advisory list: 60-80 % of an 11-22 KB answer."""
    full = check_version(CheckVersionRequest(name="--kv-transfer-config", version=OLD, detail="full"), knowledge)
    brief = check_version(CheckVersionRequest(name="--kv-transfer-config", version=OLD), knowledge)
    assert full.security is not None and brief.security is not None
    assert brief.security.listed == "counts" and brief.security.advisories == [] == brief.security.floor_caveats
    for field in ("advisory_count", "applying_count", "serious_applying", "security_floor", "floor_caveat_ids"):
        assert getattr(brief.security, field) == getattr(full.security, field), field
    assert full.security.advisory_count == len(full.security.advisories)
    [line] = [line for line in brief.summary().splitlines() if line.startswith("security (")]
    assert f"that apply: {len(full.security.serious_applying)} critical or high" in line
    assert line.endswith("check_advisories lists them")
    assert len(brief.model_dump_json()) < len(full.model_dump_json()) / 3


def test_check_version_at_the_floor_has_no_advisory_that_certainly_applies(
    knowledge: Knowledge, floor_release: str
) -> None:
    result = check_version(CheckVersionRequest(name="--kv-transfer-config", version=floor_release), knowledge)
    assert result.security is not None and result.security.below_floor is False
    assert serious(result.security) == []
    assert "BELOW THE FLOOR" not in result.summary()


def test_check_version_compares_and_reports_lmcache(knowledge: Knowledge, floor_release: str) -> None:
    result = check_version(CheckVersionRequest(version=OLD, compare_to=floor_release), knowledge)
    assert result.compare_security is not None and result.compare_security.below_floor is False
    lm = check_version(
        CheckVersionRequest(name="LMCACHE_MAX_LOCAL_CPU_SIZE", lmcache_version="0.3.0"), knowledge
    ).lmcache_security
    lm_floor = advisories.floor(
        advisories.stored(knowledge, "lmcache"), "lmcache", knowledge.release_versions("lmcache")
    )
    assert lm is not None and lm.package == "lmcache" and lm.security_floor == str(lm_floor.release)
    assert lm.below_floor is True and "CVE-2026-107204" in serious(lm)


# --- review_deployment --------------------------------------------------------------------------------


def advisory_findings(result: ReviewResult) -> dict[str, str]:
    return {
        f.rule_id.removeprefix("advisory."): f.severity for f in result.findings if f.rule_id.startswith("advisory.")
    }


def test_review_of_an_old_image_has_an_error_per_serious_advisory(knowledge: Knowledge, floor_release: str) -> None:
    result = review(f"docker run --gpus all vllm/vllm-openai:v{OLD} --model m")
    found = advisory_findings(result)
    expected = serious(check_version(CheckVersionRequest(name="--kv-transfer-config", version=OLD), knowledge).security)
    assert expected and all(found.get(i) == "error" for i in expected), result.summary()
    finding = next(f for f in result.findings if f.rule_id == f"advisory.{expected[0]}")
    assert finding.location.line == 1 and finding.sources and finding.fix.startswith("Upgrade vLLM to")
    assert result.workloads[0].security_floor == floor_release
    assert f"security floor {floor_release}" in result.summary()
    assert any(source_text(knowledge) in n for n in result.notes)
    # the configuration findings come first, the advisories after them
    kinds = [f.rule_id.startswith("advisory.") for f in result.findings]
    assert kinds == sorted(kinds)


def test_review_sarif_carries_the_cve_and_ghsa_ids(knowledge: Knowledge) -> None:
    result = review("vllm serve m --api-key secret-key", version=BEFORE_KEY_FIX)
    assert advisory_findings(result).get(API_KEY_BYPASS) == "error"
    sarif = json.loads(json.dumps(to_sarif(result, knowledge)))
    (run,) = sarif["runs"]
    rules = run["tool"]["driver"]["rules"]
    [hit] = [r for r in run["results"] if r["ruleId"] == f"advisory.{API_KEY_BYPASS}"]
    rule = rules[hit["ruleIndex"]]
    assert rule["id"] == hit["ruleId"] and hit["level"] == "error"
    assert {"security", API_KEY_BYPASS, "CVE-2026-48746"} <= set(rule["properties"]["tags"])
    assert set(hit["properties"]["tags"]) == set(rule["properties"]["tags"])
    assert rule["helpUri"] == f"https://github.com/advisories/{API_KEY_BYPASS}"
    assert float(rule["properties"]["security-severity"]) >= 9.0
    schema_file = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(to_sarif(result, knowledge), json.loads(schema_file.read_text()))


def test_an_advisory_whose_condition_the_deployment_does_not_meet_gives_no_finding(knowledge: Knowledge) -> None:
    result = review("vllm serve m", version=BEFORE_KEY_FIX)
    assert API_KEY_BYPASS not in advisory_findings(result)
    assert f"advisory.{API_KEY_BYPASS}" not in {n.rule_id for n in result.not_checked}
    by_env = review("VLLM_API_KEY=k vllm serve m", version=BEFORE_KEY_FIX)
    assert advisory_findings(by_env).get(API_KEY_BYPASS) == "error"
    skipped = review("vllm serve m --api-key k", version=BEFORE_KEY_FIX, disabled_rules=[f"advisory.{API_KEY_BYPASS}"])
    assert API_KEY_BYPASS not in advisory_findings(skipped)


def test_review_at_the_floor_has_no_serious_advisory_finding(knowledge: Knowledge, floor_release: str) -> None:
    result = review(f"docker run vllm/vllm-openai:v{floor_release} --model m --api-key k")
    assert "error" not in advisory_findings(result).values(), result.summary()


def test_review_without_a_known_release_checks_no_advisory_and_says_so(knowledge: Knowledge) -> None:
    result = review("vllm serve m --api-key k")
    assert advisory_findings(result) == {} and result.workloads[0].security_floor is None
    assert not any(n.rule_id.startswith("advisory.") for n in result.not_checked)
    assert any(
        "security advisories were not checked" in n and "not a finding that it is clear" in n for n in result.notes
    )


def test_review_asks_for_what_would_settle_an_open_condition(knowledge: Knowledge) -> None:
    # a multimodal condition cannot be read from the command line: not checked, with what would settle it
    result = review("vllm serve m", version=OLD)
    needs = {n.rule_id: n.needs for n in result.not_checked if n.rule_id.startswith("advisory.")}
    assert any("takes" in need for items in needs.values() for need in items), needs


# --- render_config ------------------------------------------------------------------------------------


def render(knowledge: Knowledge, version: str, backend: str = "none") -> Any:
    """Without a connector the floor is the plain deployment's; a connector can bring its own advisories."""
    request = RenderConfigRequest(backend=backend, version=version, model="m", sizes={"kv_offloading_size_gib": 10})
    return render_config(request, knowledge)


def test_render_below_the_floor_warns_and_names_the_floor(knowledge: Knowledge, floor_release: str) -> None:
    result = render(knowledge, "0.14.0")
    [warning] = [w for w in result.version_context.warnings if "security floor" in w]
    assert f"below the security floor {floor_release}" in warning and source_text(knowledge) in warning
    assert result.security is not None and result.security.security_floor == floor_release
    assert f"warning: {warning}" in result.summary()


def test_render_at_the_floor_has_no_security_warning(knowledge: Knowledge, floor_release: str) -> None:
    result = render(knowledge, floor_release)
    assert not any("security floor" in w for w in result.version_context.warnings)
    assert result.security is not None and result.security.below_floor is False


def test_a_backend_with_a_connector_is_floored_with_the_connectors_advisories(knowledge: Knowledge) -> None:
    facts = dataclasses.replace(PLAIN, connectors=frozenset({"OffloadingConnector"}))
    stored = advisories.stored(knowledge, "vllm")
    expected = advisories.floor(stored, "vllm", knowledge.release_versions("vllm"), facts)
    result = render(knowledge, "0.14.0", backend="native_cpu")
    assert result.security is not None
    assert result.security.security_floor == (str(expected.release) if expected.release else None)
    assert [a.id for a in result.security.floor_caveats if expected.release is None] == [
        f.advisory.id for f in expected.blockers
    ]
    # below the floor, or no release clear: either way a warning with the snapshot's date
    assert any(source_text(knowledge) in w for w in result.version_context.warnings)


# --- inspect_image ------------------------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, floor_release: str) -> Iterator[FakeRegistry]:
    with FakeRegistry() as fake:
        for tag in (f"v{OLD}", f"v{floor_release}"):
            fake.add_image("vllm/vllm-openai", tag, {"amd64": vllm_openai_config()})
        env = {"VLLM_CACHING_MCP_REGISTRY_MIRROR": f"http://127.0.0.1:{fake.port}"}

        def factory() -> RegistryClient:
            return RegistryClient(RegistrySettings.from_env(env, cache_dir=tmp_path, docker_config=None))

        monkeypatch.setattr(image, "client_factory", factory)
        yield fake


def test_inspect_image_reports_the_advisories_of_the_image_release(
    registry: FakeRegistry, knowledge: Knowledge, floor_release: str
) -> None:
    old = inspect_image(InspectImageRequest(image=f"v{OLD}"), knowledge)
    assert old.security is not None and old.security.version == OLD and serious(old.security)
    assert old.security.security_floor == floor_release and old.security.below_floor is True
    assert any(f"below the security floor {floor_release}" in w for w in old.version_context.warnings)
    assert f"floor {floor_release} (BELOW THE FLOOR)" in old.summary()
    current = inspect_image(InspectImageRequest(image=f"v{floor_release}"), knowledge)
    assert current.security is not None and current.security.below_floor is False
    assert serious(current.security) == []
    assert not any("security floor" in w for w in current.version_context.warnings)


# --- choose_backend -----------------------------------------------------------------------------------


def test_choose_backend_lists_the_floor_among_its_version_gates(knowledge: Knowledge, floor_release: str) -> None:
    old = choose_backend(ChooseBackendRequest(version=OLD, tiers=[]), knowledge)  # no connector
    gate = next(g for g in old.version_gates if g.id == "security.floor")
    assert gate.first_release == floor_release and gate.present is False
    assert source_text(knowledge) in gate.effect and serious(old.security)[0] in gate.effect
    current = choose_backend(ChooseBackendRequest(version=floor_release, tiers=[]), knowledge)
    gate = next(g for g in current.version_gates if g.id == "security.floor")
    assert gate.first_release == floor_release and gate.present is True
    assert serious(current.security) == []


def test_an_advisory_of_the_p2p_tier_needs_a_p2p_tier(knowledge: Knowledge) -> None:
    """CVE-2026-94624 is in the peer-to-peer tier of native tiering: a CPU-only OffloadingConnector
    deployment is not affected, one with a p2p secondary tier is."""
    config = (
        '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":'
        '{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":68719476736%s}}'
    )
    p2p = ',"secondary_tiers":[{"type":"p2p"}]'

    def advisory_ids(extra: str) -> set[str]:
        result = review(f"vllm serve m --kv-transfer-config '{config % extra}'", version="0.29.0")
        return set(advisory_findings(result))

    rule = "CVE-2026-94624"
    assert rule not in advisory_ids("")
    assert rule in advisory_ids(p2p)
