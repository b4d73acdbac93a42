"""Baseten Truss config.yaml with a custom server: ``docker_server.start_command`` is the command the container
runs, on ``base_image.image``, with ``environment_variables`` set and the ``requirements`` pip-installed into the
image first (truss.baseten.co, custom servers). ``model_metadata`` is metadata Truss keeps for the model; it
reaches a custom server only if its start command reads it, so keys such as ``engine_args`` there configure
nothing the command does not pass itself."""

from __future__ import annotations

from ..containers import shell_launch_workload
from ..installs import requirement_claim
from ..model import Document, EnvUse, Location, ReleaseClaim
from ..shell import Shell, ShellRun
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings


def _is_truss(root: Located) -> bool:
    server = root.get("docker_server")
    return server is not None and isinstance(server.value, dict) and server.get("start_command") is not None


def _env(doc: Document, root: Located) -> list[EnvUse]:
    given = root.get("environment_variables")
    env: list[EnvUse] = []
    for name, item in given.value.items() if given is not None and isinstance(given.value, dict) else ():
        where = node_location(doc, item)
        if item.value is None:
            env.append(
                EnvUse(name=name, value=None, reference="a value given when the Truss is deployed", location=where)
            )
        else:
            env.append(EnvUse(name=name, value=text_of(item), location=where))
    return env


def _pins(doc: Document, root: Located) -> list[ReleaseClaim]:
    given = root.get("requirements")
    pins: list[ReleaseClaim] = []
    for item in given.items() if given is not None else []:
        claim = requirement_claim(text_of(item), node_location(doc, item))
        if claim is not None:
            pins.append(claim)
    return pins


def _read_truss(doc: Document, root: Located, reading: Reading) -> None:
    deployment = reading.deployment
    server = root.get("docker_server")
    assert server is not None
    command = server.get("start_command")
    assert command is not None
    base = root.get("base_image")
    image_item = base.get("image") if base is not None and isinstance(base.value, dict) else None
    image = (text_of(image_item), node_location(doc, image_item)) if image_item is not None else None
    env = _env(doc, root)
    values = {use.name: use.value for use in env if use.value is not None}
    run = ShellRun(Document(name=doc.name, text=text_of(command)), "docker_server.start_command", Shell(values))
    run.pins = _pins(doc, root)
    for launch in run.launches(command.text_line):
        name = f"Truss docker_server #{len(deployment.workloads) + 1}"
        at = Location(file=doc.name, line=command.text_line, path="docker_server.start_command")
        deployment.workloads.append(shell_launch_workload(name, doc.name, launch, at, env, image))
        reading.totals.check(deployment)
    deployment.notes += run.notes
    metadata = root.get("model_metadata")
    engine_args = metadata.get("engine_args") if metadata is not None and isinstance(metadata.value, dict) else None
    if engine_args is not None:
        deployment.notes.append(
            f"{doc.name}:{engine_args.line}: model_metadata.engine_args is metadata Truss keeps for the model; the "
            "server runs docker_server.start_command as written, so these settings apply only where that command "
            "passes them itself"
        )


class TrussReader:
    """A Truss config whose ``docker_server.start_command`` runs the server."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_is_truss(m) for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        for root in mappings(roots):
            if _is_truss(root):
                _read_truss(doc, root, reading)
        return True


READER = TrussReader()
