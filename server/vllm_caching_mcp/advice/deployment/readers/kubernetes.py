"""Kubernetes manifests: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod, LeaderWorkerSet
(and the ConfigMaps their containers read), and any other object that holds pod specs (RayService,
KServe LLMInferenceService, Dynamo DynamoGraphDeployment, custom resources): a container there whose
command or arguments start vLLM is a vLLM workload."""

from __future__ import annotations

import json
import re

from ..bounds import Totals
from ..containers import launch_from_argv, memory_limit, script_words, started_as_written, whole_number, words_from_list
from ..flags import read_args
from ..launch import Launch, is_simulator, is_vllm_image, starts_with_vllm_options
from ..lmcache_config import maybe_lmcache_config
from ..model import Deployment, Document, EnvUse, Location, Workload
from ..shell import Shell, tokenize_shell
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

_WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod", "LeaderWorkerSet"}


_GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "node.kubernetes.io/instance-type")


def _k8s_env(
    doc: Document, container: Located, config_maps: dict[str, Located], prefix: str
) -> tuple[list[EnvUse], list[str]]:
    env: list[EnvUse] = []
    notes: list[str] = []
    by_ref: dict[str, str] = {}
    for source in container.get("envFrom").items() if container.get("envFrom") else []:
        ref = source.get("configMapRef") or source.get("secretRef")
        name = text_of(ref.get("name")) if ref and ref.get("name") else "?"
        cm = config_maps.get(name) if source.get("configMapRef") else None
        if cm is not None and cm.get("data") is not None:
            for key, item in (cm.get("data").value or {}).items():
                env.append(EnvUse(name=key, value=text_of(item), location=node_location(doc, item)))
        else:
            kind = "Secret" if source.get("secretRef") else "ConfigMap"
            notes.append(f"{doc.name}: envFrom {kind} {name!r} is not in the input; its variables are unknown")
    for item in container.get("env").items() if container.get("env") else []:
        name_item = item.get("name")
        if name_item is None:
            continue
        name = text_of(name_item)
        loc = node_location(doc, item, prefix)
        if item.get("value") is not None:
            value = text_of(item.get("value"))
            refs = re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value)
            if refs:
                origin = ", ".join(by_ref.get(r, f"$({r})") for r in refs)
                env.append(EnvUse(name=name, value=None, reference=origin, location=loc))
            else:
                env.append(EnvUse(name=name, value=value, location=loc))
        elif item.get("valueFrom") is not None:
            vf = item.get("valueFrom").plain()
            what = next(iter(vf), "valueFrom") if isinstance(vf, dict) else "valueFrom"
            detail = vf.get(what, {}) if isinstance(vf, dict) else {}
            described = f"valueFrom {what}" + (
                f" {detail.get('fieldPath') or detail.get('name') or ''}".rstrip() if isinstance(detail, dict) else ""
            )
            by_ref[name] = described
            env.append(EnvUse(name=name, value=None, reference=described, location=loc))
        else:
            env.append(EnvUse(name=name, value="", location=loc))
    return env, notes


def _gpu_label(pod_spec: Located) -> str | None:
    selector = pod_spec.get("nodeSelector")
    if selector is not None and isinstance(selector.value, dict):
        for label in _GPU_LABELS:
            if label in selector.value:
                return text_of(selector.value[label])
    affinity = pod_spec.get("affinity")
    if affinity is not None:
        text = json.dumps(affinity.plain(), default=str)  # dates and bytes, which YAML builds, as text
        for label in _GPU_LABELS:
            m = re.search(re.escape(label) + r'", "operator": "In", "values": \["([^"]+)"', text)
            if m:
                return m.group(1)
    return None


_PodSpec = tuple[Located, str, int | None, int, list[Located]]


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


def _parse_kubernetes(
    doc: Document, objects: list[Located], deployment: Deployment, totals: Totals, lmcache_keys: frozenset[str]
) -> None:
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
    for obj in objects:
        kind = text_of(obj.get("kind")) if obj.get("kind") else ""
        meta = obj.get("metadata")
        name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
        if kind == "Service":
            deployment.services.append(name)
        for pod_spec, part, replicas, nodes, containers in _pod_specs(doc, obj, deployment.notes):
            gpu = _gpu_label(pod_spec)
            for container in containers:
                image_item = container.get("image")
                image = text_of(image_item) if image_item is not None else None
                command = container.get("command").items() if container.get("command") else []
                args_item = container.get("args")
                if args_item is not None and isinstance(args_item.value, str):
                    args_words = script_words(doc, args_item)
                else:
                    args_words = words_from_list(doc, args_item.items() if args_item else [], "")
                argv = words_from_list(doc, command, "") + args_words
                env, notes = _k8s_env(doc, container, config_maps, "")
                env = _lws_env(part, nodes, container) + env if kind == "LeaderWorkerSet" else env
                variables = _k8s_variables(env)
                argv = [(_k8s_expand(word, variables), where) for word, where in argv]
                found = launch_from_argv(
                    doc, argv, image, overridden=bool(command), variables=variables, notes=deployment.notes
                )
                cname = text_of(container.get("name")) if container.get("name") else "?"
                if found is None and kind in _KSERVE_KINDS and cname == "main":
                    decode_of_pd = part in ("template", "worker") and obj.get("spec").get("prefill") is not None
                    found = _kserve_launch(doc, env, [] if command else argv, "8001" if decode_of_pd else "8000")
                if found is None and not command and _only_vllm_args(argv, image, cname):
                    found = Launch(args=argv)
                if found is None:
                    continue
                args, script_env = found.args, found.env
                deployment.notes += notes
                limits = container.get("resources")
                memory = None
                if limits is not None and limits.get("limits") is not None:
                    mem = limits.get("limits").get("memory")
                    memory = memory_limit(doc, mem, deployment.notes, "resources.limits.memory")
                label = f"{kind}/{name}" + (f" {part}" if part else "") + f" container {cname}"
                workload = Workload(
                    name=label,
                    installs=found.installs,
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
                    # a patch without an image, or a pod an operator builds: /dev/shm is set where the pod is
                    pod_elsewhere=image is None or kind not in _WORKLOAD_KINDS,
                )
                _pod_resources(doc, workload, pod_spec, container, deployment.notes)
                started_as_written(workload, found, deployment.notes)
                read_args(workload, args, variables.unresolved | found.unresolved, found.emptied)
                deployment.workloads.append(workload)


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


def _k8s_variables(env: list[EnvUse]) -> Shell:
    """The container's variables as Kubernetes expands $(VAR) with them, and as its shell sees them."""
    values = {use.name: use.value for use in env if use.value is not None}
    unresolved = {
        f"$({use.name})": f"{use.name} is set from {use.reference}, which the files do not show"
        for use in env
        if use.value is None
    }
    unresolved |= {"$" + k[2:-1]: v for k, v in unresolved.items()} | {
        "${" + k[2:-1] + "}": v for k, v in unresolved.items()
    }
    return Shell(values, unresolved)


_K8S_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _k8s_expand(word: str, variables: Shell) -> str:
    """A command or argument with $(VAR) expanded from the container's variables, as Kubernetes does:
    $$ is a literal $, and a reference to a variable the container does not have stays as written."""
    if "$" not in word:
        return word

    def one(m: re.Match[str]) -> str:
        if m.group() == "$$":
            return "$"
        name = m.group(1)
        if name in variables.values:
            return variables.values[name]
        variables.unresolved.setdefault(
            m.group(), f"{name} is not a variable of the container, so Kubernetes passes {m.group()} as written"
        )
        return m.group()

    return _K8S_REFERENCE.sub(one, word)


def _pod_resources(doc: Document, workload: Workload, pod_spec: Located, container: Located, notes: list[str]) -> None:
    """The container's memory request, its GPUs, /dev/shm (a memory emptyDir mounted there) and hostIPC."""
    resources = container.get("resources")
    for part in ("requests", "limits"):
        given = resources.get(part) if resources is not None else None
        if given is None:
            continue
        if part == "requests" and given.get("memory") is not None:
            workload.memory_request_gib = memory_limit(doc, given.get("memory"), notes, "resources.requests.memory")
        gpus = given.get("nvidia.com/gpu")
        if gpus is not None:
            workload.gpu_count = whole_number(doc, gpus, "nvidia.com/gpu", 0, 1_000, notes, quantity=True)
    workload.host_ipc = pod_spec.get("hostIPC") is not None and pod_spec.get("hostIPC").value is True
    mounts = {text_of(m.get("name")): text_of(m.get("mountPath")) for m in container.each("volumeMounts")}
    for volume in pod_spec.each("volumes"):
        if mounts.get(text_of(volume.get("name"))) != "/dev/shm":
            continue
        host_path = volume.get("hostPath")
        if host_path is not None and text_of(host_path.get("path")) == "/dev/shm":
            workload.shm_mounted = True  # the node's own /dev/shm, as with hostIPC: not the container's to size
            continue
        empty_dir = volume.get("emptyDir")
        if empty_dir is None:
            continue
        if empty_dir.get("medium") is not None and text_of(empty_dir.get("medium")) == "Memory":
            workload.shm_mounted = True
            size = empty_dir.get("sizeLimit")
            workload.shm_gib = (
                memory_limit(doc, size, notes, "emptyDir.sizeLimit") if size is not None else workload.memory_limit_gib
            )


class KubernetesReader:
    """Manifests: any YAML document with a ``kind`` and an ``apiVersion``."""

    yaml = True

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(m.get("kind") is not None and m.get("apiVersion") is not None for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        _parse_kubernetes(doc, mappings(roots), reading.deployment, reading.totals, reading.lmcache_keys)
        return True


READER = KubernetesReader()
