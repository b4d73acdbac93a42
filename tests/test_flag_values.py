"""pitfall.option-value-refused: an option value the release's argument parser refuses.

The premise is argparse's, so the probe here is argparse itself: a parser built with the actions vLLM
gives (BooleanOptionalAction for a bool field, store_true, choices from a Literal field, one positional
for the model) refuses exactly what the review reports, with the same words."""

from __future__ import annotations

import argparse

import pytest

from reading import review
from vllm_caching_mcp.advice.deployment.model import FlagUse, Location
from vllm_caching_mcp.advice.flag_values import _choices, refused_values
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.versions import Version

M = "meta-llama/Llama-3.1-8B-Instruct"
RULE = "pitfall.option-value-refused"


def _found(text: str, version: str) -> list[str]:
    return [f.message for f in review(text, version=version).findings if f.rule_id == RULE]


def _parser(knowledge: Knowledge, version: str) -> argparse.ArgumentParser:
    """The parts of vLLM's serve parser these tests need, built the way get_kwargs builds them."""
    field = next(
        e
        for e in knowledge.engine_schema.config_fields
        if e.name == "prefix_caching_hash_algo" and e.holds_at(Version(version))
    )
    parsed = _choices(field.at("type", Version(version)))
    assert parsed is not None
    parser = argparse.ArgumentParser(prog="vllm serve", exit_on_error=False)
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--prefix-caching-hash-algo", type=str, choices=sorted(parsed[0]))
    return parser


def _argparse_error(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    try:
        _, extra = parser.parse_known_args(words)
    except argparse.ArgumentError as e:
        return str(e)
    return f"unrecognized arguments: {' '.join(extra)}" if extra else None


@pytest.mark.parametrize(
    ("version", "words", "refused"),
    [
        ("0.33.0", ["--enable-prefix-caching=false"], "ignored explicit argument 'false'"),
        ("0.33.0", ["--enable-prefix-caching=true"], "ignored explicit argument 'true'"),
        ("0.33.0", ["--enforce-eager=True"], "ignored explicit argument 'True'"),
        ("0.33.0", ["--no-enable-prefix-caching=1"], "ignored explicit argument '1'"),
        ("0.33.0", ["--enable-prefix-caching", "false"], "unrecognized arguments: false"),
        ("0.33.0", ["--prefix-caching-hash-algo", "builtin"], "invalid choice: 'builtin'"),
        ("0.33.0", ["--prefix-caching-hash-algo=xxhash"], None),
        ("0.11.0", ["--prefix-caching-hash-algo", "xxhash"], "invalid choice: 'xxhash'"),
        ("0.11.0", ["--prefix-caching-hash-algo", "sha256_cbor"], None),
        ("0.33.0", ["--enable-prefix-caching", "--no-enable-prefix-caching"], None),
        # a word that is no option after the model: a second positional (a chart's extraArgs)
        ("0.33.0", ["--prefix-caching-hash-algo=xxhash", "CUDA_VISIBLE_DEVICES=0,1"], "unrecognized arguments: CUDA"),
        ("0.11.0", ["extra", "--enforce-eager"], "unrecognized arguments: extra"),
    ],
)
def test_the_review_refuses_what_argparse_refuses(
    knowledge: Knowledge, version: str, words: list[str], refused: str | None
) -> None:
    error = _argparse_error(_parser(knowledge, version), [M, *words])
    assert (error is None) is (refused is None) and (refused is None or refused in str(error)), error
    messages = _found(f"vllm serve {M} " + " ".join(words), version)
    if refused is None:
        assert messages == []
    else:
        assert len(messages) == 1 and refused in messages[0] and f"vLLM {version}" in messages[0], messages


def test_a_switch_written_apart_from_its_word_with_no_model_named_is_not_judged(knowledge: Knowledge) -> None:
    # with no model named, argparse takes the word as the model: a wrong model, not this refusal
    assert _argparse_error(_parser(knowledge, "0.33.0"), ["--enable-prefix-caching", "false"]) is None
    assert _found("vllm serve --enable-prefix-caching false", "0.33.0") == []
    # a word that is not a boolean after a switch is the model (vllm serve --enforce-eager MODEL)
    assert _found(f"vllm serve --enforce-eager {M}", "0.33.0") == []


def test_a_choice_one_release_accepts_and_another_refuses() -> None:
    text = f"vllm serve {M} --prefix-caching-hash-algo xxhash"
    [message] = _found(text, "0.11.0")
    assert "--prefix-caching-hash-algo xxhash" in message and "'sha256', 'sha256_cbor'" in message
    assert _found(text, "0.13.0") == []


def test_a_literal_with_str_takes_any_text_and_int_choices_are_numbers() -> None:
    # 0.33.0's cache_dtype is Literal[...] | str: argparse gets a metavar, not choices
    assert _found(f"vllm serve {M} --kv-cache-dtype my_dtype", "0.33.0") == []
    [dtype] = _found(f"vllm serve {M} --kv-cache-dtype my_dtype", "0.11.0")
    assert "--kv-cache-dtype my_dtype" in dtype and "'fp8'" in dtype
    [block] = _found(f"vllm serve {M} --block-size 48", "0.11.0")
    assert "invalid choice: 48" in block and "1, 8, 16, 32, 64, 128" in block
    assert _found(f"vllm serve {M} --block-size 48", "0.33.0") == []  # an int from 0.18.0


def test_a_value_from_a_variable_the_files_do_not_set_is_not_judged() -> None:
    assert _found(f"vllm serve {M} --prefix-caching-hash-algo $ALGO", "0.33.0") == []
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          command: ["vllm", "serve", "{M}", "--prefix-caching-hash-algo", "$(ALGO)", "--enable-prefix-caching=$(PC)"]
          env:
            - name: ALGO
              valueFrom: {{configMapKeyRef: {{name: vllm, key: algo}}}}
"""
    assert _found(manifest, "0.33.0") == []
    # set in the same script, the variable is read
    [message] = _found(f"ALGO=builtin\nvllm serve {M} --prefix-caching-hash-algo $ALGO", "0.33.0")
    assert "builtin" in message


def test_refused_values_names_the_option_the_value_and_what_is_accepted(knowledge: Knowledge) -> None:
    where = Location(file="serve.sh", line=1)
    flags = [
        FlagUse(
            name="--enable-chunked-prefill", written="--enable-chunked-prefill=false", value="false", location=where
        ),
        FlagUse(name="--scheduling-policy", written="--scheduling-policy", value="lifo", location=where),
        FlagUse(name="--data-parallel-backend", written="--data-parallel-backend", value="mp", location=where),
    ]
    found = refused_values(flags, Version("0.33.0"), knowledge, model_named=True)
    assert [(r.option, r.value) for r in found] == [
        ("--enable-chunked-prefill", "false"),
        ("--scheduling-policy", "lifo"),
    ]
    assert found[0].accepted == "--enable-chunked-prefill or --no-enable-chunked-prefill, with no value"
    assert found[1].accepted == "'fcfs', 'priority'"  # SchedulerConfig.policy: the renamed option


def test_a_memory_fraction_given_as_a_percentage_and_human_readable_lengths() -> None:
    # 0.11.0's CacheConfig.__post_init__ raises above 1.0 (and lets 0 pass); from 0.11.1 Field(gt=0, le=1)
    [old] = _found(f"vllm serve {M} --gpu-memory-utilization 90", "0.11.0")
    assert "--gpu-memory-utilization 90" in old and "when it builds its configuration" in old
    assert _found(f"vllm serve {M} --gpu-memory-utilization 0", "0.11.0") == []
    [zero, alias] = _found(f"vllm serve {M} --gpu-memory-utilization=0 --device-memory-utilization 1.5", "0.33.0")
    assert "above 0 and at most 1" in zero and "--device-memory-utilization 1.5" in alias
    assert _found(f"vllm serve {M} --gpu-memory-utilization 0.95", "0.33.0") == []
    # max_model_len's type reads k/m/g in every covered release (human_readable_int, then _or_auto)
    for version in ("0.11.0", "0.33.0"):
        assert _found(f"vllm serve {M} --max-model-len 32k --max-num-batched-tokens 8k", version) == []


def test_the_finding_names_the_covered_releases_that_take_the_value() -> None:
    [message] = _found(f"vllm serve {M} --prefix-caching-hash-algo xxhash", "0.11.0")
    assert "vLLM 0.11.0's argument parser stops" in message and "vLLM 0.13.0 - 0.34.0 take it" in message
    # 'all' left mamba_cache_mode's Literal in 0.32.0; with no release in the files, the review says so
    [mode] = [f.message for f in review(f"vllm serve {M} --mamba-cache-mode all").findings if f.rule_id == RULE]
    assert "vLLM 0.15.0 - 0.31.0 take it" in mode and "do not say which release runs" in mode
    [builtin] = _found(f"vllm serve {M} --prefix-caching-hash-algo builtin", "0.33.0")
    assert "take it" not in builtin  # no covered release does


_SERVE_CONFIG = """\
applications:
  - name: llm
    import_path: ray.serve.llm:build_openai_app
    args:
      llm_configs:
        - model_loading_config: {model_id: qwen, model_source: Qwen/Qwen2.5-7B-Instruct}
          engine_kwargs:
            enable_prefix_caching: "true"
            block_size: 48
            gpu_memory_utilization: 90
"""


def test_engine_kwargs_skip_the_parser_but_not_the_config_checks() -> None:
    # Ray Serve hands engine_kwargs to EngineArgs: no argparse (a string for a bool, an int outside a
    # SkipValidation Literal pass), but CacheConfig still checks the memory fraction
    found = [
        f.message for f in review(("serve_config.yaml", _SERVE_CONFIG), version="0.11.0").findings if f.rule_id == RULE
    ]
    assert len(found) == 1 and "--gpu-memory-utilization 90" in found[0], found


def test_a_manifest_args_list_with_a_switch_given_a_value() -> None:
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args:
            - --model={M}
            - --max-model-len=65536
            - --enable-prefix-caching
            - --enable-chunked-prefill=false
            - --kv-cache-dtype=fp8
"""
    [message] = _found(manifest, "0.11.0")
    assert message.endswith(
        "--enable-chunked-prefill=false: vLLM 0.11.0's argument parser stops (argument --enable-chunked-prefill: "
        "ignored explicit argument 'false'); it accepts --enable-chunked-prefill or --no-enable-chunked-prefill, "
        "with no value"
    ), message


def test_a_variable_written_into_a_charts_extra_args_is_a_positional_too_many() -> None:
    """production-stack's chart runs `vllm serve MODEL ... EXTRA_ARGS`; vLLM 0.27.1 refused the same line
    (tests/data/engine/rules-0.27.1.json, case stray-word/trips)."""
    values = """\
servingEngineSpec:
  modelSpec:
  - name: llama
    repository: vllm/vllm-openai
    tag: v0.27.1
    modelURL: meta-llama/Llama-3.1-8B-Instruct
    requestGPU: 1
    vllmConfig:
      extraArgs: ["--max-num-seqs", "4", "CUDA_VISIBLE_DEVICES=0,1"]
"""
    [finding] = [f for f in review(("values.yaml", values)).findings if f.rule_id == RULE]
    assert finding.location.line == 9 and "unrecognized arguments: CUDA_VISIBLE_DEVICES=0,1" in finding.message
    assert "set in the container's env" in finding.message
