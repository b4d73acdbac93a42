"""check_bug_status, asked the way operators ask, against a stand-in GitHub on 127.0.0.1 (never the internet).

Release dates used below are the PyPI upload dates in knowledge/releases.yaml: vLLM 0.23.0
2026-06-13, 0.24.0 2026-06-30; LMCache 0.5.4 2026-08-20, 0.5.6 2026-10-15.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from conftest import REPO, Ran, free_port, run_in_process, script_main
from github_standin import FakeGitHub, FakeIssue, FakePull, Reply
from vllm_caching_mcp.advice import bugs
from vllm_caching_mcp.advice.bugs import BugStatus, CheckBugStatusRequest, CheckBugStatusResult, check_bug_status
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.github import GitHubClient, GitHubSettings, Token
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.tools import ToolInputError, describe_validation_error, run_tool

TOKEN = "ghp_PLANTEDtokenVALUE0123456789abcdefXYZ"


def use_github(monkeypatch: pytest.MonkeyPatch, base: str, cache: Path | None, **settings: Any) -> None:
    """Point the tool at ``base``: the injectable factory, as tests are meant to use it."""
    values: dict[str, Any] = {"api_base": base, "cache_dir": cache, "backoff_base": 0.01, "timeout": 2.0}
    values.update(settings)
    monkeypatch.setattr(bugs, "client_factory", lambda: GitHubClient(GitHubSettings(**values)))


@pytest.fixture
def github(knowledge: Knowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """GitHub as the stored snapshots describe it, plus whatever a test adds."""
    fake = FakeGitHub.from_knowledge(knowledge)
    fake.start()
    use_github(monkeypatch, fake.base, tmp_path / "cache")
    yield fake
    fake.stop()


def ask(**arguments: Any) -> CheckBugStatusResult:
    """What run_tool does once the tool is registered: validate, answer, turn bad input into one line. These
    tests read each issue in full, so `detail` is full unless given (the default answer is each verdict)."""
    try:
        request = CheckBugStatusRequest.model_validate({"detail": "full", **arguments})
    except ValidationError as exc:
        raise ToolInputError(describe_validation_error(exc)) from None
    try:
        return check_bug_status(request, load_knowledge())
    except AdviceError as exc:
        raise ToolInputError(str(exc)) from None


def one(result: CheckBugStatusResult, bug_id: str) -> BugStatus:
    return next(b for b in result.bugs if b.id == bug_id)


def ask_one(bug: str, **arguments: Any) -> BugStatus:
    result = ask(bugs=[bug], **arguments)
    assert len(result.bugs) == 1
    return result.bugs[0]


# --- the tracked set ------------------------------------------------------------------------------


def test_with_no_bugs_given_every_tracked_bug_is_checked_live(github: FakeGitHub, knowledge: Knowledge) -> None:
    result = ask()
    assert [b.id for b in result.bugs] == [b.id for b in knowledge.bugs]
    assert {b.provenance.source for b in result.bugs} == {"live"}
    assert result.api_mode == "rest" and result.requests_made == github.count() > 0
    assert all(b.tracked and b.citation is not None and b.avoidance for b in result.bugs)
    # GitHub agrees with the stored snapshot here, so nothing changed for #40259
    assert one(result, "vllm-project/vllm#40259").changes_since_snapshot == []


def test_by_default_every_tracked_bug_comes_as_its_verdict_and_avoidance_in_a_few_kb(knowledge: Knowledge) -> None:
    brief = ask(offline=True, detail="summary", version="0.22.1")
    full = ask(offline=True, version="0.22.1")
    assert brief.listed == "brief" and brief.bugs == [] and full.listed == "all" and full.brief == []
    assert [(b.id, b.verdict, b.verdict_reason) for b in brief.brief] == [
        (b.id, b.verdict, b.verdict_reason) for b in full.bugs
    ]
    biting = [b for b in brief.brief if b.verdict not in ("fixed_in_your_version", "not_affected")]
    assert biting and all(b.avoidance for b in biting) and len(biting) < len(brief.brief)
    text = brief.summary()
    assert all(f"{b.id}  {b.verdict.upper().replace('_', ' ')}" in text and str(b.avoidance) in text for b in biting)
    assert "detail: full, or name the issues in `bugs`" in text
    assert len(brief.model_dump_json()) < len(full.model_dump_json()) / 3
    # issues named in `bugs` were asked about: they come in full
    assert ask(offline=True, detail="summary", bugs=["LMCache/LMCache#2942"]).listed == "all"


def test_the_snapshot_described_the_closer_in_words_live_names_the_account(github: FakeGitHub) -> None:
    github.issue("vllm-project/vllm", 33170).closed_by = "github-actions[bot]"
    bug = ask_one("vllm-project/vllm#33170", version="0.33.0")
    assert bug.closed_by is not None and bug.closed_by.login == "github-actions[bot]" and bug.closed_by.is_bot
    assert [(c.what, c.now) for c in bug.changes_since_snapshot if c.what == "closed_by"] == [
        ("closed_by", "github-actions[bot]")
    ]
    # the throughput formula is unchanged in 0.33.0 and the stale bot closed it: keep the avoidance
    assert bug.verdict == "closed_without_fix" and bug.avoidance


# --- what concerns the user's stack ---------------------------------------------------------------


def repos(result: CheckBugStatusResult) -> set[str]:
    return {b.id.split("#")[0] for b in result.bugs}


def test_plain_vllm_gets_no_sglang_lmcache_or_nixl_issue_and_github_is_not_asked_for_them(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    result = ask(components=[], version="0.22.1")
    assert result.stack == ["vllm"] and repos(result) == {"vllm-project/vllm"}
    # vLLM issues about a backend's connector concern that backend's users only
    assert {"vllm-project/vllm#33170", "vllm-project/vllm#34054", "vllm-project/vllm#40040"}.isdisjoint(
        b.id for b in result.bugs
    )
    left = {b.id: b.concerns for b in result.left_out}
    assert left["sgl-project/sglang#22607"] == ["sglang"] and left["LMCache/LMCache#2942"] == ["lmcache"]
    assert left["vllm-project/vllm#33170"] == ["vllm", "nixl"]
    assert len(result.bugs) + len(result.left_out) == len(knowledge.bugs)
    asked = " ".join(r.path for r in github.requests)
    assert "sglang" not in asked and "LMCache" not in asked
    text = result.summary()
    assert "concerning vllm" in text and "left out, as they do not concern vllm: " in text
    assert "LMCache" not in text.splitlines()[0] and "No LMCache version" not in text


def test_the_connectors_in_use_bring_their_backends_into_the_stack(github: FakeGitHub) -> None:
    result = ask(connectors=["lmcacheconnectorv1"], lmcache_version="0.5.6")
    assert result.stack == ["lmcache", "vllm"]
    assert repos(result) == {"vllm-project/vllm", "LMCache/LMCache"}
    assert "vllm-project/vllm#40040" in {b.id for b in result.bugs}  # the LMCache MP adapter: an LMCache issue
    assert "vllm-project/vllm#33170" in {b.id for b in result.left_out}  # NIXL telemetry: not without NIXL


def test_an_lmcache_release_named_puts_lmcache_in_a_stack_that_left_it_out(github: FakeGitHub) -> None:
    result = ask(components=["vllm", "nixl"], lmcache_version="0.5.6", offline=True)
    assert result.stack == ["lmcache", "nixl", "vllm"] and "LMCache/LMCache" in repos(result)
    assert "vllm-project/vllm#33170" in {b.id for b in result.bugs}


def test_an_sglang_user_gets_sglang_issues_only(github: FakeGitHub, knowledge: Knowledge) -> None:
    result = ask(components=["sglang"], offline=True)
    assert result.stack == ["sglang"]
    assert [b.id for b in result.bugs] == [b.id for b in knowledge.bugs if b.repo == "sgl-project/sglang"]


def test_an_issue_asked_for_by_name_is_answered_whatever_the_stack_and_says_it_is_outside(
    github: FakeGitHub,
) -> None:
    result = ask(bugs=["sgl-project/sglang#22607"], components=["vllm"], offline=True)
    assert [b.id for b in result.bugs] == ["sgl-project/sglang#22607"] and result.left_out == []
    assert result.bugs[0].notes == ["concerns sglang, which the stack given (vllm) does not run"]


def test_no_stack_given_checks_every_tracked_issue(github: FakeGitHub, knowledge: Knowledge) -> None:
    result = ask(offline=True, lmcache_version="0.5.6")
    assert result.stack is None and result.left_out == [] and len(result.bugs) == len(knowledge.bugs)


# --- verdicts, the way operators ask -----------------------------------------------------------------


def test_on_0_20_2_the_offload_crash_40259_still_affects_me(github: FakeGitHub) -> None:
    bug = ask_one("vllm-project/vllm#40259", version="0.20.2")
    assert bug.verdict == "still_affects_you"
    assert bug.fixed_in is not None and (bug.fixed_in.version, bug.fixed_in.basis) == ("0.21.0", "knowledge_fixed_in")
    assert "upgrade" in bug.verdict_reason


def test_on_0_21_0_the_offload_crash_40259_is_fixed(github: FakeGitHub) -> None:
    bug = ask_one("https://github.com/vllm-project/vllm/issues/40259", version="0.21.0")
    assert bug.id == "vllm-project/vllm#40259" and bug.verdict == "fixed_in_your_version" and bug.state == "closed"
    assert [(p.ref, p.merged) for p in bug.linked_pulls] == [("pr:vllm-project/vllm#41549", True)]


def test_the_lmcache_deadlock_closed_by_a_bot_is_not_fixed(github: FakeGitHub) -> None:
    bug = ask_one("LMCache/LMCache#2942", lmcache_version="0.5.6")
    assert (bug.state, bug.state_reason) == ("closed", "not_planned")
    assert bug.closed_by is not None and bug.closed_by.login == "github-actions[bot]" and bug.closed_by.is_bot
    assert bug.verdict == "closed_without_fix"
    assert bug.avoidance is not None and "LMCACHE_LOCAL_CPU=True" in bug.avoidance


def test_simple_cpu_offload_race_39702_does_not_affect_0_18_1_which_predates_the_connector(github: FakeGitHub) -> None:
    # affected range >=0.19.0,<0.22.0; fixed in 0.22.0
    assert ask_one("vllm-project/vllm#39702", version="0.18.1").verdict == "not_affected"
    assert ask_one("vllm-project/vllm#39702", version="0.21.0").verdict == "still_affects_you"
    assert ask_one("vllm-project/vllm#39702", version="0.22.0").verdict == "fixed_in_your_version"


def test_a_duplicate_with_an_affected_range_is_fixed_from_the_first_release_past_the_range(github: FakeGitHub) -> None:
    # #36463 affects <0.21.0 and has no fixed_in: the first release past the range is 0.21.0
    bug = ask_one("vllm-project/vllm#36463", version="0.22.1")
    assert bug.verdict == "fixed_in_your_version"
    assert bug.fixed_in is not None and (bug.fixed_in.version, bug.fixed_in.basis) == ("0.21.0", "affected_range")
    # on 0.20.2, inside the range: still affected, and the range's end says which release to move to
    inside = ask_one("vllm-project/vllm#36463", version="0.20.2")
    assert inside.verdict == "still_affects_you"
    assert inside.fixed_in is not None and inside.fixed_in.version == "0.21.0"


def add_fixed_upstream_issue(github: FakeGitHub) -> None:
    github.add(
        FakeIssue(
            "vllm-project/vllm",
            50001,
            "[Bug]: offload store drops blocks",
            "closed",
            "completed",
            "2026-06-20T10:00:00Z",
            "maintainer",
            [FakePull("vllm-project/vllm", 50002, merged_at="2026-06-20T10:00:00Z")],
        )
    )


def test_an_untracked_issue_fixed_after_my_release_was_published_still_affects_me(github: FakeGitHub) -> None:
    add_fixed_upstream_issue(github)
    # the fix merged 2026-06-20; 0.23.0 was published 2026-06-13, so it cannot contain it
    bug = ask_one("vllm-project/vllm#50001", version="0.23.0")
    assert bug.verdict == "still_affects_you" and not bug.tracked
    assert bug.linked_pulls[0].relation == "closed_it"  # merged in the same second the issue closed
    assert (bug.fix_merged_at, bug.first_release_after_merge) == ("2026-06-20T10:00:00+00:00", "0.24.0")
    assert any("not tracked" in n for n in bug.notes)


def test_a_fix_merged_before_my_release_is_not_claimed_to_be_in_it(github: FakeGitHub) -> None:
    add_fixed_upstream_issue(github)
    bug = ask_one("vllm-project/vllm#50001", version="0.24.0")
    assert bug.verdict == "unknown" and "not established" in bug.verdict_reason
    assert bug.first_release_after_merge == "0.24.0"


def test_an_untracked_issue_closed_by_a_stale_bot_is_closed_without_a_fix(github: FakeGitHub) -> None:
    github.add(
        FakeIssue("vllm-project/vllm", 50010, "t", "closed", "not_planned", "2026-09-01T00:00:00Z", "stale[bot]")
    )
    bug = ask_one("vllm-project/vllm#50010")
    assert bug.verdict == "closed_without_fix" and bug.closed_by is not None and bug.closed_by.is_bot


def test_an_open_untracked_issue_still_affects_me(github: FakeGitHub) -> None:
    github.add(FakeIssue("sgl-project/sglang", 40000, "HiCache hangs"))
    bug = ask_one("sgl-project/sglang#40000")
    assert bug.verdict == "still_affects_you" and bug.package is None and bug.your_version is None


def test_what_changed_since_the_snapshot_when_an_open_issue_got_fixed(github: FakeGitHub) -> None:
    issue = github.issue("LMCache/LMCache", 3106)
    issue.state, issue.state_reason, issue.closed_at, issue.closed_by = (
        "closed",
        "completed",
        "2026-11-20T09:00:00Z",
        "maintainer",
    )
    issue.pulls = [FakePull("LMCache/LMCache", 4100, merged_at="2026-11-20T09:00:00Z")]
    bug = ask_one("LMCache/LMCache#3106", lmcache_version="0.5.6")
    changes = {(c.what, c.stored, c.now) for c in bug.changes_since_snapshot}
    assert ("state", "open", "closed") in changes
    assert ("new linked pull request", None, "pr:LMCache/LMCache#4100 (merged)") in changes
    # merged 2026-11-20, after LMCache 0.5.6 (2026-10-15): no release the knowledge knows can contain it
    assert bug.verdict == "still_affects_you" and bug.first_release_after_merge is None
    # on 0.5.4 (2026-08-20) with a merge on 2026-08-10 the release might have it: not claimed either way
    issue.pulls[0].merged_at = "2026-08-10T09:00:00Z"
    issue.closed_at = "2026-08-10T09:00:00Z"
    again = ask_one("LMCache/LMCache#3106", lmcache_version="0.5.4", deadline_seconds=5)
    assert again.provenance.source == "cache"  # the answer above is still within the TTL


# --- where the answer comes from ---------------------------------------------------------------------


def test_offline_answers_from_the_snapshot_with_its_date_and_asks_nobody(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    result = ask(offline=True, version="0.22.1")
    assert github.requests == [] and result.requests_made == 0 and result.api_mode == "offline"
    for bug, stored in zip(result.bugs, knowledge.bugs, strict=True):
        assert bug.provenance.source == "snapshot" and bug.provenance.fallback_reason == "offline_requested"
        assert bug.provenance.snapshot_checked_at == stored.snapshot.checked_at
        assert bug.state == stored.snapshot.state
    assert one(result, "LMCache/LMCache#2942").verdict == "closed_without_fix"
    assert "stored snapshot of 2026-08-11; offline requested" in result.summary()


def test_a_second_call_within_the_ttl_is_answered_from_the_cache(github: FakeGitHub) -> None:
    ask(bugs=["vllm-project/vllm#40259"])
    before = github.count()
    again = ask(bugs=["vllm-project/vllm#40259"])
    assert github.count() == before and again.requests_made == 0
    provenance = again.bugs[0].provenance
    assert provenance.source == "cache" and provenance.cache_age_seconds is not None
    assert provenance.cache_age_seconds < 60


def test_when_github_goes_away_the_stale_cache_answers_with_the_reason(
    knowledge: Knowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGitHub.from_knowledge(knowledge)
    base = fake.start()
    use_github(monkeypatch, base, tmp_path, cache_ttl=0)
    ask(bugs=["vllm-project/vllm#40259"])
    fake.stop()
    bug = ask_one("vllm-project/vllm#40259")
    assert bug.provenance.source == "cache" and bug.provenance.fallback_reason == "connection_refused"


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        (f"http://127.0.0.1:{free_port()}", "connection_refused"),
        ("https://api.github-standin.invalid", "dns_failure"),  # .invalid never resolves; no packet leaves
    ],
    ids=["port-refused", "dns-failure"],
)
def test_without_a_network_every_bug_falls_back_to_the_snapshot(
    base: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knowledge: Knowledge
) -> None:
    use_github(monkeypatch, base, tmp_path)
    started = time.monotonic()
    result = ask(version="0.20.2")
    assert time.monotonic() - started < 5  # the first failure stops the rest from trying
    assert len(result.bugs) == len(knowledge.bugs)
    assert {(b.provenance.source, b.provenance.fallback_reason) for b in result.bugs} == {("snapshot", reason)}
    assert one(result, "vllm-project/vllm#40259").verdict == "still_affects_you"


def test_rate_limited_falls_back_after_one_request(github: FakeGitHub, knowledge: Knowledge) -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)}
    first = knowledge.bugs[0]
    github.script(f"/repos/{first.repo}/issues/{first.number}", Reply(403, b'{"message": "API rate limit"}', headers))
    result = ask()
    assert github.count() == 1
    assert {b.provenance.fallback_reason for b in result.bugs} == {"rate_limited"}


def test_a_slow_github_times_out_into_the_snapshot(
    knowledge: Knowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeGitHub.from_knowledge(knowledge, latency=1.0) as base:
        use_github(monkeypatch, base, tmp_path, timeout=0.2, max_retries=0)
        bug = ask_one("vllm-project/vllm#40259")
    assert (bug.provenance.source, bug.provenance.fallback_reason) == ("snapshot", "timeout")


def test_malformed_json_falls_back_to_the_snapshot(github: FakeGitHub) -> None:
    github.script("/repos/vllm-project/vllm/issues/40259", Reply(200, b"<html>unicorn</html>"))
    bug = ask_one("vllm-project/vllm#40259")
    assert (bug.provenance.source, bug.provenance.fallback_reason) == ("snapshot", "bad_response")


def test_an_untracked_issue_that_cannot_be_fetched_is_unknown(github: FakeGitHub) -> None:
    bug = ask_one("vllm-project/vllm#1", offline=True)
    assert (bug.provenance.source, bug.verdict, bug.state) == ("none", "unknown", None)


def test_with_a_token_every_tracked_bug_costs_one_graphql_request(
    github: FakeGitHub, knowledge: Knowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = ask(version="0.22.1", lmcache_version="0.5.6")
    use_github(monkeypatch, github.base, tmp_path / "graphql-cache", token=Token(TOKEN))
    before = github.count()
    graphql = ask(version="0.22.1", lmcache_version="0.5.6")
    assert graphql.api_mode == "graphql" and graphql.requests_made == 1 and github.count() == before + 1
    assert [(b.id, b.verdict, b.state) for b in graphql.bugs] == [(b.id, b.verdict, b.state) for b in rest.bugs]


def test_check_bug_status_changes_neither_the_request_nor_the_knowledge(
    github: FakeGitHub, knowledge: Knowledge
) -> None:
    add_fixed_upstream_issue(github)
    request = CheckBugStatusRequest(bugs=["vllm-project/vllm#50001", "LMCache/LMCache#2942"], version="0.23.0")
    request_before, knowledge_before = copy.deepcopy(request.model_dump()), copy.deepcopy(knowledge.model_dump())
    result = check_bug_status(request, knowledge)
    assert [b.verdict for b in result.bugs] == ["still_affects_you", "closed_without_fix"]
    assert request.model_dump() == request_before
    assert knowledge.model_dump() == knowledge_before


# --- the token, and bad input ------------------------------------------------------------------------


def test_the_token_appears_in_no_result_summary_or_log(
    github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github.reflect_authorization = True
    env = {"GITHUB_TOKEN": TOKEN, "VLLM_CACHING_MCP_GITHUB_API": github.base}
    monkeypatch.setattr(
        bugs,
        "client_factory",
        lambda: GitHubClient(GitHubSettings.from_env(env, cache_dir=tmp_path, backoff_base=0.01)),
    )
    live = ask(bugs=["vllm-project/vllm#40259"])
    graph = ask()
    env["VLLM_CACHING_MCP_GITHUB_API"] = f"http://127.0.0.1:{free_port()}"
    down = ask(bugs=["vllm-project/vllm#1"], deadline_seconds=3)
    assert github.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    for result in (live, graph, down):
        assert TOKEN not in result.model_dump_json() and TOKEN not in result.summary()
    assert TOKEN not in caplog.text


@pytest.mark.parametrize(
    ("arguments", "field", "says"),
    [
        ({"bugs": ["vllm#1"]}, "bugs[0]", "owner/repo#N"),
        ({"bugs": ["vllm-project/vllm#1", "https://evil.example.com/a/b/issues/1"]}, "bugs[1]", "github.com"),
        ({"bugs": ["../../etc/passwd#1"]}, "bugs[0]", "owner"),
        ({"bugs": ["x/y#1"] * 51}, "bugs", "at most 50"),
        ({"version": "latest"}, "version", "MAJOR.MINOR.PATCH"),
        ({"lmcache_version": "five"}, "lmcache_version", "MAJOR.MINOR.PATCH"),
        ({"deadline_seconds": 0}, "deadline_seconds", "greater than or equal to 1"),
        ({"offline": "maybe"}, "offline", "boolean"),
        ({"components": ["vllm", "dynamo"]}, "components.1", "'vllm', 'lmcache', 'nixl', 'mooncake' or 'sglang'"),
        ({"connectors": ["LMCacheConector"]}, "connectors[0]", "did you mean LMCacheMPConnector, LMCacheConnectorV1"),
    ],
)
def test_bad_input_names_the_field_and_contacts_nobody(
    github: FakeGitHub, arguments: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(ToolInputError) as caught:
        ask(**arguments)
    assert str(caught.value).startswith(f"{field}:") and says in str(caught.value)
    assert github.requests == []


def test_the_spec_marks_the_tool_open_world() -> None:
    assert bugs.SPEC.name == "check_bug_status" and bugs.SPEC.open_world


# --- scripts/refresh_bugs.py -------------------------------------------------------------------------


def refresh(bugs_file: Path, base: str, cache: Path, *args: str) -> Ran:
    """scripts/refresh_bugs.py, run in this process with the environment it reads set for it."""
    with pytest.MonkeyPatch.context() as env:
        env.delenv("GITHUB_TOKEN", raising=False)
        env.delenv("GH_TOKEN", raising=False)
        env.setenv("VLLM_CACHING_MCP_GITHUB_API", base)
        env.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(cache))
        return run_in_process(script_main(REPO / "scripts" / "refresh_bugs.py"), "--file", str(bugs_file), *args)


def test_refresh_shows_a_diff_and_writes_only_when_asked(
    knowledge: Knowledge, knowledge_copy: Path, tmp_path: Path
) -> None:
    fake = FakeGitHub.from_knowledge(knowledge)
    issue = fake.issue("LMCache/LMCache", 3106)
    issue.state, issue.state_reason, issue.closed_at, issue.closed_by = (
        "closed",
        "completed",
        "2026-11-20T09:00:00Z",
        "maintainer",
    )
    issue.pulls = [FakePull("LMCache/LMCache", 4100, merged_at="2026-11-20T09:00:00Z")]
    bugs_file = knowledge_copy / "bugs.yaml"
    original = bugs_file.read_text()
    with fake as base:
        shown = refresh(bugs_file, base, tmp_path / "cache", "--bug", "LMCache/LMCache#3106")
        assert shown.returncode == 0, shown.stderr
        assert bugs_file.read_text() == original
        assert "-      state: open\n" in shown.stdout and "+      state: closed\n" in shown.stdout
        assert "+        - {ref: 'pr:LMCache/LMCache#4100', merged: true}\n" in shown.stdout
        written = refresh(bugs_file, base, tmp_path / "cache", "--bug", "LMCache/LMCache#3106", "--write")
    assert written.returncode == 0, written.stderr
    new = bugs_file.read_text()
    # only the snapshot block changed: the comments and every other line are as they were
    diff = list(difflib.unified_diff(original.splitlines(), new.splitlines(), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    assert removed == ["      state: open", "      checked_at: 2026-04-22"]
    assert new.startswith(original.split("bugs:")[0])
    entry = next(b for b in yaml.safe_load(new)["bugs"] if b["number"] == 3106)
    assert entry["snapshot"]["state"] == "closed" and entry["snapshot"]["closed_by"] == "maintainer"
    # the refreshed file still loads (uncached: the same directory may have been loaded above)
    assert load_knowledge.__wrapped__(str(knowledge_copy)).bugs


def test_refresh_leaves_the_file_alone_when_github_cannot_be_reached(knowledge_copy: Path, tmp_path: Path) -> None:
    bugs_file = knowledge_copy / "bugs.yaml"
    original = bugs_file.read_text()
    out = refresh(bugs_file, f"http://127.0.0.1:{free_port()}", tmp_path, "--write")
    assert out.returncode == 1 and bugs_file.read_text() == original
    assert "connection_refused" in out.stderr and "Traceback" not in out.stderr
    assert json.dumps(out.stdout) == '""'


@pytest.mark.parametrize("tool", ["check_bug_status", "diagnose", "review_deployment"])
def test_the_old_vllm_version_argument_is_refused_with_its_new_name(tool: str) -> None:
    # The release is `version` in every tool; a caller still sending the old name is told what it is now.
    with pytest.raises(ToolInputError, match=r"^arguments: .*'vllm_version' \(vllm_version is now version\); it takes"):
        run_tool(
            tool,
            {"vllm_version": "0.22.1", "offline": True} if tool == "check_bug_status" else {"vllm_version": "0.22.1"},
        )
