"""SkyPilot task YAML: ``setup:`` and ``run:`` are shell scripts SkyPilot runs on every node of the
task, with ``envs:`` (and ``secrets:``) exported into them, and the variables SkyPilot sets itself
(docs.skypilot.co, running-jobs/environment-variables). ``resources.accelerators`` gives the node's
GPUs, ``resources.image_id: docker:IMAGE`` the image the scripts run in, ``num_nodes`` the nodes."""

from __future__ import annotations

import re

from ..containers import shell_launch_workload, whole_number
from ..launch import Launch
from ..model import Document, EnvUse, HygieneIssue, Location, ReleaseClaim, Workload
from ..shell import Shell, ShellRun
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

# `A100:8`, `A100-80GB:8`, `H100`: a GPU name and how many of it each node has (1 when not given).
_ACCELERATOR = re.compile(r"\s*([A-Za-z][\w.-]*)\s*(?::\s*(\d+(?:\.\d+)?))?\s*")


_NATIVE = "(set by SkyPilot on each node)"
_MAX_GPUS = 1_000  # per node, as nvidia.com/gpu is bounded


def _is_task(root: Located) -> bool:
    run = root.get("run")
    return (
        root.get("kind") is None
        and run is not None
        and isinstance(run.value, str)
        and any(root.get(key) is not None for key in ("resources", "num_nodes", "setup", "envs", "service"))
    )


def _accelerators(item: Located | None) -> tuple[str | None, int | None]:
    """The GPU name and count of ``resources.accelerators``: ``A100:8``, ``{A100: 8}``, or candidates
    (a list or set of either), of which only what they all agree on is kept."""
    if item is None or item.value is None:
        return None, None
    found: list[tuple[str, int | None]] = []
    # `{L4:1, A100:1}` is a flow mapping of keys `L4:1` with no value: each key written as a whole
    written = (
        [
            f"{name}:{count.value}" if isinstance(count.value, (int, float)) else name
            for name, count in item.value.items()
        ]
        if isinstance(item.value, dict)
        else [text_of(one) for one in item.items() or [item]]
    )
    for text in written:
        m = _ACCELERATOR.fullmatch(text)
        if m is None:
            return None, None
        count = float(m[2]) if m[2] else 1.0
        found.append((m[1], int(count) if count.is_integer() and count <= _MAX_GPUS else None))
    names, counts = {n for n, _ in found}, {c for _, c in found}
    return (names.pop() if len(names) == 1 else None), (counts.pop() if len(counts) == 1 else None)


def _task_env(doc: Document, root: Located, gpus: int | None, nodes: int) -> list[EnvUse]:
    """``envs`` and ``secrets`` (null: given at `sky launch --env/--secret`), then SkyPilot's own."""
    env: list[EnvUse] = []
    for key in ("envs", "secrets"):
        given = root.get(key)
        for name, item in given.value.items() if given is not None and isinstance(given.value, dict) else ():
            where = node_location(doc, item)
            if item.value is None:
                env.append(EnvUse(name=name, value=None, reference=f"`sky launch --{key[:-1]} {name}`", location=where))
            else:
                env.append(EnvUse(name=name, value=text_of(item), location=where))
    native = Location(file=doc.name, line=None, path=_NATIVE)
    env.append(EnvUse(name="SKYPILOT_NUM_NODES", value=str(nodes), location=native))
    if gpus is not None:
        env.append(EnvUse(name="SKYPILOT_NUM_GPUS_PER_NODE", value=str(gpus), location=native))
    for name, what in (("SKYPILOT_NODE_RANK", "the node's rank"), ("SKYPILOT_NODE_IPS", "the nodes' addresses")):
        env.append(EnvUse(name=name, value=None, reference=f"{what}, known at run time", location=native))
    return env


def _image(doc: Document, resources: Located | None) -> tuple[str, Location] | None:
    item = resources.get("image_id") if resources is not None else None
    if item is None or not text_of(item).startswith("docker:"):
        return None  # a VM image (an AMI, a GCP image): no container
    return text_of(item).removeprefix("docker:"), node_location(doc, item)


def _replicas(doc: Document, root: Located, notes: list[str]) -> int | None:
    """The replicas SkyServe runs (``service.replicas``, else the most ``replica_policy`` allows)."""
    service = root.get("service")
    if service is None or not isinstance(service.value, dict):
        return None
    policy = service.get("replica_policy")
    given = service.get("replicas")
    if given is None and policy is not None:
        given = policy.get("max_replicas") or policy.get("min_replicas")
    return whole_number(doc, given, "service replicas", 0, 100_000, notes) if given is not None else None


def _read_task(doc: Document, root: Located, reading: Reading) -> None:
    notes = reading.deployment.notes
    resources = root.get("resources")
    gpu_name, gpus = _accelerators(resources.get("accelerators") if resources is not None else None)
    nodes = whole_number(doc, root.get("num_nodes"), "num_nodes", 1, 100_000, notes) or 1
    scripts = " ".join(text_of(root.get(part)) for part in ("setup", "run"))
    # SkyPilot's own variables, where the scripts use them: a variable set on every task is no setting of this one
    env = [use for use in _task_env(doc, root, gpus, nodes) if use.location.path != _NATIVE or use.name in scripts]
    values = {use.name: use.value for use in env if use.value is not None}
    unknown = {f"${use.name}": f"{use.name} is {use.reference}" for use in env if use.value is None}
    unknown |= {"${" + k[1:] + "}": v for k, v in unknown.items()}
    image = _image(doc, resources)
    installs: list[HygieneIssue] = []  # SkyPilot runs setup before run on each node: run starts after its installs
    pins: list[ReleaseClaim] = []  # setup's pip installs of vLLM and LMCache: run's servers run on them
    for part in ("setup", "run"):
        script = root.get(part)
        if script is None or not isinstance(script.value, str):
            continue
        run = ShellRun(Document(name=doc.name, text=script.value), part, Shell(values, unknown))
        run.installs = list(installs)
        run.pins = pins
        first = script.text_line
        for launch in run.launches(first):
            workload = _workload(doc, part, launch, env, image, len(reading.deployment.workloads))
            workload.gpu_label, workload.gpu_count, workload.nodes = gpu_name, gpus, nodes
            workload.replicas = _replicas(doc, root, notes)
            reading.deployment.workloads.append(workload)
            reading.totals.check(reading.deployment)
        notes += run.notes
        installs = run.installs


def _workload(
    doc: Document, part: str, launch: Launch, env: list[EnvUse], image: tuple[str, Location] | None, n: int
) -> Workload:
    name = f"SkyPilot {part} {'docker run' if launch.source == 'docker-run' else 'vllm'} #{n + 1}"
    return shell_launch_workload(name, doc.name, launch, Location(file=doc.name, line=1, path=part), env, image)


class SkyPilotReader:
    """A SkyPilot task: a mapping with a ``run`` script beside ``resources``, ``num_nodes``, ``setup``,
    ``envs`` or ``service``."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_is_task(m) for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        for root in mappings(roots):
            if _is_task(root):
                _read_task(doc, root, reading)
        return True


READER = SkyPilotReader()
