"""What the readers of container specs share: a container's command words, the launch they start,
and its memory and count values."""

from __future__ import annotations

import re

from ..common import AdviceError, readable_number
from .bounds import MAX_ARGUMENTS, clip
from .launch import SHELLS, Launch, is_vllm_image, split_script, vllm_args
from .model import GIB, Document, Location, Workload
from .shell import Shell, ShellRun, tokenize_shell
from .yaml_nodes import Located, node_location, text_of


def script_words(doc: Document, item: Located) -> list[tuple[str, Location]]:
    """Words of a command written as one string, each with its own line."""
    first = node_location(doc, item)
    tokens = [t for t in tokenize_shell(text_of(item), first.line or 1) if not t.separator]
    _check_words(doc, item, len(tokens))
    return [(t.text, Location(file=doc.name, line=t.line, path=first.path)) for t in tokens]


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
    if len(texts) >= 3 and texts[0] in SHELLS and texts[1] in ("-c", "-lc", "-ec"):
        loc = argv[2][1]
        run = ShellRun(Document(name=doc.name, text=texts[2]), loc.path, variables or Shell())
        launch = next(run.launches(loc.line or 1), None)
        if notes is not None:
            notes += run.notes
        return launch if launch is not None else split_script(argv)
    inner = vllm_args(argv)
    if inner is not None:
        return Launch(args=inner)
    if overridden or image is None or not is_vllm_image(image):
        return None
    if texts and texts[0] == "serve":
        return Launch(args=argv[1:])  # images whose entrypoint is `vllm` (lmcache/vllm-openai) take `serve MODEL`
    if not texts or texts[0].startswith("-") or "/" in texts[0]:
        return Launch(args=argv)  # the image's entrypoint is the vLLM server; these are its arguments
    return None


def started_as_written(workload: Workload, launch: Launch, notes: list[str]) -> None:
    if launch.problem is not None:
        workload.start_problem = launch.problem
        notes.append(f"{workload.name} does not start: {launch.problem}")


def _memory_gib(text: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]i?|[kmgtp]|[KMGTP]B?)?\s*", text)
    if not m:
        return None
    number = float(m.group(1))
    unit = (m.group(2) or "").rstrip("B")
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
    decimal = {"k": 1e3, "K": 1e3, "M": 1e6, "m": 1e6, "G": 1e9, "g": 1e9, "T": 1e12, "t": 1e12, "P": 1e15}
    factor = binary.get(unit) or decimal.get(unit) or 1
    return readable_number(number * factor / GIB)


def whole_number(
    doc: Document, item: Located | None, what: str, low: int, high: int, notes: list[str], *, quantity: bool = False
) -> int | None:
    """An integer field such as replicas; None, with a note, when it is not a whole number from low to high.
    A resource ``quantity`` may also be written as a string ("8"), as Kubernetes quantities often are."""
    if item is None:
        return None
    value = item.value
    if quantity and isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    shown = clip(text_of(item), 40)
    notes.append(
        f"{node_location(doc, item)}: {what} {shown} is not a whole number from {low} to {high:,}; it is not used"
    )
    return None


def memory_limit(doc: Document, item: Located | None, notes: list[str]) -> float | None:
    if item is None:
        return None
    gib = _memory_gib(text_of(item))
    if gib is None:
        shown = clip(text_of(item), 40)
        notes.append(
            f"{node_location(doc, item)}: memory limit {shown!r} is not a quantity such as 64Gi; it is not used"
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
    if gpus is not None and gpus.isdigit():
        workload.gpu_count = int(gpus)
    elif gpus is not None and "device=" in gpus:
        workload.gpu_count = len(gpus.split("device=", 1)[1].strip("\"'").split(","))


def docker_bytes_gib(text: str) -> float | None:
    """A Docker size (--shm-size, compose shm_size): Docker's units are binary, 8g is 8 GiB."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgBKMG]?)[bB]?\s*", text)
    unit = {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[m[2].lower()] if m else None
    return _memory_gib(m[1] + unit) if m and unit is not None else None
