"""Whether a release of vLLM can load a model's config and build its model class at all.

vLLM refuses a model before any KV is planned in two places, and size_offload refuses where it does, with
its reason (knowledge/model_registry.yaml, read from each release's wheel):

1. Loading the config: transformers' ``AutoConfig`` must know the ``model_type``, or vLLM must have its
   own config class for it (``_CONFIG_REGISTRY``, wheel:vllm==0.33.0:vllm/transformers_utils/config.py:122),
   or ``auto_map`` must name a remote ``AutoConfig`` class (loaded with ``--trust-remote-code``).
2. Resolving the architecture (``ModelRegistry``, wheel:vllm==0.33.0:vllm/model_executor/models/registry.py):
   an architecture in the release's ``_VLLM_MODELS`` is built by vLLM's own class; one it once served, or
   that moved to a plugin, is refused with that message (``_raise_for_unsupported``, registry.py:1221-1253);
   any other is served by the Transformers backend only if transformers exports a model class of that name
   or ``auto_map`` names a remote ``AutoModel`` (``_try_resolve_transformers``, registry.py:1266-1340), and is
   refused otherwise ("Model architectures [...] are not supported for now").

An architecture served through the Transformers backend is sized with the generic reader; the answer says so.
"""

from __future__ import annotations

import dataclasses

from ..knowledge import ModelRegistry, TransformersRead
from ..versions import Version
from .model_config import Architecture


@dataclasses.dataclass(frozen=True)
class Verdict:
    refusal: str | None = None  # vLLM will not start: why, in its words
    note: str | None = None  # vLLM starts, by a path the answer should name


def registry_verdict(registry: ModelRegistry, arch: Architecture, version: Version) -> Verdict:
    """What the release's registry and config loading make of the model read from a config."""
    if not registry.was_read(version):
        return Verdict()
    pinned = registry.transformers_for(version)
    refused = _config_refusal(registry, arch, version, pinned)
    if refused is not None:
        return Verdict(refusal=refused)
    name = arch.architecture
    if name is None or registry.serves(name, version):
        return Verdict(note=_remote_config_note(registry, arch, version, pinned))
    known = registry.refusal(name)
    if known is not None and known.why.startswith("until "):
        until = known.why.removeprefix("until ")
        return Verdict(
            refusal=f"vLLM {version} refuses it: 'Model architecture {name} was supported in vLLM until v{until}, "
            "and is not supported anymore' (its model registry); use a release of that line"
        )
    if known is not None:
        return Verdict(
            refusal=f"vLLM {version} refuses it: 'Model architecture {name} is not supported in-tree anymore'; "
            f"it is served by the plugin at {known.why.removeprefix('plugin ')}"
        )
    backend = (
        f"vLLM {version} has no class of its own for {name} (not in its model registry) and serves it through its "
        "Transformers backend"
    )
    if arch.remote_model:
        return Verdict(
            note=f"{backend}, with the remote model class config.json's auto_map names (needs "
            "--trust-remote-code); the figures are the generic reader's estimate"
        )
    if pinned is None:
        return Verdict(
            note=f"{backend} only if its transformers exports a model class of that name, which is not "
            "recorded for this release; the figures are the generic reader's estimate"
        )
    tf_version, tf = pinned
    if name in tf.model_classes:
        return Verdict(
            note=f"{backend} (transformers {tf_version} has the class); the figures are the generic reader's estimate"
        )
    return Verdict(
        refusal=f"vLLM {version} refuses it: 'Model architectures ['{name}'] are not supported for now': {name} is "
        f"not in its model registry, transformers {tf_version} (what it installs) has no class of that name, and "
        "config.json's auto_map names no remote AutoModel"
    )


def _remote_config_note(
    registry: ModelRegistry, arch: Architecture, version: Version, pinned: tuple[str, TransformersRead] | None
) -> str | None:
    """A config only auto_map's remote AutoConfig class can load: vLLM runs that code only when told to."""
    model_type = arch.model_type
    if not arch.remote_config or model_type is None or pinned is None or registry.has_own_config(model_type, version):
        return None
    tf_version, tf = pinned
    if model_type in tf.model_types:
        return None
    return (
        f"vLLM {version} loads this config through config.json's auto_map (model_type '{model_type}' is known "
        f"neither to transformers {tf_version} nor to vLLM's own config classes): start it with --trust-remote-code, "
        "or it refuses ('contains custom code which must be executed to correctly load the model')"
    )


def _config_refusal(
    registry: ModelRegistry, arch: Architecture, version: Version, pinned: tuple[str, TransformersRead] | None
) -> str | None:
    model_type = arch.model_type
    if model_type is None or pinned is None or arch.remote_config or registry.has_own_config(model_type, version):
        return None
    tf_version, tf = pinned
    if model_type in tf.model_types:
        return None
    return (
        f"vLLM {version} cannot load its config: model_type '{model_type}' is known neither to transformers "
        f"{tf_version} (what vLLM {version} installs; AutoConfig: 'Transformers does not recognize this "
        "architecture') nor to vLLM's own config classes, and config.json's auto_map names no remote AutoConfig"
    )
