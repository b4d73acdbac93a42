"""Helm values of llm-d's modelservice chart (llm-d-incubation/llm-d-modelservice): a ``decode`` and a
``prefill`` section, each a role whose ``containers`` the chart renders into the pods of that role."""

from __future__ import annotations

from ..containers import launch_from_argv, memory_limit, script_words, started_as_written, whole_number, words_from_list
from ..flags import read_args
from ..hygiene import duplicate_env_issues, env_expansion_issues
from ..launch import Launch, is_simulator
from ..model import Document, EnvUse, Location, Workload
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

_ROLES = ("decode", "prefill")


# What the chart's templates (templates/_helpers.tpl) write for a container, by its `modelCommand`
# (`custom` when unset): `vllmServe` runs `vllm serve MODEL`, `imageDefault` gives the image's entrypoint
# `--model MODEL`; both then `--port` (routing.servicePort for prefill or with the proxy disabled, else
# routing.proxy.targetPort), `--tensor-parallel-size`, `--data-parallel-size`, `--data-parallel-size-local`
# from `parallelism` when above 1, `--served-model-name` modelArtifacts.name, and the container's args;
# `custom` runs the container's command and args as written. Each container asks for
# parallelism.dataLocal × parallelism.tensor accelerators (nvidia.com/gpu unless accelerator.type says
# otherwise) and gets DP_SIZE, TP_SIZE, DP_SIZE_LOCAL in its environment.
_MODEL_COMMANDS = ("custom", "vllmServe", "imageDefault")


def _number(item: Located | None, default: int) -> int:
    value = item.value if item is not None else None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _parallelism(section: Located) -> dict[str, int]:
    """tensor, data, dataLocal, workers as the chart's helpers derive each from the others."""
    given = section.get("parallelism")
    values = {
        k: _number(given.get(k) if given is not None else None, 0) for k in ("tensor", "data", "dataLocal", "workers")
    }
    tensor = values["tensor"] or 1
    data, local, workers = values["data"], values["dataLocal"], values["workers"]
    data_total = data or (local * workers if local and workers else local) or 1
    data_local = local or (data // workers if data and workers else data) or 1
    count = workers or (data // local if data and local else 0) or 1
    return {"tensor": tensor, "data": data_total, "dataLocal": data_local, "workers": count}


def _model_argument(root: Located) -> str | None:
    """The model the chart passes, from modelArtifacts.uri (hf://, pvc://, pvc+hf://)."""
    artifacts = root.get("modelArtifacts")
    if artifacts is None or artifacts.get("uri") is None:
        return None
    name = text_of(artifacts.get("name")) if artifacts.get("name") is not None else ""
    uri = text_of(artifacts.get("uri")).replace("{{ .Values.modelArtifacts.name }}", name).replace('"', "")
    protocol, _, rest = uri.partition("://")
    mount = text_of(artifacts.get("mountPath")) if artifacts.get("mountPath") is not None else "/model-cache"
    if protocol == "hf":
        return rest
    if protocol == "pvc":
        return f"{mount}/{rest.split('/', 1)[1]}" if "/" in rest else None
    if protocol == "pvc+hf":
        return "/".join(rest.split("/")[-2:])
    return None


def _port(root: Located, role: str) -> str:
    routing = root.get("routing")
    proxy = routing.get("proxy") if routing is not None else None
    disabled = proxy is not None and proxy.get("enabled") is not None and proxy.get("enabled").value is False
    if role == "prefill" or disabled:
        given = routing.get("servicePort") if routing is not None else None
        return text_of(given) if given is not None else "8000"
    given = proxy.get("targetPort") if proxy is not None else None
    return text_of(given) if given is not None else "8200"


def _env(doc: Document, container: Located, where: Location, parallel: dict[str, int]) -> list[EnvUse]:
    env = [
        EnvUse(name=name, value=str(parallel[key]), location=where)
        for name, key in (("DP_SIZE", "data"), ("TP_SIZE", "tensor"), ("DP_SIZE_LOCAL", "dataLocal"))
    ]
    for item in container.each("env"):
        if item.get("name") is None:
            continue
        loc = node_location(doc, item)
        if item.get("value") is not None:
            env.append(EnvUse(name=text_of(item.get("name")), value=text_of(item.get("value")), location=loc))
        elif item.get("valueFrom") is not None:
            what = next(iter(item.get("valueFrom").value or {}), "valueFrom")
            env.append(EnvUse(name=text_of(item.get("name")), value=None, reference=f"valueFrom {what}", location=loc))
    return env


def _launch(doc: Document, root: Located, role: str, container: Located, parallel: dict[str, int]) -> Launch | None:
    command = str(container.get("modelCommand").value) if container.get("modelCommand") is not None else "custom"
    args_item = container.get("args")
    if args_item is not None and isinstance(args_item.value, str):
        args = script_words(doc, args_item)
    else:
        args = words_from_list(doc, args_item.items() if args_item is not None else [], "")
    image = text_of(container.get("image")) if container.get("image") is not None else None
    if command == "custom":
        given = container.get("command")
        argv = words_from_list(doc, given.items() if given is not None else [], "") + args
        return launch_from_argv(doc, argv, image, overridden=given is not None) if argv else None
    if command not in _MODEL_COMMANDS:
        return None
    # Each word the chart writes is placed at the value it comes from (parallelism.tensor, the model's
    # uri), so a finding on it points at the line to change; the container when the value is a default.
    here = Location(file=doc.name, line=container.line, path=f"(the chart's {command} command)")
    artifacts = root.get("modelArtifacts")
    given = _parallelism_given(root, role)
    model = _model_argument(root)
    written: list[tuple[str, Location]] = []
    uri = artifacts.get("uri") if artifacts is not None else None
    at_uri = node_location(doc, uri) if uri is not None else here
    if command == "imageDefault":
        written.append(("--model", at_uri))
    if model:
        written.append((model, at_uri))
    written += [("--port", here), (_port(root, role), here)]
    for flag, key in (
        ("--tensor-parallel-size", "tensor"),
        ("--data-parallel-size", "data"),
        ("--data-parallel-size-local", "dataLocal"),
    ):
        if parallel[key] > 1:
            source = given.get(key) if given is not None else None
            at = node_location(doc, source) if source is not None else here
            written += [(flag, at), (str(parallel[key]), at)]
    if artifacts is not None and artifacts.get("name") is not None:
        at = node_location(doc, artifacts.get("name"))
        written += [("--served-model-name", at), (text_of(artifacts.get("name")), at)]
    return Launch(args=written + args)


def _parallelism_given(root: Located, role: str) -> Located | None:
    """The role's ``parallelism`` mapping, as written."""
    section = root.get(role)
    return section.get("parallelism") if section is not None else None


def _accelerator(root: Located) -> str:
    accelerator = root.get("accelerator")
    kind = text_of(accelerator.get("type")) if accelerator is not None and accelerator.get("type") else "nvidia"
    return kind


def _read_values(doc: Document, root: Located, reading: Reading) -> bool:
    deployment = reading.deployment
    before = len(deployment.workloads)
    multinode = root.get("multinode") is not None and root.get("multinode").value is True
    for role in _ROLES:
        section = root.get(role)
        if section is None or not isinstance(section.value, dict):
            continue
        if section.get("create") is not None and section.get("create").value is False:
            continue
        parallel = _parallelism(section)
        replicas = whole_number(doc, section.get("replicas"), f"{role}.replicas", 0, 1_000_000, deployment.notes)
        for container in section.each("containers"):
            image_item = container.get("image")
            if image_item is not None and is_simulator(text_of(image_item)):  # the chart runs no vLLM there
                continue
            found = _launch(doc, root, role, container, parallel)
            if found is None:
                continue
            cname = text_of(container.get("name")) if container.get("name") is not None else "vllm"
            where = Location(file=doc.name, line=container.line, path=container.path or None)
            workload = Workload(
                name=f"modelservice {role} container {cname}",
                installs=found.pins,
                file=doc.name,
                source="helm-values",
                image=text_of(image_item) if image_item is not None else None,
                image_location=node_location(doc, image_item) if image_item is not None else None,
                env=_env(doc, container, where, parallel) + found.env,
                replicas=replicas if section.get("replicas") is not None else 1,
                nodes=parallel["workers"] if multinode else 1,
                location=where,
            )
            resources = container.get("resources")
            for part in ("requests", "limits"):
                given = resources.get(part) if resources is not None else None
                memory = given.get("memory") if given is not None else None
                if memory is not None and part == "limits":
                    workload.memory_limit_gib = memory_limit(doc, memory, deployment.notes, "resources.limits.memory")
                if memory is not None and part == "requests":
                    workload.memory_request_gib = memory_limit(
                        doc, memory, deployment.notes, "resources.requests.memory"
                    )
            if _accelerator(root) == "nvidia":
                workload.gpu_count = parallel["dataLocal"] * parallel["tensor"]
            started_as_written(workload, found, deployment.notes)
            # the chart renders the container's env as written, beside DP_SIZE, TP_SIZE, DP_SIZE_LOCAL of its own
            workload.hygiene += env_expansion_issues(doc, container, None) + duplicate_env_issues(doc, container)
            read_args(workload, found.args, found.unresolved, found.emptied)
            deployment.workloads.append(workload)
    return len(deployment.workloads) > before


class ModelServiceReader:
    """Values of llm-d's modelservice chart: a ``decode`` or ``prefill`` role with ``containers``, beside
    ``modelArtifacts`` or a container's ``modelCommand``, in the first YAML document."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        found = mappings(roots)
        if not found or found[0].get("kind") is not None:
            return False
        roles = [found[0].get(role) for role in _ROLES]
        containers = [c for r in roles if r is not None and isinstance(r.value, dict) for c in r.each("containers")]
        return bool(containers) and (
            found[0].get("modelArtifacts") is not None or any(c.get("modelCommand") is not None for c in containers)
        )

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return _read_values(doc, mappings(roots)[0], reading)


READER = ModelServiceReader()
