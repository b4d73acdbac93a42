"""What the readers of container specs share: a container's command words, the launch they start,
and its memory and count values."""

from __future__ import annotations

import functools
import re
from typing import Literal

from ...knowledge import ServerListener
from ..common import AdviceError, readable_number
from .bounds import MAX_ARGUMENTS, clip
from .flags import read_args
from .launch import Launch, entrypoint_of, is_vllm_image, script_index, split_script, vllm_args
from .model import GIB, Document, EnvUse, FlagUse, Location, PortRef, Workload
from .quantity import DOCKER_FORM, docker_bytes, parse_quantity, quantity_bytes
from .shell import Shell, ShellRun, script_install_issues, tokenize_shell
from .yaml_nodes import Located, node_location, text_of


def script_words(doc: Document, item: Located) -> list[tuple[str, Location]]:
    """Words of a command written as one string, each with its own line."""
    first = node_location(doc, item)
    tokens = [t for t in tokenize_shell(_unfolded(doc, item), first.line or 1) if not t.separator]
    _check_words(doc, item, len(tokens))
    return [(t.text, Location(file=doc.name, line=t.line, path=first.path)) for t in tokens]


def _unfolded(doc: Document, item: Located) -> str:
    text = text_of(item)
    return unfolded(doc, item.text_line, text) if item.block and item.file is None else text


def unfolded(doc: Document, line: int, text: str) -> str:
    """A script's text with its words on the lines they are written on, from ``line`` of ``doc``: a folded block
    scalar (`args: [>]`) joins its lines with blanks, which the shell reads as the backslash-newline continuations
    written back here. Any other text (a literal block keeps its lines) is returned as it is."""
    stripped = text.strip()
    if "\n" in stripped:
        return text
    starts = [*_line_starts(doc.text), len(doc.text) + 1]
    first = max(line - 1, 0)
    if first + 1 >= len(starts) or starts[first + 1] - starts[first] > len(stripped):
        return text  # the text fits on its first line: nothing was folded
    written: list[str] = []
    indent, length = None, 0
    for n in range(first, len(starts) - 1):
        raw = doc.text[starts[n] : starts[n + 1] - 1]
        width = len(raw) - len(raw.lstrip())
        if indent is None:
            indent = width
        if (raw.strip() and width < indent) or length > len(stripped):
            break  # past the block, or longer than the text it would have to fold into: not this text's lines
        written.append(raw.strip())
        length += len(written[-1]) + 1
    while written and not written[-1]:
        written.pop()
    if len(written) < 2 or " ".join(written) != stripped:
        return text
    return " \\\n".join(written)


@functools.lru_cache(maxsize=4)
def _line_starts(text: str) -> list[int]:
    """Where each line of ``text`` starts (a document's scripts are unfolded against it one after another)."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


def words_from_list(doc: Document, items: list[Located], prefix: str) -> list[tuple[str, Location]]:
    if items:
        _check_words(doc, items[0], len(items))
    return [(text_of(i), node_location(doc, i, prefix)) for i in items]


def _check_words(doc: Document, item: Located, count: int) -> None:
    if count > MAX_ARGUMENTS:
        raise AdviceError(
            "text",
            f"{doc.name}, line {item.line}: a command of more than {MAX_ARGUMENTS:,} words; no deployment runs one "
            "that long",
        )


def launch_from_argv(
    doc: Document,
    argv: list[tuple[str, Location]],
    image: str | None,
    overridden: bool = False,
    variables: Shell | None = None,
    notes: list[str] | None = None,
) -> Launch | None:
    """vLLM arguments from a container's command + args: exec form, a shell script, or the image
    entrypoint's arguments (not when ``overridden``: a command or entrypoint of its own runs instead).
    ``variables``: what a shell script sees (the container's environment)."""
    texts = [w for w, _ in argv]
    at = script_index(texts)
    if at is not None:
        loc = argv[at][1]
        script = unfolded(doc, loc.line or 1, texts[at])
        run = ShellRun(Document(name=doc.name, text=script), loc.path, variables or Shell())
        launch = next(run.launches(loc.line or 1), None)
        if notes is not None:
            notes += run.notes
        return launch if launch is not None else split_script(argv)
    inner = vllm_args(argv)
    if inner is not None:
        return Launch(args=inner, entrypoint=entrypoint_of(argv))
    if overridden or image is None or not is_vllm_image(image):
        return None
    if texts and texts[0] == "serve":
        return Launch(args=argv[1:])  # images whose entrypoint is `vllm` (lmcache/vllm-openai) take `serve MODEL`
    if not texts or texts[0].startswith("-") or "/" in texts[0]:
        return Launch(args=argv)  # the image's entrypoint is the vLLM server; these are its arguments
    return None


def shell_launch_workload(
    name: str,
    file: str,
    launch: Launch,
    at: Location,
    env: list[EnvUse] | None = None,
    image: tuple[str, Location] | None = None,
) -> Workload:
    """The workload a launch of shell text starts (a script's `vllm serve` or `docker run`): ``at`` where it is
    when the launch has no place of its own, ``env`` what the text's runner sets before it, ``image`` the one
    it runs on when the launch names none (SkyPilot's image_id)."""
    given = launch.image or image
    workload = Workload(
        name=name,
        file=file,
        source=launch.source,
        env=(env or []) + launch.env,
        installs=launch.pins,
        image=given[0] if given else None,
        image_location=given[1] if given else None,
        location=launch.location or at,
        background=launch.background,
        entrypoint=launch.entrypoint,
        ray_cluster=launch.ray_cluster,
        options_unknown=launch.options_unknown,
    )
    docker_resources(workload, launch.options)
    workload.hygiene += launch.hygiene
    read_args(workload, launch.args, launch.unresolved, launch.emptied)
    if launch.image is not None and launch.image[0] in launch.unresolved:
        workload.unresolved.append(
            f"{launch.image[1]}: the image {clip(launch.image[0], 80)}: {launch.unresolved[launch.image[0]]}"
        )
    return workload


def started_as_written(workload: Workload, launch: Launch, notes: list[str]) -> None:
    workload.hygiene += launch.hygiene
    workload.entrypoint = launch.entrypoint
    workload.ray_cluster = workload.ray_cluster or launch.ray_cluster
    workload.options_unknown = launch.options_unknown
    if launch.problem is not None:
        workload.start_problem = launch.problem
        notes.append(f"{workload.name} does not start: {launch.problem}")


def whole_number(
    doc: Document, item: Located | None, what: str, low: int, high: int, notes: list[str], *, quantity: bool = False
) -> int | None:
    """An integer field such as replicas; None, with a note, when it is not a whole number from low to high.
    A resource ``quantity`` may also be a Kubernetes quantity string ("8", "1e1"), as extended resources are."""
    if item is None:
        return None
    value = item.value
    if quantity and isinstance(value, str):
        try:
            amount = parse_quantity(value)
        except ValueError:
            pass  # noted below as not a whole number
        else:
            value = int(amount) if amount == amount.to_integral_value() else value
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    shown = clip(text_of(item), 40)
    notes.append(
        f"{node_location(doc, item)}: {what} {shown} is not a whole number from {low} to {high:,}; it is not used"
    )
    return None


def memory_limit(doc: Document, item: Located | None, notes: list[str], what: str = "memory") -> float | None:
    """A Kubernetes memory quantity (resources, an emptyDir sizeLimit) in GiB, read as Kubernetes reads it;
    None, with a note naming the field and its value, when Kubernetes would refuse it."""
    if item is None:
        return None
    try:
        return readable_number(quantity_bytes(text_of(item)) / GIB)
    except ValueError as problem:
        notes.append(f"{node_location(doc, item)}: {what} {problem}; it is not used")
        return None


def docker_size(doc: Document, item: Located | None, what: str, notes: list[str]) -> float | None:
    """A Docker size in a compose file (mem_limit, shm_size) in GiB; None, with a note, when Docker refuses it."""
    if item is None:
        return None
    gib = docker_bytes_gib(text_of(item))
    if gib is None:
        notes.append(
            f"{node_location(doc, item)}: {what} {clip(text_of(item), 40)!r} is not {DOCKER_FORM}; it is not used"
        )
    return gib


def docker_resources(workload: Workload, options: dict[str, str | None]) -> None:
    """--shm-size, --ipc=host, --memory and --gpus of a docker/podman run."""
    shm = options.get("--shm-size")
    if shm:
        workload.shm_mounted, workload.shm_gib = True, docker_bytes_gib(shm)
    workload.host_ipc = options.get("--ipc") == "host"
    memory = options.get("--memory") or options.get("-m")
    if memory:
        workload.memory_limit_gib = docker_bytes_gib(memory)
    gpus = options.get("--gpus")
    # a bare host's command line does not say what the host gives it; a docker run does
    workload.gpus_stated = workload.source == "docker-run" and not ({"--runtime", "--device"} & options.keys())
    if gpus is not None:
        workload.accelerator = "--gpus"
    network = options.get("--network") or options.get("--net")
    # a bare host's process is on the host's network; a container is on its own unless --network host
    workload.host_network = network == "host" or workload.source == "command-line"
    published = options.get("-p") or options.get("--publish")
    container_side = published.rsplit(":", 1)[-1].split("/", 1)[0] if published else ""
    if container_side.isdigit() and not workload.host_network:
        workload.ports = [PortRef(what="-p", number=int(container_side), location=workload.location)]
    if gpus is not None and gpus.isdigit():
        workload.gpu_count = int(gpus)
    elif gpus is not None and "device=" in gpus:
        workload.gpu_count = len(gpus.split("device=", 1)[1].strip("\"'").split(","))


def docker_bytes_gib(text: str) -> float | None:
    """A Docker size (--memory, --shm-size, compose mem_limit and shm_size): Docker's units, 8g is 8 GiB."""
    try:
        return readable_number(docker_bytes(text.strip()) / GIB)
    except ValueError:
        return None


Words = list[tuple[str, Location]]


def command_words(words: Words) -> tuple[Words, set[int]]:
    """A container's command words, a `sh -c` script read word by word, and where each of the script's
    commands ends (`;`, `&`, `&&`, a new line: the index of the word after it)."""
    ends: set[int] = set()
    at = script_index([w for w, _ in words]) if words else None
    if words and at is not None:
        script, where = words[at]
        words = []
        for token in tokenize_shell(script, where.line or 1):
            if token.separator:
                ends.add(len(words))
            else:
                words.append((token.text, Location(file=where.file, line=token.line, path=where.path)))
    return words, ends


def _until_the_end(words: Words, ends: set[int], start: int) -> Words:
    end = min((e for e in ends if e >= start), default=len(words))
    return words[start:end]


def proxy_launch(words: Words, scripts: tuple[str, ...]) -> tuple[str, Words, Location] | None:
    """The P/D proxy script (a known one's file name) a command runs, the words after it, and where it is."""
    words, ends = command_words(words)
    for i, (word, where) in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if name in scripts:
            return name, _until_the_end(words, ends, i + 1), where
    return None


def cache_server_args(
    words: Words, servers: tuple[ServerListener, ...]
) -> tuple[ServerListener, list[tuple[str, Location]], str] | None:
    """The LMCache server a command starts (a console script of its ``entry_points``, `lmcache server`,
    or `python -m` one of its ``modules``), the words after the command, and the command as
    lmcache_server_cli.yaml names it (``python -m M``); a `sh -c` script is read word by word. None when
    the words start none."""
    words, ends = command_words(words)
    texts = [w for w, _ in words]

    def until_the_end(start: int) -> list[tuple[str, Location]]:
        return _until_the_end(words, ends, start)

    for i, word in enumerate(texts):
        base = word.rsplit("/", 1)[-1]
        for server in servers:
            if server.package != "lmcache":
                continue
            for entry in server.entry_points:
                command = entry.split()
                if base == command[0] and texts[i + 1 : i + len(command)] == command[1:]:
                    return server, until_the_end(i + len(command)), entry
            module = texts[i + 2] if base.startswith("python") and i + 2 < len(texts) and texts[i + 1] == "-m" else None
            if module in server.modules:
                return server, until_the_end(i + 3), f"python -m {module}"
    return None


# The device-plugin resources of GPUs the review counts against the engine's world size, and the
# prefixes of other accelerators' (Intel, Gaudi, Neuron, TPU), whose request means the pod has one.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
_ACCELERATOR_PREFIXES = (
    "nvidia.com/",
    "amd.com/gpu",
    "gpu.intel.com/",
    "habana.ai/",
    "aws.amazon.com/neuron",
    "google.com/tpu",
)


def is_accelerator(resource: str) -> bool:
    return resource.startswith(_ACCELERATOR_PREFIXES) or resource.endswith("/gpu")


def cache_server(
    label: str,
    file: str,
    found: tuple[ServerListener, list[tuple[str, Location]], str],
    where: Location,
    image: str | None,
    env: list[EnvUse],
    source: Literal["command-line", "docker-run", "compose", "kubernetes", "helm-values"] = "kubernetes",
    *,
    image_location: Location | None = None,
    words: Words | None = None,
) -> Workload:
    """An LMCache server a container starts, with its options as flags (a positional host or port under
    the option name its knowledge entry gives it); ``words``, the container's command, give the installs
    its `sh -c` script runs before the server."""
    server, args, command = found
    workload = Workload(
        name=label,
        file=file,
        source=source,
        image=image,
        env=env,
        location=where,
        role="lmcache-server",
        server=server.id,
        command=command,
        image_location=image_location,
    )
    at = script_index([w for w, _ in words]) if words else None
    if words and at is not None:
        workload.hygiene += script_install_issues(words[at][0], words[at][1])
    read_args(workload, args)
    workload.model = None  # a positional word is a host or port here, not a model
    positional = [(w, loc) for w, loc in args if not w.startswith("-")]
    for flag, position in (("--host", server.host_position), ("--port", server.port_position)):
        if position is not None and position <= len(positional):
            word, loc = positional[position - 1]
            workload.flags.append(FlagUse(name=flag, written=word, value=word, location=loc))
    return workload


# A command that asks the container itself: curl/wget of localhost:PORT (or 127.0.0.1, 0.0.0.0).
_SELF_URL = re.compile(r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0):(\d+)\b")


def self_addressed_ports(doc: Document, items: list[Located], what: str) -> list[PortRef]:
    """The ports the words of a command run inside the container (a healthcheck's test, an exec probe, a
    lifecycle hook) ask on the container's own address."""
    return [
        PortRef(what=what, number=int(m[1]), location=node_location(doc, item))
        for item in items
        for m in _SELF_URL.finditer(text_of(item))
    ]


def port_ref(doc: Document, what: str, item: Located) -> PortRef:
    """A port given as a number or as the name of a container's port (a probe's port, a targetPort)."""
    if isinstance(item.value, int) and not isinstance(item.value, bool):
        return PortRef(what=what, number=item.value, location=node_location(doc, item))
    text = text_of(item)
    if text.isdigit():
        return PortRef(what=what, number=int(text), location=node_location(doc, item))
    return PortRef(what=what, name=text, location=node_location(doc, item))


_PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
_HOOKS = ("postStart", "preStop")


def handler_ports(doc: Document, container: Located) -> list[PortRef]:
    """The ports a container's probes and lifecycle hooks ask: their httpGet, tcpSocket and grpc ports, and the
    container's own address in an exec command (`curl localhost:8000/metrics` in a preStop drain)."""
    found = []
    lifecycle = container.get("lifecycle")
    hooks = [(f"lifecycle {h}", lifecycle.get(h)) for h in _HOOKS] if lifecycle is not None else []
    for what, handler_of in [*((p, container.get(p)) for p in _PROBES), *hooks]:
        if handler_of is None:
            continue
        for handler in ("httpGet", "tcpSocket", "grpc"):
            port = handler_of.get(handler).get("port") if handler_of.get(handler) is not None else None
            if port is not None:
                found.append(port_ref(doc, f"{what} {handler}.port", port))
        command = handler_of.get("exec").get("command") if handler_of.get("exec") is not None else None
        if command is not None:
            words = command.items() if isinstance(command.value, list) else [command]
            found += self_addressed_ports(doc, words, f"{what} exec")
    return found
