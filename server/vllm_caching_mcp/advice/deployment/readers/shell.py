"""Shell text: the vLLM launches a script runs."""

from __future__ import annotations

from typing import Literal

from ...common import docker_run_options
from ..bounds import Totals
from ..containers import cache_server, cache_server_args, docker_resources, shell_launch_workload
from ..launch import DOCKER_SWITCHES
from ..model import Deployment, Document, Location
from ..shell import parse_shell, split_commands, starts_ray, tokenize_shell
from ..systemd import is_unit, unit_as_shell
from ..yaml_nodes import Located
from .base import Reading, mappings


def _read_shell_document(doc: Document, deployment: Deployment, totals: Totals, options: frozenset[str]) -> None:
    ray_cluster = starts_ray(doc.text)
    launches = parse_shell(doc, notes=deployment.notes, hygiene=deployment.hygiene, vllm_options=options)
    for n, launch in enumerate(launches):
        name = f"{'docker run' if launch.source == 'docker-run' else 'vllm'} #{n + 1}"
        workload = shell_launch_workload(name, doc.name, launch, Location(file=doc.name, line=1))
        workload.ray_cluster = ray_cluster
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
        if is_unit(doc.text):  # a systemd unit: its start commands, as the shell lines they amount to
            text, issues = unit_as_shell(doc.text, doc.name)
            doc = Document(name=doc.name, text=text)
            reading.deployment.hygiene += issues
        _read_shell_document(doc, reading.deployment, reading.totals, reading.vllm_options)
        _read_cache_servers(doc, reading)
        return True


# A script starts an LMCache server or two; this many commands of a script are looked at for one.
_MAX_COMMANDS = 2_000


def _read_cache_servers(doc: Document, reading: Reading) -> None:
    """The LMCache servers a script starts, on the host (`lmcache server …`) or in a `docker run` (with its
    --network, --memory and -p), as objects of the deployment beside its vLLM servers."""
    for n, command in enumerate(split_commands(tokenize_shell(doc.text))[:_MAX_COMMANDS]):
        words = [(t.text, Location(file=doc.name, line=t.line)) for t in command]
        texts = [w for w, _ in words]
        run = next(
            (i for i in range(len(texts) - 1) if texts[i] in ("docker", "podman") and texts[i + 1] == "run"), None
        )
        options: dict[str, str | None] = {}
        if run is not None:
            parsed, image_at = docker_run_options(texts[run + 2 :], DOCKER_SWITCHES)
            options = {name: value for name, value, _ in parsed}
            rest = words[run + 2 + image_at + 1 :]
            entrypoint = options.get("--entrypoint")
            words = ([(entrypoint, words[run][1])] if entrypoint else []) + rest
        found = cache_server_args(words, reading.servers)
        if found is None:
            continue
        where = words[0][1] if words else Location(file=doc.name, line=command[0].line)
        source: Literal["docker-run", "command-line"] = "docker-run" if run is not None else "command-line"
        server = cache_server(f"LMCache server #{n + 1}", doc.name, found, where, None, [], source)
        if run is not None:
            docker_resources(server, options)
            server.pod = f"{doc.name}:docker/{options.get('--name') or n + 1}"
        else:
            server.host_network = True  # a process on the host listens on the host's network
        reading.deployment.cache_servers.append(server)


READER = ShellReader()
