"""check_advisories, called the way the server and the CLI call it (`tools.run_tool`, `cli.main`, settings
from the environment), against a stand-in GitHub Advisory Database on 127.0.0.1 (never the internet).

The stored snapshot (knowledge/advisories.yaml, checked 2026-12-01) answers offline and whenever
GitHub misbehaves; a live answer carries what GitHub lists now, with the snapshot's conditions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from github_standin import FakeGitHub
from standin_http import Reply
from test_advisories import HOUR, gh_advisory, page
from vllm_caching_mcp import cli
from vllm_caching_mcp.advice.advisories_tool import AdvisoryAnswer, CheckAdvisoriesResult
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.tools import TOOL_NAMES, ToolInputError, run_tool, tool_spec

TOKEN = "ghp_PLANTEDcheckADVISORIEStoken0123456789"
DEADLINE = 2.0
SLACK = 3.0  # interpreter and thread scheduling on a loaded 2-core machine
SNAPSHOT_DATE = "2026-12-01"
NEW = "GHSA-w3w3-w3w3-w3w3"  # in no snapshot: only the stand-in lists it
API_KEY_BYPASS = "GHSA-94f4-hr76-p5j6"  # applies only where an API key is what keeps callers out; fixed 0.22.0


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings as the server reads them: a token and a private cache; the API base is set per test."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def github(environment: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", fake.start())
    yield fake
    fake.stop()


def ask(**arguments: Any) -> CheckAdvisoriesResult:
    """The tool's answer; these tests read verdicts, so every advisory that may apply is listed unless
    `include` says otherwise (the default lists only the serious ones that apply)."""
    result = run_tool("check_advisories", {"include": "relevant", **arguments})
    assert isinstance(result, CheckAdvisoriesResult)
    assert TOKEN not in result.model_dump_json() and TOKEN not in result.summary()
    return result


def entry(result: CheckAdvisoriesResult, advisory_id: str) -> AdvisoryAnswer:
    return next(a for a in result.advisories if advisory_id in (a.id, a.ghsa, a.cve))


def test_it_is_registered_after_check_bug_status_as_a_network_tool() -> None:
    assert TOOL_NAMES[TOOL_NAMES.index("check_bug_status") + 1] == "check_advisories"
    spec = tool_spec("check_advisories")
    assert spec.open_world and "check_version" in spec.description


# --- live ---------------------------------------------------------------------------------------------


def test_a_live_advisory_the_snapshot_lacks_is_listed_and_judged_for_the_release(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    github.script(
        "/advisories",
        page(
            [
                gh_advisory(NEW, None, "< 0.35.0", "0.35.0", "high"),
                gh_advisory("GHSA-2222-3333-4444", None, "< 0.20.0", "0.20.0", "critical"),
                gh_advisory(API_KEY_BYPASS, "CVE-2026-48746", ">= 0.3.0, < 0.22.0", "0.22.0", "critical"),
                gh_advisory(
                    "GHSA-2pc9-4j83-qjmr", "CVE-2026-22807", ">= 0.10.1, < 0.14.0", "0.14.0", withdrawn_at="2026-12-02"
                ),
            ]
        ),
    )
    result = ask(include="all", version="0.21.0", deadline_seconds=DEADLINE)
    assert result.provenance.source == "live" and result.provenance.text == "GitHub Advisory Database, live"
    [asked] = github.requests
    assert asked.path == "/advisories?ecosystem=pip&affects=vllm&per_page=100"
    assert asked.headers["authorization"] == f"Bearer {TOKEN}"

    new = entry(result, NEW)
    assert (new.verdict, new.release_status, new.fixed_in, new.curated) == ("applies", "affected", "0.35.0", False)
    assert new.citation is None and new.cvss_score == 9.8 and new.source == f"https://github.com/advisories/{NEW}"
    assert entry(result, "GHSA-2222-3333-4444").verdict == "not_in_this_release"
    # The live record keeps the snapshot's condition: with the API key not given, it stays open.
    bypass = entry(result, API_KEY_BYPASS)
    assert bypass.verdict == "applies_only_if" and bypass.open_conditions == ["configured"]
    assert bypass.only_if == ["configured includes --api-key or VLLM_API_KEY"]
    assert bypass.curated and bypass.citation is not None and bypass.citation.id == API_KEY_BYPASS
    assert "GHSA-2pc9-4j83-qjmr" not in {a.id for a in result.advisories}
    assert any(n.startswith(f"{NEW}: new since the snapshot") for n in result.notes)
    assert any("GHSA-2pc9-4j83-qjmr: withdrawn" in n for n in result.notes)
    # A high advisory fixed only in 0.35.0 keeps every known release below a floor.
    assert result.floor.status == "none_clear" and NEW in result.floor.open_at_floor
    assert NEW in result.summary() and "GitHub Advisory Database, live" in result.summary()


def test_a_second_ask_is_answered_from_the_cache_and_says_how_old_it_is(github: FakeGitHub) -> None:
    github.script("/advisories", page([gh_advisory(NEW, None, "< 0.35.0", "0.35.0")]))
    assert ask(package="vllm").provenance.source == "live"
    again = ask(package="vllm")
    assert again.provenance.source == "cache" and again.provenance.cache_age_seconds is not None
    assert "cached" in again.provenance.text and len(github.requests) == 1
    assert entry(again, NEW).verdict == "applies"


def test_the_package_is_asked_for_under_its_pip_name(github: FakeGitHub) -> None:
    github.script("/advisories", page([]))
    result = ask(package="mooncake", version="0.3.12")
    assert github.requests[0].path == "/advisories?ecosystem=pip&affects=mooncake-transfer-engine&per_page=100"
    assert result.pip_name == "mooncake-transfer-engine" and result.provenance.source == "live"
    # GitHub lists none, and the snapshot's CVE-only Mooncake records are kept as stored.
    assert entry(result, "CVE-2026-103764").verdict == "applies"


# --- offline and when GitHub misbehaves -------------------------------------------------------------


def test_offline_answers_from_the_snapshot_with_its_date_and_asks_nobody(github: FakeGitHub) -> None:
    result = ask(version="0.22.1", offline=True)
    assert result.provenance.source == "snapshot" and result.provenance.fallback_reason == "offline_requested"
    assert str(result.provenance.snapshot_checked_at) == SNAPSHOT_DATE
    assert f"stored snapshot of {SNAPSHOT_DATE}; offline requested" in result.summary().splitlines()[0]
    assert github.requests == []
    assert NEW not in {a.id for a in result.advisories}


FAULTS: dict[str, tuple[list[Reply], set[str]]] = {
    "hang": ([Reply(200, b"[]", delay=DEADLINE + 5)] * 3, {"timeout", "deadline"}),
    "5xx storm": ([Reply(503, b"unavailable")] * 40, {"server_error", "deadline"}),
    "rate limited": (
        [Reply(403, b"{}", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": HOUR})] * 10,
        {"rate_limited"},
    ),
    "bad JSON": ([Reply(200, b'[{"ghsa_id": ')] * 10, {"bad_response"}),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_misbehaving_github_gives_the_dated_snapshot_and_the_reason_within_the_deadline(
    fault: str, github: FakeGitHub
) -> None:
    replies, reasons = FAULTS[fault]
    github.script("/advisories", *replies)
    start = time.monotonic()
    result = ask(version="0.21.0", deadline_seconds=DEADLINE)
    elapsed = time.monotonic() - start
    assert github.requests, "the fault was never reached"
    assert elapsed < DEADLINE + SLACK, f"{elapsed:.1f} s"
    assert result.provenance.source == "snapshot" and result.provenance.fallback_reason in reasons
    assert str(result.provenance.snapshot_checked_at) == SNAPSHOT_DATE
    reason = str(result.provenance.fallback_reason).replace("_", " ")
    assert f"stored snapshot of {SNAPSHOT_DATE}; {reason}" in result.summary()
    assert entry(result, API_KEY_BYPASS).verdict == "applies_only_if"


def test_connection_resets_give_the_dated_snapshot(
    resetting_server: str, environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", resetting_server)
    result = ask(deadline_seconds=DEADLINE)
    assert result.provenance.source == "snapshot" and result.provenance.fallback_reason is not None


# --- the release and the deployment conditions --------------------------------------------------------


def test_the_api_key_condition_applies_when_given_is_ruled_out_when_absent_and_open_when_not_given() -> None:
    def verdict(**conditions: Any) -> str:
        return entry(ask(include="all", version="0.21.0", offline=True, **conditions), API_KEY_BYPASS).verdict

    assert verdict() == "applies_only_if"
    assert verdict(configured=["--api-key"]) == "applies"
    assert verdict(configured=["--api_key=s3cr3t-value"]) == "applies"  # vLLM reads --api_key as --api-key
    assert verdict(configured=["--port", "--kv-offloading-size"]) == "ruled_out"
    assert entry(
        ask(include="all", version="0.22.0", offline=True, configured=["--api-key"]), API_KEY_BYPASS
    ).verdict == ("not_in_this_release")


def test_a_value_given_with_a_variable_is_not_echoed() -> None:
    result = ask(version="0.21.0", offline=True, configured=["VLLM_API_KEY=s3cr3t-value"])
    assert result.conditions_given == {"configured": ["VLLM_API_KEY"]}
    assert "s3cr3t" not in result.model_dump_json() and "s3cr3t" not in result.summary()
    assert entry(result, API_KEY_BYPASS).verdict == "applies"


def test_connectors_are_matched_by_name_in_any_case_and_leave_the_other_conditions_open() -> None:
    result = ask(include="all", version="0.33.0", offline=True, connectors=["nixlconnector"])
    assert result.conditions_given == {"connectors": ["NixlConnector"]}
    assert "connectors" not in result.conditions_not_given and "configured" in result.conditions_not_given
    nixl = entry(result, "CVE-2026-94622")
    assert nixl.verdict == "applies" and nixl.release_status == "not_established"
    assert entry(result, "CVE-2026-94627").verdict == "ruled_out"  # Mooncake's, not NIXL's
    assert result.floor.status == "none_clear" and "CVE-2026-94622" in result.floor.open_at_floor


def test_a_hugging_face_architecture_name_matches_the_advisory_s() -> None:
    phi = "GHSA-vc6m-hm49-g9qg"
    assert entry(ask(include="all", offline=True, architectures=["Phi4MMForCausalLM"]), phi).verdict == "applies"
    assert entry(ask(include="all", offline=True, architectures=["LlamaForCausalLM"]), phi).verdict == "ruled_out"


def test_without_a_version_every_advisory_is_listed_with_its_ranges(knowledge: Knowledge) -> None:
    result = ask(offline=True)
    stored = [a for a in knowledge.advisories.advisories if a.package == "vllm"]
    assert len(result.advisories) == len(stored) and result.version is None and result.version_context is None
    assert all(a.release_status is None and a.verdict in ("applies", "applies_only_if") for a in result.advisories)
    assert entry(result, API_KEY_BYPASS).fixed_in == "0.22.0"
    assert result.floor.below_floor is None


def test_a_package_s_own_advisories_need_no_component_condition() -> None:
    lmcache = ask(include="all", package="lmcache", version="0.5.5", offline=True)
    rce = entry(lmcache, "CVE-2026-107204")
    assert rce.verdict == "applies" and rce.only_if == [] and rce.citation is not None
    assert rce.citation.verification.status == "verified"
    assert (lmcache.floor.release, lmcache.floor.below_floor) == ("0.5.6", True)
    assert lmcache.version_context is not None and lmcache.version_context.package == "lmcache"
    assert ask(include="all", package="lmcache", version="0.5.6", offline=True).floor.below_floor is False
    mooncake = ask(include="all", package="mooncake", version="0.3.13", offline=True)
    assert entry(mooncake, "CVE-2026-103764").verdict == "not_in_this_release"
    assert entry(mooncake, "CVE-2026-106037").verdict == "applies"
    assert mooncake.floor.status == "none_clear" and mooncake.version_context is None


def test_a_package_with_no_advisory_says_so() -> None:
    result = ask(package="nixl", version="0.5.0", offline=True)
    assert result.advisories == [] and result.floor.status == "no_serious_advisory"
    assert "no published advisory names nixl (pip)" in result.notes


# --- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"package": "sglang"}, "package:"),
        ({"version": "latest"}, "version:"),
        ({"version": " "}, "version:"),
        ({"package": "mooncake", "version": "soon"}, "version:"),
        ({"connectors": ["NixlConnector", "nixl"]}, "connectors[1]:"),
        ({"configured": ["api key"]}, "configured[0]:"),
        ({"offload_tiers": ["ssd"]}, "offload_tiers[0]:"),
        ({"multimodal": ["text"]}, "multimodal.0:"),
        ({"engine": "v2"}, "engine:"),
        ({"deadline_seconds": 0.1}, "deadline_seconds:"),
        ({"deadline_seconds": 1e308}, "deadline_seconds:"),
        ({"versoin": "0.22.1"}, "arguments: check_advisories takes no argument 'versoin'"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolInputError) as caught:
        run_tool("check_advisories", {"offline": True, **arguments})
    message = str(caught.value)
    assert message.startswith(field) and "\n" not in message and "Traceback" not in message


def test_a_bad_github_setting_names_the_variable(environment: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", "http://example.com")
    with pytest.raises(ToolInputError, match=r"^VLLM_CACHING_MCP_GITHUB_API: .*https://"):
        run_tool("check_advisories", {})


# --- the command line, in process ---------------------------------------------------------------------


def test_the_cli_prints_the_offline_answer_with_the_snapshot_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check-advisories", "--offline", "--version", "0.21.0", "--configured", "--api-key"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"vLLM 0.21.0: 85 advisories (stored snapshot of {SNAPSHOT_DATE}; offline requested)")
    assert API_KEY_BYPASS in out


def test_the_cli_call_prints_the_live_structured_answer(github: FakeGitHub, capsys: pytest.CaptureFixture[str]) -> None:
    github.script("/advisories", page([gh_advisory(NEW, None, "< 0.35.0", "0.35.0")]))
    assert (
        cli.main(
            ["call", "check_advisories", json.dumps({"version": "0.33.0", "multi_node": False, "include": "relevant"})]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["provenance"]["source"] == "live" and data["conditions_given"] == {"multi_node": False}
    assert next(a for a in data["advisories"] if a["id"] == NEW)["verdict"] == "applies"


def test_the_cli_refuses_bad_input_with_exit_2_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check-advisories", "--offline", "--connectors", "nixl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "connectors[0]:" in err


def test_relevant_lists_the_advisories_that_may_apply_and_counts_the_rest() -> None:
    relevant = ask(version="0.33.0", offline=True)
    every = ask(version="0.33.0", offline=True, include="all")
    assert {a.verdict for a in relevant.advisories} <= {"applies", "applies_only_if"}
    assert relevant.verdict_counts == every.verdict_counts
    assert len(relevant.advisories) + relevant.not_listed == len(every.advisories) and every.not_listed == 0
    assert relevant.not_listed > 0 and "not listed (include='all' lists them)" in relevant.summary()
    assert len(relevant.model_dump_json()) < len(every.model_dump_json()) / 2


def test_by_default_the_serious_ones_that_apply_are_listed_the_conditional_ones_by_id_in_a_few_kb() -> None:
    brief = run_tool("check_advisories", {"version": "0.22.1", "offline": True})
    relevant = ask(version="0.22.1", offline=True)
    assert isinstance(brief, CheckAdvisoriesResult)
    assert brief.include == "serious" and brief.verdict_counts == relevant.verdict_counts
    assert [a.id for a in brief.advisories] == [
        a.id for a in relevant.advisories if a.verdict == "applies" and a.severity in ("critical", "high")
    ]
    serious_conditional = [
        a.id for a in relevant.advisories if a.verdict == "applies_only_if" and a.severity in ("critical", "high")
    ]
    assert brief.serious_only_if == relevant.serious_only_if == serious_conditional and serious_conditional
    text = brief.summary()
    assert all(i in text for i in serious_conditional)
    assert "  and 13 medium or low\n" in text
    assert "not listed: 35 more that may apply (include='relevant' lists them); 49 that do not apply" in text
    assert len(brief.model_dump_json()) + len(text) < 6_000 < len(relevant.model_dump_json())
