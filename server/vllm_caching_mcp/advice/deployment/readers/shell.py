"""Shell text: the vLLM launches a script runs."""

from __future__ import annotations

from ..bounds import Totals
from ..containers import docker_resources
from ..flags import read_args
from ..model import Deployment, Document, Location, Workload
from ..shell import parse_shell
from ..yaml_nodes import Located
from .base import Reading, mappings


def _read_shell_document(doc: Document, deployment: Deployment, totals: Totals) -> None:
    for n, launch in enumerate(parse_shell(doc, notes=deployment.notes)):
        workload = Workload(
            name=f"{'docker run' if launch.source == 'docker-run' else 'vllm'} #{n + 1}",
            file=doc.name,
            source=launch.source,
            env=launch.env,
            installs=launch.pins,
            image=launch.image[0] if launch.image else None,
            image_location=launch.image[1] if launch.image else None,
            location=launch.location or Location(file=doc.name, line=1),
        )
        docker_resources(workload, launch.options)
        workload.hygiene += launch.hygiene
        read_args(workload, launch.args, launch.unresolved, launch.emptied)
        if launch.image is not None and launch.image[0] in launch.unresolved:
            workload.unresolved.append(
                f"{launch.image[1]}: the image {launch.image[0]}: {launch.unresolved[launch.image[0]]}"
            )
        deployment.workloads.append(workload)
        totals.check(deployment)  # as they come: a text of 100,000 servers stops at the first past the bound


class ShellReader:
    """Shell text: `vllm serve`, `python -m vllm.entrypoints…`, `docker run` / `podman run` lines. It
    claims what is no YAML mapping, and a mapping no other reader claims in a file not named .yaml:
    `{ vllm serve …; }` is a YAML flow mapping too, a shell group there."""

    yaml = False
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return not mappings(roots) or not doc.name.lower().endswith((".yaml", ".yml"))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        _read_shell_document(doc, reading.deployment, reading.totals)
        return True


READER = ShellReader()
