"""KServe InferenceService whose predictor names a model (``predictor.model``) served by KServe's
vLLM-backed runtimes: ``modelFormat: huggingface`` (kserve-huggingfaceserver, whose vLLM backend parses
the container's arguments with vLLM's own parser beside options of its own: python/huggingfaceserver/
huggingfaceserver/__main__.py of kserve/kserve) or ``vllm`` (kserve-vllmserver, which runs the OpenAI
server with ``--model=/mnt/models``). The runtime's container is built by KServe from a ServingRuntime,
which the files may not hold; the model's ``args``, ``env`` and ``resources`` go into it, and the
storage initializer puts ``storageUri`` at /mnt/models."""

from __future__ import annotations

from ..containers import memory_limit, script_words, words_from_list
from ..flags import normalize_flag, read_args
from ..model import Document, Location, Workload
from ..pods import container_env, gpu_label, pod_resources
from ..yaml_nodes import Located, node_location, text_of
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


def _vllm_words(words: list[tuple[str, Location]]) -> tuple[list[tuple[str, Location]], str | None]:
    """The arguments vLLM reads (the runtime's own options left out), and the --model_id given."""
    kept: list[tuple[str, Location]] = []
    model_id: str | None = None
    i = 0
    while i < len(words):
        word = words[i][0]
        name = normalize_flag(word)
        takes_next = "=" not in word and i + 1 < len(words) and not words[i + 1][0].startswith("-")
        if name in _SERVER_OPTIONS:
            value = word.split("=", 1)[1] if "=" in word else words[i + 1][0] if takes_next else None
            model_id = value if name == "--model-id" else model_id
            i += 2 if takes_next else 1
            continue
        if name not in _SERVER_SWITCHES:
            kept.append(words[i])
        i += 1
    return kept, model_id


def _read_isvc(doc: Document, root: Located, model: Located, reading: Reading) -> None:
    notes = reading.deployment.notes
    meta = root.get("metadata")
    name = text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
    predictor = root.get("spec").get("predictor")
    args = model.get("args")
    words = (
        script_words(doc, args)
        if args is not None and isinstance(args.value, str)
        else (words_from_list(doc, args.items() if args is not None else [], ""))
    )
    words, model_id = _vllm_words(words)
    storage = model.get("storageUri") or model.get("storage")
    image = model.get("image")
    workload = Workload(
        name=f"InferenceService/{name} predictor",
        file=doc.name,
        source="kubernetes",
        model=model_id or "/mnt/models",
        model_location=node_location(doc, storage) if storage is not None and not model_id else None,
        image=text_of(image) if image is not None else None,
        image_location=node_location(doc, image) if image is not None else None,
        location=node_location(doc, model),
        pod_elsewhere=True,  # KServe builds the pod from the ServingRuntime
        gpu_label=gpu_label(predictor),
        replicas=_replicas(predictor),
    )
    env, env_notes = container_env(doc, model, {}, "")
    workload.env = env
    notes += env_notes
    limits = model.get("resources").get("limits") if model.get("resources") is not None else None
    if limits is not None and limits.get("memory") is not None:
        workload.memory_limit_gib = memory_limit(doc, limits.get("memory"), notes, "resources.limits.memory")
    pod_resources(doc, workload, predictor, model, notes)
    read_args(workload, words)
    reading.deployment.workloads.append(workload)
    reading.totals.check(reading.deployment)


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
