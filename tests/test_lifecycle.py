"""The version lifecycle lives on the knowledge types: versions are parsed once, at load, and every tool
asks an entry where a release falls (`Gated.status_at`) and a connector whether it keeps the hybrid KV
cache manager (`Connector.hma_at`) instead of comparing versions by hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from vllm_caching_mcp.knowledge import Connector, Feature, Knowledge, load_knowledge
from vllm_caching_mcp.versions import Version

# Fields the schema types as a release (VersionText); every one must hold a parsed Version.
RELEASE_FIELDS = frozenset({"introduced", "deprecated", "removed", "version", "fixed_in", "unfixed_through"})


def _models(value: object) -> Iterator[BaseModel]:
    if isinstance(value, BaseModel):
        yield value
        for name in type(value).model_fields:
            yield from _models(getattr(value, name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _models(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _models(item)


def test_every_release_in_the_knowledge_is_parsed_once_at_load() -> None:
    knowledge = load_knowledge()
    seen = 0
    for model in _models(knowledge):
        for name in RELEASE_FIELDS & set(type(model).model_fields):
            value = getattr(model, name)
            if isinstance(value, str) and type(model).__name__ in ("Cvss",):
                continue  # a CVSS specification version ('3.1'), not a release
            if value is not None and not isinstance(value, BaseModel):  # Bug.fixed_in is a model; walked too
                assert isinstance(value, Version), f"{type(model).__name__}.{name} = {value!r} is not parsed"
                seen += 1
    assert seen > 500


def test_a_release_is_written_back_as_text() -> None:
    connector = next(c for c in load_knowledge().connectors if c.introduced is not None)
    dumped = connector.model_dump(mode="json")
    assert dumped["introduced"] == str(connector.introduced)
    assert connector.model_dump()["introduced"] == str(connector.introduced)


def test_a_release_that_is_not_text_is_refused_at_load_naming_the_field(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with pytest.raises(ValueError, match=r"introduced\n.*written as text"):
        Feature.model_validate(
            {
                "id": "feature.x",
                "name": "x",
                "summary": "s",
                "introduced": 0.2,
                "sources": ["pypi:vllm"],
                "verified_at": "2026-12-01",
            }
        )


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.10.0", "not_yet"), ("0.11.0", "available"), ("0.20.0", "deprecated"), ("0.30.0", "removed")],
)
def test_status_at_reads_each_point_as_the_first_release_in_which_it_holds(version: str, expected: str) -> None:
    entry = Feature.model_validate(
        {
            "id": "feature.x",
            "name": "x",
            "summary": "s",
            "introduced": "0.11.0",
            "deprecated": "0.20.0",
            "removed": "0.30.0",
            "sources": ["pypi:vllm"],
            "verified_at": "2026-12-01",
        }
    )
    assert entry.status_at(Version(version)) == expected
    assert entry.exists_in(Version(version)) is (expected in ("available", "deprecated"))


def test_hma_at_answers_from_the_connector_s_ranges_and_none_outside_them() -> None:
    knowledge: Knowledge = load_knowledge()
    offloading = next(c for c in knowledge.connectors if c.name == "OffloadingConnector")
    assert offloading.hma_at(Version("0.20.2")) == "no"
    assert offloading.hma_at(Version("0.21.0")) == "yes"
    bare = Connector.model_validate(
        {
            "id": "connector.x",
            "name": "X",
            "summary": "s",
            "hma": [{"versions": ">=0.22.0", "value": "yes"}],
            "sources": ["pypi:vllm"],
            "verified_at": "2026-12-01",
        }
    )
    assert bare.hma_at(Version("0.21.0")) is None and bare.hma_at(Version("0.22.0")) == "yes"


@pytest.mark.parametrize("tool", ["choose_backend", "size_offload", "render_config"])
def test_a_minor_release_is_read_as_its_newest_patch_and_the_answer_says_so(tool: str) -> None:
    from vllm_caching_mcp.tools import run_tool

    arguments: dict[str, object] = {"version": "v0.22"}
    if tool == "choose_backend":
        arguments["tiers"] = ["cpu"]
    elif tool == "size_offload":
        arguments |= {"model": "llama-3.1-8b", "kv_offloading_size_gib": 64}
    else:
        arguments |= {"backend": "native_cpu", "model": "m", "sizes": {"kv_offloading_size_gib": 64}}
    result = run_tool(tool, arguments)
    context = result.version_context  # type: ignore[attr-defined]
    assert context.version == "0.22.1"
    assert any("'v0.22' is read as 0.22.1" in w and "0.22.0 also exists" in w for w in context.warnings)
