"""production-stack's operator: a ``VLLMRuntime`` custom resource, from which the operator builds a
Deployment whose container runs `vllm serve MODEL --host 0.0.0.0 --port PORT` with options and
environment made from the fields, as deploymentForVLLMRuntime does (operator/internal/controller/
vllmruntime_controller.go of vllm-project/production-stack, commit 3310887f): each option below is
the one it appends for its field, LMCache's settings become the LMCACHE_* variables it sets."""

from __future__ import annotations

import json
from typing import Any

from ..containers import memory_limit, whole_number
from ..flags import read_args
from ..model import Document, EnvUse, Location, Workload
from ..yaml_nodes import Located, node_location, text_of
from .base import Reading, mappings

_OPERATOR = "(set by the production-stack operator)"

# (section, field, option): a whole number above 0 or a non-empty text is given as the option's value.
_VALUED = (
    ("model", "toolCallParser", "--tool-call-parser"),
    ("model", "maxModelLen", "--max-model-len"),
    ("model", "dtype", "--dtype"),
    ("vllmConfig", "tensorParallelSize", "--tensor-parallel-size"),
    ("model", "maxNumSeqs", "--max-num-seqs"),
    ("vllmConfig", "gpuMemoryUtilization", "--gpu_memory_utilization"),
    ("vllmConfig", "maxLoras", "--max_loras"),
)

# (section, field, option when true, option when false or absent; None: nothing)
_SWITCHES = (
    ("model", "enableLoRA", "--enable-lora", None),
    ("model", "enableTool", "--enable-auto-tool-choice", None),
    ("vllmConfig", "enableChunkedPrefill", "--enable-chunked-prefill", "--no-enable-chunked-prefill"),
    ("vllmConfig", "enablePrefixCaching", "--enable-prefix-caching", "--no-enable-prefix-caching"),
)

# lmCacheConfig field → the variables the operator sets when it is not empty ("True" for the switch)
_LMCACHE_ENV = {
    "cpuOffloadingBufferSize": ("LMCACHE_LOCAL_CPU", "LMCACHE_MAX_LOCAL_CPU_SIZE"),
    "diskOffloadingBufferSize": ("LMCACHE_LOCAL_DISK", "LMCACHE_MAX_LOCAL_DISK_SIZE"),
}


def _is_runtime(root: Located) -> bool:
    return text_of(root.get("kind")) == "VLLMRuntime" and root.get("spec") is not None


def _field(spec: Located, section: str, name: str) -> Any:
    """The field's Located, or None (typed Any as Located.get is: the resource is walked by hand)."""
    part = spec.get(section)
    return part.get(name) if part is not None else None


def _given(item: Located | None) -> bool:
    """Whether the operator takes the field: Go's zero value (0, "", false) is no value."""
    return item is not None and item.value not in (None, "", 0, False)


def _args(doc: Document, spec: Located) -> list[tuple[str, Location]]:
    operator = Location(file=doc.name, line=None, path=_OPERATOR)
    url, port = _field(spec, "model", "modelURL"), _field(spec, "vllmConfig", "port")
    args = [(text_of(url), node_location(doc, url))] if _given(url) else []
    args += [("--host", operator), ("0.0.0.0", operator)]
    if _given(port):
        args += [("--port", node_location(doc, port)), (text_of(port), node_location(doc, port))]
    for section, name, on, off in _SWITCHES:
        item = _field(spec, section, name)
        where = node_location(doc, item) if item is not None else operator
        chosen = on if item is not None and item.value is True else off
        if chosen is not None:
            args.append((chosen, where))
    for section, name, option in _VALUED:
        item = _field(spec, section, name)
        if _given(item):
            args += [(option, node_location(doc, item)), (text_of(item), node_location(doc, item))]
    extra = _field(spec, "vllmConfig", "extraArgs")
    args += [(text_of(i), node_location(doc, i)) for i in extra.items()] if extra is not None else []
    template = _field(spec, "model", "chatTemplate")
    if _given(template):
        args += [("--chat-template", node_location(doc, template)), ("/etc/chat-template.json", operator)]
    return args


def _env(doc: Document, spec: Located) -> tuple[list[EnvUse], list[tuple[str, Location]]]:
    """The variables the operator sets, and the --kv-transfer-config it adds for LMCache."""
    operator = Location(file=doc.name, line=None, path=_OPERATOR)
    v1 = _field(spec, "vllmConfig", "v1")
    on_v1 = v1 is not None and v1.value is True
    env = [EnvUse(name="VLLM_USE_V1", value="1" if on_v1 else "0", location=node_location(doc, v1) if v1 else operator)]
    lora = _field(spec, "model", "enableLoRA")
    if lora is not None and lora.value is True:
        env.append(EnvUse(name="VLLM_ALLOW_RUNTIME_LORA_UPDATING", value="True", location=node_location(doc, lora)))
    args: list[tuple[str, Location]] = []
    cache = spec.get("lmCacheConfig")
    enabled = cache.get("enabled") if cache is not None else None
    if enabled is not None and enabled.value is True:
        where = node_location(doc, enabled)
        env += [EnvUse(name=n, value=v, location=where) for n, v in (
            ("LMCACHE_LOG_LEVEL", "DEBUG"), ("LMCACHE_USE_EXPERIMENTAL", "True"), ("VLLM_RPC_TIMEOUT", "1000000"),
        )]  # fmt: skip
        connector = "LMCacheConnectorV1" if on_v1 else "LMCacheConnector"
        args = [("--kv-transfer-config", where), (json.dumps({"kv_connector": connector, "kv_role": "kv_both"}), where)]
        for name, (switch, size) in _LMCACHE_ENV.items():
            item = cache.get(name)
            if _given(item):
                at = node_location(doc, item)
                env += [
                    EnvUse(name=switch, value="True", location=at),
                    EnvUse(name=size, value=text_of(item), location=at),
                ]
        remote = cache.get("remoteUrl")
        if _given(remote):
            serde = cache.get("remoteSerde")
            env += [
                EnvUse(name="LMCACHE_REMOTE_URL", value=text_of(remote), location=node_location(doc, remote)),
                EnvUse(name="LMCACHE_REMOTE_SERDE", value=text_of(serde), location=node_location(doc, serde or remote)),
            ]
    given_env = _field(spec, "vllmConfig", "env")
    for item in given_env.items() if given_env is not None else []:
        if item.get("name") is not None:
            env.append(
                EnvUse(
                    name=text_of(item.get("name")), value=text_of(item.get("value")), location=node_location(doc, item)
                )
            )
    secret = _field(spec, "model", "hfTokenSecret")
    if secret is not None:
        env.append(
            EnvUse(name="HF_TOKEN", value=None, reference="valueFrom secretKeyRef", location=node_location(doc, secret))
        )
    return env, args


def _image(doc: Document, spec: Located) -> tuple[str, Location] | None:
    """registry + "/" + name, as the operator joins them."""
    image = _field(spec, "deploymentConfig", "image")
    name = image.get("name") if image is not None else None
    if name is None:
        return None
    registry = image.get("registry")
    return f"{text_of(registry)}/{text_of(name)}" if registry is not None else text_of(name), node_location(doc, name)


def _read_runtime(doc: Document, root: Located, reading: Reading) -> None:
    notes = reading.deployment.notes
    spec = root.get("spec")
    meta = root.get("metadata")
    name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
    image = _image(doc, spec)
    env, transfer = _env(doc, spec)
    workload = Workload(
        name=f"VLLMRuntime/{name} container vllm",
        file=doc.name,
        source="kubernetes",
        image=image[0] if image else None,
        image_location=image[1] if image else None,
        env=env,
        location=node_location(doc, spec),
        pod_elsewhere=True,  # the operator builds the pod
        replicas=whole_number(doc, _field(spec, "deploymentConfig", "replicas"), "replicas", 0, 1_000_000, notes),
    )
    resources = _field(spec, "deploymentConfig", "resources")
    if resources is not None:
        memory = resources.get("memory")
        if memory is not None:  # the operator sets it as both the request and the limit
            workload.memory_limit_gib = memory_limit(doc, memory, notes, "deploymentConfig.resources.memory")
            workload.memory_request_gib = workload.memory_limit_gib
        gpus = resources.get("gpu")
        workload.gpu_count = (
            whole_number(doc, gpus, "deploymentConfig.resources.gpu", 0, 1_000, notes, quantity=True)
            if gpus is not None
            else None
        )
    read_args(workload, _args(doc, spec) + transfer)
    reading.deployment.workloads.append(workload)
    reading.totals.check(reading.deployment)


class VLLMRuntimeReader:
    """production-stack's VLLMRuntime objects; the other objects of the file go to the manifest reader."""

    yaml = True
    partial = True

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_is_runtime(m) for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        for root in mappings(roots):
            if _is_runtime(root):
                _read_runtime(doc, root, reading)
                reading.taken.add(id(root))
        return True


READER = VLLMRuntimeReader()
