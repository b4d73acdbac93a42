"""Shell text: variables set earlier, defaults, arithmetic and word splitting, `env` prefixes, `podman run`,
line continuations, argparse abbreviations, the LMCache image's `serve` (issue 15).

The shell constructs one by one (quotes, groups, functions, heredocs) are in tests/test_shell_constructs.py.
"""

from __future__ import annotations

import pytest

from reading import KNOWLEDGE, effective, flags, read, review, workloads
from vllm_caching_mcp.advice.deployment import resolve
from vllm_caching_mcp.advice.deployment.read import NothingToReview
from vllm_caching_mcp.advice.deployment.shell import conditional_lines
from vllm_caching_mcp.versions import parse_version


def test_shell_variables_set_earlier_defaults_arithmetic_and_splitting_are_expanded() -> None:
    script = (
        'MODEL=${MODEL:-Qwen/Qwen3-8B}\nTP=2\nexport PP=2\nEXTRA="--enable-prefix-caching --max-num-seqs 64"\n'
        'vllm serve "$MODEL" --tensor-parallel-size $TP --pipeline-parallel-size "${PP}" '
        "--port $((8000 + TP * 10)) $EXTRA > serve.log 2>&1 &\n"
    )
    [w], _ = workloads(("serve.sh", script))
    assert w.model == "Qwen/Qwen3-8B"
    assert flags(w) == {
        "--tensor-parallel-size": "2",
        "--pipeline-parallel-size": "2",
        "--port": "8020",
        "--enable-prefix-caching": True,
        "--max-num-seqs": "64",
    }
    assert {e.name: e.value for e in w.env} == {"PP": "2"}  # TP is not exported


def test_what_the_files_do_not_set_is_unresolved_never_guessed() -> None:
    [w], notes = workloads(("run.sh", "vllm serve $MODEL_PATH --enforce-eager --max-model-len ${MAX_LEN}\n"))
    assert w.model is None
    [length] = [f for f in w.flags if f.name == "--max-model-len"]
    assert length.unresolved == "MAX_LEN is not set in the files"
    assert any("the model $MODEL_PATH: MODEL_PATH is not set in the files" in n for n in notes)
    resolved = resolve(w, read(("run.sh", "vllm serve x")), KNOWLEDGE, parse_version("0.20.2"), "stated")
    assert "max_model_len" not in resolved.facts


def test_a_value_that_expands_to_nothing_is_a_parse_error_not_the_next_option() -> None:
    [w], _ = workloads(("run.sh", "MAX_LEN=${MAX_LEN-}\nvllm serve m --max-model-len $MAX_LEN --enforce-eager\n"))
    [length] = [f for f in w.flags if f.name == "--max-model-len"]
    assert length.value == "" and length.problem and "expected one argument" in length.problem
    assert flags(w)["--enforce-eager"] is True


def test_env_prefix_podman_and_an_image_in_a_variable() -> None:
    script = (
        "IMAGE=docker.io/vllm/vllm-openai:v0.20.2\n"
        "podman run --rm --ipc=host --shm-size 8g -e PYTHONHASHSEED=0 $IMAGE --model m\n"
        "env LMCACHE_LOCAL_CPU=True vllm serve m2\n"
    )
    [docker, plain], _ = workloads(("run.sh", script))
    assert docker.image == "docker.io/vllm/vllm-openai:v0.20.2" and docker.host_ipc and docker.shm_gib == 8
    assert {e.name for e in plain.env} == {"LMCACHE_LOCAL_CPU"}


def test_a_continuation_broken_by_a_trailing_space_is_said() -> None:
    [w], notes = workloads(("run.sh", "vllm serve m \\ \n  --enable-prefix-caching\n"))
    assert not w.flags
    assert any("starts with --enable-prefix-caching" in n for n in notes)


def test_an_unambiguous_prefix_is_read_as_the_option_it_abbreviates() -> None:
    resolved = effective(("r.sh", "vllm serve m --max-num-seq 12 --max 3"))
    assert resolved.flags["--max-num-seqs"].value == "12"
    assert "--max" in resolved.flags  # ambiguous: left as written, for the unknown-flag rule


def test_the_lmcache_image_takes_serve_and_the_model_after_it() -> None:
    text = "docker run --gpus all lmcache/vllm-openai:v0.3.9 serve Qwen/Qwen3-8B --max-num-seqs 8\n"
    [w], _ = workloads(("run.sh", text))
    assert w.model == "Qwen/Qwen3-8B" and w.gpu_count is None


def test_words_behind_an_alternate_expansion_are_judged_as_passed_only_where_it_is_set() -> None:
    script = (
        'MODE=fast\nvllm serve m \\\n  ${REVISION:+--revision "$REVISION"} \\\n'
        '  ${SWAP:+--swap-space "$SWAP"} \\\n  ${MODE:+--enforce-eager}\n'
    )
    [w], _ = workloads(("serve.sh", script))
    assert {"--revision", "--swap-space", "--enforce-eager"} <= set(flags(w))
    result = review(("serve.sh", script), version="0.33.0")
    (swap,) = [f for f in result.findings if "--swap-space" in f.message]
    assert swap.severity == "warning" and "line 4: it is passed only where SWAP is set" in swap.message
    assert conditional_lines(script) == {
        3: "it is passed only where REVISION is set (`${REVISION:+...}`)",
        4: "it is passed only where SWAP is set (`${SWAP:+...}`)",
    }  # MODE is assigned in the script: its words are passed as the script says


def test_a_launcher_of_its_own_is_read_by_the_vllm_options_it_passes_on() -> None:
    # A Slurm job's own cluster starter (github: uv-python/raycluster's sbatch): its options first, vLLM's after.
    script = (
        "#!/usr/bin/env bash\n#SBATCH --nodes=4\nmodule load singularity/4.1.0-slurm\n"
        "srun -u ~/projects/raycluster/start-cluster.py singularity ~/.opt/vLLM/vllm_latest.sif \\\n"
        '\t--container-args "--bind ./app:/app" \\\n'
        "\t--slurm --auto --model Qwen/Qwen3-235B-A22B --max-model-len 40000 \\\n"
        "\t--enable-expert-parallel --gpu-memory-utilization 0.98 --enforce-eager --kv-cache-dtype fp8\n"
    )
    [w], notes = workloads(("job.sbatch", script))
    assert w.model == "Qwen/Qwen3-235B-A22B"
    assert flags(w) == {
        "--max-model-len": "40000",
        "--enable-expert-parallel": True,
        "--gpu-memory-utilization": "0.98",
        "--enforce-eager": True,
        "--kv-cache-dtype": "fp8",
    }  # the launcher's own --container-args, --slurm and --auto are not taken for vLLM's
    assert any("`srun -u ~/projects/raycluster/start-cluster.py` is no vLLM command" in n for n in notes)


def test_words_that_print_fetch_or_measure_are_no_launcher() -> None:
    options = "--model m --max-model-len 8192 --enable-prefix-caching --gpu-memory-utilization 0.9"
    for line in (
        f'echo "usage: run.sh {options}"',
        f"curl -s http://localhost:8000/v1/models {options}",
        f"python benchmarks/benchmark_throughput.py {options}",
        f"vllm bench serve {options}",
        # a launcher whose options are mostly its own: too few of vLLM's to say what it passes on
        "./launch.sh --model m --nodes 2 --partition gpu --account a --queue q",
    ):
        found = workloads(("run.sh", line + "\nvllm serve real\n"))[0]
        assert [w.model for w in found] == ["real"], line


def test_a_transfer_config_with_a_loop_variable_is_read_without_that_field() -> None:
    # vLLM's own P2P NCCL example builds each instance's config in a loop: kv_port is $((21001 + i)).
    script = (
        "for i in 0 1; do\n  kv_port=$((21001 + i))\n"
        '  vllm serve m --kv-transfer-config "{\\"kv_connector\\":\\"P2pNcclConnector\\",'
        '\\"kv_role\\":\\"kv_producer\\",\\"kv_port\\":\\"$kv_port\\",\\"enable_async_transfers\\":true}" &\ndone\n'
    )
    e = effective(("run.sh", script), version="0.33.0")
    assert [c.name for c in e.connectors] == ["P2pNcclConnector"]
    written = {"kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "enable_async_transfers": True}
    assert e.transfer_config == written
    result = review(("run.sh", script), version="0.33.0")
    assert {"pitfall.p2p-nccl-removed", "pitfall.transfer-config-field-refused"} <= {f.rule_id for f in result.findings}
    assert any("read without kv_port" in n for n in result.notes)


def test_a_vllm_image_whose_entrypoint_runs_a_script_not_shown_is_a_server_of_unknown_options() -> None:
    """`docker run --entrypoint /bin/bash lmcache/vllm-openai:patched -c "python app.py"`: vLLM runs inside
    app.py, whose options the files do not give; the container (image, environment) is read all the same."""
    script = (
        'IMAGE="lmcache/vllm-openai:patched"\n'
        "docker run --rm --gpus all --env LMCACHE_LOCAL_CPU=True --entrypoint /bin/bash \\\n"
        '  "${IMAGE}" -c "source /opt/venv/bin/activate && python llm_backend_blend.py"\n'
    )
    deployment = read(("run.sh", script))
    [workload] = deployment.workloads
    assert deployment.unread == [] and workload.flags == [] and workload.image == "lmcache/vllm-openai:patched"
    assert workload.options_unknown is not None
    assert "runs `/bin/bash -c" in workload.options_unknown and "not known" in workload.options_unknown
    assert [(e.name, e.value) for e in workload.env] == [("LMCACHE_LOCAL_CPU", "True")]
    # another image's entrypoint override is no vLLM launch at all
    other = script.replace("lmcache/vllm-openai:patched", "redis:7")
    with pytest.raises(NothingToReview):
        read(("run.sh", other))


def test_an_env_given_twice_to_docker_run_and_a_pulled_moving_tag_are_found() -> None:
    script = (
        "docker pull vllm/vllm-openai:latest\n"
        "docker run --gpus all -e LMCACHE_MAX_LOCAL_CPU_SIZE=5 -e HF_HOME=/hf -e LMCACHE_MAX_LOCAL_CPU_SIZE=200 \\\n"
        "  vllm/vllm-openai:v0.11.0 --model m\n"
    )
    result = review(script)
    by_rule = {f.rule_id: f for f in result.findings}
    twice = by_rule["pitfall.duplicate-yaml-key"]
    assert twice.location.line == 2 and "first at line 2, '5'" in twice.message and "'200'" in twice.message
    pulled = by_rule["pitfall.floating-image-tag"]
    assert pulled.location.line == 1 and "docker pull: vllm/vllm-openai:latest" in pulled.message
    # a pulled release tag, or another image's moving one, is no finding
    pinned = review(
        script.replace("openai:latest", "openai:v0.11.0")
        .replace("=200", "=5 -e OTHER=1")
        .replace("LMCACHE_MAX_LOCAL_CPU_SIZE=5 -e HF_HOME", "HF_HOME")
    )
    assert not {"pitfall.duplicate-yaml-key", "pitfall.floating-image-tag"} & {f.rule_id for f in pinned.findings}
    assert "pitfall.floating-image-tag" not in {
        f.rule_id for f in review(script.replace("vllm/vllm-openai:latest", "redis:latest")).findings
    }
