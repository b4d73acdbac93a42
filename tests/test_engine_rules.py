"""The error-level review rules against what the released engine does (issue 14 item 6, issue 15).

tests/data/engine/rules-<version>.json holds, for command lines that trip each `severity: error`
rule of knowledge/pitfalls.yaml (and controls that do not), what vLLM itself did with them: refused
at start-up (the stage, the exception, its first line), hung, logged and turned something off, or
worked. scripts/engine_oracle/rules.py records them with vLLM installed in a scratch venv
(knowledge/ENGINE.md); this test needs no vLLM. It reviews each command line with
review_deployment and checks that the rule fires where the engine refuses or disables, and stays
quiet where the engine works.

Where the review and the engine disagree, the case is in KNOWN_DISAGREEMENTS with what the engine
did: the set must be exactly that, so a corrected rule fails until its entry goes, and a new
disagreement fails at once. The render cases are the `vllm serve` lines render_config writes; the
engine took each of them, and they must still be the lines render_config writes today.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from vllm_caching_mcp.advice.render import RenderConfigRequest, render_config, shell_words
from vllm_caching_mcp.advice.review import ReviewRequest, review_deployment
from vllm_caching_mcp.knowledge import Knowledge

ENGINE_DATA = Path(__file__).resolve().parent / "data" / "engine"
RULE_FILES = sorted(ENGINE_DATA.glob("rules-*.json"))
# What the engine does when it bears a failure rule out; "works" is the other answer.
FAILS = frozenset({"refused", "hangs", "disabled"})
OUTCOMES = FAILS | {"works", "not_reachable_offline"}

# case id → what the engine did, where the rule says otherwise. The lead corrects or downgrades the rule;
# then its entry goes.
KNOWN_DISAGREEMENTS: dict[str, str] = {
    # The engine refuses the flag; the review reports it as pitfall.calculate-kv-scales-removed instead, and
    # --calculate-kv-scales is the only flag this rule lists, so it never fires on its own.
    "flag-not-in-release/trips": "refused at serve_parser: unrecognized arguments: --calculate-kv-scales",
}

# Error rules with no engine record, and why (a release whose venv was not built, a premise outside
# what a `vllm serve` line can carry). Empty means every error-severity rule has a trips case.
NOT_RECORDED: dict[str, str] = {
    "pitfall.demo-api-server-removed": "the premise is the module's absence, not a `vllm serve` word the oracle "
    "runs: the 0.25.0 and newer wheels hold no vllm/entrypoints/api_server.py (feature.demo-api-server's probe, "
    "verified at 0.24.0 and 0.25.0), and in the 0.33.0 oracle venv `python -m vllm.entrypoints.api_server` exits "
    "with 'No module named vllm.entrypoints.api_server'",
    "pitfall.python-outside-requires-python": "the premise is pip's, before any vLLM code exists to run: the "
    "release's Requires-Python (release.vllm.requires-python, read in each wheel's METADATA at every boundary). "
    "Run by hand, `pip download --no-deps --python-version 3.10 --only-binary=:all: vllm==0.33.0` stops with "
    "'Ignored the following versions that require a different python version: ... 0.33.0 Requires-Python "
    "<3.15,>=3.11' and 'No matching distribution found for vllm==0.33.0'; with 3.9 and no pin it takes 0.11.0",
    "pitfall.vllm-env-value-refused": "the ValueError comes from vllm/envs.py's own parse rules (int(), bool(int()), "
    "env_with_choices, get_vllm_port) when the engine core reads every variable after loading the model "
    "(wheel:vllm==0.11.1:vllm/v1/engine/core.py:652), a stage the oracle does not reach; "
    "tests/test_engine_schema.py runs the same conversions on the same texts",
    "pitfall.option-value-empty": "a record gives the engine words, and a word that expands to nothing cannot be "
    "one: the review reads the shell's expansion. Run by hand through the oracle's serve parser on 0.33.0, "
    "--max-model-len followed by --enforce-eager or by nothing is refused by argparse: 'argument "
    "--max-model-len: expected one argument' (wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:156)",
    "pitfall.server-does-not-start": "the premise is bash's, not vLLM's: the oracle runs `vllm serve` lines, and "
    "`bash -c vllm ...` runs the vllm command with no subcommand, which prints its help and returns "
    "(wheel:vllm==0.33.0:vllm/entrypoints/cli/main.py:116-119)",
    "pitfall.offload-tier-over-shm-unchecked": "0.27.x only, a release the oracle does not install; the start-up "
    "failure is reproduced instead with the calls 0.27.x's SharedOffloadRegion makes, on a tmpfs smaller than the "
    "region (the pitfall's reproduction, scripts/reproductions/shm_prefault.py, re-run by verify_knowledge.py "
    "--reproduce and tests/test_reproductions.py)",
    "pitfall.lmcache-server-option-unknown": "the premise is argparse's, in an LMCache server process the oracle "
    "does not run (it runs `vllm serve`): parse_args exits with code 2 on an option the parser does not register "
    "and takes a unique prefix of a long option as it (allow_abbrev), reproduced by running argparse with the "
    "options lmcache_server_cli.yaml records (tests/test_lmcache_server_cli.py; "
    "wheel:lmcache==0.5.6:lmcache/v1/multiprocess/server.py:529-540)",
    "pitfall.lmcache-value-refused": "the premise is LMCache's file loader, not a `vllm serve` word: from 0.3.4 to "
    "0.3.11 it calls the key's converter outside any try (wheel:lmcache==0.3.9:lmcache/v1/config.py:652), decided "
    "from each release's code by scripts/build_engine_schema.py (lmcache_bad_value) and checked against int() here",
}


def _records() -> list[dict[str, Any]]:
    out = []
    for path in RULE_FILES:
        recorded = json.loads(path.read_text())
        for case in recorded["cases"]:
            assert case["version"] == recorded["vllm_version"] == case["provenance"]["vllm_version"], case["id"]
            out.append(case)
    return out


RECORDS = _records()
RULE_CASES = [c for c in RECORDS if c["role"] in ("trips", "control")]
RENDER_CASES = [c for c in RECORDS if c["role"] == "render"]


def _fired(knowledge: Knowledge, case: dict[str, Any]) -> set[str]:
    """The rules review_deployment raises on the case's command line, with its environment in front, on the GPU the
    stand-in was where the case names one."""
    env = " ".join(f"{key}={shlex.quote(value)}" for key, value in case["env"].items())
    text = f"{env} {case['command']}".strip()
    host = {"gpu": case["provenance"]["gpu"]} if "gpu" in case else {}
    request = ReviewRequest.model_validate(
        {"detail": "full", "documents": [{"name": "serve.sh", "text": text}], "version": case["version"], "host": host}
    )
    return {finding.rule_id for finding in review_deployment(request, knowledge).findings}


def _engine_says(case: dict[str, Any]) -> str:
    engine = case["engine"]
    said = engine["outcome"]
    if engine["outcome"] in ("refused", "hangs"):
        said += f" at {engine['stage']}: {engine['exception']}: {engine['message']}"
    elif engine["outcome"] == "disabled":
        facts = ", ".join(f"{key}={engine['resolved'].get(key)}" for key in case["disables"])
        said += f" ({facts})"
    return said


def test_the_records_exist_and_carry_their_provenance() -> None:
    assert RULE_FILES, "no tests/data/engine/rules-*.json: run scripts/engine_oracle/rules.py (knowledge/ENGINE.md)"
    ids = [c["id"] for c in RECORDS]
    assert len(ids) == len(set(ids)) or len(RULE_FILES) > 1
    for case in RECORDS:
        engine = case["engine"]
        assert engine["outcome"] in OUTCOMES, case["id"]
        assert case["provenance"]["recorded_at"] and case["provenance"]["method"], case["id"]
        assert case["command"].split(";")[-1].split()[:2] == ["vllm", "serve"], case["id"]
        if engine["outcome"] in ("refused", "hangs", "not_reachable_offline"):
            assert engine["stage"] and engine["exception"] and engine["message"], case["id"]
        if engine["outcome"] == "not_reachable_offline":
            assert engine["why"], case["id"]
        if case["role"] != "render":
            assert case["role"] in ("trips", "control"), case["id"]


def test_every_error_rule_has_an_engine_record(knowledge: Knowledge) -> None:
    error_rules = {p.id for p in knowledge.pitfalls if p.severity == "error" and p.when is not None}
    tripped = {c["rule"] for c in RULE_CASES if c["role"] == "trips"}
    missing = error_rules - tripped - set(NOT_RECORDED)
    assert not missing, (
        f"error-severity rules with no engine case (add one to scripts/engine_oracle/rules.py): {missing}"
    )
    stale = (set(NOT_RECORDED) & tripped) | (set(NOT_RECORDED) - error_rules)
    assert not stale, f"NOT_RECORDED names rules that are recorded, or are not error rules: {stale}"
    not_rules = {c["rule"] for c in RULE_CASES} - {p.id for p in knowledge.pitfalls}
    assert not not_rules, f"records name rules the knowledge does not have: {not_rules}"


def test_a_premise_only_a_runtime_shows_says_why() -> None:
    """The cases whose failure needs a GPU, a peer or traffic are named, each with its reason; the engine
    was still run on them (the configuration itself is accepted or refused like any other)."""
    runtime = {c["id"]: c["runtime"] for c in RULE_CASES if "runtime" in c}
    assert all(len(why) > 20 for why in runtime.values()), runtime
    assert all(c["role"] == "trips" for c in RULE_CASES if "runtime" in c)


def test_the_review_agrees_with_the_engine_except_the_known_disagreements(knowledge: Knowledge) -> None:
    # Only an error says the engine fails; a warning's advice may hold on a configuration that starts.
    errors = {p.id.removeprefix("pitfall.") for p in knowledge.pitfalls if p.severity == "error"}
    found: dict[str, str] = {}
    for case in RULE_CASES:
        if "runtime" in case or case["engine"]["outcome"] == "not_reachable_offline":
            continue
        if case["rule"].removeprefix("pitfall.") not in errors:
            continue
        fires = case["rule"] in _fired(knowledge, case)
        fails = case["engine"]["outcome"] in FAILS
        if fires != fails:
            found[case["id"]] = f"rule {'fires' if fires else 'is silent'}; engine: {_engine_says(case)}"
    new = {k: v for k, v in found.items() if k not in KNOWN_DISAGREEMENTS}
    gone = set(KNOWN_DISAGREEMENTS) - set(found)
    assert not new, f"the review and the engine disagree (fix the rule, or add a KNOWN_DISAGREEMENTS entry): {new}"
    assert not gone, f"these cases agree now; remove them from KNOWN_DISAGREEMENTS: {sorted(gone)}"


def test_known_disagreements_name_recorded_cases() -> None:
    recorded = {c["id"] for c in RULE_CASES}
    assert set(KNOWN_DISAGREEMENTS) <= recorded, set(KNOWN_DISAGREEMENTS) - recorded


@pytest.mark.parametrize("case", RENDER_CASES, ids=[c["id"] for c in RENDER_CASES])
def test_the_engine_took_every_rendered_serve_line(knowledge: Knowledge, case: dict[str, Any]) -> None:
    engine = case["engine"]
    assert "create_engine_config" in engine["stages"], _engine_says(case)
    # Past the config, the scheduler's connector may wait for the server it is told to use (LMCache MP).
    assert engine["outcome"] != "refused", _engine_says(case)
    assert engine["outcome"] != "hangs" or engine["stage"] == "scheduler_connector", _engine_says(case)
    result = render_config(RenderConfigRequest.model_validate(case["render_request"]), knowledge)
    [rendered] = [f.content for f in result.files if f.name == case["file"]]
    words = shell_words(rendered)
    env = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isupper():
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert (shlex.join(words), env) == (case["command"], case["env"]), (
        "render_config writes another line than the engine was given: rerun scripts/engine_oracle/rules.py"
    )


def test_every_render_backend_was_run() -> None:
    if not RENDER_CASES:
        pytest.fail("no render cases recorded")
    backends = {c["render_request"]["backend"] for c in RENDER_CASES}
    assert backends >= {"native_cpu", "native_tiering", "lmcache", "lmcache_mp", "nixl_pd", "mooncake_pd"}, backends


def test_what_a_pitfall_says_vllm_logs_is_what_the_engine_printed(knowledge: Knowledge) -> None:
    """A pitfall's `logged` patterns are how diagnose recognises its refusal in a start-up log: each must match
    the message of every refusal the engine recorded for that rule, and every recorded refusal of a rule that
    has patterns is matched by one."""
    import re

    refusals: dict[str, list[str]] = {}
    for case in RECORDS:
        if case["engine"].get("outcome") == "refused" and case.get("role") != "control":
            refusals.setdefault(case["rule"], []).append(case["engine"].get("message") or "")
    with_patterns = [p for p in knowledge.pitfalls if p.logged]
    assert len(with_patterns) >= 8
    for pitfall in with_patterns:
        messages = refusals.get(pitfall.id, [])
        assert messages, f"{pitfall.id}: logged patterns, but no refusal of it is recorded"
        for message in messages:
            assert any(re.search(p, message, re.IGNORECASE) for p in pitfall.logged), (pitfall.id, message)
