"""Kubernetes manifests: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod, LeaderWorkerSet
(and the ConfigMaps their containers read), and any other object that holds pod specs (RayService,
KServe LLMInferenceService, Dynamo DynamoGraphDeployment, custom resources): a container there whose
command or arguments start vLLM is a vLLM workload."""

from __future__ import annotations

import re
from typing import NamedTuple

from ..bounds import clip
from ..containers import (
    cache_server,
    cache_server_args,
    handler_ports,
    launch_from_argv,
    memory_limit,
    port_ref,
    proxy_launch,
    script_words,
    started_as_written,
    whole_number,
    words_from_list,
)
from ..flags import read_args
from ..hygiene import (
    claim_spec,
    container_hygiene,
    duplicate_env_issues,
    env_expansion_issues,
    placeholder_image,
    pod_claims,
    secret_data_issues,
)
from ..launch import (
    Launch,
    is_simulator,
    is_vllm_image,
    looks_like_vllm_args,
    script_index,
    starts_with_vllm_options,
    vllm_option_share,
)
from ..lmcache_config import maybe_lmcache_config
from ..model import (
    Document,
    EnvUse,
    HygieneIssue,
    IngressBackend,
    Location,
    PortRef,
    ProxyLaunch,
    ServiceSpec,
    Workload,
)
from ..pods import (
    SERVING_RUNTIME_KINDS,
    container_env,
    gpu_label,
    k8s_expand,
    k8s_variables,
    pod_resources,
    runtime_placeholders,
)
from ..shell import argv_starts_ray, tokenize_shell
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

_WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod", "LeaderWorkerSet"}
# apps/v1 kinds the API server refuses without spec.selector and pod labels for it to match: one written with
# neither is a strategic-merge patch (a kustomize overlay's), and the pod's GPUs, /dev/shm and probes are in the
# base it patches.
_SELECTOR_REQUIRED = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}


def _a_patch(obj: Located, kind: str) -> bool:
    spec = obj.get("spec")
    if kind not in _SELECTOR_REQUIRED or spec is None or spec.get("selector") is not None:
        return False
    template = spec.get("template")
    meta = template.get("metadata") if template is not None else None
    return meta is None or meta.get("labels") is None


_PodSpec = tuple[Located, str, int | None, int, list[Located]]


def _labels(template: Located | None) -> dict[str, str]:
    """The labels of a pod template (or a Pod): what a Service's selector is matched against."""
    meta = template.get("metadata") if template is not None else None
    labels = meta.get("labels") if meta is not None else None
    if labels is None or not isinstance(labels.value, dict):
        return {}
    return {str(key): text_of(value) for key, value in labels.value.items()}


def _template_of(obj: Located, part: str) -> Located | None:
    """The pod template a pod spec of ``_pod_specs`` came from (the Pod itself for a Pod)."""
    spec = obj.get("spec")
    if text_of(obj.get("kind")) == "Pod":
        return obj
    if spec is None:
        return None
    if part in ("leaderTemplate", "workerTemplate"):
        group = spec.get("leaderWorkerTemplate")
        return group.get(part) if group is not None else None
    return spec.get("template") if not part else None


def _pod_specs(doc: Document, obj: Located, notes: list[str]) -> list[_PodSpec]:
    """(pod spec, part, replicas, hosts per engine, containers) of a workload object; of any other
    object (a custom resource: RayService, KServe, Dynamo, AIBrix), every pod spec in it."""
    kind = text_of(obj.get("kind"))
    spec = obj.get("spec")
    if spec is None:
        return []
    if kind not in _WORKLOAD_KINDS:
        found: list[_PodSpec] = []
        _pod_specs_within(doc, spec, None, notes, found)
        return found
    count = whole_number(doc, spec.get("replicas"), "replicas", 0, 1_000_000, notes)
    if kind == "Pod":
        return [(spec, "", 1, 1, spec.each("containers"))]
    found = []
    if kind == "LeaderWorkerSet":
        template = spec.get("leaderWorkerTemplate")
        size = template.get("size") if template is not None else None
        nodes = whole_number(doc, size, "leaderWorkerTemplate.size", 1, 100_000, notes) or 1
        for part in ("leaderTemplate", "workerTemplate"):
            part_template = template.get(part) if template is not None else None
            pod = part_template.get("spec") if part_template is not None else None
            if pod is not None:
                found.append((pod, part, count, nodes, pod.each("containers")))
        return found
    template = spec.get("template")
    pod = template.get("spec") if template is not None else None
    if pod is not None:
        found.append((pod, "", count, 1, pod.each("containers")))
    return found


def _pod_specs_within(
    doc: Document, node: Located, replicas: int | None, notes: list[str], found: list[_PodSpec]
) -> None:
    """Every mapping under ``node`` with a ``containers`` list (a pod spec, wherever a custom resource puts
    one) or a ``mainContainer`` (Dynamo's extraPodSpec), with the replicas of the nearest mapping above
    that sets them."""
    if isinstance(node.value, list):
        for item in node.value:
            _pod_specs_within(doc, item, replicas, notes, found)
        return
    if not isinstance(node.value, dict):
        return
    if isinstance(node.get("replicas") and node.get("replicas").value, int):
        replicas = whole_number(doc, node.get("replicas"), "replicas", 0, 1_000_000, notes)
    containers = [c for c in node.each("containers") if isinstance(c.value, dict)]
    main = node.get("mainContainer")
    if main is not None and isinstance(main.value, dict):
        containers.append(main)
    if containers:
        found.append((node, node.path.removeprefix("spec."), replicas, 1, containers))
    for key, child in node.value.items():
        if key not in ("containers", "mainContainer", "initContainers"):
            _pod_specs_within(doc, child, replicas, notes, found)


def _parse_kubernetes(doc: Document, objects: list[Located], reading: Reading) -> None:
    deployment, totals, lmcache_keys = reading.deployment, reading.totals, reading.lmcache_keys
    config_maps = {
        text_of(o.get("metadata").get("name")): o
        for o in objects
        if o.get("kind") is not None
        and text_of(o.get("kind")) == "ConfigMap"
        and o.get("metadata") is not None
        and o.get("metadata").get("name") is not None
    }
    for cm in config_maps.values():
        for key, item in (cm.get("data").value if cm.get("data") is not None else {}).items():
            if key.endswith((".yaml", ".yml")) and isinstance(item.value, str):
                maybe_lmcache_config(doc.name, item.value, deployment, totals, item.line + 1, lmcache_keys, key)
    deployment.claims += [c for c in (claim_spec(doc, o) for o in objects) if c is not None]
    patched: list[str] = []  # the vLLM workloads read as patches for want of a selector (said once, in a note)
    for obj in objects:
        kind = text_of(obj.get("kind")) if obj.get("kind") else ""
        meta = obj.get("metadata")
        name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
        if kind == "Secret":
            deployment.hygiene += secret_data_issues(doc, obj)
        if kind == "Service":
            deployment.services.append(name)
            deployment.service_specs.append(_service_spec(doc, obj, name))
        if kind == "Ingress":
            deployment.ingress_backends += _ingress_backends(doc, obj, name)
        served: set[int] = set()  # ids of the containers that run vLLM
        own_hygiene: set[int] = set()  # ids of the containers read as LMCache servers
        pods = _pod_specs(doc, obj, deployment.notes)
        a_patch = _a_patch(obj, kind)  # the object's, for each of its containers
        for pod_spec, part, replicas, nodes, containers in pods:
            gpu = gpu_label(pod_spec)
            pod = Pod(
                key=f"{doc.name}:{kind}/{name}" + (f":{part}" if part else ""),
                labels=_labels(_template_of(obj, part)) if kind in _WORKLOAD_KINDS else {},
                host_network=pod_spec.get("hostNetwork") is not None and pod_spec.get("hostNetwork").value is True,
                namespace=_namespace(obj),
                service_links=kind in _WORKLOAD_KINDS
                and not (
                    pod_spec.get("enableServiceLinks") is not None and pod_spec.get("enableServiceLinks").value is False
                ),
            )
            for container in containers:
                deployment.pod_ports.setdefault(pod.key, []).extend(declared_ports(doc, container))
                image_item = container.get("image")
                image = text_of(image_item) if image_item is not None else None
                command = container.get("command").items() if container.get("command") else []
                args_item = container.get("args")
                if args_item is not None and isinstance(args_item.value, str):
                    args_words = script_words(doc, args_item)
                else:
                    args_words = words_from_list(doc, args_item.items() if args_item else [], "")
                argv = words_from_list(doc, command, "") + args_words
                env, notes = container_env(doc, container, config_maps, "")
                env = _lws_env(part, nodes, container) + env if kind == "LeaderWorkerSet" else env
                variables = k8s_variables(env)
                argv = [(k8s_expand(word, variables), where) for word, where in argv]
                if kind in SERVING_RUNTIME_KINDS:
                    runtime_placeholders(argv, variables)
                found = launch_from_argv(
                    doc, argv, image, overridden=bool(command), variables=variables, notes=deployment.notes
                )
                cname = text_of(container.get("name")) if container.get("name") else "?"
                if found is None and kind in _KSERVE_KINDS and cname == "main":
                    decode_of_pd = part in ("template", "worker") and obj.get("spec").get("prefill") is not None
                    found = _kserve_launch(doc, env, [] if command else argv, "8001" if decode_of_pd else "8000")
                if found is None and not command and _only_vllm_args(argv, image, cname):
                    found = Launch(args=argv)
                if found is None and not command and looks_like_vllm_args([w for w, _ in argv], reading.vllm_options):
                    found = Launch(args=argv[1:] if argv[0][0] == "serve" else argv)  # an entrypoint of `vllm`
                    deployment.notes.append(_args_alone_note(doc, container, image, argv, reading.vllm_options))
                if found is None and command and _start_script(argv[: len(argv) - len(args_words)]):
                    found = _script_given_vllm_args(doc, container, argv, args_words, reading)
                label = f"{kind}/{name}" + (f" {part}" if part else "") + f" container {cname}"
                if kind in _WORKLOAD_KINDS:
                    before = len(deployment.cache_servers)
                    _other_servers(doc, label, (pod, pod_spec, container), argv, image, env, reading, found is None)
                    if len(deployment.cache_servers) > before:
                        own_hygiene.add(id(container))  # an LMCache server's container is judged as its own
                if found is None:
                    found = _script_run(command, argv, image, reading)
                if found is None:
                    continue
                args, script_env = found.args, found.env
                deployment.notes += notes
                limits = container.get("resources")
                memory = None
                if limits is not None and limits.get("limits") is not None:
                    mem = limits.get("limits").get("memory")
                    memory = memory_limit(doc, mem, deployment.notes, "resources.limits.memory")
                workload = Workload(
                    name=label,
                    installs=found.pins,
                    file=doc.name,
                    source="kubernetes",
                    image=image,
                    image_location=node_location(doc, image_item) if image_item is not None else None,
                    env=env + script_env,
                    gpu_label=gpu,
                    memory_limit_gib=memory,
                    replicas=replicas,
                    nodes=nodes,
                    location=Location(file=doc.name, line=container.line, path=container.path or None),
                    # a patch (without an image, or without the selector its kind needs), a base whose image an
                    # overlay sets, or a pod an operator builds: GPUs and /dev/shm are set where the pod is completed
                    pod_elsewhere=image is None or placeholder_image(image) or kind not in _WORKLOAD_KINDS or a_patch,
                )
                if image is not None and a_patch:
                    patched.append(f"{kind}/{name}")
                pod_resources(doc, workload, pod_spec, container, deployment.notes)
                evaluated = frozenset(
                    {"VLLM_ADDITIONAL_ARGS"} if kind in _KSERVE_KINDS else ()
                )  # its template evals it
                deployment.referenced_env |= evaluated
                defined = _defined_first(kind, container, config_maps)
                workload.hygiene += container_hygiene(doc, container, defined, vllm=True, evaluated=evaluated)
                workload.claims = pod_claims(doc, pod_spec)
                workload.mounts_known = not workload.pod_elsewhere
                served.add(id(container))
                _pod_network(doc, workload, pod, container)
                workload.gpus_stated = not workload.pod_elsewhere and not _claims_devices(pod_spec, container)
                workload.ray_cluster = argv_starts_ray([w for w, _ in argv])
                started_as_written(workload, found, deployment.notes)
                read_args(workload, args, variables.unresolved | found.unresolved, found.emptied)
                deployment.workloads.append(workload)
        if served:
            deployment.hygiene += _beside_vllm(doc, kind, pods, served | own_hygiene, config_maps)
    if patched:
        named = ", ".join(dict.fromkeys(patched[:5])) + (f" and {len(patched) - 5} more" if len(patched) > 5 else "")
        deployment.notes.append(
            f"{doc.name}: {named} {'has' if len(patched) == 1 else 'have'} no spec.selector and no pod labels, "
            "which the API server requires: read as a patch (a kustomize overlay's); the pod's GPUs, /dev/shm and "
            "probes are its base's and are not judged here"
        )


def _defined_first(kind: str, container: Located, config_maps: dict[str, Located]) -> list[str] | None:
    """Names a container's env[] may refer to with $(VAR) before its own entries: what its envFrom
    ConfigMaps and the LeaderWorkerSet controller set; None when an envFrom source is not in the input."""
    names = ["LWS_GROUP_SIZE", "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX"] if kind == "LeaderWorkerSet" else []
    for source in container.each("envFrom"):
        ref = source.get("configMapRef")
        cm = config_maps.get(text_of(ref.get("name"))) if ref is not None and ref.get("name") is not None else None
        data = cm.get("data") if cm is not None else None
        if data is None or not isinstance(data.value, dict):
            return None  # a Secret or a ConfigMap the files do not hold: its names are not known
        prefix = text_of(source.get("prefix")) if source.get("prefix") is not None else ""
        names += [prefix + key for key in data.value]
    return names


def _beside_vllm(
    doc: Document, kind: str, pods: list[_PodSpec], served: set[int], config_maps: dict[str, Located]
) -> list[HygieneIssue]:
    """The hygiene of the other containers of an object that runs vLLM (sidecars, init containers, the
    worker pods of a LeaderWorkerSet): their env values and images."""
    issues = []
    for pod_spec, _, _, _, containers in pods:
        for container in [*containers, *pod_spec.each("initContainers")]:
            if id(container) in served or not isinstance(container.value, dict):
                continue
            issues += container_hygiene(doc, container, _defined_first(kind, container, config_maps), vllm=False)
    return issues


def _script_run(
    command: list[Located], argv: list[tuple[str, Location]], image: str | None, reading: Reading
) -> Launch | None:
    """A vLLM image's container whose command runs a script the image holds (`/usr/local/bin/run.sh`): its
    vLLM command is in the script, which the files do not hold, so its options are not known. Not a shell or
    an interpreter given its script in the files (read already), nor an LMCache server or a P/D proxy."""
    texts = [w for w, _ in argv]
    if not command or image is None or not is_vllm_image(image) or script_index(texts) is not None:
        return None
    if not _is_script(texts[0], (".sh", ".bash", ".py")):
        return None
    if cache_server_args(argv, reading.servers) is not None or proxy_launch(argv, reading.proxy_scripts) is not None:
        return None
    text = f"{' '.join(texts)[:80]}: a script in the image {image}; the vLLM command it runs is not in the files"
    return Launch(options_unknown=clip(text, 200))


def _is_script(word: str, extensions: tuple[str, ...]) -> bool:
    """A program that is a script of the image (`/usr/local/bin/run.sh`, `start-server`), not a shell, an
    interpreter or `vllm` itself."""
    program = word.rsplit("/", 1)[-1]
    if program in _INTERPRETERS or program.startswith("python"):
        return False
    return program.endswith(extensions) or _STARTER.match(program) is not None


def _start_script(command: list[tuple[str, Location]]) -> bool:
    """A command that is one start script (`/scripts/startup.sh`, `run`), not a shell or an interpreter."""
    return len(command) == 1 and _is_script(command[0][0], (".sh", ".bash"))


def _script_given_vllm_args(
    doc: Document,
    container: Located,
    argv: list[tuple[str, Location]],
    args: list[tuple[str, Location]],
    reading: Reading,
) -> Launch | None:
    """A start script the files do not hold, given arguments that are `vllm serve` options: read as the options
    it passes on to vLLM (`exec vllm serve "$@"`), said in a note."""
    if not args or not looks_like_vllm_args([w for w, _ in args], reading.vllm_options):
        return None
    reading.deployment.notes.append(
        f"{node_location(doc, container)}: {clip(argv[0][0], 60)} is a script the files do not hold, given "
        "`vllm serve` options as its arguments: read as the options it passes on to vLLM; what else it does "
        "is not reviewed"
    )
    return Launch(args=args)


_INTERPRETERS = {
    "sh", "bash", "dash", "ash", "zsh", "env", "exec", "vllm", "tini", "dumb-init", "uv", "torchrun", "ray",
}  # fmt: skip
# Names a start script has when it has no extension (`run`, `start-server`, `entrypoint`, `launch_vllm`).
_STARTER = re.compile(r"(run|start|entrypoint|docker-entrypoint|launch|serve)([-_.]|$)")


def _args_alone_note(
    doc: Document, container: Located, image: str | None, argv: list[tuple[str, Location]], options: frozenset[str]
) -> str:
    total, ours, _ = vllm_option_share([w for w, _ in argv], options)
    return (
        f"{node_location(doc, container)}: read as a vLLM server by its arguments ({ours} of {total} are options "
        f"`vllm serve` takes), though its image {image or '(none)'} does not name vLLM: its entrypoint is taken to "
        "be the server"
    )


def _only_vllm_args(argv: list[tuple[str, Location]], image: str | None, name: str) -> bool:
    """Arguments alone that start with vLLM's options, in a container that names no image (a kustomize
    patch of one whose base the files may not hold) or whose image or name says vllm: the image's
    entrypoint is the vLLM server. Not llm-d's simulator, which takes vLLM's options without running vLLM."""
    named = image is None or is_vllm_image(image) or is_vllm_image(name)
    return named and not is_simulator(image) and starts_with_vllm_options([word for word, _ in argv])


# The launch KServe's LLMInferenceService template (config-llm-template, config-llm-prefill-template of
# kserve/kserve) makes in its `main` container: `eval "exec vllm serve /mnt/models --served-model-name …
# --port 8000 … ${VLLM_ADDITIONAL_ARGS} $@"`, so the variable's words, shell-parsed, are vLLM arguments,
# and the container's args after them. The decode pods of a P/D service (config-llm-decode-template) run
# vLLM on port 8001, behind the routing sidecar on 8000.
_KSERVE_KINDS = {"LLMInferenceService", "LLMInferenceServiceConfig"}


def _kserve_launch(doc: Document, env: list[EnvUse], argv: list[tuple[str, Location]], port: str) -> Launch | None:
    extra = next((use for use in env if use.name == "VLLM_ADDITIONAL_ARGS"), None)
    where = extra.location if extra is not None else Location(file=doc.name, line=None)
    template = [
        (word, Location(file=doc.name, line=None, path="(KServe's vllm serve template)"))
        for word in ("/mnt/models", "--port", port)
    ]
    words: list[tuple[str, Location]] = []
    if extra is not None and extra.value:
        words = [(t.text, where) for t in tokenize_shell(extra.value) if not t.separator]
    if extra is None and not argv:
        return None
    return Launch(args=template + words + argv)


def _lws_env(part: str, size: int, container: Located) -> list[EnvUse]:
    """The variables LeaderWorkerSet sets in every container of a group (its controller's pod
    webhook): the group's size, the leader's address, the pod's index in the group."""
    where = Location(file="LeaderWorkerSet", line=None, path="(set by the LeaderWorkerSet controller)")
    return [
        EnvUse(name="LWS_GROUP_SIZE", value=str(size), location=where),
        EnvUse(
            name="LWS_LEADER_ADDRESS",
            value=None,
            reference="the leader pod's address, known at run time",
            location=where,
        ),
        EnvUse(
            name="LWS_WORKER_INDEX",
            value="0" if part == "leaderTemplate" else None,
            reference=None if part == "leaderTemplate" else "the worker's index in its group",
            location=where,
        ),
    ]


def _other_servers(
    doc: Document,
    label: str,
    where: tuple[Pod, Located, Located],
    argv: list[tuple[str, Location]],
    image: str | None,
    env: list[EnvUse],
    reading: Reading,
    no_vllm: bool,
) -> None:
    """An LMCache server the container starts (alone, or beside vLLM in one script), or the P/D proxy it runs,
    as objects of the deployment."""
    pod, pod_spec, container = where
    server = cache_server_args(argv, reading.servers)
    deployment = reading.deployment
    if server is not None:
        at = Location(file=doc.name, line=container.line, path=container.path or None)
        image_item = container.get("image")
        image_at = node_location(doc, image_item) if image_item is not None else None
        cache = cache_server(label, doc.name, server, at, image, env, image_location=image_at, words=argv)
        cache.hygiene += env_expansion_issues(doc, container, None) + duplicate_env_issues(doc, container)
        pod_resources(doc, cache, pod_spec, container, deployment.notes)
        _pod_network(doc, cache, pod, container)
        deployment.cache_servers.append(cache)
        return
    proxy = proxy_launch(argv, reading.proxy_scripts) if no_vllm else None
    if proxy is not None:
        script, words, at = proxy
        launch = ProxyLaunch(script=script, words=words, pod=pod.key, host_network=pod.host_network, location=at)
        deployment.proxy_launches.append(launch)


class Pod(NamedTuple):
    """What the containers of one pod share: its key, labels, network and namespace."""

    key: str
    labels: dict[str, str]
    host_network: bool
    namespace: str | None = None
    service_links: bool = False


def _namespace(obj: Located) -> str | None:
    meta = obj.get("metadata")
    item = meta.get("namespace") if meta is not None else None
    return text_of(item) if item is not None and isinstance(item.value, str) else None


def _pod_network(doc: Document, workload: Workload, pod: Pod, container: Located) -> None:
    """The pod the container runs in, its labels and network, and the container's ports and probes' ports."""
    workload.pod, workload.pod_labels, workload.host_network = pod.key, pod.labels, pod.host_network
    workload.namespace, workload.service_links = pod.namespace, pod.service_links
    workload.ports = declared_ports(doc, container)
    workload.probe_ports = handler_ports(doc, container)


def declared_ports(doc: Document, container: Located) -> list[PortRef]:
    """A container's ports: each containerPort with its name."""
    found = []
    for item in container.each("ports"):
        number = item.get("containerPort")
        found.append(
            PortRef(
                what="containerPort",
                number=number.value if number is not None and isinstance(number.value, int) else None,
                name=text_of(item.get("name")) if item.get("name") is not None else None,
                location=node_location(doc, number if number is not None else item),
            )
        )
    return found


def _ingress_backends(doc: Document, ingress: Located, name: str) -> list[IngressBackend]:
    """The Services an Ingress (networking.k8s.io/v1) routes to: its defaultBackend and each rule's paths."""
    spec = ingress.get("spec")
    if spec is None:
        return []
    backends = [spec.get("defaultBackend")]
    for rule in spec.each("rules"):
        http = rule.get("http")
        backends += [path.get("backend") for path in (http.each("paths") if http is not None else [])]
    found = []
    for backend in backends:
        service = backend.get("service") if backend is not None else None
        if service is None or service.get("name") is None:
            continue
        port = service.get("port")
        number_or_name = port.get("number") or port.get("name") if port is not None else None
        found.append(
            IngressBackend(
                ingress=name,
                service=text_of(service.get("name")),
                port=port_ref(doc, "port", number_or_name) if number_or_name is not None else None,
                namespace=_namespace(ingress),
                location=node_location(doc, service.get("name")),
            )
        )
    return found


def _service_spec(doc: Document, service: Located, name: str) -> ServiceSpec:
    """A Service's selector and the port each of its ports sends to (targetPort, else port)."""
    spec = service.get("spec")
    selector = spec.get("selector") if spec is not None else None
    selected = (
        {str(k): text_of(v) for k, v in selector.value.items()}
        if selector is not None and isinstance(selector.value, dict)
        else {}
    )
    ports, targets = [], []
    for item in spec.each("ports") if spec is not None else []:
        if item.get("port") is not None:
            named = text_of(item.get("name")) if item.get("name") is not None else None
            ports.append(port_ref(doc, "port", item.get("port")).model_copy(update={"name": named}))
        target = item.get("targetPort") or item.get("port")
        if target is not None:
            targets.append(port_ref(doc, "targetPort" if item.get("targetPort") else "port", target))
    where = node_location(doc, service)
    kind = spec.get("type") if spec is not None else None
    meta = service.get("metadata")
    notes = meta.get("annotations") if meta is not None else None
    internal = (
        isinstance(notes.value, dict) and any("internal" in f"{k}={text_of(v)}".lower() for k, v in notes.value.items())
        if notes is not None
        else False
    )
    return ServiceSpec(
        name=name,
        file=doc.name,
        selector=selected,
        ports=ports,
        targets=targets,
        namespace=_namespace(service),
        type=text_of(kind) if kind is not None else "ClusterIP",
        restricted=internal or (spec is not None and spec.get("loadBalancerSourceRanges") is not None),
        location=where,
    )


def _claims_devices(pod_spec: Located, container: Located) -> bool:
    """Devices given through dynamic resource allocation (resourceClaims), which the files do not count."""
    resources = container.get("resources")
    return pod_spec.get("resourceClaims") is not None or (resources is not None and resources.get("claims") is not None)


class KubernetesReader:
    """Manifests: any YAML document with a ``kind`` and an ``apiVersion``."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(m.get("kind") is not None and m.get("apiVersion") is not None for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        _parse_kubernetes(doc, mappings(roots), reading)
        return True


READER = KubernetesReader()
