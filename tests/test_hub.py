"""size_offload for a model named by its Hugging Face Hub id, against a stand-in Hub on loopback (issue 27).

The stand-in (tests/hub_standin.py) serves what the Hub serves: the repository listing, files under
/resolve/, the X-Error-Code of a missing, gated or private repository, a renamed repository's
redirect and a CDN on another origin. HF_ENDPOINT points at it, as it would at a mirror. The
configs served are the published ones the engine tests use (tests/data/engine/configs/), so an
answer by Hub id can be checked against the same config read from disk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import size_offload_of
from hub_standin import FakeHub
from proxy_standin import FakeProxy
from standin_http import Reply
from vllm_caching_mcp.advice import hub_model
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.http_client import ConfigError
from vllm_caching_mcp.hub import HubSettings, is_repo_id
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.tools import ToolInputError, run_tool

CONFIGS = Path(__file__).resolve().parent / "data" / "engine" / "configs"
GIB = 1 << 30
REPO = "acme/qwen3-32b-ft"  # not in the knowledge: only the Hub knows it
TOKEN = "hf_standinTokenForTests0123456789"
# Shaped like Qwen3-32B's model.safetensors.index.json: bf16 tensors, 32.8 B parameters.
QWEN3_32B_BYTES = 65_524_246_528


def published(model: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CONFIGS / model / "config.json").read_text())
    return raw


def index(total: int) -> dict[str, Any]:
    return {"metadata": {"total_size": total}, "weight_map": {"lm_head.weight": "model-00017-of-00017.safetensors"}}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    fake = FakeHub().start()
    fake.add(
        REPO,
        {
            "config.json": published("qwen3-32b"),
            "model.safetensors.index.json": index(QWEN3_32B_BYTES),
            "model-00001-of-00017.safetensors": b"",
        },
    )
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    yield fake
    fake.stop()


def ask(knowledge: Knowledge, model: str = REPO, **fields: object) -> Any:
    return size_offload_of(knowledge, model=model, **fields)


def test_a_hub_model_is_sized_as_its_config_on_disk(hub: FakeHub, knowledge: Knowledge) -> None:
    by_id = ask(knowledge, tensor_parallel_size=2, weights_gib_per_gpu=30)
    on_disk = size_offload_of(
        knowledge,
        config_path=str(CONFIGS / "qwen3-32b" / "config.json"),
        tensor_parallel_size=2,
        weights_gib_per_gpu=30,
    )
    assert by_id.layer_kinds == on_disk.layer_kinds
    assert (by_id.kv_bytes_per_token_total, by_id.num_gpu_blocks) == (
        on_disk.kv_bytes_per_token_total,
        on_disk.num_gpu_blocks,
    )
    assert by_id.model == REPO
    assert by_id.model_source is not None and "3f1c2a9b8e7d" in by_id.model_source and "127.0.0.1" in by_id.model_source
    assert by_id.model_source in by_id.summary()
    assert [r.path.split("?")[0] for r in hub.requests] == [
        f"/api/models/{REPO}/revision/main",
        f"/{REPO}/resolve/3f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a098/config.json",
        f"/{REPO}/resolve/3f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a098/model.safetensors.index.json",
    ]


def test_the_weights_come_from_the_safetensors_index(hub: FakeHub, knowledge: Knowledge) -> None:
    answer = ask(knowledge, tensor_parallel_size=2)
    assert answer.weights_gib_per_gpu == pytest.approx(QWEN3_32B_BYTES / 2 / GIB, abs=1e-3)
    budget = next(f for f in answer.formulas if f.name == "GPU KV budget per rank")
    assert "safetensors index total_size" in budget.formula
    given = ask(knowledge, tensor_parallel_size=2, weights_gib_per_gpu=10)
    assert given.weights_gib_per_gpu == 10


def test_without_an_index_the_weights_must_be_given(hub: FakeHub, knowledge: Knowledge) -> None:
    hub.add("acme/no-index", {"config.json": published("qwen3-32b"), "pytorch_model.bin": b""})
    with pytest.raises(AdviceError, match="weights_gib_per_gpu"):
        ask(knowledge, model="acme/no-index")
    assert ask(knowledge, model="acme/no-index", params_total_b=32.8).weights_gib_per_gpu > 60


def test_a_known_model_is_answered_from_the_knowledge_without_asking(hub: FakeHub, knowledge: Knowledge) -> None:
    known = knowledge.models[0]
    answer = ask(knowledge, model=known.hf_repo)
    assert answer.model == known.name and answer.model_source is None
    assert hub.requests == []


def test_a_missing_repository_is_a_clear_error(hub: FakeHub, knowledge: Knowledge) -> None:
    with pytest.raises(AdviceError, match=r"^model: acme/nope: .*no such model repository.*HF_TOKEN"):
        ask(knowledge, model="acme/nope")


def test_a_gated_repository_needs_a_token_with_access(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add("meta/gated-8b", {"config.json": published("llama-3.1-8b")}, gated=True, tokens=frozenset({TOKEN}))
    with pytest.raises(AdviceError, match=r"gated \(HTTP 401\): request access .* set HF_TOKEN"):
        ask(knowledge, model="meta/gated-8b", params_total_b=8)
    monkeypatch.setenv("HF_TOKEN", "hf_someoneElsesToken000000000000")
    with pytest.raises(AdviceError, match=r"gated \(HTTP 403\): the token set has no access yet"):
        ask(knowledge, model="meta/gated-8b", params_total_b=8)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    answer = ask(knowledge, model="meta/gated-8b", params_total_b=8)
    assert answer.layer_kinds[0].layers == 32
    assert hub.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"


def test_the_token_file_hf_auth_login_writes_is_read(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub.add("meta/gated-8b", {"config.json": published("llama-3.1-8b")}, gated=True, tokens=frozenset({TOKEN}))
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text(TOKEN + "\n")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert ask(knowledge, model="meta/gated-8b", params_total_b=8).layer_kinds[0].layers == 32


def test_the_token_goes_only_to_the_hubs_own_origin(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renamed repository's redirect stays on the Hub and keeps the token; the CDN gets none."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.add(
        "acme/new-name",
        {"config.json": published("qwen3-32b"), "model.safetensors.index.json": index(QWEN3_32B_BYTES)},
        on_cdn=frozenset({"model.safetensors.index.json"}),
    )
    hub.add("acme/old-name", {}, renamed_to="acme/new-name")
    answer = ask(knowledge, model="acme/old-name", tensor_parallel_size=4)
    assert answer.weights_gib_per_gpu == pytest.approx(QWEN3_32B_BYTES / 4 / GIB, abs=1e-3)
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in hub.requests)
    assert any("acme/new-name" in r.path for r in hub.requests)
    assert len(hub.cdn_requests) == 1 and "authorization" not in hub.cdn_requests[0].headers


def test_offline_answers_from_the_cache_and_says_so(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ask(knowledge, weights_gib_per_gpu=60)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_TTL", "0")
    asked = len(hub.requests)
    cached = ask(knowledge, weights_gib_per_gpu=60)
    assert len(hub.requests) == asked
    assert cached.num_gpu_blocks == first.num_gpu_blocks
    assert cached.model_source is not None and "from the on-disk cache, fetched" in cached.model_source
    assert "offline mode" in cached.model_source
    with pytest.raises(AdviceError, match=r"offline mode.*Nothing for acme/other is cached yet"):
        ask(knowledge, model="acme/other", weights_gib_per_gpu=60)


def test_a_hub_out_of_reach_is_covered_by_the_cache(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask(knowledge, weights_gib_per_gpu=60)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_TTL", "0")
    hub.stop()
    answer = ask(knowledge, weights_gib_per_gpu=60)
    assert answer.model_source is not None and "was not reached: cannot connect" in answer.model_source


def test_within_the_ttl_the_cache_answers_without_asking(hub: FakeHub, knowledge: Knowledge) -> None:
    ask(knowledge, weights_gib_per_gpu=60)
    asked = len(hub.requests)
    again = ask(knowledge, weights_gib_per_gpu=60)
    assert len(hub.requests) == asked
    assert again.model_source is not None and "within the cache's TTL" in again.model_source


def test_a_malformed_config_is_a_clear_error(hub: FakeHub, knowledge: Knowledge) -> None:
    hub.add("acme/broken", {"config.json": b'{"num_hidden_layers": 4,'})
    with pytest.raises(AdviceError, match=r"^model: acme/broken: cannot read its config.json: .*not valid JSON"):
        ask(knowledge, model="acme/broken", weights_gib_per_gpu=1)
    hub.add("acme/not-a-decoder", {"config.json": {"model_type": "bert", "hidden_size": 768}})
    with pytest.raises(AdviceError, match=r"^model: acme/not-a-decoder: config.json has no num_hidden_layers"):
        ask(knowledge, model="acme/not-a-decoder", weights_gib_per_gpu=1)
    hub.add("acme/bad-index", {"config.json": published("qwen3-32b"), "model.safetensors.index.json": {"metadata": {}}})
    with pytest.raises(AdviceError, match=r"metadata.total_size"):
        ask(knowledge, model="acme/bad-index")
    hub.add("acme/no-config", {"README.md": b"# weights elsewhere"})
    with pytest.raises(AdviceError, match=r"has no config.json"):
        ask(knowledge, model="acme/no-config")


def test_a_hub_that_keeps_failing_ends_at_the_deadline(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_model, "HUB_DEADLINE_SECONDS", 2.0)
    hub.scripted.extend([Reply(503), Reply(503), Reply(503)])
    with pytest.raises(AdviceError, match=r"cannot read its file list: .*(503|deadline)"):
        ask(knowledge, weights_gib_per_gpu=60)
    hub.scripted.clear()
    hub.scripted.append(Reply(200, b'{"sha": "' + b"a" * 40 + b'"}', drip="body"))
    with pytest.raises(AdviceError, match="deadline"):
        ask(knowledge, weights_gib_per_gpu=60)


def test_a_mistral_format_repository_is_read_from_params_json(hub: FakeHub, knowledge: Knowledge) -> None:
    """vLLM reads params.json where consolidated*.safetensors is beside it, and maps its keys to the HF ones."""
    params = {
        "dim": 5120,
        "n_layers": 40,
        "head_dim": 128,
        "hidden_dim": 32768,
        "n_heads": 32,
        "n_kv_heads": 8,
        "norm_eps": 1e-05,
        "vocab_size": 131072,
        "rope_theta": 1000000000.0,
        "max_position_embeddings": 131072,
        "sliding_window": [4096, 4096, 4096, None],
    }
    hub.add("mistral/params-only", {"params.json": params, "consolidated.safetensors": b""})
    answer = ask(knowledge, model="mistral/params-only", weights_gib_per_gpu=45)
    kinds = {k.kind: k.layers for k in answer.layer_kinds}
    assert kinds == {"full_attention": 10, "sliding_window": 30}
    assert answer.max_model_len == 131072
    assert answer.layer_kinds[0].bytes_per_token_per_layer_per_rank == 2 * 8 * 128 * 2


def test_a_repository_id_is_spelled_as_the_hub_spells_it() -> None:
    assert is_repo_id("Qwen/Qwen3-VL-8B-Instruct") and is_repo_id("meta-llama/Llama-3.3-70B-Instruct")
    for wrong in ("qwen3", "a/b/c", "../etc", "a/b.git", "a/-b", "a--b/c", "https://huggingface.co/a/b"):
        assert not is_repo_id(wrong), wrong


def test_a_wrong_hf_endpoint_names_the_variable(knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="HF_ENDPOINT"):
        HubSettings.from_env({"HF_ENDPOINT": "http://hub.example.com"})
    monkeypatch.setenv("HF_ENDPOINT", "ftp://mirror.example.com")
    with pytest.raises(ToolInputError, match="model: cannot ask the Hub: HF_ENDPOINT"):
        run_tool("size_offload", {"model": "acme/x", "weights_gib_per_gpu": 1})


def test_a_hub_model_the_reader_refuses_is_refused_for_the_model_field(hub: FakeHub, knowledge: Knowledge) -> None:
    config = json.loads((CONFIGS / "mimo-v2-flash" / "config.json").read_text())
    config["swa_v_head_dim"] = 64  # the sliding layers' V smaller than the full layers': not modelled
    hub.add("XiaomiMiMo/MiMo-V2-Flash", {"config.json": config})
    with pytest.raises(AdviceError, match=r"^model: XiaomiMiMo/MiMo-V2-Flash: a MiMo-V2 config.json whose sliding"):
        ask(knowledge, model="XiaomiMiMo/MiMo-V2-Flash", weights_gib_per_gpu=30)


def test_a_hub_model_with_per_kind_geometry_is_sized_from_its_config(hub: FakeHub, knowledge: Knowledge) -> None:
    hub.add("google/gemma-4-31b-it", {"config.json": json.loads((CONFIGS / "gemma-4-31b" / "config.json").read_text())})
    answer = ask(knowledge, model="google/gemma-4-31b-it", weights_gib_per_gpu=30, version="0.33.0")
    assert {k.kind: k.block_size for k in answer.layer_kinds} == {"sliding_window": 16, "full_attention": 32}
    assert answer.kv_figures_basis.startswith("verified against the engine for Gemma4ForConditionalGeneration")


def safetensors_file(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A .safetensors file: the 8-byte header length, the JSON header, then the tensor bytes (zeros)."""
    sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = sizes[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + bytes(offset)


def test_a_single_safetensors_file_gives_the_weights_from_its_header(hub: FakeHub, knowledge: Knowledge) -> None:
    """Two range requests to the CDN (the file is large there): the header, never the tensors, and no token."""
    tensors = {"model.embed_tokens.weight": ("BF16", [1024, 64]), "lm_head.weight": ("F32", [1024, 64])}
    hub.add(
        "acme/small",
        {"config.json": published("qwen3-32b"), "model.safetensors": safetensors_file(tensors)},
        on_cdn=frozenset({"model.safetensors"}),
    )
    answer = ask(knowledge, model="acme/small")
    assert answer.weights_gib_per_gpu == pytest.approx((1024 * 64 * 2 + 1024 * 64 * 4) / GIB, abs=1e-3)
    assert [r.headers["range"] for r in hub.cdn_requests] == ["bytes=0-7", f"bytes=8-{8 + hub_header_length(hub) - 1}"]


def hub_header_length(hub: FakeHub) -> int:
    return int.from_bytes(hub.repos["acme/small"].files["model.safetensors"][:8], "little")


def test_a_safetensors_header_that_is_not_one_is_a_clear_error(hub: FakeHub, knowledge: Knowledge) -> None:
    hub.add("acme/junk", {"config.json": published("qwen3-32b"), "model.safetensors": b"\xff" * 64})
    with pytest.raises(AdviceError, match=r"cannot read its model.safetensors header: .*safetensors header would be"):
        ask(knowledge, model="acme/junk")


def test_a_hub_that_echoes_the_token_gets_it_into_no_answer_or_cache_file(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    echoed = {**published("qwen3-32b"), "_name_or_path": TOKEN, "note": f"Bearer {TOKEN}"}
    hub.add("acme/echo", {"config.json": echoed})
    answer = ask(knowledge, model="acme/echo", weights_gib_per_gpu=60)
    assert TOKEN not in answer.model_dump_json() and TOKEN not in answer.summary()
    cached = [p.read_text() for p in (tmp_path / "cache").rglob("*.json")]
    assert cached and not any(TOKEN in text for text in cached)


def test_the_sites_proxy_carries_every_hub_request(
    hub: FakeHub, knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.address)
        ask(knowledge, tensor_parallel_size=2)
    assert [s.target for s in proxy.seen] == [hub.url + r.path for r in hub.requests]
    assert len(proxy.seen) == 3


def test_a_misspelt_known_model_gets_the_knowledge_suggestions(hub: FakeHub, knowledge: Knowledge) -> None:
    known = next(m for m in knowledge.models if m.hf_repo.startswith("meta-llama/"))
    misspelt = known.hf_repo[:-1] + "x"
    with pytest.raises(AdviceError, match=rf"no such model repository.*Did you mean: .*{known.id}"):
        ask(knowledge, model=misspelt)
