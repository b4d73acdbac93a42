"""Which vLLM release a workload is reviewed for, read from every place its files state one (the image tag,
a Dockerfile's FROM, a kustomize images: rewrite, a pip install before the server starts), with the place
cited; where two places disagree the review says which runs and why; below the covered range nothing of the
configuration is judged."""

from __future__ import annotations

import shlex

import pytest

from reading import read, review
from vllm_caching_mcp.advice.deployment.installs import pip_installs, requirement_claim
from vllm_caching_mcp.advice.deployment.model import Document, Location
from vllm_caching_mcp.advice.deployment.release import lmcache_release, workload_release
from vllm_caching_mcp.advice.deployment.shell import parse_shell, script_installs
from vllm_caching_mcp.advice.review import release_free
from vllm_caching_mcp.knowledge import load_knowledge

M = "Qwen/Qwen3-8B"


def release(*documents: str | tuple[str, str], **request: str) -> tuple[str, str, str | None]:
    [w] = review(*documents, **request).workloads
    where = f"{w.version_location.file}:{w.version_location.line}" if w.version_location else None
    return w.vllm_version, w.version_source, where


def configuration_findings(*documents: str | tuple[str, str]) -> list[str]:
    return [f.rule_id for f in review(*documents).findings if not f.rule_id.startswith("advisory.")]


@pytest.mark.parametrize(
    ("command", "requirements"),
    [
        ("pip install vllm==0.12.0", [("vllm", "0.12.0")]),
        ('uv pip install --system "vllm[audio]==0.12.0" lmcache==0.3.9', [("vllm", "0.12.0"), ("lmcache", "0.3.9")]),
        ("python3 -m pip install -U --extra-index-url https://wheels.example.com vllm", [("vllm", None)]),
        ("pip3 install 'vllm>=0.10.0' -r requirements.txt", [("vllm", None), ("unknown", None)]),
        (
            "pip install https://wheels.example.com/vllm-0.12.0+cu128-cp38-abi3-manylinux1_x86_64.whl",
            [("vllm", "0.12.0")],
        ),
        ("pip install vllm-flash-attn==2.6.1 lmcache-ext", []),
        ("pip install -c vllm==0.1.0 torch", [("torch", None)]),  # the value of -c is a file, not a requirement
        ("pip download vllm==0.12.0", []),
        # packages the files do not name: what they bring is not known
        ("pip install -r requirements.txt torch==2.8.0", [("unknown", None), ("torch", "2.8.0")]),
        ("pip install -e . git+https://github.com/org/repo", [("unknown", None), ("unknown", None)]),
    ],
)
def test_pip_install_words_name_their_requirements(command: str, requirements: list[tuple[str, str | None]]) -> None:
    where = Location(file="s.sh", line=1)
    claims = pip_installs([(word, where) for word in shlex.split(command)])
    assert [(c.package, c.version) for c in claims] == requirements


def test_the_image_tag_gives_the_release_at_its_line() -> None:
    assert release(f"docker run --gpus all vllm/vllm-openai:v0.12.0 --model {M}") == (
        "0.12.0",
        "image-tag",
        "serve0.sh:1",
    )


def test_a_release_of_four_numbers_is_read_from_the_tag() -> None:
    assert release(f"docker run --gpus all docker.io/vllm/vllm-openai:v0.9.0.1 --model {M}")[:2] == (
        "0.9.0.1",
        "image-tag",
    )


def test_a_pip_pin_in_a_script_gives_the_release_at_its_line() -> None:
    script = f"set -e\npip install --no-cache-dir vllm==0.12.0\nvllm serve {M} --port 8000\n"
    assert release(script) == ("0.12.0", "pip-install", "serve0.sh:2")
    result = review(script)
    assert "vLLM 0.12.0 (from a pip install at serve0.sh:2)" in result.summary(), result.summary()
    advisories = [f for f in result.findings if f.rule_id.startswith("advisory.")]
    assert advisories and {f.location.line for f in advisories} == {2}  # at the install that says the release


def test_a_pip_pin_in_a_container_command_replaces_the_images_release_and_says_so() -> None:
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: engine}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        command: ["/bin/sh", "-c"]
        args:
        - |
          pip install vllm==0.12.0
          exec vllm serve {M} --port 8000
"""
    result = review(("engine.yaml", manifest))
    assert release(("engine.yaml", manifest)) == ("0.12.0", "pip-install", "engine.yaml:13")
    [note] = [n for n in result.notes if "replaces" in n]
    assert (
        "engine.yaml:13" in note
        and "vLLM 0.11.0 read at engine.yaml:9" in note
        and "0.12.0 is the release that runs" in note
    )


def test_an_unpinned_install_leaves_the_release_unknown_and_says_it() -> None:
    result = review(f"pip install vllm\nvllm serve {M}\n")
    assert [(w.vllm_version, w.version_source) for w in result.workloads] == [("0.34.0", "assumed-newest")]
    assert any("serve0.sh:1: pip installs vllm with no exact version" in n and "not known" in n for n in result.notes)
    assert not [f for f in result.findings if f.rule_id.startswith("advisory.")]  # nothing judged of an unknown release
    assert release(f"pip install vllm\nvllm serve {M}\n", version="0.20.0")[:2] == ("0.20.0", "stated")


def test_an_unpinned_install_keeps_an_installed_release_that_satisfies_it_unless_it_upgrades() -> None:
    image = "docker.io/vllm/vllm-openai:v0.12.0"

    def in_image(script: str) -> tuple[str, str, str | None]:
        compose = f"services:\n  engine:\n    image: {image}\n    entrypoint: ['/bin/bash', '-c', '{script}']\n"
        return release(("compose.yaml", compose))

    assert in_image(f"pip install lmcache vllm && vllm serve {M}") == ("0.12.0", "image-tag", "compose.yaml:3")
    assert in_image(f"pip install vllm>=0.11 && vllm serve {M}")[:2] == ("0.12.0", "image-tag")
    assert in_image(f"pip install vllm>=0.13 && vllm serve {M}")[1] == "assumed-newest"  # pip upgrades it
    assert in_image(f"pip install -U vllm && vllm serve {M}")[1] == "assumed-newest"


def test_a_later_pin_replaces_an_earlier_one() -> None:
    script = f"pip install vllm==0.11.0\npip install vllm==0.12.0 lmcache==0.3.9\nvllm serve {M}\n"
    [workload] = read(("serve.sh", script)).workloads
    vllm, lmcache = workload_release(workload), lmcache_release(workload)
    assert (vllm.version, vllm.source, vllm.location and vllm.location.line) == ("0.12.0", "pip-install", 2)
    assert any("which replaces the vLLM 0.11.0 read at serve.sh:1" in n for n in vllm.notes), vllm.notes
    assert lmcache.version == "0.3.9"


def test_a_host_install_does_not_reach_a_docker_run() -> None:
    script = f"pip install vllm==0.12.0\ndocker run --gpus all vllm/vllm-openai:v0.11.0 --model {M}\n"
    assert release(script)[:2] == ("0.11.0", "image-tag")


def test_a_dockerfile_pin_over_its_base_image_gives_the_release() -> None:
    dockerfile = f'FROM vllm/vllm-openai:v0.11.0\nRUN pip install "vllm==0.12.0"\nCMD ["--model", "{M}"]\n'
    assert release(("Dockerfile", dockerfile)) == ("0.12.0", "pip-install", "Dockerfile:2")
    assert release(("Dockerfile", dockerfile.replace("RUN", "# RUN"))) == ("0.11.0", "image-tag", "Dockerfile:1")


def test_a_kustomize_new_tag_is_the_release_deployed_and_the_bases_tag_is_noted() -> None:
    base = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: engine}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "{M}"]
"""
    kustomization = "resources: [deployment.yaml]\nimages:\n- name: vllm/vllm-openai\n  newTag: v0.12.0\n"
    documents = (("base/deployment.yaml", base), ("base/kustomization.yaml", kustomization))
    assert release(*documents) == ("0.12.0", "image-tag", "base/kustomization.yaml:4")
    notes = review(*documents).notes
    assert any("written at base/deployment.yaml:9" in n and "vLLM 0.12.0 is reviewed, not 0.11.0" in n for n in notes)


def test_a_derived_tag_with_several_suffixes_gives_its_release() -> None:
    image = "registry.example.com/aibrix/vllm-openai:v0.12.0-cu128-nixl-v0.4.1-lmcache-0.3.2"
    assert release(f"docker run --gpus all {image} --model {M}")[:2] == ("0.12.0", "image-tag")


def test_a_pinned_install_in_script_lines_gives_the_release() -> None:
    """dstack's `commands:` (and a CI step's script): the install before `vllm serve` names the release it runs."""
    task = f"type: task\ncommands:\n  - pip install vllm==0.22.1\n  - vllm serve {M}\n"
    assert release(("task.dstack.yml", task)) == ("0.22.1", "pip-install", "task.dstack.yml:3")


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.12.0-gpu-py312-cu128-ubuntu22.04-ec2", "0.12.0"),
        ("intel/vllm:0.14.1-xpu", "0.14.1"),
        ("nvcr.io/nvidia/vllm:25.09-py3", None),  # NVIDIA's container release, not vLLM's
        ("opea/vllm:1.3", None),
    ],
)
def test_an_image_named_vllm_tagged_with_a_release_gives_it(image: str, expected: str | None) -> None:
    found = release(f"docker run --gpus all {image} --model {M}")
    assert (found[0] if found[1] == "image-tag" else None) == expected


@pytest.mark.parametrize(
    "documents",
    [
        (f"pip install vllm==0.10.2\nvllm serve {M} --swap-space 16 --kv-offloading-sise 1\n",),
        (("Dockerfile", f'FROM vllm/vllm-openai:v0.10.2\nCMD ["--model", "{M}", "--swap-space", "16"]\n'),),
        (
            ("compose.yaml", "services:\n  engine:\n    build: .\n"),
            (
                "Dockerfile",
                f'FROM python:3.12\nRUN pip install vllm==0.10.2\nCMD ["vllm", "serve", "{M}", "--swap-space", "4"]\n',
            ),
        ),
    ],
)
def test_a_release_below_the_covered_range_from_any_place_is_not_judged(
    documents: tuple[str | tuple[str, str], ...],
) -> None:
    result = review(*documents)
    assert [w.vllm_version for w in result.workloads] == ["0.10.2"]
    assert any("vLLM 0.10.2 from" in n and "older than 0.11.0" in n and "not judged" in n for n in result.notes)
    # what depends on the release is not judged; the deployment's hygiene and its objects still are
    judged = {p.id for p in load_knowledge().pitfalls if p.when is not None and not release_free(p.when)}
    assert [r for r in configuration_findings(*documents) if r in judged] == [], result.summary()
    assert any(f.rule_id.startswith("advisory.") for f in result.findings)  # published ranges still apply


def test_a_pip_pin_that_disagrees_with_the_stated_version_is_reviewed_for_the_pin() -> None:
    result = review(f"pip install vllm==0.12.0\nvllm serve {M}\n", version="0.20.0")
    assert result.workloads[0].vllm_version == "0.12.0"
    assert any("the pip install at serve0.sh:1 says vLLM 0.12.0, not the stated 0.20.0" in n for n in result.notes)


def test_a_setup_steps_pin_reaches_the_launches_of_the_step_after_it() -> None:
    # Launchers that split a job into a setup and a run script (SkyPilot's setup: and run:) read both this way.
    setup = Document(name="task.yaml", text="conda activate vllm || conda create -n vllm\npip install vllm==0.12.0\n")
    installs = script_installs(setup, first_line=20)
    assert [(c.version, c.location.line) for c in installs] == [("0.12.0", 21)]
    run = Document(name="task.yaml", text=f"python -m vllm.entrypoints.openai.api_server --model {M}\n")
    [launch] = parse_shell(run, first_line=30, pins=installs)
    assert [c.version for c in launch.pins] == ["0.12.0"]


def test_a_requirement_item_is_read_as_pip_reads_it() -> None:
    where = Location(file="serve.yaml", line=4)
    claim = requirement_claim("vllm==0.12.0", where)
    assert claim is not None and (claim.package, claim.version, claim.upgrade) == ("vllm", "0.12.0", False)
    torch = requirement_claim("torch==2.8.0", where)  # pinned beside vLLM: judged against its Requires-Dist
    assert torch is not None and (torch.package, torch.version) == ("torch", "2.8.0")
    assert requirement_claim("numpy==2.0.0", where) is None


def test_an_lmcache_pin_is_the_lmcache_release_its_config_is_judged_by() -> None:
    # enable_nixl and nixl_role are keys up to LMCache 0.3.6, unknown keys from 0.4 on
    config = ("lmcache.yaml", "chunk_size: 256\nenable_nixl: true\nnixl_role: sender\n")
    transfer = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'"""
    serve = f"LMCACHE_CONFIG_FILE=/c/lmcache.yaml vllm serve {M} {transfer}\n"

    def ignored(pin: str) -> list[str]:
        result = review(config, ("serve.sh", f"pip install vllm==0.12.0 {pin}\n{serve}"))
        return [f.message for f in result.findings if f.rule_id == "pitfall.lmcache-key-ignored"]

    assert ignored("lmcache==0.3.3") == []
    found = ignored("lmcache==0.4.1")
    assert found and all("LMCache 0.4.1 (the pip install)" in m for m in found), found


@pytest.mark.parametrize(
    ("script", "pythons"),
    [
        ("conda create -n vllm python=3.9 -y\nconda activate vllm\npip install vllm", ["3.9"]),
        ("mamba install -y python==3.10.4 pip\npip install vllm==0.12.0", ["3.10"]),
        ("uv venv --python 3.12 .venv\nuv pip install vllm==0.33.0", ["3.12"]),
        ("uv venv -p python3.10\nuv pip install vllm", ["3.10"]),
        ("python3.11 -m venv /opt/venv\n/opt/venv/bin/pip install vllm==0.33.0", ["3.11"]),
        ("virtualenv --python=python3.9 env\npip install vllm", ["3.9"]),
        ("pyenv global 3.10.14\npip install vllm", ["3.10"]),
        ("uv python pin 3.13\nuv pip install vllm", ["3.13"]),
        # the install's own Python wins over the one chosen before it
        ("conda create -n x python=3.12\npython3.9 -m pip install vllm\npip3.10 install vllm", ["3.9", "3.10"]),
        ("uv venv -p 3.12\nuv pip install --python 3.10 vllm==0.34.0", ["3.10"]),
        # nothing in the files says which Python: none is assumed
        ("pyenv install 3.9.18\npython3 -m pip install vllm", [None]),
        ("conda create -n x numpy\npip install vllm", [None]),
    ],
)
def test_the_python_an_install_goes_into_is_read_from_the_commands_before_it(
    script: str, pythons: list[str | None]
) -> None:
    claims = script_installs(Document(name="s.sh", text=script + "\n"))
    assert [c.python for c in claims] == pythons


def test_a_python_base_image_is_the_python_its_installs_go_into() -> None:
    dockerfile = "FROM python:3.10-slim AS base\nRUN pip install vllm==0.33.0\nFROM base\nCMD vllm serve x\n"
    rules = configuration_findings(("Dockerfile", dockerfile))
    assert "pitfall.python-outside-requires-python" in rules
    assert "pitfall.python-outside-requires-python" not in configuration_findings(
        ("Dockerfile", dockerfile.replace("3.10", "3.12"))
    )


def test_an_unpinned_install_into_an_old_python_runs_the_last_release_that_admits_it() -> None:
    script = f"conda create -n vllm python=3.9 -y\nconda activate vllm\npip install vllm\nvllm serve {M}\n"
    assert release(script) == ("0.11.0", "pip-install", "serve0.sh:3")
    result = review(script)
    assert any(
        "into Python 3.9: pip takes the newest vLLM release that admits that Python, 0.11.0" in n for n in result.notes
    )
    [finding] = [f for f in result.findings if f.rule_id == "pitfall.unpinned-install-old-python"]
    assert "vLLM 0.34.0 requires Python <3.15,>=3.11" in finding.message
    # a Python the newest release admits: the release stays whichever is newest when it runs
    assert release(script.replace("3.9", "3.12"))[:2] == ("0.34.0", "assumed-newest")


def test_the_python_ranges_are_the_ones_each_wheel_states() -> None:
    knowledge = load_knowledge()
    assert str(knowledge.newest_for_python("vllm", "3.10")) == "0.31.0"  # 0.32.0 requires >=3.11
    assert str(knowledge.newest_for_python("vllm", "3.14")) == str(knowledge.newest("vllm"))
    assert knowledge.newest_for_python("vllm", "3.15") is None
    assert knowledge.newest_for_python("vllm", "3.8") is None  # below every covered release


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"singularity exec --nv -B /data:/data docker://vllm/vllm-openai:v0.20.0 vllm serve {M}", "0.20.0"),
        (f"apptainer run --nv --env HF_HOME=/h docker://vllm/vllm-openai:v0.12.0 vllm serve {M}", "0.12.0"),
        (f"srun --container-image=vllm/vllm-openai:v0.11.0 --container-mounts=/d:/d vllm serve {M}", "0.11.0"),
        (f"srun --container-image vllm#vllm/vllm-openai:v0.13.0 vllm serve {M}", "0.13.0"),
        # a local image file names no release
        (f"apptainer exec --nv vllm.sif vllm serve {M}", None),
    ],
)
def test_an_hpc_container_runners_image_gives_the_release(line: str, expected: str | None) -> None:
    version, source, _ = release(line)
    assert (version, source) == (expected, "image-tag") if expected else source == "assumed-newest"
