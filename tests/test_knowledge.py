"""The knowledge base loads, every fact is sourced, and a broken file fails loudly and precisely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from vllm_caching_mcp.knowledge import FILES, Knowledge, load_knowledge, model_key
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.versions import Version, parse_specifier


def test_loads_once_and_covers_both_release_lines(knowledge: Knowledge) -> None:
    # the same object a second time (test_verify_knowledge clears the cache, so not always the fixture's)
    assert load_knowledge() is load_knowledge()
    assert str(knowledge.oldest()) == "0.11.0"
    assert knowledge.newest() >= Version("0.33.0")
    assert knowledge.newest("lmcache") >= Version("0.5.6")


def test_every_fact_has_sources_and_a_verification_date(knowledge: Knowledge) -> None:
    facts = [*knowledge.gated(), *knowledge.pitfalls, *knowledge.bugs, *knowledge.pins, *knowledge.hardware.gpus]
    assert len(facts) > 100
    for fact in facts:
        assert fact.sources, fact
        assert fact.verified_at.year >= 2026, fact


def test_every_release_source_names_a_known_release(knowledge: Knowledge) -> None:
    pattern = re.compile(r"^(?:wheel|sdist):(\w+)==([\w.]+):")
    sourced = [*knowledge.gated(), *knowledge.recipes.recipes, *knowledge.recipes.pd_proxies]
    for entry in sourced:
        changes = getattr(entry, "changes", ())
        for source in (*entry.sources, *(s for c in changes for s in c.sources)):
            m = pattern.match(source)
            if m:
                assert Version(m.group(2)) in knowledge.release_versions(m.group(1)), (entry.id, source)


def test_ranged_values_do_not_overlap(knowledge: Knowledge) -> None:
    for setting in knowledge.settings:
        for values in (setting.defaults, setting.accepted_values):
            for release in knowledge.release_versions(setting.component):
                hits = [r for r in values if parse_specifier(r.versions).contains(release, prereleases=True)]
                assert len(hits) <= 1, (setting.id, str(release), hits)


def test_each_model_spelling_names_one_model(knowledge: Knowledge) -> None:
    owners: dict[str, set[str]] = {}
    for m in knowledge.models:
        for spelling in (m.id, m.id.split(".", 1)[-1], m.name, m.hf_repo, *m.aliases):
            owners.setdefault(model_key(spelling), set()).add(m.id)
    assert {key: ids for key, ids in owners.items() if len(ids) > 1} == {}
    for m in knowledge.models:
        assert knowledge.find_model(m.hf_repo) is m
        assert knowledge.find_model(m.hf_repo.upper().replace("-", "_")) is m
    assert knowledge.find_model("no-such/model") is None


def _break(directory: Path, file: str, mutate: object) -> None:
    path = directory / file
    data = yaml.safe_load(path.read_text())
    mutate(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _first(data: dict, key: str) -> dict:  # type: ignore[type-arg]
    return data[key][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("file", "mutate", "expected"),
    [
        (
            "flags.yaml",
            lambda d: _first(d, "settings").update(sources=[]),
            r"flags\.yaml: entry '[\w.-]+'.*field 'sources'",
        ),
        ("flags.yaml", lambda d: _first(d, "settings").pop("verified_at"), r"field 'verified_at': Field required"),
        ("flags.yaml", lambda d: _first(d, "settings").update(introduced=0.11), r"field 'introduced'"),
        ("flags.yaml", lambda d: _first(d, "settings").update(introduced="0.11.7"), r"0\.11\.7 is not a vllm release"),
        ("flags.yaml", lambda d: _first(d, "settings").update(unit_of="GiB"), r"field 'unit_of': Extra inputs"),
        (
            "connectors.yaml",
            lambda d: _first(d, "connectors").update(related=["flag.nope"]),
            r"no entry has the id 'flag\.nope'",
        ),
        (
            "connectors.yaml",
            lambda d: _first(d, "connectors").update(hma=[{"versions": ">=0.1", "value": "maybe"}]),
            r"hma value",
        ),
        ("metrics.yaml", lambda d: _first(d, "metrics").update(sources=["somewhere on the web"]), r"a source is"),
        ("pitfalls.yaml", lambda d: _first(d, "pitfalls").update(versions=">=zero"), r"not a PEP 440 version range"),
        ("bugs.yaml", lambda d: _first(d, "bugs").update(number=-3), r"field 'number'"),
        ("features.yaml", lambda d: d["features"].append(dict(d["features"][0])), r"id already used"),
        (
            "recipes.yaml",
            lambda d: _first(d, "recipes")["requirements"][0].update(source="env.nope"),
            r"recipes\.yaml: entry 'recipe\.none': no knowledge entry has the id 'env\.nope'",
        ),
        (
            "recipes.yaml",
            lambda d: _first(d, "recipes")["requirements"][0].update(when="always-on-tuesdays"),
            r"field 'requirements\.0\.when'",
        ),
        (
            "recipes.yaml",
            lambda d: d["pd_proxies"][2].update(versions=">=0.16.0,<0.20.0"),  # 0.20.x left without a proxy
            r"pd_proxies: connector\.mooncake in 0\.20\.0 needs exactly one proxy, found \[\]",
        ),
        (
            "recipes.yaml",
            lambda d: d["pd_proxies"][1].update(versions=">=0.13.0,<0.17.0"),
            r"connector\.mooncake in 0\.16\.0 needs exactly one proxy, found \['proxy\.mooncake-via-nixl-toy', ",
        ),
        ("recipes.yaml", lambda d: d["pd_proxies"][0].update(path="../../etc/passwd"), r"field 'path'"),
        (
            "features.yaml",
            lambda d: _first(d, "features").update(introduced="0.30.0", removed="0.20.0"),
            r"removed .* must come after introduced",
        ),
    ],
)
def test_a_broken_file_names_file_entry_and_field(
    knowledge_copy: Path, file: str, mutate: object, expected: str
) -> None:
    _break(knowledge_copy, file, mutate)
    with pytest.raises(KnowledgeError, match=expected):
        load_knowledge(str(knowledge_copy))


def test_invalid_yaml_and_missing_file_are_named(knowledge_copy: Path) -> None:
    (knowledge_copy / "metrics.yaml").write_text("metrics: [unclosed\n")
    with pytest.raises(KnowledgeError, match=r"metrics\.yaml: not valid YAML"):
        load_knowledge(str(knowledge_copy))
    (knowledge_copy / "metrics.yaml").unlink()
    with pytest.raises(KnowledgeError, match=r"metrics\.yaml: file is missing"):
        load_knowledge(str(knowledge_copy))


def test_every_file_has_a_schema() -> None:
    shipped = {p.name for p in Path(load_knowledge().directory).glob("*.yaml")}
    # verification.yaml is the verifier's output, validated by vllm_caching_mcp.verification
    assert shipped == {*FILES, "verification.yaml"}


def test_a_misspelled_fact_in_a_rule_condition_is_refused_with_the_rule_and_close_names(knowledge_copy: Path) -> None:
    # A fact name no workload has would compare as unknown, so the rule would silently never fire.
    path = knowledge_copy / "pitfalls.yaml"
    text = path.read_text(encoding="utf-8")
    rule = next(p["id"] for p in yaml.safe_load(text)["pitfalls"] if "fact:world_size" in str(p.get("when")))
    path.write_text(text.replace("fact:world_size", "fact:wrld_size", 1), encoding="utf-8")
    with pytest.raises(KnowledgeError) as refused:
        load_knowledge(str(knowledge_copy))
    message = str(refused.value)
    assert f"pitfalls.yaml: entry {rule!r}" in message, message
    assert "'fact:wrld_size' names no fact a workload has; did you mean world_size?" in message, message


def test_a_release_without_a_wheel_is_cited_by_its_source_distribution(knowledge_copy: Path) -> None:
    """LMCache 0.3.0 is on the index as an sdist only: a wheel: source for it names an artifact that does not exist."""
    lmcache = (knowledge_copy / "lmcache.yaml").read_text(encoding="utf-8")
    assert "sdist:lmcache==0.3.0:lmcache/v1/config.py:44" in lmcache and "wheel:lmcache==0.3.0:" not in lmcache
    (knowledge_copy / "lmcache.yaml").write_text(lmcache.replace("sdist:lmcache==0.3.0:", "wheel:lmcache==0.3.0:"))
    with pytest.raises(
        KnowledgeError, match=r"lmcache 0\.3\.0 has no wheel on the index; cite its source distribution"
    ):
        load_knowledge(str(knowledge_copy))
