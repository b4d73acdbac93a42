"""A model named by its Hugging Face Hub id: its config read from the Hub the way vLLM reads it at start-up.

vLLM started with ``--model owner/name`` (config format ``auto``) reads ``params.json`` when the
repository is in Mistral format (it has ``consolidated*.safetensors`` and ``params.json``), else
``config.json`` (wheel:vllm==0.33.0:vllm/transformers_utils/config.py:889-901,
vllm/transformers_utils/repo_utils.py:230-242). A Mistral ``params.json`` is turned into the
Hugging Face keys as vLLM's adapter does (vllm/transformers_utils/configs/mistral.py:146-197), with
the repository's ``config.json`` filling the keys it lacks (config.py:492-501, mistral.py:86-87) and
``max_position_embeddings`` defaulting as vLLM defaults it (config.py:483-488, 1569-1590).

The weights side comes from ``model.safetensors.index.json`` where the repository has one: its
``metadata.total_size`` is the bytes of every tensor as stored, which vLLM loads and splits over
the ranks; a repository with a single ``model.safetensors`` gives the same from that file's header
(two range requests, never the tensors). Without either the bytes are not known from the Hub, and the
answer asks for ``weights_gib_per_gpu`` or ``params_total_b``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..http_client import ConfigError, Deadline
from ..hub import HubClient, HubError, HubFile, RepoListing, is_repo_id
from .common import AdviceError
from .model_config import Architecture, architecture_from_hf_config

HUB_DEADLINE_SECONDS = 20.0  # the whole look-up; a worker's wall-clock bound is far longer
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
client_factory: Callable[[], HubClient] = HubClient.from_env

__all__ = ["HubModel", "RepoNotFound", "architecture_from_hub", "is_repo_id"]


@dataclasses.dataclass(frozen=True)
class HubModel:
    arch: Architecture
    source: str  # where the config came from: repository, commit, Hub or cache
    weights_bytes: int | None  # safetensors index total_size


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} days"


def _from_where(client: HubClient, files: list[HubFile], listing: RepoListing) -> str:
    ages = [listing.age_seconds, *(f.age_seconds for f in files)]
    failures = [x for x in (listing.failure, *(f.failure for f in files)) if x]
    cached = listing.origin == "cache" or any(f.origin == "cache" for f in files)
    if not cached:
        return f"from {client.service}"
    why = f"; {client.service} was not reached: {failures[0]}" if failures else " (within the cache's TTL)"
    return f"from the on-disk cache, fetched {_age(max(ages))} ago{why}"


class RepoNotFound(AdviceError):
    """The Hub has no repository of that id (or shows it to no one without access)."""


def _fail(repo: str, exc: HubError, what: str) -> AdviceError:
    if exc.reason == "not_found" and what == "file list":
        return RepoNotFound("model", f"{repo}: {exc.detail}. Check the id (owner/name, as on the model's page).")
    hint = {
        "not_found": " Check the id (owner/name, as on the model's page).",
        "offline_requested": f" Nothing for {repo} is cached yet: run once with the Hub reachable.",
    }.get(exc.reason, "")
    return AdviceError("model", f"{repo}: cannot read its {what}: {exc.detail}.{hint}")


def architecture_from_hub(repo: str) -> HubModel:
    """The layout of the model ``repo`` (owner/name) from its Hub config, and the bytes of its weights."""
    try:
        client = client_factory()
    except ConfigError as exc:
        raise AdviceError("model", f"cannot ask the Hub: {exc}") from None
    deadline = Deadline(HUB_DEADLINE_SECONDS)
    with client:
        try:
            listing = client.listing(repo, deadline)
        except HubError as exc:
            raise _fail(repo, exc, "file list") from None
        revision = listing.commit or "main"
        names = set(listing.files)
        fetched: list[HubFile] = []
        raw = _config(client, repo, revision, names, deadline, fetched)
        weights = _weights_bytes(client, repo, revision, names, deadline, fetched)
        source = f"{repo}" + (f" at commit {listing.commit[:12]}" if listing.commit else "")
        source += f", {_from_where(client, fetched, listing)}"
    try:
        arch = architecture_from_hf_config(raw, name=repo)
    except AdviceError as exc:
        message = str(exc).removeprefix(f"{exc.field}: ")
        raise AdviceError("model", f"{repo}: {message}") from None
    if raw.get(_FROM_PARAMS):  # vLLM builds a params.json config itself, not through AutoConfig (mistral.py:89)
        arch = arch.model_copy(update={"model_type": None})
    return HubModel(arch=arch, source=source, weights_bytes=weights)


def _get(client: HubClient, repo: str, revision: str, name: str, deadline: Deadline, fetched: list[HubFile]) -> Any:
    try:
        found = client.get_json(client.file_url(repo, name, revision), deadline)
    except HubError as exc:
        raise _fail(repo, exc, name) from None
    fetched.append(found)
    return found.body


def _config(
    client: HubClient, repo: str, revision: str, names: set[str], deadline: Deadline, fetched: list[HubFile]
) -> dict[str, Any]:
    """config.json, or params.json turned into its keys where vLLM reads the repository as Mistral format."""
    mistral = "params.json" in names and any(n.startswith("consolidated") and n.endswith(".safetensors") for n in names)
    if not mistral:
        if "config.json" not in names:
            raise AdviceError(
                "model",
                f"{repo} has no config.json (nor a Mistral-format params.json): vLLM cannot start from it either",
            )
        config: dict[str, Any] = _get(client, repo, revision, "config.json", deadline, fetched)
        return config
    params: dict[str, Any] = _get(client, repo, revision, "params.json", deadline, fetched)
    hf: dict[str, Any] = (
        _get(client, repo, revision, "config.json", deadline, fetched) if "config.json" in names else {}
    )
    return mistral_params_to_hf(params, hf)


def _weights_bytes(
    client: HubClient, repo: str, revision: str, names: set[str], deadline: Deadline, fetched: list[HubFile]
) -> int | None:
    if INDEX_FILE not in names:
        if SINGLE_FILE not in names:
            return None
        try:  # one file, no index: its header says the bytes (what huggingface_hub's get_safetensors_metadata reads)
            found = client.safetensors_bytes(client.file_url(repo, SINGLE_FILE, revision), deadline)
        except HubError as exc:
            raise _fail(repo, exc, f"{SINGLE_FILE} header") from None
        fetched.append(found)
        return int(found.body["total_size"])
    index = _get(client, repo, revision, INDEX_FILE, deadline, fetched)
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float) or not 0 < total < 2**50:
        raise AdviceError("model", f"{repo}: {INDEX_FILE} has no metadata.total_size as a positive byte count")
    return int(total)


# Mistral key -> Hugging Face key (vllm/transformers_utils/configs/mistral.py:148-155).
_MISTRAL_KEYS = {
    "dim": "hidden_size",
    "norm_eps": "rms_norm_eps",
    "n_kv_heads": "num_key_value_heads",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "hidden_dim": "intermediate_size",
}
_MISTRAL_DEFAULT_MAX_POSITIONS = 128_000  # config.py:1570, mistral.py:161


def mistral_params_to_hf(params: dict[str, Any], hf: dict[str, Any]) -> dict[str, Any]:
    """params.json as the Hugging Face config vLLM builds from it (the keys the sizing reads)."""
    config = dict(params)
    if config.get("max_position_embeddings") is None:
        text = hf.get("text_config") if isinstance(hf.get("text_config"), dict) else hf
        found = text.get("max_position_embeddings") if isinstance(text, dict) else None
        config["max_position_embeddings"] = found or _MISTRAL_DEFAULT_MAX_POSITIONS
    for key, new_key in _MISTRAL_KEYS.items():
        if key in config:
            config[new_key] = config.pop(key)
    window = config.get("sliding_window")
    layers = config.get("num_hidden_layers")
    if window and isinstance(layers, int) and layers > 0:  # mistral.py:176-196
        if isinstance(window, list) and window:
            kinds = window * (layers // len(window))
            config["layer_types"] = ["full_attention" if k is None else "sliding_attention" for k in kinds]
            config["sliding_window"] = next((w for w in window if w is not None), None)
        elif isinstance(window, int) and config.get("layer_types") is None:
            config["layer_types"] = ["sliding_attention"] * layers
    quantization = config.pop("quantization", None)
    if isinstance(quantization, dict) and quantization.get("qformat_weight") == "fp8_e4m3":  # mistral.py:199-211
        config["quantization_config"] = {"quant_method": "fp8"}
    moe = config.get("moe")
    if isinstance(moe, dict) and (moe.get("num_shared_experts") or 0) > 0:  # mistral.py:27-37: Mistral Large 3
        config.update(model_type="deepseek_v3", architectures=["MistralLarge3ForCausalLM"])
    else:
        config["architectures"] = ["MixtralForCausalLM" if moe else "MistralForCausalLM"]
    config.setdefault("model_type", "transformer")
    for key, value in hf.items():  # mistral.py:86-87: the HF config fills what params.json lacks
        config.setdefault(key, value)
    config[_FROM_PARAMS] = True
    return config


_FROM_PARAMS = "_vllm_caching_from_params_json"  # marks a config made from params.json (no reader reads it)
