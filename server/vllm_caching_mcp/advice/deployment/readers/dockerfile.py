"""A Dockerfile or Containerfile whose image starts vLLM (its CMD or ENTRYPOINT): the container it runs,
on the release its base image and pip installs give."""

from __future__ import annotations

import re

from ..containers import launch_from_argv, started_as_written
from ..dockerfile import DockerBuild, is_dockerfile, read_dockerfile
from ..flags import read_args
from ..launch import Launch, is_vllm_image
from ..model import Document, Location, Workload
from ..shell import Shell
from ..yaml_nodes import Located
from .base import Reading

# vLLM's OpenAI server image, whose ENTRYPOINT is `vllm serve` (an image built on it keeps that).
_VLLM_SERVE_IMAGE = re.compile(r"(^|/)vllm/vllm-openai$")


def build_workload(build: DockerBuild, name: str, reading: Reading) -> Workload | None:
    """The vLLM server the image runs when started as built; None when its ENTRYPOINT and CMD start none
    (with neither, the file only adds to its base: what runs it gives the command)."""
    stage, doc, notes = build.stage, build.doc, reading.deployment.notes
    image = stage.image[0] if stage.image else None
    if not build.argv():
        if image is None or _VLLM_SERVE_IMAGE.search(image.rsplit(":", 1)[0].split("@")[0]) is None:
            return None
        # vllm/vllm-openai's ENTRYPOINT is `vllm serve`: an image built on it that sets none serves vLLM, with
        # the arguments whatever runs it gives
        found: Launch | None = Launch(args=[])
        notes.append(
            f"{doc.name}: builds on {image}, whose ENTRYPOINT is `vllm serve`, and sets no ENTRYPOINT or CMD of its "
            "own: read as a vLLM server whose arguments are given where the image is run"
        )
    else:
        variables = Shell({u.name: u.value for u in stage.env if u.value is not None})
        found = launch_from_argv(doc, build.argv(), image, stage.entrypoint is not None, variables, notes)
        if found is None:
            found = _own_start_script(build, image, notes)
    if found is None:
        return None
    workload = Workload(
        name=name,
        file=doc.name,
        source="dockerfile",
        image=image,
        image_location=stage.image[1] if stage.image else None,
        env=stage.env + found.env,
        installs=stage.installs + found.pins,
        location=_where_it_starts(build),
    )
    started_as_written(workload, found, notes)
    read_args(workload, found.args, stage.unresolved | found.unresolved, found.emptied)
    return workload


# A start script of the image's own: `/entrypoint.sh`, `start.sh`, `bash /app/run.sh` (the shell's words first),
# `python3 /src/main.py`.
_SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env", "env", "tini", "/usr/bin/tini", "--", "-c"}
_VLLM_SOURCE = re.compile(r"github\.com/vllm-project/vllm(\.git)?\b")


_PYTHON = re.compile(r"^(\S*/)?python[\d.]*$")


def _start_script(words: list[str]) -> str | None:
    """The script a command starts: a shell script (`/entrypoint.sh`), or a Python one (`python3 -u /src/main.py`)."""
    if words and words[0].endswith(".sh"):
        return words[0]
    if words and _PYTHON.match(words[0]):
        return next((w for w in words[1:] if not w.startswith("-")), None) if len(words) > 1 else None
    return None


def _own_start_script(build: DockerBuild, image: str | None, notes: list[str]) -> Launch | None:
    """An image built for vLLM (its base names vLLM, or it installs or builds vLLM) whose ENTRYPOINT or CMD runs
    a shell script the files do not hold: a vLLM server whose options sit in that script."""
    words = [w for w, _ in build.argv() if w not in _SHELLS]
    script = _start_script(words)
    if script is None:
        return None
    base = (image or "").rsplit(":", 1)[0].split("@")[0]
    if is_vllm_image(base):
        why = f"it builds on {image}"
    elif any(claim.package == "vllm" for claim in build.stage.installs):
        why = "it installs vLLM"
    elif _VLLM_SOURCE.search(build.doc.text):
        why = "it builds vLLM from its sources"
    else:
        return None
    notes.append(
        f"{build.doc.name}: its image is built for vLLM ({why}) and starts {script}, which the files do not hold: "
        "read as a vLLM server whose options are in that script; its image and installs are reviewed, its options "
        "only when the script is reviewed with it"
    )
    return Launch(args=[])


def _where_it_starts(build: DockerBuild) -> Location:
    """The line of the first word the container runs (its ENTRYPOINT or CMD)."""
    argv = build.argv()
    return argv[0][1] if argv else Location(file=build.doc.name, line=1)


class DockerfileReader:
    """A Dockerfile (Dockerfile, Dockerfile.vllm, vllm.Dockerfile, Containerfile) whose instructions start with
    FROM or ARG. The image it builds is a workload when its CMD or ENTRYPOINT starts vLLM; otherwise it only
    gives the release of the compose service that builds it."""

    yaml = False
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return is_dockerfile(doc)

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        build = reading.dockerfiles.get(doc.name) or read_dockerfile(doc)
        reading.deployment.notes += build.notes
        workload = build_workload(build, f"container of {doc.name.rsplit('/', 1)[-1]}", reading)
        if workload is not None:
            reading.deployment.workloads.append(workload)
        return True  # one that starts no server is said once every compose file has been read (read.py)


READER = DockerfileReader()
