"""docker-compose files: `${VAR}` from a `.env` beside them, an entrypoint that is not vLLM, `bash -c`
given its command as one string or as one item (issue 15).
"""

from __future__ import annotations

import pytest

from reading import flags, read, workloads
from vllm_caching_mcp.advice.deployment.read import NothingToReview


def test_compose_reads_the_dotenv_beside_it_and_an_entrypoint_that_is_not_vllm_is_not_a_server() -> None:
    compose = (
        "services:\n  vllm:\n    image: vllm/vllm-openai:${TAG}\n    command: [--model, '${MODEL}', --max-num-seqs,"
        " '${SEQS:-128}']\n  cache:\n    image: lmcache/vllm-openai:latest\n"
        "    entrypoint: [/opt/venv/bin/lmcache_server, 0.0.0.0, '65432']\n"
    )
    [w], _ = workloads(("compose.yaml", compose), (".env", "TAG=v0.19.1\nMODEL='Qwen/Qwen3-8B'  \n"))
    assert (w.image, flags(w)["--model"], flags(w)["--max-num-seqs"]) == (
        "vllm/vllm-openai:v0.19.1",
        "Qwen/Qwen3-8B",
        "128",
    )
    [alone], notes = workloads(("compose.yaml", compose))
    assert [f.unresolved for f in alone.flags if f.name == "--model"] != [None] and any(
        "MODEL is set neither in a .env file" in n for n in notes
    )


COMPOSE_BASH_C = """
services:
  engine:
    image: vllm/vllm-openai:v0.22.1
    entrypoint: [bash, -c]
    command: %s
"""


def test_compose_bash_c_given_the_command_as_a_string_runs_only_vllm() -> None:
    [w], notes = workloads(("c.yaml", COMPOSE_BASH_C % "vllm serve m --max-num-seqs 64"))
    assert w.start_problem and "runs only the word after it, 'vllm'" in w.start_problem
    assert "compose splits a command: string into words" in w.start_problem
    assert flags(w) == {"--max-num-seqs": "64"} and w.model == "m"  # read as the author meant it
    assert any(n.startswith("service engine does not start: c.yaml:6") for n in notes)


def test_compose_bash_c_given_the_line_as_one_item_reads_it_as_a_shell_script() -> None:
    [w], notes = workloads(("c.yaml", COMPOSE_BASH_C % "['MAX=64; exec vllm serve m --max-num-seqs $MAX']"))
    assert w.start_problem is None and flags(w) == {"--max-num-seqs": "64"}
    assert not any("does not start" in n for n in notes)


def test_compose_device_ids_count_each_gpu_of_a_comma_list() -> None:
    # Docker joins device_ids with commas for the NVIDIA runtime: ["5,6"] and ["5", "6"] are both two GPUs
    for ids in ('["5,6"]', '["5", "6"]'):
        compose = (
            "services:\n  vllm:\n    image: vllm/vllm-openai:v0.22.1\n    command: --model m --tensor-parallel-size 2\n"
            "    deploy:\n      resources:\n        reservations:\n          devices:\n"
            f"            - driver: nvidia\n              device_ids: {ids}\n              capabilities: [gpu]\n"
        )
        [w], _ = workloads(("compose.yaml", compose))
        assert w.gpu_count == 2, ids


def test_a_vllm_service_built_from_a_dockerfile_not_given_is_a_server_of_unknown_options() -> None:
    compose = "services:\n  lmcache:\n    build: .\n    image: lmcache-gptoss:latest\n    ports: ['8000:8000']\n"
    deployment = read(("compose.yaml", compose))
    [workload] = deployment.workloads
    assert deployment.unread == [] and workload.flags == [] and [p.number for p in workload.ports] == [8000]
    assert (
        workload.options_unknown is not None
        and "that Dockerfile is not among the documents" in workload.options_unknown
    )
    other = compose.replace("lmcache", "web")
    with pytest.raises(NothingToReview):
        read(("compose.yaml", other))


def test_a_secret_in_a_service_beside_the_server_is_found_too() -> None:
    """A database's password written into the compose file is as readable as the server's token."""
    from reading import review

    text = """services:
  vllm:
    image: vllm/vllm-openai:v0.33.0
    command: ["--model", "m"]
  neo4j:
    image: neo4j:5-community
    environment:
      - NEO4J_PASSWORD=password123
      - NEO4J_dbms_memory=2G
  db:
    image: postgres:16
    environment: {POSTGRES_PASSWORD: "${PG_PASSWORD}"}
"""
    found = [f for f in review(("docker-compose.yaml", text)).findings if f.rule_id == "pitfall.secret-in-plain-text"]
    assert [(f.location.line, "service neo4j: NEO4J_PASSWORD" in f.message) for f in found] == [(8, True)]


def test_a_service_that_is_not_vllm_built_from_a_missing_dockerfile_gets_no_vllm_note() -> None:
    text = (
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    command: [--model, m]\n"
        "  app:\n    build: ./app\n    ports: ['3000:3000']\n"
    )
    notes = read(("docker-compose.yaml", text)).notes
    assert not any("service app is built from" in n for n in notes), notes
