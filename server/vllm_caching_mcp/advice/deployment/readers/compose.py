"""docker-compose files, with `${VAR}` interpolation from the environment and a `.env` beside them."""

from __future__ import annotations

import posixpath
import re

from ..bounds import clip
from ..containers import (
    cache_server,
    cache_server_args,
    docker_size,
    launch_from_argv,
    proxy_launch,
    script_words,
    self_addressed_ports,
    started_as_written,
    whole_number,
    words_from_list,
)
from ..dockerfile import DockerBuild, read_dockerfile
from ..flags import read_args
from ..hygiene import compose_conflicts, env_secret_issues
from ..images import image_version
from ..launch import Launch, looks_like_vllm_args
from ..model import Backing, Document, EnvUse, Location, Mount, PortRef, ProxyLaunch, Workload
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
    if service.get("mem_limit") is not None:
        workload.memory_limit_location = node_location(doc, service.get("mem_limit"))
    if shm is not None:
        workload.shm_location = node_location(doc, shm)
    network = service.get("network_mode")
    workload.host_network = network is not None and text_of(network) == "host"
    workload.ports = [] if workload.host_network else _compose_ports(doc, service)
    workload.probe_ports = _healthcheck_ports(doc, service)
    _compose_gpus(doc, service, workload, notes)
    workload.mounts = _compose_mounts(doc, service)
    workload.mounts_known = service.get("extends") is None  # an extended service may bring volumes of its own


def _compose_mounts(doc: Document, service: Located) -> list[Mount]:
    """The service's volumes (short `SOURCE:TARGET[:MODE]` and long syntax) and tmpfs mounts."""
    found: list[Mount] = []
    for item in service.each("volumes"):
        backing: Backing
        if isinstance(item.value, str):
            parts = item.value.split(":")
            target = parts[1] if len(parts) > 1 else parts[0]
            bind = len(parts) > 1 and parts[0].startswith(("/", ".", "~", "$"))
            backing, read_only = "host" if bind else "other", "ro" in parts[2:]
        elif isinstance(item.value, dict):
            target, kind = text_of(item.get("target")), text_of(item.get("type"))
            read_only = item.get("read_only") is not None and item.get("read_only").value is True
            backing = "memory" if kind == "tmpfs" else "host" if kind == "bind" else "other"
        else:
            continue
        if target.startswith("/"):
            found.append(Mount(path=target, backing=backing, read_only=read_only, location=node_location(doc, item)))
    tmpfs = service.get("tmpfs")
    entries = [tmpfs] if tmpfs is not None and isinstance(tmpfs.value, str) else list(service.each("tmpfs"))
    for entry in entries:
        target = text_of(entry).split(":", 1)[0]
        if target.startswith("/"):
            found.append(Mount(path=target, backing="memory", location=node_location(doc, entry)))
    return found


def _healthcheck_ports(doc: Document, service: Located) -> list[PortRef]:
    """The ports a healthcheck's test asks on the container's own address (a probe, as compose runs it inside)."""
    check = service.get("healthcheck")
    test = check.get("test") if check is not None else None
    if test is None:
        return []
    return self_addressed_ports(doc, test.items() if isinstance(test.value, list) else [test], "healthcheck")


def _compose_ports(doc: Document, service: Located) -> list[PortRef]:
    """The container side of each `ports:` entry ("8080:8000", "127.0.0.1:8080:8000/tcp", {target: 8000})."""
    found = []
    for item in service.each("ports"):
        target = item.get("target") if isinstance(item.value, dict) else item
        if target is None:
            continue
        text = text_of(target).rsplit(":", 1)[-1].split("/", 1)[0]
        if text.isdigit():
            found.append(PortRef(what="ports", number=int(text), location=node_location(doc, item)))
    return found


def _compose_gpus(doc: Document, service: Located, workload: Workload, notes: list[str]) -> None:
    """GPUs reserved for the service (deploy.resources.reservations.devices with count or device_ids, or
    gpus:); whether they are all its files give it (not with a runtime: or devices: of its own)."""
    workload.gpus_stated = service.get("runtime") is None and service.get("devices") is None
    gpus = service.get("gpus")
    deploy = service.get("deploy")
    resources = deploy.get("resources") if deploy is not None else None
    reservations = resources.get("reservations") if resources is not None else None
    devices = reservations.get("devices") if reservations is not None else None
    for device in ([gpus] if gpus is not None else []) + (devices.items() if devices is not None else []):
        workload.accelerator = "compose GPU reservation"
        workload.gpu_location = node_location(doc, device)
        count = device.get("count") if isinstance(device.value, dict) else device
        ids = device.get("device_ids") if isinstance(device.value, dict) else None
        if ids is not None and isinstance(ids.value, list):
            # Docker hands the ids to the NVIDIA runtime joined by commas, so ["5,6"] is two GPUs.
            workload.gpu_count = len(
                [part for item in ids.items() for part in text_of(item).split(",") if part.strip()]
            )
        elif count is not None and isinstance(count.value, int):
            workload.gpu_count = whole_number(doc, count, "count", 0, 1_000, notes)


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


def _compose_interpolate(root: Located, dotenv: dict[str, str], unresolved: dict[str, str]) -> set[int]:
    """Work out ``${VAR}``, ``${VAR:-default}``, ``$VAR`` and ``$$`` in every string of a compose file,
    as compose does with the `.env` beside it; a variable neither sets stays as written, in ``unresolved``.
    The ids of the nodes a `.env` value went into."""
    from_dotenv: set[int] = set()

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
            written = node.value
            node.value = _COMPOSE_REFERENCE.sub(one, written)
            if any((m[1] or m[4]) in dotenv for m in _COMPOSE_REFERENCE.finditer(written)):
                from_dotenv.add(id(node))
    return from_dotenv


_DOTENV = "a .env file among the documents"  # a value compose interpolates is written there, not here


def _compose_pod(doc: Document, name: str, service: Located) -> str:
    """The network namespace a service runs in: its own, or another service's (network_mode: service:NAME)."""
    network = service.get("network_mode")
    shared = (
        text_of(network).removeprefix("service:")
        if network is not None and text_of(network).startswith("service:")
        else name
    )
    return f"{doc.name}:service/{shared}"


def _words(doc: Document, item: Located | None) -> list[tuple[str, Location]] | None:
    """A service's entrypoint or command as words (a string is split as compose splits it); None when not given."""
    if item is None:
        return None
    return script_words(doc, item) if isinstance(item.value, str) else words_from_list(doc, item.items(), "")


def _named_for_vllm(name: str, image: str | None) -> bool:
    """A service whose name or image says it serves vLLM or LMCache."""
    return any(re.search(r"vllm|lmcache", text, re.I) for text in (name, image or ""))


def _build_of(doc: Document, name: str, service: Located, reading: Reading) -> tuple[DockerBuild | None, str | None]:
    """The Dockerfile a service's `build:` names (context, dockerfile, dockerfile_inline), when it is among the
    documents (by its path from the compose file, else by its name alone when one document has it); else the
    note that says it is not, for a service that turns out to run vLLM."""
    build = service.get("build")
    if build is None:
        return None, None
    inline = build.get("dockerfile_inline") if isinstance(build.value, dict) else None
    if inline is not None:
        where = node_location(doc, inline)
        text = text_of(inline)
        return read_dockerfile(Document(name=f"{doc.name}:{where.line} (dockerfile_inline)", text=text)), None
    if isinstance(build.value, str):
        context, dockerfile = text_of(build), None
    else:
        context = text_of(build.get("context")) if build.get("context") is not None else "."
        dockerfile = text_of(build.get("dockerfile")) if build.get("dockerfile") is not None else None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(doc.name), context, dockerfile or "Dockerfile"))
    found = reading.dockerfiles.get(path) or next(
        (b for n, b in reading.dockerfiles.items() if posixpath.normpath(n) == path), None
    )
    if found is None:
        same_name = [b for n, b in reading.dockerfiles.items() if n.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1]]
        found = same_name[0] if len(same_name) == 1 else None
    if found is None:
        return None, (
            f"{node_location(doc, build)}: service {name} is built from {path}, which is not among the documents: "
            "the vLLM release of that image is not known; give the Dockerfile to have it read"
        )
    found.built_by.append(f"service {name} of {doc.name}")
    return found, None


def _named_otherwise(
    image: str | None, where: Location | None, built: DockerBuild, name: str, notes: list[str]
) -> None:
    """A note where the name a service gives the image it builds says another vLLM release than its base."""
    base = built.stage.image
    named, runs = image_version(image), image_version(base[0] if base else None)
    if named is not None and named != runs and where is not None:
        notes.append(
            f"{where}: service {name} names the image it builds {clip(image or '', 80)}, but it is built on "
            f"{clip(base[0], 80) + f' ({base[1]})' if base else 'an image not known'}: the release is read from "
            "the Dockerfile, not from that name"
        )


def _service_env(doc: Document, service: Located, from_dotenv: set[int]) -> list[EnvUse]:
    """A service's `environment:`, as a mapping or as a list of NAME=value; a name alone takes the host's."""
    environment = service.get("environment")
    if environment is None:
        return []
    if isinstance(environment.value, dict):
        pairs = [(str(key), item, item.value is not None) for key, item in environment.value.items()]
        values = {id(item): text_of(item) for _, item, _ in pairs}
    else:
        pairs, values = [], {}
        for item in environment.items():
            key, eq, value = text_of(item).partition("=")
            pairs.append((key, item, bool(eq)))
            values[id(item)] = value
    return [
        EnvUse(
            name=key,
            value=values[id(item)],
            reference=_DOTENV if id(item) in from_dotenv else None,
            location=node_location(doc, item),
        )
        if given
        else EnvUse(name=key, value=None, reference="the host environment", location=node_location(doc, item))
        for key, item, given in pairs
    ]


def _parse_compose(doc: Document, root: Located, reading: Reading) -> None:
    deployment, dotenv = reading.deployment, reading.dotenv
    servers, proxy_scripts = reading.servers, reading.proxy_scripts
    unresolved: dict[str, str] = {}
    from_dotenv = _compose_interpolate(root, dotenv, unresolved)
    services = root.get("services")
    if services is not None and isinstance(services.value, dict):
        deployment.hygiene += compose_conflicts(doc, services.value)
    for name, service in (services.value if services is not None and isinstance(services.value, dict) else {}).items():
        image_item = service.get("image")
        image = text_of(image_item) if image_item is not None else None
        image_location = node_location(doc, image_item) if image_item is not None else None
        entrypoint, command = _words(doc, service.get("entrypoint")), _words(doc, service.get("command"))
        built, missing = _build_of(doc, name, service, reading)
        if built is not None and entrypoint is None:  # the image's ENTRYPOINT, and its CMD unless command: is given
            argv = built.argv(command)
        else:
            argv = [*(entrypoint or []), *(command or [])]
        if built is not None:  # `image:` beside `build:` names the image built, not the one it is built on
            _named_otherwise(image, image_location, built, name, deployment.notes)
            image, image_location = built.stage.image if built.stage.image else (None, None)
            unresolved |= built.stage.unresolved
        if service.get("env_file") is not None:
            deployment.notes.append(
                f"{node_location(doc, service.get('env_file'))}: service {name} reads variables from env_file, "
                "which is not read here; give them in environment: to have them reviewed"
            )
        overridden = entrypoint is not None or (built is not None and built.stage.entrypoint is not None)
        found = launch_from_argv(doc, argv, image, overridden=overridden)
        texts = [w for w, _ in argv]
        if found is None and not overridden and texts and looks_like_vllm_args(texts, reading.vllm_options):
            # the image's entrypoint is taken to be the server (or `vllm`, given `serve` first): its arguments say so
            found = Launch(args=argv[1:] if argv[0][0] == "serve" else argv)
            deployment.notes.append(
                f"{node_location(doc, service)}: service {name} read as a vLLM server by its arguments, though its "
                f"image {image or '(none)'} does not name vLLM"
            )
        if missing is not None and (found is not None or _named_for_vllm(name, image)):  # another service's is not ours
            deployment.notes.append(missing)
        proxy = proxy_launch(argv, proxy_scripts) if found is None else None
        if proxy is not None:
            network = service.get("network_mode")
            on_host = network is not None and text_of(network) == "host"
            script, words, where = proxy
            pod = _compose_pod(doc, name, service)
            deployment.proxy_launches.append(
                ProxyLaunch(script=script, words=words, pod=pod, host_network=on_host, location=where)
            )
        if found is None:
            server = cache_server_args(argv, servers)
            if server is not None:
                where = Location(file=doc.name, line=service.line, path=service.path)
                image_item = service.get("image")
                image_at = node_location(doc, image_item) if image_item is not None else None
                cache = cache_server(
                    f"service {name}",
                    doc.name,
                    server,
                    where,
                    image,
                    [],
                    "compose",
                    image_location=image_at,
                    words=argv,
                )
                _compose_resources(doc, service, cache, deployment.notes)
                cache.pod = _compose_pod(doc, name, service)
                deployment.cache_servers.append(cache)
                continue
            found = _built_elsewhere(name, service, image, built, argv)
            if found is None:  # a database, a UI, a gateway beside the server: its own secrets are in the file too
                deployment.hygiene += env_secret_issues(_service_env(doc, service, from_dotenv), f"service {name}: ")
                continue
        args, script_env = found.args, found.env
        env = _service_env(doc, service, from_dotenv)
        workload = Workload(
            name=f"service {name}",
            installs=(built.stage.installs if built is not None else []) + found.pins,
            file=doc.name,
            source="compose",
            image=image,
            image_location=image_location,
            env=(built.stage.env if built is not None else []) + env + script_env,
            location=Location(file=doc.name, line=service.line, path=service.path),
        )
        _compose_resources(doc, service, workload, deployment.notes)
        workload.pod = _compose_pod(doc, name, service)
        command = service.get("command")
        if found.problem and command is not None and isinstance(command.value, str):
            found.problem += " (compose splits a command: string into words: write command: as a list of one item)"
        started_as_written(workload, found, deployment.notes)
        read_args(workload, args, unresolved | found.unresolved, found.emptied)
        deployment.workloads.append(workload)


def _built_elsewhere(
    name: str, service: Located, image: str | None, built: DockerBuild | None, argv: list[tuple[str, Location]]
) -> Launch | None:
    """A service named for vLLM that runs what a Dockerfile not among the documents says: a server whose options
    are not known."""
    if built is not None or service.get("build") is None or argv or not _named_for_vllm(name, image):
        return None
    return Launch(
        options_unknown=f"service {clip(name, 40)} ({clip(image or 'no image', 60)}) runs what the Dockerfile it "
        "builds from says, and that Dockerfile is not among the documents"
    )


class ComposeReader:
    """A docker-compose file: its first YAML document has ``services``."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        found = mappings(roots)
        return bool(found) and found[0].get("services") is not None

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        _parse_compose(doc, mappings(roots)[0], reading)
        return True


READER = ComposeReader()
