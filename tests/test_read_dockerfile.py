"""Dockerfiles: the image's base (ARG defaults, the final stage of a multi-stage build), its pip installs of
vLLM and LMCache, its ENV, and the server its ENTRYPOINT and CMD start; a compose service's `build:` takes
them from the Dockerfile among the documents."""

from __future__ import annotations

import pytest

from reading import flags, read, review, workloads
from vllm_caching_mcp.advice.common import AdviceError

SERVED = 'CMD ["--model", "Qwen/Qwen3-8B", "--kv-offloading-size", "16"]\n'


def test_a_dockerfile_on_the_official_image_runs_its_cmd_as_the_images_arguments() -> None:
    [w], _ = workloads(("Dockerfile", "FROM vllm/vllm-openai:v0.12.0\n" + SERVED))
    assert (w.source, w.image, str(w.image_location)) == ("dockerfile", "vllm/vllm-openai:v0.12.0", "Dockerfile:1")
    assert flags(w) == {"--model": "Qwen/Qwen3-8B", "--kv-offloading-size": "16"}
    assert [f.location.line for f in w.flags] == [2, 2]


def test_an_arg_default_names_the_base_image() -> None:
    text = "ARG VLLM_TAG=v0.11.1\nARG BASE=vllm/vllm-openai:${VLLM_TAG}\nFROM ${BASE}\n" + SERVED
    [w], _ = workloads(("vllm.Dockerfile", text))
    assert w.image == "vllm/vllm-openai:v0.11.1"
    [w], _ = workloads(("Containerfile", "FROM ${BASE:-vllm/vllm-openai:v0.13.0}\n" + SERVED))
    assert w.image == "vllm/vllm-openai:v0.13.0"


def test_a_base_image_no_arg_sets_is_said_unknown() -> None:
    deployment = read(("Dockerfile", 'ARG BASE\nFROM $BASE\nCMD ["vllm", "serve", "m"]\n'))
    assert any("the base image $BASE is not known" in n for n in deployment.notes), deployment.notes


def test_the_final_stage_counts_and_a_stage_built_on_another_keeps_its_installs() -> None:
    text = (
        "FROM vllm/vllm-openai:v0.10.2 AS old\n"
        "FROM vllm/vllm-openai:v0.12.0 AS engine\n"
        "RUN pip install lmcache==0.3.9\n"
        "FROM engine\n"
        "ENV VLLM_LOGGING_LEVEL=DEBUG\n" + SERVED
    )
    [w], _ = workloads(("Dockerfile", text))
    assert w.image == "vllm/vllm-openai:v0.12.0"
    assert [(c.package, c.version, c.location.line) for c in w.installs] == [("lmcache", "0.3.9", 3)]
    assert [(e.name, e.value) for e in w.env] == [("VLLM_LOGGING_LEVEL", "DEBUG")]


def test_run_pip_installs_keep_their_own_lines_across_continuations_comments_and_mounts() -> None:
    text = (
        "FROM nvidia/cuda:12.8.0-runtime-ubuntu24.04\n"
        "RUN --mount=type=cache,target=/var/cache/uv uv pip install --system \\\n"
        "    # the engine, pinned\n"
        '    "vllm==0.11.0" \\\n'
        "    lmcache==0.3.9\n"
        'RUN ["python3", "-m", "pip", "install", "vllm[audio]==0.11.2"]\n'
        "ENTRYPOINT vllm serve Qwen/Qwen3-8B \\\n"
        "    --port 8000\n"
    )
    [w], _ = workloads(("Dockerfile", text))
    assert [(c.package, c.version, c.location.line) for c in w.installs] == [
        ("vllm", "0.11.0", 4),
        ("lmcache", "0.3.9", 5),
        ("vllm", "0.11.2", 6),
    ]
    assert (w.model, flags(w), w.flags[0].location.line) == ("Qwen/Qwen3-8B", {"--port": "8000"}, 8)


def test_an_exec_entrypoint_takes_cmd_as_its_arguments_and_env_forms_are_read() -> None:
    text = (
        "FROM python:3.12-slim\n"
        "RUN pip install vllm==0.12.0\n"
        'ENV HF_HOME=/models LMCACHE_CHUNK_SIZE="256"\n'
        "ENV VLLM_PORT 8000\n"
        'ENTRYPOINT ["vllm", "serve"]\n'
        'CMD ["Qwen/Qwen3-8B", \\\n'
        '     "--gpu-memory-utilization", "0.85"]\n'
    )
    [w], _ = workloads(("Dockerfile", text))
    assert (w.model, flags(w)) == ("Qwen/Qwen3-8B", {"--gpu-memory-utilization": "0.85"})
    assert w.flags[0].location.line == 7
    assert [(e.name, e.value, e.location.line) for e in w.env] == [
        ("HF_HOME", "/models", 3),
        ("LMCACHE_CHUNK_SIZE", "256", 3),
        ("VLLM_PORT", "8000", 4),
    ]


def test_a_dockerfile_whose_image_starts_no_server_gives_no_workload() -> None:
    deployment = read(
        ("Dockerfile", "FROM python:3.12\nRUN pip install vllm==0.12.0 lmcache==0.3.9\n"),
        ("serve.sh", "vllm serve m\n"),
    )
    assert [w.source for w in deployment.workloads] == ["command-line"]
    assert any("whose ENTRYPOINT and CMD start no vLLM server" in n for n in deployment.notes), deployment.notes
    # built on vLLM's own image, it keeps that image's ENTRYPOINT, `vllm serve`: a server whose arguments come at run
    [kept], notes = workloads(("Dockerfile", "FROM vllm/vllm-openai:v0.12.0\nRUN pip install lmcache==0.3.9\n"))
    assert (
        kept.source == "dockerfile" and kept.flags == [] and any("whose ENTRYPOINT is `vllm serve`" in n for n in notes)
    )
    built = read(("Dockerfile", "FROM vllm/vllm-openai:v0.12.0\n"), ("c.yaml", "services:\n  e:\n    build: .\n"))
    assert not any("start no vLLM server" in n for n in built.notes), built.notes


def test_a_shell_script_named_like_a_dockerfile_is_still_a_script() -> None:
    [w], _ = workloads(("Dockerfile.sh", "vllm serve m --port 8000\n"))
    assert w.source == "command-line"


COMPOSE = """services:
  engine:
    build:
      context: ./engine
      dockerfile: Dockerfile.vllm
    image: registry.example.com/engine:latest
    environment:
      VLLM_LOGGING_LEVEL: INFO
"""

ENGINE = (
    "FROM vllm/vllm-openai:v0.11.0\n"
    "RUN pip install vllm==0.12.0\n"
    "ENV VLLM_LOGGING_LEVEL=DEBUG\n"
    'CMD ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]\n'
)


def test_a_compose_build_takes_the_image_installs_env_and_cmd_from_its_dockerfile() -> None:
    deployment = read(("deploy/compose.yaml", COMPOSE), ("deploy/engine/Dockerfile.vllm", ENGINE))
    [w] = deployment.workloads  # the Dockerfile's own server is the service's, not a second one
    assert (w.name, w.source, w.image) == ("service engine", "compose", "vllm/vllm-openai:v0.11.0")
    assert str(w.image_location) == "deploy/engine/Dockerfile.vllm:1"
    assert [(c.version, str(c.location)) for c in w.installs] == [("0.12.0", "deploy/engine/Dockerfile.vllm:2")]
    assert [(e.name, e.value) for e in w.env] == [("VLLM_LOGGING_LEVEL", "DEBUG"), ("VLLM_LOGGING_LEVEL", "INFO")]
    assert flags(w) == {"--model": "Qwen/Qwen3-8B", "--max-model-len": "8192"}
    assert any("reviewed as service engine of deploy/compose.yaml" in n for n in deployment.notes)


def test_a_compose_command_replaces_the_dockerfiles_cmd_and_its_entrypoint_stays() -> None:
    dockerfile = 'FROM python:3.12\nRUN pip install vllm==0.12.0\nENTRYPOINT ["vllm", "serve"]\nCMD ["m"]\n'
    compose = 'services:\n  engine:\n    build: .\n    command: ["Qwen/Qwen3-8B", "--port", "8001"]\n'
    [w], _ = workloads(("compose.yaml", compose), ("Dockerfile", dockerfile))
    assert (w.model, flags(w)) == ("Qwen/Qwen3-8B", {"--port": "8001"})
    inline = "services:\n  engine:\n    build:\n      dockerfile_inline: |\n        FROM vllm/vllm-openai:v0.13.0\n"
    [w], _ = workloads(("compose.yaml", inline + '    command: ["--model", "m"]\n'))
    assert w.image == "vllm/vllm-openai:v0.13.0"


def test_a_compose_build_whose_dockerfile_is_not_given_is_said() -> None:
    compose = 'services:\n  engine:\n    build: ./engine\n    command: ["vllm", "serve", "m"]\n'
    deployment = read(("compose.yaml", compose))
    [w] = deployment.workloads
    assert w.image is None and not w.installs
    assert any("built from engine/Dockerfile, which is not among the documents" in n for n in deployment.notes)


def test_a_dockerfile_sets_no_dev_shm_where_it_runs_but_a_compose_service_does() -> None:
    # /dev/shm is given when the container runs (docker run --shm-size, compose shm_size), not in the image.
    dockerfile = (
        'FROM vllm/vllm-openai:v0.30.0\nCMD ["--model", "m", "--kv-offloading-size", "16", '
        '"--kv-offloading-backend", "native"]\n'
    )
    rule = "pitfall.offload-tier-over-shm"
    assert rule not in {f.rule_id for f in review(("Dockerfile", dockerfile)).findings}
    compose = ("compose.yaml", "services:\n  engine:\n    build: .\n")
    assert rule in {f.rule_id for f in review(compose, ("Dockerfile", dockerfile)).findings}


def test_a_dockerfile_of_more_instructions_than_any_has_is_refused_with_its_name() -> None:
    with pytest.raises(AdviceError, match="Dockerfile: more than 5,000 instructions"):
        read(("Dockerfile", "FROM vllm/vllm-openai:v0.12.0\n" + "ENV A=1\n" * 5_000))


def test_a_dockerfile_under_another_name_is_known_by_its_instructions() -> None:
    text = "# engine image\nFROM vllm/vllm-openai:v0.12.0\nRUN pip install \\\n    lmcache==0.3.9\n" + SERVED
    [w], _ = workloads(("pasted", text))
    assert (w.source, w.image) == ("dockerfile", "vllm/vllm-openai:v0.12.0")
    [w], _ = workloads(("pasted", "from=1\nvllm serve m\n"))  # a script: a line that is no instruction
    assert w.source == "command-line"
    [w], _ = workloads(("build.sh", 'FROM=vllm\nvllm serve "$FROM"\n'))
    assert w.source == "command-line"


def test_a_built_image_named_with_another_release_is_said_and_the_dockerfile_counts() -> None:
    compose = "services:\n  engine:\n    build: .\n    image: vllm/vllm-openai:v0.13.0\n"
    dockerfile = 'FROM vllm/vllm-openai:v0.12.0\nCMD ["--model", "m"]\n'
    deployment = read(("compose.yaml", compose), ("Dockerfile", dockerfile))
    assert [w.image for w in deployment.workloads] == ["vllm/vllm-openai:v0.12.0"]
    [note] = [n for n in deployment.notes if "names the image it builds" in n]
    assert note.startswith("compose.yaml:4") and "built on vllm/vllm-openai:v0.12.0 (Dockerfile:1)" in note


def test_a_stage_built_on_one_with_a_shell_form_entrypoint_still_runs_it_alone() -> None:
    text = (
        "FROM python:3.12 AS engine\nRUN pip install vllm==0.12.0\nENTRYPOINT vllm serve m --port 8000\n"
        'FROM engine\nCMD ["x"]\n'
    )
    [w], _ = workloads(("Dockerfile", text))
    assert (w.model, flags(w)) == ("m", {"--port": "8000"})  # Docker gives a shell-form ENTRYPOINT no CMD


def test_an_image_built_for_vllm_that_starts_its_own_script_is_a_vllm_server_whose_options_are_not_here() -> None:
    on_base = "FROM example.com/models/pytorch-vllm-serve:gemma4\nCOPY entrypoint.sh /entrypoint.sh\n"
    [w], notes = workloads(("Dockerfile", on_base + 'ENTRYPOINT ["/entrypoint.sh"]\n'))
    assert w.source == "dockerfile" and w.flags == []
    assert any("starts /entrypoint.sh, which the files do not hold" in n for n in notes), notes
    # built from vLLM's sources in one stage and copied into the next: its installs are the copy's
    multi_stage = (
        "FROM nvidia/cuda:12.8.1-devel-ubuntu24.04 AS build\n"
        "RUN git clone https://github.com/vllm-project/vllm.git && cd vllm && pip install -e .\n"
        "FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04\n"
        "COPY --from=build /opt/venv /opt/venv\n"
        'CMD ["bash", "/usr/local/bin/start.sh"]\n'
    )
    [built], _ = workloads(("Containerfile", multi_stage))
    assert [(c.package, c.requirement, c.location.line) for c in built.installs] == [("unknown", "--from=build", 4)]
    assert "pitfall.vllm-not-in-image" not in {f.rule_id for f in review(("Containerfile", multi_stage)).findings}
    # a script in an image that has nothing of vLLM is no vLLM server
    other = 'FROM python:3.12\nCOPY run.sh /run.sh\nENTRYPOINT ["/run.sh"]\n'
    with pytest.raises(AdviceError, match="no vLLM server found"):
        read(("Dockerfile", other))


def test_buildkit_options_on_lines_of_their_own_are_not_commands() -> None:
    text = (
        "FROM vllm/vllm-openai:v0.12.0\n"
        "RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \\\n"
        "    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \\\n"
        "    apt-get update && pip install lmcache==0.3.9\n"
    )
    [w], notes = workloads(("Dockerfile", text))
    assert not any("--mount" in n for n in notes), notes
    assert [(c.package, c.location.line) for c in w.installs] == [("lmcache", 4)]
