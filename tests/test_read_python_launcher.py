"""Python that starts vLLM (Modal apps, BentoML services, launch scripts) and Baseten Truss configs: the command,
its image, environment and pins read from the source as written, with nothing run; what the code computes stays
a reference the review does not judge."""

from __future__ import annotations

import pytest

from reading import flags, read, review, workloads
from vllm_caching_mcp.advice.common import AdviceError

MODAL = '''import os
import subprocess

import modal

MODEL_NAME = os.environ.get("MODEL_NAME", "Qwen/Qwen3-8B")
N_GPU = 2
vllm_image = (
    modal.Image.from_registry("vllm/vllm-openai:v0.15.1")
    .pip_install("transformers==5.1.0")
    .env({"VLLM_SERVER_DEV_MODE": "1", "HF_XET_HIGH_PERFORMANCE": "1"})
)
app = modal.App("x")


@app.cls(image=vllm_image, gpu=f"H100:{N_GPU}")
class Server:
    @modal.enter()
    def serve(self):
        """Starts `vllm serve MODEL` in the background."""
        print("starting vllm serve now")
        cmd = [
            "vllm",
            "serve",
            MODEL_NAME,
            "--gpu-memory-utilization 0.6",
            f"--max-model-len {32 * 1024}",
        ]
        cmd += ["--tensor-parallel-size", str(N_GPU)]
        subprocess.Popen(" ".join(cmd), shell=True)
'''

BENTO = """import json

import bentoml

KV_PORT = 21001


@bentoml.service(resources={"gpu": 1})
class Prefiller:
    model = bentoml.models.HuggingFaceModel("Qwen/Qwen3-8B")

    def __command__(self) -> list[str]:
        port = 8000 + bentoml.server_context.worker_index
        transfer = {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": str(KV_PORT)}
        return [
            "vllm", "serve", self.model,
            "--port", str(port),
            "--max-num-seqs", "8",
            "--kv-transfer-config", json.dumps(transfer),
            "--max-num-seqs", "16",
        ]
"""


def test_a_modal_command_list_joined_for_the_shell_is_one_launch_with_the_images_env_and_pins() -> None:
    [workload], notes = workloads(("app.py", MODAL))
    assert workload.model == "Qwen/Qwen3-8B"  # os.environ.get's default, said in a note
    assert any("MODEL_NAME is read from the environment; reviewed with its default" in n for n in notes)
    # "--gpu-memory-utilization 0.6" is one element: the shell line " ".join makes splits it
    assert flags(workload) == {
        "--gpu-memory-utilization": "0.6",
        "--max-model-len": "32768",
        "--tensor-parallel-size": "2",
    }
    assert workload.image == "vllm/vllm-openai:v0.15.1"
    assert {e.name: e.value for e in workload.env}["VLLM_SERVER_DEV_MODE"] == "1"
    assert [(c.package, c.version) for c in workload.installs] == [("transformers", "5.1.0")]
    assert workload.location.line == 23  # the "vllm" word


def test_a_modal_app_is_reviewed_as_its_image_release() -> None:
    result = review(("app.py", MODAL))
    assert result.workloads[0].vllm_version == "0.15.1"
    rules = {f.rule_id: f for f in result.findings if not f.rule_id.startswith("advisory.")}
    assert set(rules) >= {"pitfall.pin-outside-vllm-requirement", "pitfall.server-dev-mode-endpoints"}
    assert "requires transformers<5,>=4.56.0" in rules["pitfall.pin-outside-vllm-requirement"].message


def test_a_returned_command_keeps_what_the_code_computes_as_references() -> None:
    [workload], _ = workloads(("service.py", BENTO))
    assert workload.model is None  # self.model: not in the files
    assert any("{self.model}" in u for u in workload.unresolved)
    values = flags(workload)
    assert values["--port"] == "{str(port)}" and values["--max-num-seqs"] == "16"
    # the transfer config is a dict of constants: json.dumps of it is read
    assert '"kv_connector": "NixlConnector"' in values["--kv-transfer-config"]
    rules = [f.rule_id for f in review(("service.py", BENTO), version="0.33.0").findings]
    assert "pitfall.option-given-twice" in rules and "pitfall.nixl-kv-both-deprecated" in rules


def test_a_command_string_is_a_launch_and_a_message_or_docstring_is_not() -> None:
    script = (
        '"""Run `vllm serve Qwen/Qwen3-8B` by hand to try it."""\n'
        "import os\n"
        'MODEL = "Qwen/Qwen3-8B"\n'
        'print("vllm serve is starting")\n'
        'os.system(f"vllm serve {MODEL} --max-model-len 8192 --port 8001")\n'
    )
    [workload], _ = workloads(("launch.py", script))
    assert workload.model == "Qwen/Qwen3-8B" and flags(workload) == {"--max-model-len": "8192", "--port": "8001"}
    assert workload.location.line == 5


def test_python_that_starts_no_vllm_is_no_workload() -> None:
    with pytest.raises(AdviceError, match="no vLLM server found"):
        read(("tool.py", 'import vllm\nprint(vllm.__version__)\nargs = ["vllm", "--port", "8000"]\n'))


TRUSS = """model_name: lfm2
base_image:
  image: vllm/vllm-openai:v0.15.1
requirements:
  - transformers==5.1.0
model_metadata:
  engine_args:
    max_model_len: 32768
docker_server:
  start_command: sh -c "vllm serve LiquidAI/LFM2-8B-A1B --max-num-seqs 64"
  server_port: 8000
environment_variables:
  VLLM_USE_V1: "1"
  HF_ACCESS_TOKEN: null
"""


def test_a_truss_config_is_its_start_command_on_its_base_image() -> None:
    [workload], notes = workloads(("config.yaml", TRUSS))
    assert (workload.model, flags(workload)) == ("LiquidAI/LFM2-8B-A1B", {"--max-num-seqs": "64"})
    assert workload.image == "vllm/vllm-openai:v0.15.1"
    assert [(c.package, c.version, c.location.line) for c in workload.installs] == [("transformers", "5.1.0", 5)]
    assert any("model_metadata.engine_args is metadata Truss keeps" in n for n in notes)
    rules = [f.rule_id for f in review(("config.yaml", TRUSS)).findings]
    # VLLM_USE_V1: "1" is the default 0.11.0, its last reader, had: a leftover (info), not a lost setting
    assert "pitfall.vllm-env-leftover-default" in rules and "pitfall.pin-outside-vllm-requirement" in rules


def test_a_dockerfile_that_starts_a_python_script_on_a_vllm_image_is_a_server_of_that_image() -> None:
    dockerfile = 'FROM vllm/vllm-openai:v0.27.1\nCOPY src /src\nENTRYPOINT ["python3", "/src/main.py"]\n'
    [workload], notes = workloads(("Dockerfile", dockerfile))
    assert workload.image == "vllm/vllm-openai:v0.27.1"
    assert any("starts /src/main.py, which the files do not hold" in n for n in notes)


def test_words_added_under_a_condition_are_not_reviewed_and_a_helpers_list_is_the_launch() -> None:
    script = (
        "import subprocess\n"
        "def build(model, quantization=None):\n"
        '    cmd = ["vllm", "serve", model, "--max-model-len", "512"]\n'
        "    if quantization:\n"
        '        cmd.extend(["--quantization", quantization])\n'
        '        cmd.append("--enforce-eager")\n'
        "    return cmd\n"
        "def serve():\n"
        '    subprocess.Popen(" ".join(build("Qwen/Qwen3-8B")), shell=True)\n'
    )
    [workload], notes = workloads(("app.py", script))
    assert flags(workload) == {"--max-model-len": "512"}  # the model is the helper's parameter: a reference
    assert any("words added to cmd under a condition" in n and "app.py:5" in n for n in notes)
