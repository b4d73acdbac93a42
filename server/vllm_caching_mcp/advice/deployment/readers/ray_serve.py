"""Ray Serve LLM: a KubeRay ``RayService`` whose ``serveConfigV2`` (a Serve config, as YAML text) builds
``ray.serve.llm`` applications, and a Serve config file of its own (``applications:``). Each LLMConfig
(in ``args.llm_configs``, ``args.llm_config``, or P/D's ``prefill_config``/``decode_config``) runs a vLLM
engine in every replica, with its ``engine_kwargs`` as the engine's arguments (read as the `vllm serve`
options that set them) and the GPUs of the Ray worker group that hosts it. A KubeRay ``RayJob`` whose
``entrypoint`` (the shell command its head runs) starts vLLM is read as that command on its cluster."""

from __future__ import annotations

from ...common import AdviceError
from ..containers import memory_limit, whole_number
from ..engine_kwargs import kwargs_words
from ..flags import read_args
from ..model import Document, EnvUse, Workload
from ..pods import container_env, gpu_label, pod_resources
from ..shell import Shell, ShellRun
from ..yaml_nodes import Located, load_yaml, node_location, text_of
from .base import Reading, mappings

_LLM_CONFIG_ARGS = ("llm_configs", "llm_config", "prefill_config", "decode_config")


def _is_ray_service(root: Located) -> bool:
    spec = root.get("spec")
    return (
        text_of(root.get("kind")) == "RayService"
        and spec is not None
        and spec.get("serveConfigV2") is not None
        and isinstance(spec.get("serveConfigV2").value, str)
    )


def _is_serve_config(root: Located) -> bool:
    return root.get("kind") is None and any(
        isinstance(app.value, dict) and app.get("import_path") is not None for app in root.each("applications")
    )


class _Cluster:
    """The Ray worker pod an engine's ranks run in: its container (image, env, resources) and pod spec."""

    def __init__(self, pod: Located | None, container: Located | None, path: str) -> None:
        self.pod, self.container, self.path = pod, container, path


def _gpus(container: Located) -> bool:
    resources = container.get("resources")
    return resources is not None and any(
        resources.get(part) is not None and resources.get(part).get("nvidia.com/gpu") is not None
        for part in ("limits", "requests")
    )


def _cluster(spec: Located, key: str = "rayClusterConfig") -> _Cluster:
    """The worker group that requests GPUs (the first, else the first group, else the head): Ray places
    the engine's GPU workers there; the head, started with no GPUs in these samples, hosts none."""
    config = spec.get(key)
    if config is None:
        return _Cluster(None, None, "")
    groups = [(g.get("template"), g.path) for g in config.each("workerGroupSpecs")]
    head = config.get("headGroupSpec")
    groups.append((head.get("template") if head is not None else None, head.path if head is not None else ""))
    pods = [(t.get("spec"), path) for t, path in groups if t is not None and t.get("spec") is not None]
    candidates = [(pod, c, path) for pod, path in pods for c in pod.each("containers")[:1]]
    chosen = next((c for c in candidates if _gpus(c[1])), candidates[0] if candidates else None)
    return _Cluster(*chosen) if chosen is not None else _Cluster(None, None, "")


def _serve_config(doc: Document, item: Located, reading: Reading) -> Located | None:
    """The Serve config in a RayService's serveConfigV2, its lines those of the file."""
    try:
        roots = load_yaml(doc.name, text_of(item), reading.totals, item.text_line)
    except AdviceError as problem:
        why = str(problem).removeprefix(f"{problem.field}: ")
        raise AdviceError("text", f"{node_location(doc, item)}: the Ray Serve config in it: {why}") from None
    found = mappings(roots)
    return found[0] if found else None


def _read_ray_service(doc: Document, root: Located, reading: Reading) -> bool:
    spec = root.get("spec")
    meta = root.get("metadata")
    name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
    config = _serve_config(doc, spec.get("serveConfigV2"), reading)
    if config is None:
        return False
    return _read_serve_config(doc, config, f"RayService/{name}", _cluster(spec), reading, "spec.serveConfigV2:")


def _llm_configs(app: Located) -> list[Located]:
    args = app.get("args")
    found: list[Located] = []
    for key in _LLM_CONFIG_ARGS if args is not None else ():
        item = args.get(key)
        if item is not None:
            found += item.items() if isinstance(item.value, list) else [item]
    return found


def _read_serve_config(
    doc: Document, config: Located, owner: str, cluster: _Cluster, reading: Reading, prefix: str = ""
) -> bool:
    """Whether the config builds any LLM application (else it is no shape of this reader's)."""
    found = False
    for app in config.each("applications"):
        app_name = text_of(app.get("name")) or "?"
        for llm in _llm_configs(app):
            found = True
            if not isinstance(llm.value, dict):
                reading.deployment.notes.append(
                    f"{node_location(doc, llm, prefix)}: the LLM config {text_of(llm)!r} is a file the input does "
                    "not hold; give it to review its engine"
                )
                continue
            workload = _workload(doc, llm, owner, app_name, cluster, prefix, reading.deployment.notes)
            workload.env += _runtime_env(doc, app, prefix) + _runtime_env(doc, llm, prefix)
            reading.deployment.workloads.append(workload)
            reading.totals.check(reading.deployment)
    return found


def _model(llm: Located) -> tuple[str, Located] | None:
    loading = llm.get("model_loading_config")
    if loading is None:
        return None
    for key in ("model_source", "model_id"):
        item = loading.get(key)
        if item is not None and isinstance(item.value, str):  # a model_source mapping mirrors a bucket
            return item.value, item
    return None


def _workload(
    doc: Document, llm: Located, owner: str, app: str, cluster: _Cluster, prefix: str, notes: list[str]
) -> Workload:
    model = _model(llm)
    label = f"{owner} application {app}" if owner else f"Ray Serve application {app}"
    container = cluster.container
    image = container.get("image") if container is not None else None
    workload = Workload(
        name=f"{label} model {model[0] if model else '?'}",
        file=doc.name,
        # a Serve config alone runs on whatever Ray cluster it is deployed to: no container to see
        source="kubernetes" if container is not None else "command-line",
        model=model[0] if model else None,
        model_location=node_location(doc, model[1], prefix) if model else None,
        image=text_of(image) if image is not None else None,
        image_location=node_location(doc, image) if image is not None else None,
        location=node_location(doc, llm, prefix),
        pod_elsewhere=container is not None,  # KubeRay builds the pods from the group templates
        replicas=_replicas(doc, llm, prefix, notes),
    )
    _on_cluster(doc, workload, cluster, notes)
    accelerator = llm.get("accelerator_type")
    if accelerator is not None and text_of(accelerator):
        workload.gpu_label = text_of(accelerator)  # the accelerator Ray schedules the engine's workers on
    kwargs = llm.get("engine_kwargs")
    if kwargs is not None:
        read_args(workload, kwargs_words(doc, kwargs, prefix, notes))
        workload.engine_kwargs = True
    workload.nodes = _nodes(workload)
    return workload


def _on_cluster(doc: Document, workload: Workload, cluster: _Cluster, notes: list[str]) -> None:
    """The environment, GPU label, memory, GPUs and /dev/shm of the Ray pod the engine's workers run in."""
    container = cluster.container
    if container is None or cluster.pod is None:
        return
    env, env_notes = container_env(doc, container, {}, "")
    workload.env, workload.gpu_label = env + workload.env, gpu_label(cluster.pod)
    notes += env_notes
    limits = container.get("resources").get("limits") if container.get("resources") is not None else None
    if limits is not None and limits.get("memory") is not None:
        workload.memory_limit_gib = memory_limit(doc, limits.get("memory"), notes, "resources.limits.memory")
    pod_resources(doc, workload, cluster.pod, container, notes)


def _is_ray_job(root: Located) -> bool:
    spec = root.get("spec")
    entrypoint = spec.get("entrypoint") if spec is not None else None
    return text_of(root.get("kind")) == "RayJob" and entrypoint is not None and isinstance(entrypoint.value, str)


def _read_ray_job(doc: Document, root: Located, reading: Reading) -> bool:
    """A KubeRay RayJob whose entrypoint (a shell command the head runs) starts vLLM on its cluster."""
    spec = root.get("spec")
    meta = root.get("metadata")
    name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
    entrypoint = spec.get("entrypoint")
    run = ShellRun(Document(name=doc.name, text=text_of(entrypoint)), entrypoint.path, Shell())
    cluster = _cluster(spec, "rayClusterSpec")
    found = False
    for n, launch in enumerate(run.launches(entrypoint.text_line)):
        found = True
        image = cluster.container.get("image") if cluster.container is not None else None
        workload = Workload(
            name=f"RayJob/{name} entrypoint vllm #{n + 1}",
            file=doc.name,
            source="kubernetes",
            env=launch.env,
            image=text_of(image) if image is not None else None,
            image_location=node_location(doc, image) if image is not None else None,
            location=launch.location or node_location(doc, entrypoint),
            pod_elsewhere=True,  # KubeRay builds the pods from the group templates
        )
        _on_cluster(doc, workload, cluster, reading.deployment.notes)
        workload.hygiene += launch.hygiene
        read_args(workload, launch.args, launch.unresolved, launch.emptied)
        workload.nodes = _nodes(workload)
        reading.deployment.workloads.append(workload)
        reading.totals.check(reading.deployment)
    reading.deployment.notes += run.notes
    return found


def _replicas(doc: Document, llm: Located, prefix: str, notes: list[str]) -> int | None:
    """Engines the deployment runs: num_replicas, else the most its autoscaling_config allows."""
    deployment = llm.get("deployment_config")
    if deployment is None:
        return None
    autoscaling = deployment.get("autoscaling_config")
    given = deployment.get("num_replicas")
    if given is None and autoscaling is not None:
        given = autoscaling.get("max_replicas") or autoscaling.get("min_replicas")
    if given is None or not isinstance(given.value, int):
        return None  # "auto", or none given
    return whole_number(doc, given, given.step.lstrip("."), 0, 1_000_000, notes)


def _nodes(workload: Workload) -> int:
    """Worker pods one engine's ranks span: Ray places TP x PP GPU workers over the group's pods."""
    values = {f.name: f.value for f in workload.flags}
    try:
        world = int(str(values.get("--tensor-parallel-size", 1))) * int(str(values.get("--pipeline-parallel-size", 1)))
    except ValueError:
        return 1
    per_pod = workload.gpu_count
    return max(1, -(-world // per_pod)) if per_pod else 1  # whole numbers: a float overflows on a huge size


def _runtime_env(doc: Document, node: Located, prefix: str) -> list[EnvUse]:
    """The env_vars of a runtime_env: what Ray sets in the engine's worker processes."""
    runtime = node.get("runtime_env")
    variables = runtime.get("env_vars") if runtime is not None else None
    if variables is None or not isinstance(variables.value, dict):
        return []
    return [
        EnvUse(name=key, value=text_of(item), location=node_location(doc, item, prefix))
        for key, item in variables.value.items()
    ]


class RayServeReader:
    """RayService objects with a serveConfigV2 (the other objects of the file are left to the manifest
    reader), and Serve config files: a mapping with ``applications`` that have an ``import_path``."""

    yaml = True
    partial = True

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_is_ray_service(m) or _is_ray_job(m) or _is_serve_config(m) for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        for root in mappings(roots):
            # a Serve config with no LLM application (a plain Serve app) is left to the readers after this one
            if _is_ray_service(root):
                read = _read_ray_service(doc, root, reading)
            elif _is_ray_job(root):
                read = _read_ray_job(doc, root, reading)
            else:
                read = _is_serve_config(root) and _read_serve_config(doc, root, "", _Cluster(None, None, ""), reading)
            if read:
                reading.taken.add(id(root))
        return True


READER = RayServeReader()
