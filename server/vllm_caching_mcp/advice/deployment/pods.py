"""What the readers of Kubernetes pod specs share (a workload's pods, an operator's custom resource
that holds pod templates): a container's environment, $(VAR) expansion, GPU labels and its resources."""

from __future__ import annotations

import json
import re

from .containers import GPU_RESOURCES, is_accelerator, memory_limit, whole_number
from .model import Document, EnvUse, Location, Mount, Workload
from .shell import Shell
from .yaml_nodes import Located, node_location, text_of

_GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "node.kubernetes.io/instance-type")


def container_env(
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


def gpu_label(pod_spec: Located) -> str | None:
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


def k8s_variables(env: list[EnvUse]) -> Shell:
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


def k8s_expand(word: str, variables: Shell) -> str:
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


def pod_resources(doc: Document, workload: Workload, pod_spec: Located, container: Located, notes: list[str]) -> None:
    """The container's memory request, its GPUs, /dev/shm (a memory emptyDir mounted there) and hostIPC."""
    resources = container.get("resources")
    for part in ("requests", "limits"):
        given = resources.get(part) if resources is not None else None
        if given is None or not isinstance(given.value, dict):
            continue
        if part == "requests" and given.get("memory") is not None:
            workload.memory_request_gib = memory_limit(doc, given.get("memory"), notes, "resources.requests.memory")
            workload.memory_request_location = node_location(doc, given.get("memory"))
        if part == "limits" and given.get("memory") is not None:
            workload.memory_limit_location = node_location(doc, given.get("memory"))
            if workload.role == "lmcache-server":  # a vLLM container's limit is read with its launch
                workload.memory_limit_gib = memory_limit(doc, given.get("memory"), notes, "resources.limits.memory")
        for resource, amount in given.value.items():
            if not is_accelerator(str(resource)):
                continue
            workload.accelerator = str(resource)
            if str(resource) in GPU_RESOURCES:
                workload.gpu_count = whole_number(doc, amount, str(resource), 0, 1_000, notes, quantity=True)
                workload.gpu_location = node_location(doc, amount)
    if workload.accelerator is None and resources is not None:
        workload.gpu_location = node_location(doc, resources.get("limits") or resources)  # where one would go
    if container.get("volumeMounts") is not None:
        workload.shm_location = node_location(doc, container.get("volumeMounts"))  # where /dev/shm would be mounted
    workload.host_ipc = pod_spec.get("hostIPC") is not None and pod_spec.get("hostIPC").value is True
    workload.mounts = container_mounts(doc, pod_spec, container, notes)
    for shm in (m for m in workload.mounts if m.path == "/dev/shm"):
        if shm.backing == "host" and shm.host_path == "/dev/shm":
            workload.shm_mounted = True  # the node's own /dev/shm, as with hostIPC: not the container's to size
        elif shm.backing == "memory":
            workload.shm_mounted = True
            workload.shm_location = shm.size_location
            workload.shm_gib = shm.size_gib if shm.size_limited else workload.memory_limit_gib


# A KServe ServingRuntime's container is a template: KServe fills in `{{.Name}}` (the InferenceService's
# name) and the like when it builds the predictor's pod, and appends the InferenceService's args.
SERVING_RUNTIME_KINDS = {"ServingRuntime", "ClusterServingRuntime"}
_PLACEHOLDER = re.compile(r"\{\{\s*\.?[A-Za-z_][\w.]*\s*\}\}")


def runtime_placeholders(argv: list[tuple[str, Location]], variables: Shell) -> None:
    """Mark the values a runtime template leaves to KServe as not known from the files."""
    for word, _ in argv:
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        found = _PLACEHOLDER.search(value)
        if found is not None:
            variables.unresolved.setdefault(
                value, f"{found.group()} is filled in by KServe from each InferenceService that uses the runtime"
            )


_CONFIG_VOLUMES = ("configMap", "secret", "projected", "downwardAPI")


def container_mounts(doc: Document, pod_spec: Located, container: Located, notes: list[str]) -> list[Mount]:
    """The container's volumeMounts, each with what its pod volume is (an emptyDir's sizeLimit read as a
    Kubernetes quantity)."""
    volumes = {text_of(v.get("name")): v for v in pod_spec.each("volumes")}
    found: list[Mount] = []
    for item in container.each("volumeMounts"):
        path, volume = text_of(item.get("mountPath")), volumes.get(text_of(item.get("name")))
        if not path.startswith("/"):
            continue
        read_only = item.get("readOnly") is not None and item.get("readOnly").value is True
        mount = Mount(path=path, backing="other", read_only=read_only, location=node_location(doc, item))
        if volume is not None:
            _backed_by(doc, volume, mount, notes)
        found.append(mount)
    return found


def _backed_by(doc: Document, volume: Located, mount: Mount, notes: list[str]) -> None:
    """What the pod volume behind ``mount`` is: an emptyDir (its medium and sizeLimit), a hostPath, a claim, a
    config volume."""
    empty_dir, host_path = volume.get("emptyDir"), volume.get("hostPath")
    if empty_dir is not None:
        fields = empty_dir.value if isinstance(empty_dir.value, dict) else {}
        medium, limit = fields.get("medium"), fields.get("sizeLimit")
        mount.backing = "memory" if medium is not None and text_of(medium) == "Memory" else "node-disk"
        mount.size_limited = limit is not None
        mount.size_gib = memory_limit(doc, limit, notes, "emptyDir.sizeLimit") if limit is not None else None
        mount.size_location = node_location(doc, limit if limit is not None else empty_dir)
    elif host_path is not None:
        mount.backing = "host"
        path = host_path.get("path") if isinstance(host_path.value, dict) else None
        mount.host_path = text_of(path) if path is not None else None
    elif volume.get("persistentVolumeClaim") is not None:
        mount.backing = "claim"
    elif any(volume.get(kind) is not None for kind in _CONFIG_VOLUMES):
        mount.backing, mount.read_only = "config", True
