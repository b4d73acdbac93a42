"""KServe InferenceService whose predictor names a model (``predictor.model``) served by KServe's
vLLM-backed runtimes: ``modelFormat: huggingface`` (kserve-huggingfaceserver, whose vLLM backend parses
the container's arguments with vLLM's own parser beside options of its own: python/huggingfaceserver/
huggingfaceserver/__main__.py of kserve/kserve) or ``vllm`` (kserve-vllmserver, which runs the OpenAI
server with ``--model=/mnt/models``). The runtime's container is built by KServe from a ServingRuntime,
which the files may not hold; the model's ``args``, ``env`` and ``resources`` go into it, and the
storage initializer puts ``storageUri`` at /mnt/models."""

from __future__ import annotations

import re
from typing import NamedTuple

from ...common import AdviceError
from ..bounds import Totals
from ..containers import launch_from_argv, memory_limit, script_words, words_from_list
from ..flags import normalize_flag, read_args
from ..model import Document, EnvUse, Location, Workload
from ..pods import (
    SERVING_RUNTIME_KINDS,
    container_env,
    gpu_label,
    k8s_expand,
    k8s_variables,
    pod_resources,
    runtime_placeholders,
)
from ..yaml_nodes import Located, load_yaml, node_location, text_of
from .base import Reading, mappings

_VLLM_FORMATS = {"huggingface", "vllm"}

# Options of huggingfaceserver and of KServe's model server, not vLLM's: its parser takes them, and
# vLLM never sees them. The switches among them take no value.
_SERVER_OPTIONS = {
    "--model-name", "--model-dir", "--model-id", "--model-revision", "--max-length", "--backend", "--task",
    "--tensor-input-names", "--max-log-len", "--http-port", "--grpc-port", "--workers", "--max-threads",
    "--max-asyncio-workers", "--enable-grpc", "--enable-docs-url", "--enable-latency-logging",
    "--configure-logging", "--log-config-file", "--access-log-format", "--predictor-host",
    "--predictor-protocol", "--predictor-use-ssl", "--predictor-request-timeout-seconds",
}  # fmt: skip
_SERVER_SWITCHES = {
    "--disable-lower-case", "--disable-special-tokens", "--return-token-type-ids", "--return-probabilities",
}  # fmt: skip


def _model_of(root: Located) -> Located | None:
    spec = root.get("spec")
    predictor = spec.get("predictor") if spec is not None else None
    model = predictor.get("model") if predictor is not None else None
    if text_of(root.get("kind")) != "InferenceService" or model is None or not isinstance(model.value, dict):
        return None
    fmt = model.get("modelFormat")
    name = text_of(fmt.get("name")).lower() if fmt is not None and fmt.get("name") is not None else ""
    runtime = text_of(model.get("runtime")).lower()
    return model if name in _VLLM_FORMATS or "vllm" in runtime or "huggingface" in runtime else None


def _vllm_words(words: list[tuple[str, Location]]) -> list[tuple[str, Location]]:
    """The arguments vLLM reads: the runtime's own options left out, the --model_id given as the model."""
    kept: list[tuple[str, Location]] = []
    model_id: tuple[str, Location] | None = None
    i = 0
    while i < len(words):
        word = words[i][0]
        name = normalize_flag(word)
        takes_next = "=" not in word and i + 1 < len(words) and not words[i + 1][0].startswith("-")
        if name in _SERVER_OPTIONS:
            value = word.split("=", 1)[1] if "=" in word else words[i + 1][0] if takes_next else None
            if name == "--model-id" and value:  # huggingfaceserver gives vLLM the model id as its model
                model_id = (value, words[i + (0 if "=" in word else 1)][1])
            i += 2 if takes_next else 1
            continue
        if name not in _SERVER_SWITCHES:
            kept.append(words[i])
        i += 1
    return [model_id, *kept] if model_id is not None else kept


class _Runtime(NamedTuple):
    """A ServingRuntime among the documents: its document, the object, and its (first) container."""

    doc: Document
    root: Located
    container: Located


_RUNTIME_MARK = re.compile(r"^kind:\s*['\"]?(?:Cluster)?ServingRuntime\b", re.M)


def _runtimes(documents: tuple[Document, ...]) -> list[_Runtime]:
    """The ServingRuntimes of every document of the call (each read again here, as written: a kustomize
    build of one is not applied to it)."""
    found: list[_Runtime] = []
    for doc in documents:
        if not _RUNTIME_MARK.search(doc.text):
            continue
        try:
            roots = load_yaml(doc.name, doc.text, Totals())
        except AdviceError:
            continue  # its own reading says what is wrong with it
        for root in mappings(roots):
            spec = root.get("spec")
            if text_of(root.get("kind")) in SERVING_RUNTIME_KINDS and spec is not None:
                containers = [c for c in spec.each("containers") if isinstance(c.value, dict)]
                found += [_Runtime(doc, root, containers[0])] if containers else []
    return found


def _runtime_for(model: Located, runtimes: list[_Runtime]) -> _Runtime | None:
    """The runtime KServe serves the model with: the one ``runtime`` names, else one that supports its
    modelFormat and is auto-selected."""
    wanted = text_of(model.get("runtime"))
    fmt = model.get("modelFormat")
    fmt_name = text_of(fmt.get("name")).lower() if fmt is not None and fmt.get("name") is not None else ""
    for runtime in runtimes:
        meta = runtime.root.get("metadata")
        name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else ""
        if wanted:
            if name == wanted:
                return runtime
            continue
        for supported in runtime.root.get("spec").each("supportedModelFormats"):
            auto = supported.get("autoSelect")
            if text_of(supported.get("name")).lower() == fmt_name and auto is not None and auto.value is True:
                return runtime
    return None


def _args_of(doc: Document, container: Located) -> list[tuple[str, Location]]:
    args = container.get("args")
    if args is not None and isinstance(args.value, str):
        return script_words(doc, args)
    return words_from_list(doc, args.items() if args is not None else [], "")


def _read_isvc(doc: Document, root: Located, model: Located, reading: Reading) -> None:
    notes = reading.deployment.notes
    meta = root.get("metadata")
    name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
    predictor = root.get("spec").get("predictor")
    runtime = _runtime_for(model, _runtimes(reading.documents))
    container = runtime.container if runtime is not None else None
    image = model.get("image") or (container.get("image") if container is not None else None)
    image_doc = doc if model.get("image") is not None or runtime is None else runtime.doc
    workload = Workload(
        name=f"InferenceService/{name} predictor",
        file=doc.name,
        source="kubernetes",
        image=text_of(image) if image is not None else None,
        image_location=node_location(image_doc, image) if image is not None else None,
        location=node_location(doc, model),
        pod_elsewhere=runtime is None,  # KServe builds the pod from a ServingRuntime the files do not hold
        gpu_label=gpu_label(predictor),
        replicas=_replicas(predictor),
    )
    # the runtime's container, then the model's settings, which KServe lays over it
    holders: list[tuple[Document, Located, Located]] = [(doc, predictor, model)]
    if runtime is not None:
        holders.insert(0, (runtime.doc, runtime.root.get("spec"), runtime.container))
    env: list[EnvUse] = []
    for where, pod, holder in holders:
        found, env_notes = container_env(where, holder, {}, "")
        env += found
        notes += env_notes
        _resources(where, workload, pod, holder, notes)
    workload.env = env
    words, unresolved = _engine_words(doc, model, runtime, workload, notes)
    read_args(workload, words, unresolved)
    if workload.model is None:
        storage = model.get("storageUri") or model.get("storage")
        workload.model = "/mnt/models"  # where the storage initializer puts storageUri
        workload.model_location = node_location(doc, storage) if storage is not None else None
    if runtime is not None:
        notes.append(
            f"{workload.name}: read with the {text_of(runtime.root.get('kind'))} of {runtime.doc.name}, which serves it"
        )
    reading.deployment.workloads.append(workload)
    reading.totals.check(reading.deployment)


def _resources(doc: Document, workload: Workload, pod: Located, holder: Located, notes: list[str]) -> None:
    """The memory, GPUs and /dev/shm of the runtime's container, then the model's, which override them."""
    limits = holder.get("resources").get("limits") if holder.get("resources") is not None else None
    if limits is not None and limits.get("memory") is not None:
        workload.memory_limit_gib = memory_limit(doc, limits.get("memory"), notes, "resources.limits.memory")
    pod_resources(doc, workload, pod, holder, notes)


def _engine_words(
    doc: Document, model: Located, runtime: _Runtime | None, workload: Workload, notes: list[str]
) -> tuple[list[tuple[str, Location]], dict[str, str]]:
    """vLLM's words: the runtime's command and args with the model's args after them (KServe appends
    them), as a vLLM launch when the runtime's command starts one, else read past the runtime's own options."""
    words = _args_of(doc, model)
    if runtime is None:
        return _vllm_words(words), {}
    command = runtime.container.get("command")
    argv = words_from_list(runtime.doc, command.items() if command is not None else [], "")
    argv += _args_of(runtime.doc, runtime.container) + words
    variables = k8s_variables(workload.env)
    argv = [(k8s_expand(word, variables), where) for word, where in argv]
    runtime_placeholders(argv, variables)
    launch = launch_from_argv(runtime.doc, argv, workload.image, bool(command), variables, notes)
    if launch is not None:
        return launch.args, variables.unresolved | launch.unresolved
    return _vllm_words(argv[len(command.items()) if command is not None else 0 :]), variables.unresolved


def _replicas(predictor: Located) -> int | None:
    """The most pods the predictor scales to: maxReplicas, else a minReplicas above 0."""
    for key in ("maxReplicas", "minReplicas"):
        item = predictor.get(key)
        if item is not None and isinstance(item.value, int) and not isinstance(item.value, bool) and item.value > 0:
            return int(item.value)
    return None


class KServeReader:
    """InferenceService objects with a ``predictor.model`` of a vLLM-backed format or runtime; the other
    objects of the file (a ServingRuntime, Secrets) are left to the manifest reader."""

    yaml = True
    partial = True

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_model_of(m) is not None for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        for root in mappings(roots):
            model = _model_of(root)
            if model is not None:
                _read_isvc(doc, root, model, reading)
                reading.taken.add(id(root))
        return True


READER = KServeReader()
