"""Security advisories: the stored snapshot, the lookups, the floor, and the live list from a stand-in
GitHub Advisory Database on 127.0.0.1 (never the internet), including a GitHub that misbehaves."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, Ran, run_in_process, script_main
from github_standin import FakeGitHub, Reply
from vllm_caching_mcp import advisories
from vllm_caching_mcp.advisories import DeploymentFacts, affecting, current_advisories, floor, pep440_range, status_at
from vllm_caching_mcp.github import GitHubClient, GitHubSettings, Token
from vllm_caching_mcp.knowledge import Advisory, Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.versions import Version, as_text

TOKEN = "ghp_PLANTEDadvisoryTOKEN0123456789abcdXYZ"
DEADLINE = 1.0  # a fault that is waited out costs the suite this long
SLACK = 4.0  # interpreter and thread scheduling on a loaded 2-core machine; a hang would hold the call far longer
STALL = 30.0  # how long a hanging stand-in holds its reply
HOUR = str(int(time.time()) + 3600)

# A deployment about which everything is known and nothing special is used.
PLAIN = DeploymentFacts().closed()


def by_id(knowledge: Knowledge, advisory_id: str) -> Advisory:
    return next(a for a in knowledge.advisories.advisories if advisory_id in (a.ghsa, a.cve))


def ids(findings: Any) -> list[str]:
    return [f.advisory.id for f in findings]


def v(text: str) -> Version:
    return Version(text)


# --- the stored snapshot ----------------------------------------------------------------------------


def test_every_stored_advisory_is_identified_dated_and_sourced(knowledge: Knowledge) -> None:
    stored = knowledge.advisories.advisories
    assert {a.package for a in stored} == {"vllm", "lmcache", "mooncake"}
    assert len({a.id for a in stored}) == len(stored)
    for a in stored:
        assert a.sources and a.verified_at <= knowledge.advisories.checked_at
        assert a.applies and a.cvss, a.id
        assert any(s.startswith("https://") for s in a.sources), a.id


def _broken(knowledge_copy: Path, index: int, change: dict[str, Any]) -> str:
    path = knowledge_copy / "advisories.yaml"
    data = yaml.safe_load(path.read_text())
    data["advisories"][index].update(change)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(KnowledgeError) as caught:
        load_knowledge(str(knowledge_copy))
    message = str(caught.value)
    assert "advisories.yaml" in message and "\n" not in message
    return message


def test_a_fix_inside_its_own_range_is_refused_at_load(knowledge_copy: Path) -> None:
    message = _broken(knowledge_copy, 0, {"ranges": [{"affected": ">=0.6.5,<0.8.5", "fixed_in": "0.8.0"}]})
    assert "ranges" in message and "fixed_in 0.8.0 is inside the affected range" in message


def test_a_connector_no_knowledge_entry_names_is_refused(knowledge_copy: Path) -> None:
    message = _broken(knowledge_copy, 0, {"requires": {"connectors": ["MoonCakeConector"]}})
    assert "GHSA-hj4w-hm2g-p6w5" in message and "'MoonCakeConector'" in message


def test_a_cvss_vector_of_another_version_is_refused(knowledge_copy: Path) -> None:
    message = _broken(knowledge_copy, 0, {"cvss": [{"version": "4.0", "score": 10.0, "vector": "CVSS:3.1/AV:N"}]})
    assert "cvss" in message and "CVSS 3.1 vector, not 4.0" in message


def test_a_derived_fix_needs_the_wheel_it_was_read_in(knowledge_copy: Path, knowledge: Knowledge) -> None:
    index = next(i for i, a in enumerate(knowledge.advisories.advisories) if a.cve == "CVE-2026-107204")
    sources = [s for s in by_id(knowledge, "CVE-2026-107204").sources if not s.startswith("wheel:")]
    assert "wheel:lmcache==" in _broken(knowledge_copy, index, {"sources": sources})


def test_a_wheel_read_fix_must_be_a_release(knowledge_copy: Path, knowledge: Knowledge) -> None:
    index = next(i for i, a in enumerate(knowledge.advisories.advisories) if a.cve == "CVE-2026-107204")
    ranges = [{"affected": "<=0.5.5", "open_ended": True, "fixed_in": "0.5.7", "fix_basis": "derived"}]
    assert "0.5.7 is not a lmcache release" in _broken(knowledge_copy, index, {"ranges": ranges})


def test_an_unparsable_range_names_the_field(knowledge_copy: Path) -> None:
    message = _broken(knowledge_copy, 1, {"ranges": [{"affected": "before 0.8.0"}]})
    assert "ranges.0.affected" in message and "PEP 440" in message


# --- which advisories hit a release ------------------------------------------------------------------


def test_the_api_key_bypass_counts_only_where_an_api_key_is_what_keeps_callers_out(knowledge: Knowledge) -> None:
    stored = knowledge.advisories.advisories
    with_key = affecting(stored, "vllm", v("0.21.0"), DeploymentFacts(configured=frozenset({"--api-key"})))
    finding = next(f for f in with_key if f.advisory.ghsa == "GHSA-94f4-hr76-p5j6")
    assert (finding.status, finding.applies, finding.fixed_in) == ("affected", "yes", v("0.22.0"))
    assert "GHSA-94f4-hr76-p5j6" not in ids(affecting(stored, "vllm", v("0.21.0"), PLAIN))
    unknown = next(f for f in affecting(stored, "vllm", v("0.21.0")) if f.advisory.ghsa == "GHSA-94f4-hr76-p5j6")
    assert unknown.applies == "unknown" and unknown.open_conditions == ("configured",)
    assert "GHSA-94f4-hr76-p5j6" not in ids(affecting(stored, "vllm", v("0.22.0")))


def test_mooncake_p_d_on_0_33_0_is_still_hit_by_the_transfer_id_leak(knowledge: Knowledge) -> None:
    facts = DeploymentFacts(connectors=frozenset({"MooncakeConnector"}))
    found = {
        f.advisory.id: f
        for f in affecting(knowledge.advisories.advisories, "vllm", v("0.33.0"), facts)
        if f.applies == "yes" and f.advisory.requires.connectors  # the connector's own advisories
    }
    assert set(found) == {"CVE-2026-94627", "CVE-2026-94625"}
    finding = found["CVE-2026-94627"]
    assert finding.status == "affected" and finding.fixed_in is None
    assert "no fixed release known" in finding.line()
    # the placeholder leak was published "through 0.29.0" and never read in a later wheel
    assert found["CVE-2026-94625"].status == "not_established"


def test_nixl_p_d_past_an_open_ended_range_is_not_reported_clear(knowledge: Knowledge) -> None:
    nixl = by_id(knowledge, "CVE-2026-94622")
    assert [status_at(nixl, v(x)) for x in ("0.29.0", "0.30.0", "0.33.0")] == [
        "affected",
        "not_established",
        "not_established",
    ]
    facts = DeploymentFacts(connectors=frozenset({"NixlConnector"}))
    finding = next(
        f for f in affecting(knowledge.advisories.advisories, "vllm", v("0.33.0"), facts) if f.applies == "yes"
    )
    assert finding.advisory is nixl and "not established clear" in finding.line()


def test_the_v0_multi_node_advisory_is_fixed_in_0_10_0_as_published(knowledge: Knowledge) -> None:
    v0 = by_id(knowledge, "GHSA-9pcc-gvx5-r5wm")
    # GitHub's record (modified 2025-12-05): ">= 0.5.2, < 0.10.0", first patched 0.10.0.
    assert [status_at(v0, v(x)) for x in ("0.5.1", "0.8.5.post1", "0.9.2", "0.10.0", "0.11.0")] == [
        "not_affected",
        "affected",
        "affected",
        "fixed",
        "fixed",
    ]
    assert v0.ranges[0].fix_basis == "published" and not v0.ranges[0].open_ended


def test_the_speculative_decoding_token_crash_keeps_github_s_range_and_needs_speculative_decoding(
    knowledge: Knowledge,
) -> None:
    spec = by_id(knowledge, "GHSA-8wr5-jm2h-8r4f")
    assert spec.cve == "CVE-2026-54234" and spec.severity == "high"
    assert [c.vector for c in spec.cvss] == ["CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H"]
    # GitHub's reviewed range (">= 0.17.1, < 0.24.0"), not the CVE record's wider "< 0.24.0"; the wheels show
    # the same kernel in 0.17.0 (flaw_present_from), and 0.16.0's is another one.
    assert spec.ranges[0].affected == ">=0.17.1,<0.24.0" and str(spec.ranges[0].flaw_present_from) == "0.17.0"
    assert [status_at(spec, v(x)) for x in ("0.16.0", "0.17.0", "0.17.1", "0.23.0", "0.24.0")] == [
        "not_affected",
        "affected",
        "affected",
        "affected",
        "fixed",
    ]
    stored = knowledge.advisories.advisories
    assert spec.id not in ids(affecting(stored, "vllm", v("0.23.0"), PLAIN))
    with_spec = DeploymentFacts(configured=frozenset({"--speculative-config"}))
    assert spec.id in ids(f for f in affecting(stored, "vllm", v("0.23.0"), with_spec) if f.applies == "yes")


def test_the_gguf_truncation_advisory_records_github_s_reviewed_values(knowledge: Knowledge) -> None:
    gguf = by_id(knowledge, "CVE-2026-53923")
    # GitHub labels it moderate although its 3.1 vector scores 7.5; the CVE record's 4.0 score is 5.3.
    assert gguf.ghsa == "GHSA-5jv2-g5wq-cmr4" and gguf.severity == "medium"
    assert sorted((c.version, c.score) for c in gguf.cvss) == [("3.1", 7.5), ("4.0", 5.3)]
    assert (gguf.ranges[0].affected, gguf.ranges[0].fixed_in) == (">=0.5.5,<0.24.0", Version("0.24.0"))


def test_lmcache_0_5_6_is_past_the_run_script_rce(knowledge: Knowledge) -> None:
    stored = knowledge.advisories.advisories
    assert ids(affecting(stored, "lmcache", v("0.5.5"), DeploymentFacts(components=frozenset({"lmcache"})))) == [
        "CVE-2026-107204"
    ]
    assert affecting(stored, "lmcache", v("0.5.6")) == []
    assert by_id(knowledge, "CVE-2026-107204").residual  # still unsafe if turned back on


# --- the floor ----------------------------------------------------------------------------------------


def test_the_floor_for_a_plain_deployment_and_for_one_that_relies_on_an_api_key(knowledge: Knowledge) -> None:
    releases = knowledge.release_versions("vllm")
    stored = knowledge.advisories.advisories
    keyed_facts = dataclasses.replace(PLAIN, configured=frozenset({"VLLM_API_KEY"}))
    plain = floor(stored, "vllm", releases, PLAIN)
    # The structured-output ReDoS (fixed in 0.24.0) and the Dockerfile dependency confusion (fixed
    # in 0.22.1) have no condition a deployment can rule out.
    assert plain.release == v("0.24.0") and plain.blockers == ()
    unconditioned = {"GHSA-rwxx-mrjm-wc2m", "GHSA-jrf6-vqxq-pjv2"}
    assert unconditioned <= set(plain.considered) and "GHSA-94f4-hr76-p5j6" not in plain.considered
    keyed = floor(stored, "vllm", releases, keyed_facts)
    assert keyed.release == v("0.24.0")
    assert {"GHSA-94f4-hr76-p5j6", "GHSA-wr9h-g72x-mwhm"} <= set(keyed.considered)
    without_redos = [a for a in stored if a.ghsa != "GHSA-rwxx-mrjm-wc2m"]
    assert floor(without_redos, "vllm", releases, PLAIN).release == v("0.22.1")
    # Without both, relying on an API key is what moves the floor.
    rest = [a for a in stored if a.ghsa not in unconditioned]
    assert floor(rest, "vllm", releases, PLAIN).release == v("0.14.0")
    assert floor(rest, "vllm", releases, keyed_facts).release == v("0.22.0")


def test_no_vllm_release_is_a_floor_for_mooncake_p_d_and_the_blocker_says_why(knowledge: Knowledge) -> None:
    facts = dataclasses.replace(PLAIN, connectors=frozenset({"MooncakeConnector"}))
    result = floor(knowledge.advisories.advisories, "vllm", knowledge.release_versions("vllm"), facts)
    assert result.release is None and ids(result.blockers) == ["CVE-2026-94627"]


def test_unknown_conditions_count_against_the_floor(knowledge: Knowledge) -> None:
    result = floor(knowledge.advisories.advisories, "vllm", knowledge.release_versions("vllm"))
    assert result.release is None
    assert {"CVE-2026-94622", "CVE-2026-94627"} <= set(ids(result.blockers))
    assert all(f.applies == "unknown" for f in result.blockers)


def test_floors_for_lmcache_and_for_mooncake_which_has_no_release_line(knowledge: Knowledge) -> None:
    stored = knowledge.advisories.advisories
    assert floor(stored, "lmcache", knowledge.release_versions("lmcache")).release == v("0.5.6")
    mooncake = floor(stored, "mooncake")  # candidates are the fixed releases: 0.3.13
    assert mooncake.release is None
    assert set(ids(mooncake.blockers)) == {"CVE-2026-103765", "CVE-2026-106037", "CVE-2026-96762"}
    assert floor(stored, "nixl") == advisories.Floor("nixl", None, (), ())


@pytest.mark.parametrize(
    ("github", "pep440"),
    [
        (">= 0.6.5, < 0.8.5", ">=0.6.5,<0.8.5"),
        ("< 0.8.0", "<0.8.0"),
        ("= 0.9.0", "==0.9.0"),
        ("<= 0.8.5.post1", "<=0.8.5.post1"),
    ],
)
def test_github_ranges_become_pep_440(github: str, pep440: str) -> None:
    assert pep440_range(github) == pep440


@pytest.mark.parametrize("bad", ["", "before 0.8.0", ">= x"])
def test_a_range_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="range"):
        pep440_range(bad)


# --- the live list ------------------------------------------------------------------------------------


def gh_advisory(
    ghsa: str, cve: str | None, rng: str, patched: str | None, severity: str = "high", **extra: Any
) -> dict[str, Any]:
    """One entry as GET /advisories returns it (the documented shape, trimmed to what is read)."""
    return {
        "ghsa_id": ghsa,
        "cve_id": cve,
        "html_url": f"https://github.com/advisories/{ghsa}",
        "summary": f"summary of {ghsa}",
        "type": "reviewed",
        "severity": severity,
        "published_at": "2026-11-20T10:00:00Z",
        "withdrawn_at": None,
        "vulnerabilities": [
            {
                "package": {"ecosystem": "pip", "name": "vllm"},
                "vulnerable_version_range": rng,
                "first_patched_version": patched,
                "vulnerable_functions": [],
            }
        ],
        "cvss_severities": {
            "cvss_v3": {"vector_string": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", "score": 9.8},
            "cvss_v4": {"vector_string": None, "score": 0.0},
        },
        **extra,
    }


def page(entries: list[dict[str, Any]], next_url: str | None = None) -> Reply:
    headers = {"Content-Type": "application/json"}
    if next_url:
        headers["Link"] = f'<{next_url}>; rel="next"'
    return Reply(200, json.dumps(entries).encode(), headers)


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.start()
    settings = GitHubSettings(
        api_base=fake.base, cache_dir=tmp_path / "cache", backoff_base=0.01, timeout=2.0, token=Token(TOKEN)
    )
    monkeypatch.setattr(advisories, "client_factory", lambda: GitHubClient(settings))
    yield fake
    fake.stop()


def test_the_live_list_keeps_the_stored_conditions_and_adds_what_is_new(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    first = [
        gh_advisory("GHSA-94f4-hr76-p5j6", "CVE-2026-48746", ">= 0.3.0, < 0.22.0", "0.22.0", "critical"),
        gh_advisory(
            "GHSA-2pc9-4j83-qjmr",
            "CVE-2026-22807",
            ">= 0.10.1, < 0.14.0",
            "0.14.0",
            withdrawn_at="2026-11-25T00:00:00Z",
        ),
    ]
    second = [gh_advisory("GHSA-w3w3-w3w3-w3w3", None, "< 0.35.0", "0.35.0", "high")]
    github.script("/advisories", page(first, f"{github.base}/advisories?after=abc"), page(second))
    result = current_advisories(knowledge, "vllm")
    assert result.provenance.source == "live"
    got = {a.id: a for a in result.advisories}
    assert got["GHSA-94f4-hr76-p5j6"].requires.configured == ("--api-key", "VLLM_API_KEY")
    assert "GHSA-2pc9-4j83-qjmr" not in got  # withdrawn upstream
    new = got["GHSA-w3w3-w3w3-w3w3"]
    assert new.requires.given() == [] and new.ranges[0].fixed_in == Version("0.35.0")
    assert "CVE-2026-94627" in got  # a CVE GitHub does not list stays as stored
    assert any("GHSA-w3w3-w3w3-w3w3: new" in n for n in result.notes)
    assert any("withdrawn" in n for n in result.notes)
    # a new high advisory fixed only in 0.35.0 takes the floor past every known release
    assert floor(result.advisories, "vllm", knowledge.release_versions("vllm"), PLAIN).release is None
    [asked, followed] = github.requests
    assert asked.path == "/advisories?ecosystem=pip&affects=vllm&per_page=100" and followed.path.endswith("after=abc")
    assert asked.headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(result)


def test_a_live_range_without_a_patch_keeps_the_fix_read_in_the_wheels(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    # The LMCache /run_script RCE: published "through 0.5.5" with no fix; 0.5.6 read in the wheels.
    lmcache = [{"package": {"ecosystem": "pip", "name": "lmcache"}, "vulnerable_version_range": "<= 0.5.5"}]
    live = [gh_advisory("GHSA-w3w3-w3w3-w3w3", "CVE-2026-107204", "<= 0.5.5", None, vulnerabilities=lmcache)]
    github.script("/advisories", page(live))
    result = current_advisories(knowledge, "lmcache")
    assert result.provenance.source == "live"
    got = next(a for a in result.advisories if a.cve == "CVE-2026-107204")
    assert got.ghsa == "GHSA-w3w3-w3w3-w3w3"  # the live record, matched to the stored one by its CVE
    assert got.ranges == by_id(knowledge, "CVE-2026-107204").ranges
    assert got.ranges[0].fix_basis == "derived"
    assert status_at(got, v("0.5.6")) == "fixed"


def test_the_published_v0_multi_node_record_matches_the_stored_range(github: FakeGitHub, knowledge: Knowledge) -> None:
    live = [gh_advisory("GHSA-9pcc-gvx5-r5wm", "CVE-2025-30165", ">= 0.5.2, < 0.10.0", "0.10.0")]
    github.script("/advisories", page(live))
    got = next(a for a in current_advisories(knowledge, "vllm").advisories if a.ghsa == "GHSA-9pcc-gvx5-r5wm")
    assert got.ranges == by_id(knowledge, "GHSA-9pcc-gvx5-r5wm").ranges
    assert got.requires == by_id(knowledge, "GHSA-9pcc-gvx5-r5wm").requires  # V0 multi-node only


def test_offline_answers_from_the_snapshot_with_its_date_and_asks_nobody(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    result = current_advisories(knowledge, "lmcache", offline=True)
    assert result.provenance.source == "snapshot" and result.provenance.fallback_reason == "offline_requested"
    assert result.provenance.snapshot_checked_at == knowledge.advisories.checked_at
    assert "stored snapshot of 2026-12-01" in result.provenance.text()
    assert [a.cve for a in result.advisories] == ["CVE-2026-107204", "CVE-2026-10813"] and github.requests == []


def test_a_second_ask_within_the_ttl_is_answered_from_the_cache(github: FakeGitHub, knowledge: Knowledge) -> None:
    github.script("/advisories", page([]))
    assert current_advisories(knowledge, "nixl").provenance.source == "live"
    again = current_advisories(knowledge, "nixl")
    assert again.provenance.source == "cache" and len(github.requests) == 1


FAULTS: dict[str, list[Reply]] = {
    "hang": [Reply(200, b"[]", delay=STALL)] * 3,
    "5xx storm": [Reply(503, b"unavailable")] * 40,
    "403 rate limit": [Reply(403, b"{}", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": HOUR})] * 10,
    "429 retry-after": [Reply(429, b"{}", {"retry-after": "3600"})] * 10,
    "bad JSON": [Reply(200, b'[{"ghsa_id": ')] * 10,
    "not a list": [Reply(200, b'{"message": "ok"}')] * 10,
    "malformed entry": [Reply(200, json.dumps([{"ghsa_id": "GHSA-bad"}]).encode())] * 10,
    "bad range": [Reply(200, json.dumps([gh_advisory("GHSA-w3w3-w3w3-w3w3", None, "soon", None)]).encode())] * 10,
    "huge body": [Reply(200, b"[" + b"0," * (3 * 1024 * 1024) + b"0]")] * 3,
    "huge, no length": [Reply(200, b" " * (5 * 1024 * 1024) + b"[]", no_length=True)] * 3,
}


def assert_dated_snapshot(result: advisories.AdvisoryList, knowledge: Knowledge, elapsed: float) -> None:
    assert elapsed < DEADLINE + SLACK, f"{elapsed:.1f} s"
    assert result.provenance.source == "snapshot", result.provenance
    assert result.provenance.snapshot_checked_at == knowledge.advisories.checked_at
    assert result.provenance.fallback_reason is not None
    assert result.advisories == advisories.stored(knowledge, "vllm")
    assert TOKEN not in repr(result)


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings as the server reads them: the token and the API base from the environment."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_misbehaving_github_gives_the_dated_snapshot_within_the_deadline(
    fault: str,
    knowledge: Knowledge,
    environment: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake = FakeGitHub()
    fake.script("/advisories", *FAULTS[fault])
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", fake.start())
    try:
        start = time.monotonic()
        result = current_advisories(knowledge, "vllm", deadline_seconds=DEADLINE)
        elapsed = time.monotonic() - start
    finally:
        fake.stop()
    assert fake.requests, "the fault was never reached"
    assert_dated_snapshot(result, knowledge, elapsed)
    assert TOKEN not in caplog.text


def test_connection_resets_give_the_dated_snapshot_within_the_deadline(
    resetting_server: str, knowledge: Knowledge, environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", resetting_server)
    start = time.monotonic()
    result = current_advisories(knowledge, "vllm", deadline_seconds=DEADLINE)
    assert_dated_snapshot(result, knowledge, time.monotonic() - start)
    assert result.provenance.fallback_reason in ("network_error", "connection_refused")


# --- scripts/refresh_advisories.py --------------------------------------------------------------------


def as_github(advisory: Advisory) -> dict[str, Any]:
    """A stored advisory as GitHub would list it (its GHSA id, severity, vectors and published ranges)."""
    entry = gh_advisory(advisory.ghsa or "", advisory.cve, "", None, advisory.severity)
    entry["vulnerabilities"] = [
        {
            "package": {"ecosystem": "pip", "name": advisories.PIP_NAMES[advisory.package]},
            "vulnerable_version_range": ", ".join(re.sub(r"^([<>=!]+)", r"\1 ", c) for c in r.affected.split(",")),
            "first_patched_version": None if r.fix_basis == "derived" else as_text(r.fixed_in),
        }
        for r in advisory.ranges
    ]
    entry["cvss_severities"] = {
        f"cvss_v{c.version[0]}": {"vector_string": c.vector, "score": c.score} for c in advisory.cvss
    }
    return entry


def run_refresh(knowledge_dir: Path, base: str, cache: Path, *args: str) -> Ran:
    """scripts/refresh_advisories.py, run in this process with the environment it reads set for it."""
    with pytest.MonkeyPatch.context() as env:
        env.delenv("GITHUB_TOKEN", raising=False)
        env.delenv("GH_TOKEN", raising=False)
        env.setenv("VLLM_CACHING_MCP_GITHUB_API", base)
        env.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(cache))
        main = script_main(REPO / "scripts" / "refresh_advisories.py")
        return run_in_process(main, "--knowledge-dir", str(knowledge_dir), "--deadline", "10", *args)


def script_github_as_stored(fake: FakeGitHub, knowledge: Knowledge, extra: list[dict[str, Any]] | None = None) -> None:
    for package in ("vllm", "lmcache", "nixl", "mooncake"):  # the order the script asks in
        listed = [as_github(a) for a in advisories.stored(knowledge, package) if a.ghsa]  # type: ignore[arg-type]
        fake.script("/advisories", page(listed + ((extra or []) if package == "vllm" else [])))


def test_refresh_dates_the_snapshot_only_when_github_agrees(
    knowledge: Knowledge, knowledge_copy: Path, tmp_path: Path
) -> None:
    path = knowledge_copy / "advisories.yaml"
    original = path.read_text()
    with FakeGitHub() as base:
        pass  # a port nobody answers on once stopped
    fake = FakeGitHub()
    script_github_as_stored(fake, knowledge, [gh_advisory("GHSA-w3w3-w3w3-w3w3", None, "< 0.35.0", "0.35.0")])
    with fake as live:
        differs = run_refresh(knowledge_copy, live, tmp_path / "cache", "--write")
    assert differs.returncode == 1, differs.stderr
    assert "vllm: GHSA-w3w3-w3w3-w3w3 (no CVE) is new: high" in differs.stdout and path.read_text() == original
    fake = FakeGitHub()
    script_github_as_stored(fake, knowledge)
    with fake as live:
        agrees = run_refresh(knowledge_copy, live, tmp_path / "cache2", "--write")
    assert agrees.returncode == 0, agrees.stdout + agrees.stderr
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert path.read_text() == original.replace("checked_at: 2026-12-01", f"checked_at: {today}", 1)
    unreachable = run_refresh(knowledge_copy, base, tmp_path / "cache3", "--write")
    assert unreachable.returncode == 1 and "connection refused" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


@pytest.mark.parametrize(
    ("advisory_id", "before", "first", "in_range"),
    [
        # the upload read whole since the route arrived (0.7.3); the published range starts at 0.22.0
        ("GHSA-v82g-2437-67m2", None, "0.11.0", "0.22.0"),
        ("GHSA-8wr5-jm2h-8r4f", "0.16.0", "0.17.0", "0.17.1"),
        # MOSS-Audio arrived in 0.24.0 with the cache; published from 0.25.0
        ("GHSA-823j-m4cj-hmjf", "0.23.0", "0.24.0", "0.25.0"),
    ],
)
def test_a_flaw_the_code_shows_before_the_published_range_counts_and_says_so(
    knowledge: Knowledge, advisory_id: str, before: str | None, first: str, in_range: str
) -> None:
    from vllm_caching_mcp.advisories import flaw_present_before

    advisory = by_id(knowledge, advisory_id)
    if before is not None:
        assert status_at(advisory, v(before)) == "not_affected"
    assert status_at(advisory, v(first)) == "affected"
    earlier = flaw_present_before(advisory, v(first))
    assert earlier is not None and earlier <= v(first)
    assert flaw_present_before(advisory, v(in_range)) is None  # inside the published range: as published
    everything = DeploymentFacts(multimodal=frozenset({"audio"}), configured=frozenset({"--speculative-config"}))
    (hit,) = [
        f
        for f in affecting(knowledge.advisories.advisories, "vllm", v(first), everything)
        if f.advisory.id == advisory_id
    ]
    assert hit.flaw_present_from == earlier
    assert f"below the published range, but the code has the flaw from {earlier}" in hit.line()


def test_a_flaw_present_from_must_come_before_the_range() -> None:
    from pydantic import ValidationError

    from vllm_caching_mcp.knowledge import AffectedRange

    with pytest.raises(ValidationError, match=r"flaw_present_from 0\.18\.0 must come before the start"):
        AffectedRange.model_validate(
            {"affected": ">=0.17.1,<0.24.0", "fixed_in": "0.24.0", "flaw_present_from": "0.18.0"}
        )
    with pytest.raises(ValidationError, match=r"must come before the start of '<0\.24\.0'"):
        AffectedRange.model_validate({"affected": "<0.24.0", "fixed_in": "0.24.0", "flaw_present_from": "0.11.0"})


def test_the_live_list_keeps_the_flaw_the_snapshot_read_before_the_published_range(knowledge: Knowledge) -> None:
    from vllm_caching_mcp.advisories import merge
    from vllm_caching_mcp.knowledge import AffectedRange

    stored = by_id(knowledge, "GHSA-8wr5-jm2h-8r4f")
    # GitHub publishes only its own range, without the wheel reading.
    live = stored.model_copy(update={"ranges": (AffectedRange(affected=">=0.17.1,<0.24.0", fixed_in="0.24.0"),)})
    merged, _ = merge([stored], [live])
    (again,) = merged
    assert [str(r.flaw_present_from) for r in again.ranges] == ["0.17.0"]
    assert status_at(again, v("0.17.0")) == "affected"
