"""What vLLM refuses before it plans any KV (issue 27): the model registry of each release, read from its wheel.

The generator runs on tiny fake releases; the shipped knowledge/model_registry.yaml then decides, for a
config read from disk or the Hub, what the release does: builds its own class, serves it through the
Transformers backend (the answer says the figures are the generic reader's), or refuses it with the
reason vLLM gives (a model_type transformers does not know, an architecture no longer or never served).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, size_offload_of
from vllm_caching_mcp.advice.common import AdviceError
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.versions import Version

sys.path.insert(0, str(REPO / "scripts"))
import build_model_registry

CONFIGS = REPO / "tests" / "data" / "engine" / "configs"

REGISTRY_OLD = """\
_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), "MPTForCausalLM": ("mpt", "MPT")}
_MULTIMODAL_MODELS = {"LlavaForConditionalGeneration": ("llava", "Llava")}
_VLLM_MODELS = {**_TEXT_GENERATION_MODELS, **_MULTIMODAL_MODELS}
"""
REGISTRY_NEW = """\
_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}
_VLLM_MODELS = {
    **_TEXT_GENERATION_MODELS,
}
_PREVIOUSLY_SUPPORTED_MODELS = {"MPTForCausalLM": "0.28.0"}
_OOT_SUPPORTED_MODELS = {"BartModel": "https://github.com/vllm-project/bart-plugin"}
"""
CONFIG_REGISTRY = 'LazyConfigDict = dict\n_CONFIG_REGISTRY: dict = LazyConfigDict(chatglm="ChatGLMConfig")\n'
AUTO_MAPPINGS = 'CONFIG_MAPPING_NAMES = OrderedDict([("llama", "LlamaConfig"), ("gemma4", "Gemma4Config")])\n'
MODELING = '__all__ = ["LlamaForCausalLM", "LlamaModel"]\n'


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def test_the_generator_reads_each_releases_registry(tmp_path: Path) -> None:
    _write(tmp_path / "vllm-0.11.0", {build_model_registry.REGISTRY: REGISTRY_OLD})
    _write(
        tmp_path / "vllm-0.33.0",
        {build_model_registry.REGISTRY: REGISTRY_NEW, build_model_registry.CONFIGS: CONFIG_REGISTRY},
    )
    _write(
        tmp_path / "transformers-5.20.2",
        {
            "transformers/models/auto/auto_mappings.py": AUTO_MAPPINGS,
            "transformers/models/llama/modeling_llama.py": MODELING,
        },
    )
    data = build_model_registry.build(tmp_path)
    assert data["releases_read"] == ["0.11.0", "0.33.0"]
    assert data["architectures"] == [
        {"name": "LlamaForCausalLM"},
        {"name": "LlavaForConditionalGeneration", "removed": "0.33.0"},
        {"name": "MPTForCausalLM", "removed": "0.33.0"},
    ]
    assert data["config_types"] == [{"name": "chatglm", "introduced": "0.33.0"}]
    assert {"name": "MPTForCausalLM", "why": "until 0.28.0"} in data["refused"]
    assert data["transformers"]["5.20.2"]["model_types"] == ["gemma4", "llama"]
    assert data["transformers"]["5.20.2"]["model_classes"] == ["LlamaForCausalLM", "LlamaModel"]
    assert "wheel:vllm==0.33.0:vllm/model_executor/models/registry.py:2-4" in data["sources"]
    out = tmp_path / "model_registry.yaml"
    assert build_model_registry.main(["--src-dir", str(tmp_path), "--out", str(out)]) == 0
    assert "name: 'MPTForCausalLM', removed: '0.33.0'" in out.read_text()


def test_the_generator_names_what_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path / "vllm-0.33.0", {build_model_registry.REGISTRY: "_VLLM_MODELS = dict()\n"})
    assert build_model_registry.main(["--src-dir", str(tmp_path), "--out", str(tmp_path / "x.yaml")]) == 1
    assert "no _VLLM_MODELS dict" in capsys.readouterr().err


def test_the_shipped_registry_has_the_releases_and_the_issues_examples(knowledge: Knowledge) -> None:
    registry = knowledge.model_registry
    newest = Version("0.33.0")
    assert registry.was_read(newest) and registry.was_read(Version("0.20.2"))
    for served in ("LlamaForCausalLM", "DeciLMForCausalLM", "Lfm2ForCausalLM", "MiMoV2FlashForCausalLM"):
        assert registry.serves(served, newest), served
    assert not registry.serves("Step3p7FlashForCausalLM", newest)
    assert registry.serves("MPTForCausalLM", Version("0.20.2")) and not registry.serves("MPTForCausalLM", newest)
    pinned = registry.transformers_for(newest)
    assert pinned is not None and "qwen3" in pinned[1].model_types and "acme_unknown" not in pinned[1].model_types


def _config(tmp_path: Path, **changes: Any) -> str:
    raw = json.loads((CONFIGS / "llama-3.1-8b" / "config.json").read_text())
    raw.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return str(tmp_path)


def ask(knowledge: Knowledge, path: str, version: str = "0.33.0") -> Any:
    return size_offload_of(knowledge, config_path=path, weights_gib_per_gpu=16, version=version)


def test_a_model_type_transformers_does_not_know_is_refused(knowledge: Knowledge, tmp_path: Path) -> None:
    path = _config(tmp_path, architectures=["AcmeForCausalLM"], model_type="acme_unknown")
    with pytest.raises(
        AdviceError, match=r"^config_path: .*cannot load its config: model_type 'acme_unknown' is known "
    ):
        ask(knowledge, path)
    # transformers 5.20.2 knows step3p7, vLLM 0.33.0 has no Step3p7FlashForCausalLM: the registry refuses it
    # a remote config class (auto_map) loads with --trust-remote-code: then the registry decides
    step = _config(tmp_path, architectures=["Step3p7FlashForCausalLM"], model_type="step3p7")
    with pytest.raises(AdviceError, match=r"'Model architectures \['Step3p7FlashForCausalLM'\] are not supported"):
        ask(knowledge, step)
    # a remote config class (auto_map) loads with --trust-remote-code: then the registry decides
    remote = _config(
        tmp_path, architectures=["LlamaForCausalLM"], model_type="acme_unknown", auto_map={"AutoConfig": "c.C"}
    )
    assert ask(knowledge, remote).layer_kinds[0].layers == 32


def test_an_architecture_vllm_stopped_serving_is_refused_with_its_message(knowledge: Knowledge, tmp_path: Path) -> None:
    path = _config(tmp_path, architectures=["MPTForCausalLM"])
    with pytest.raises(AdviceError, match=r"was supported in vLLM until v0.28.0, and is not supported anymore"):
        ask(knowledge, path)
    assert ask(knowledge, path, version="0.20.2").layer_kinds[0].layers == 32  # that release still serves it


def test_an_architecture_only_transformers_has_is_served_by_its_backend(knowledge: Knowledge, tmp_path: Path) -> None:
    pinned = knowledge.model_registry.transformers_for(Version("0.33.0"))
    assert pinned is not None
    name = next(
        c
        for c in sorted(pinned[1].model_classes)
        if c.endswith("ForCausalLM") and not knowledge.model_registry.serves(c, Version("0.33.0"))
    )
    answer = ask(knowledge, _config(tmp_path, architectures=[name]))
    assert any("Transformers backend" in w and "generic reader's estimate" in w for w in answer.warnings)


def test_a_remote_model_class_is_served_by_the_backend(knowledge: Knowledge, tmp_path: Path) -> None:
    path = _config(tmp_path, architectures=["AcmeForCausalLM"], auto_map={"AutoModelForCausalLM": "m.Acme"})
    answer = ask(knowledge, path)
    assert any("remote model class" in w and "--trust-remote-code" in w for w in answer.warnings)


def test_known_models_and_plain_layouts_are_not_second_guessed(knowledge: Knowledge) -> None:
    known = size_offload_of(knowledge, model="llama-3.1-8b", weights_gib_per_gpu=16)
    assert not any("registry" in w or "Transformers backend" in w for w in known.warnings)
    typed = {"num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128}
    assert size_offload_of(knowledge, architecture=typed, weights_gib_per_gpu=16, max_model_len=8192).layer_kinds
