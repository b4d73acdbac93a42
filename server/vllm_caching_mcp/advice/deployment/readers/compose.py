"""docker-compose files, with `${VAR}` interpolation from the environment and a `.env` beside them."""

from __future__ import annotations

import re

from ..containers import (
    docker_size,
    launch_from_argv,
    script_words,
    started_as_written,
    words_from_list,
)
from ..flags import read_args
from ..model import Deployment, Document, EnvUse, Location, Workload
from ..shell import ASSIGNMENT
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings


def _compose_resources(doc: Document, service: Located, workload: Workload, notes: list[str]) -> None:
    """A compose service's shm_size, mem_limit and ipc, as docker run's --shm-size, --memory and --ipc:
    Docker's sizes (64g is 64 GiB), not Kubernetes quantities."""
    workload.memory_limit_gib = docker_size(doc, service.get("mem_limit"), "mem_limit", notes)
    shm = service.get("shm_size")
    if shm is not None:
        workload.shm_mounted, workload.shm_gib = True, docker_size(doc, shm, "shm_size", notes)
    ipc = service.get("ipc")
    workload.host_ipc = ipc is not None and text_of(ipc) == "host"


_COMPOSE_REFERENCE = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^}]*\})*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


def read_dotenv(text: str) -> dict[str, str]:
    """The variables of a compose `.env` file: ``NAME=value`` lines, quotes taken off, comments skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        m = ASSIGNMENT.match(line)
        if not m or line.startswith("#"):
            continue
        value = m[2].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.sub(r"\s+#.*$", "", value)
        found[m[1]] = value
    return found


def _compose_interpolate(root: Located, dotenv: dict[str, str], unresolved: dict[str, str]) -> None:
    """Work out ``${VAR}``, ``${VAR:-default}``, ``$VAR`` and ``$$`` in every string of a compose file,
    as compose does with the `.env` beside it; a variable neither sets stays as written, in ``unresolved``."""

    def one(m: re.Match[str]) -> str:
        if m.group() == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        operator, word = m.group(2), m.group(3) or ""
        value = dotenv.get(name)
        empty = value is None or (operator is not None and operator.startswith(":") and value == "")
        if operator is not None and operator.endswith("-"):
            return word if empty else value or ""
        if operator is not None and operator.endswith("+"):
            return "" if empty else word
        if value is not None and not (operator is not None and empty):
            return value
        unresolved.setdefault(m.group(), f"{name} is set neither in a .env file among the documents nor in the file")
        return m.group()

    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node.value, dict):
            pending += node.value.values()
        elif isinstance(node.value, list):
            pending += node.items()
        elif isinstance(node.value, str) and "$" in node.value:
            node.value = _COMPOSE_REFERENCE.sub(one, node.value)


def _parse_compose(doc: Document, root: Located, deployment: Deployment, dotenv: dict[str, str]) -> None:
    unresolved: dict[str, str] = {}
    _compose_interpolate(root, dotenv, unresolved)
    services = root.get("services")
    for name, service in (services.value if services is not None and isinstance(services.value, dict) else {}).items():
        image_item = service.get("image")
        image = text_of(image_item) if image_item is not None else None
        argv: list[tuple[str, Location]] = []
        for key in ("entrypoint", "command"):
            item = service.get(key)
            if item is None:
                continue
            if isinstance(item.value, str):
                argv += script_words(doc, item)
            else:
                argv += words_from_list(doc, item.items(), "")
        if service.get("env_file") is not None:
            deployment.notes.append(
                f"{node_location(doc, service.get('env_file'))}: service {name} reads variables from env_file, "
                "which is not read here; give them in environment: to have them reviewed"
            )
        found = launch_from_argv(doc, argv, image, overridden=service.get("entrypoint") is not None)
        if found is None:
            continue
        args, script_env = found.args, found.env
        env: list[EnvUse] = []
        environment = service.get("environment")
        if environment is not None and isinstance(environment.value, dict):
            for key, item in environment.value.items():
                env.append(
                    EnvUse(name=key, value=text_of(item), location=node_location(doc, item))
                    if item.value is not None
                    else EnvUse(
                        name=key, value=None, reference="the host environment", location=node_location(doc, item)
                    )
                )
        elif environment is not None:
            for item in environment.items():
                key, eq, value = text_of(item).partition("=")
                env.append(
                    EnvUse(name=key, value=value, location=node_location(doc, item))
                    if eq
                    else EnvUse(
                        name=key, value=None, reference="the host environment", location=node_location(doc, item)
                    )
                )
        workload = Workload(
            name=f"service {name}",
            installs=found.installs,
            file=doc.name,
            source="compose",
            image=image,
            image_location=node_location(doc, image_item) if image_item is not None else None,
            env=env + script_env,
            location=Location(file=doc.name, line=service.line, path=service.path),
        )
        _compose_resources(doc, service, workload, deployment.notes)
        command = service.get("command")
        if found.problem and command is not None and isinstance(command.value, str):
            found.problem += " (compose splits a command: string into words: write command: as a list of one item)"
        started_as_written(workload, found, deployment.notes)
        read_args(workload, args, unresolved | found.unresolved, found.emptied)
        deployment.workloads.append(workload)


class ComposeReader:
    """A docker-compose file: its first YAML document has ``services``."""

    yaml = True

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        found = mappings(roots)
        return bool(found) and found[0].get("services") is not None

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        _parse_compose(doc, mappings(roots)[0], reading.deployment, reading.dotenv)
        return True


READER = ComposeReader()
