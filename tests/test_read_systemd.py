"""systemd units that start vLLM: their start commands read as the shell lines they run, in place."""

from __future__ import annotations

import pytest

from reading import flags, read, review
from vllm_caching_mcp.advice.deployment.systemd import RESTART_VALUES, is_unit, unit_as_shell

DOCKER_UNIT = """[Unit]
Description=vLLM OpenAI-Compatible Server (Qwen3-8B)
After=docker.service

[Service]
Restart=unless-stopped
Environment="HF_HOME=/models" "VLLM_LOGGING_LEVEL=INFO"
ExecStartPre=-/usr/bin/docker rm -f vllm
ExecStart=/usr/bin/docker run --name vllm --gpus all -p 8000:8000 \\
  vllm/vllm-openai:v0.11.0 \\
    Qwen/Qwen3-8B --max-model-len 32768
ExecStop=/usr/bin/docker stop vllm

[Install]
WantedBy=multi-user.target
"""

VENV_UNIT = """[Service]
Environment=VLLM_MM_INPUT_CACHE_GIB=8
ExecStart=/opt/venv/bin/vllm serve Qwen/Qwen3-8B --port 8007 --max-num-seqs 8
Restart=always
"""


def test_a_unit_is_read_as_its_start_commands_at_their_lines() -> None:
    text, issues = unit_as_shell(DOCKER_UNIT, "vllm.service")
    assert len(text.splitlines()) == len(DOCKER_UNIT.splitlines())
    assert "Description" not in text and "docker stop" not in text and "export " in text
    [issue] = issues
    assert issue.check == "systemd-restart-invalid" and issue.location.line == 6
    [workload] = read(("vllm.service", DOCKER_UNIT)).workloads
    assert workload.image == "vllm/vllm-openai:v0.11.0" and workload.model == "Qwen/Qwen3-8B"
    assert flags(workload)["--max-model-len"] == "32768"
    assert [f.location.line for f in workload.flags if f.name == "--max-model-len"] == [11]


def test_environment_lines_are_the_servers_variables() -> None:
    [workload] = read(("vllm.service", VENV_UNIT)).workloads
    assert flags(workload)["--port"] == "8007"
    assert [(e.name, e.value, e.location.line) for e in workload.env] == [("VLLM_MM_INPUT_CACHE_GIB", "8", 2)]
    found = review(("vllm.service", VENV_UNIT), version="0.34.0").findings
    unread = [f for f in found if f.rule_id == "pitfall.vllm-env-unread"]
    assert [f.location.line for f in unread] == [2]
    assert "pitfall.systemd-restart-ignored" not in {f.rule_id for f in found}


@pytest.mark.parametrize("value", ["unless-stopped", "yes", "true", "on-fail"])
def test_a_restart_value_systemd_does_not_take_is_found(value: str) -> None:
    unit = VENV_UNIT.replace("Restart=always", f"Restart={value}")
    [hit] = [f for f in review(("vllm.service", unit)).findings if f.rule_id == "pitfall.systemd-restart-ignored"]
    assert hit.location.line == 4 and f"Restart={value} is no value systemd takes" in hit.message


def test_only_a_unit_with_a_service_that_starts_a_command_is_one() -> None:
    assert is_unit(DOCKER_UNIT) and is_unit(VENV_UNIT)
    assert not is_unit("[Unit]\nDescription=x\n[Timer]\nOnCalendar=daily\n")
    assert not is_unit("ExecStart=vllm serve m\n")  # no [Service] section
    assert "always" in RESTART_VALUES and "unless-stopped" not in RESTART_VALUES


def test_a_unit_a_script_writes_is_read_and_the_script_around_it_too() -> None:
    script = """#!/bin/bash
apt-get install -y nfs-common=1:2.6.1
cat <<END > /etc/systemd/system/vllm.service
[Unit]
Description=vLLM
[Service]
Environment=HF_HOME=/models
ExecStart=/bin/bash -c "/opt/venv/bin/vllm serve Qwen/Qwen3-8B --port 8001"
Restart=yes
END
systemctl enable --now vllm
vllm serve Qwen/Qwen3-0.6B --port 8002 &
"""
    deployment = read(("user_data.sh", script))
    assert sorted(flags(w)["--port"] for w in deployment.workloads) == ["8001", "8002"]
    [hit] = [f for f in review(("user_data.sh", script)).findings if f.rule_id == "pitfall.systemd-restart-ignored"]
    assert hit.location.line == 9
