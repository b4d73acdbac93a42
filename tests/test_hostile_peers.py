"""Generated answers from a GitHub and a registry on 127.0.0.1: whatever JSON a peer sends, the tools answer.

The fault matrix (test_faults) scripts the misbehaviours found so far; here hypothesis generates
the peer's JSON itself, well-formed but of any shape (objects where lists belong, numbers for
timestamps, strings for counts, nesting), at every place a client reads one: the GraphQL and REST
answers of GitHub, and a registry's tag manifest and config blob. Every call must end in an answer
(live, cache or snapshot, with the failure's reason) or a one-line input error: never an internal
error. PROPERTY_EXAMPLES sets the examples, as in test_properties.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from github_standin import FakeGitHub, Reply
from registry_standin import FakeRegistry, canonical, digest_of, vllm_openai_config
from registry_standin import Reply as RegistryReply
from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool

EXAMPLES = max(10, int(os.environ.get("PROPERTY_EXAMPLES", "80")) // 2)
PROFILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=20)
NESTED = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
JSON = st.one_of(SCALARS, NESTED)  # a number where a list belongs is the commonest wrong shape: drawn as often
BUG = "vllm-project/vllm#40259"
ISSUE = "/repos/vllm-project/vllm/issues/40259"


def shaped_like(genuine: Any, replacement: Any, path: list[int]) -> Any:
    """``genuine`` with the value at ``path`` (child indexes in order) replaced: the right shape but one part."""
    if not path or not isinstance(genuine, dict | list) or not genuine:
        return replacement
    keys = list(genuine) if isinstance(genuine, dict) else list(range(len(genuine)))
    key = keys[path[0] % len(keys)]
    copy = dict(genuine) if isinstance(genuine, dict) else list(genuine)
    copy[key] = shaped_like(genuine[key], replacement, path[1:])  # type: ignore[index]
    return copy


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return load_knowledge()


@pytest.fixture
def github(knowledge: Knowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    fake = FakeGitHub.from_knowledge(knowledge)
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", fake.start())
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hostilePEERtoken0123456789abcdefXYZ")
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_TTL", "0")
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    yield fake
    fake.stop()


@pytest.mark.parametrize("path", ["/graphql", ISSUE, f"{ISSUE}/timeline"])
def test_any_json_from_github_is_answered(github: FakeGitHub, path: str) -> None:
    @PROFILE
    @example([1, 2], [0])  # GraphQL data a list
    @example({"state": "closed", "closed_at": "yesterday"}, [])  # a closing date that is no date
    @given(JSON, st.lists(st.integers(0, 40), max_size=3))
    def check(value: Any, where: list[int]) -> None:
        github.scripted.clear()
        body = json.dumps(value if not where else shaped_like({"data": {"i0": {"issue": {}}}}, value, where))
        github.script(path, *[Reply(200, body.encode(), {"Content-Type": "application/json"})] * 4)
        result = run_tool("check_bug_status", {"bugs": [BUG], "deadline_seconds": 5})
        [bug] = result.model_dump(mode="json")["bugs"]
        assert bug["provenance"]["source"] in ("live", "cache", "snapshot"), bug["provenance"]

    check()


@pytest.mark.parametrize("stage", ["tag manifest", "config blob"])
def test_any_json_from_a_registry_is_answered(stage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = "vllm/vllm-openai"
    with FakeRegistry() as registry:
        registry.add_image(repo, "v0.22.1", {"amd64": vllm_openai_config()})
        monkeypatch.setenv("VLLM_CACHING_MCP_REGISTRY_MIRROR", f"http://127.0.0.1:{registry.port}")
        monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "none"))
        monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_TTL", "0")
        config = canonical(vllm_openai_config())
        genuine = registry.tags[(repo, "v0.22.1")] if stage == "tag manifest" else config
        target = f"/v2/{repo}/manifests/v0.22.1" if stage == "tag manifest" else f"/v2/{repo}/blobs/{digest_of(config)}"
        media_type = json.loads(genuine).get("mediaType") or "application/json"

        document = json.loads(genuine)

        @PROFILE
        @example("manifests", 5, [])  # the shapes an attack run sent
        @example("layers", 7, [])
        @example("config", 5, [])
        @example("history", {"created_by": 7}, [])
        @given(st.sampled_from(sorted(document)), JSON, st.lists(st.integers(0, 40), max_size=3))
        def check(key: str, value: Any, where: list[int]) -> None:
            registry.scripted.clear()
            body = json.dumps({**document, key: shaped_like(document.get(key), value, where)}).encode()
            # The config blob is asked by its digest: bytes that do not hash to it are refused as such
            # (tests/test_faults), so at that stage this checks what a cache hit of a changed blob reads.
            registry.script(target, *[RegistryReply(200, body, {"Content-Type": media_type})] * 4)
            try:
                result = run_tool("inspect_image", {"image": "v0.22.1", "deadline_seconds": 5})
            except ToolInputError as exc:
                assert "\n" not in str(exc) and str(exc).startswith(("image:", "arch:")), exc
                return
            source = result.model_dump(mode="json")["provenance"]["source"]
            assert source in ("live", "cache", "unavailable")

        check()
