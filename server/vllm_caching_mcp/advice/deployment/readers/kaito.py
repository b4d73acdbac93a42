"""KAITO's ``Workspace``: a preset model that the KAITO operator serves, with vLLM by default ("From KAITO
v0.4.0, the default runtime is switched to vLLM"; the annotation ``kaito.sh/runtime: transformers`` picks
Hugging Face transformers instead; kaito-project/kaito, website/docs/inference.md). Its vLLM options are
the ``vllm:`` section of the ``inference_config.yaml`` of the ConfigMap ``inference.config`` names; the
operator builds the pod, picks the image and the release, and passes the rest of the command."""

from __future__ import annotations

from ..flags import read_args
from ..model import Document, Location, Workload
from ..yaml_launches import config_args
from ..yaml_nodes import Located, load_yaml, node_location, text_of
from .base import Reading, mappings


def _is_workspace(root: Located) -> bool:
    return text_of(root.get("apiVersion")).startswith("kaito.sh/") and text_of(root.get("kind")) == "Workspace"


def _runtime(root: Located) -> str:
    metadata = root.get("metadata")
    annotations = metadata.get("annotations") if metadata is not None else None
    named = annotations.get("kaito.sh/runtime") if annotations is not None else None
    return text_of(named).lower() if named is not None else "vllm"


def _config_map(roots: list[Located], name: str) -> Located | None:
    for root in roots:
        metadata = root.get("metadata")
        if text_of(root.get("kind")) == "ConfigMap" and metadata is not None and text_of(metadata.get("name")) == name:
            return root
    return None


def _vllm_options(doc: Document, config_map: Located, reading: Reading) -> Located | None:
    """The `vllm:` mapping of the ConfigMap's inference_config.yaml, read at its own lines."""
    data = config_map.get("data")
    text = data.get("inference_config.yaml") if data is not None else None
    if text is None or not isinstance(text.value, str):
        return None
    roots = load_yaml(doc.name, text.value, reading.totals, text.text_line)
    section = roots[0].get("vllm") if roots and isinstance(roots[0].value, dict) else None
    return section if section is not None and isinstance(section.value, dict) else None


class KaitoReader:
    """Each KAITO Workspace that serves its preset with vLLM, with the options of its inference ConfigMap."""

    yaml = True
    partial = True  # the Secrets and Services beside it go on to the manifest reader

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return any(_is_workspace(m) for m in mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        found = mappings(roots)
        for root in (r for r in found if _is_workspace(r)):
            reading.taken.add(id(root))
            name = text_of(root.get("metadata").get("name")) if root.get("metadata") is not None else "?"
            if _runtime(root) != "vllm":
                reading.deployment.notes.append(
                    f"{node_location(doc, root)}: Workspace {name} runs the {_runtime(root)} runtime, not vLLM"
                )
                continue
            inference = root.get("inference")
            preset = inference.get("preset") if inference is not None else None
            model = preset.get("name") if preset is not None else None
            workload = Workload(
                name=f"Workspace/{name}",
                file=doc.name,
                source="kubernetes",
                location=Location(file=doc.name, line=root.line, path=root.path or None),
                pod_elsewhere=True,  # the operator builds the pod
            )
            args = (
                [("--model", node_location(doc, model)), (text_of(model), node_location(doc, model))] if model else []
            )
            config = inference.get("config") if inference is not None else None
            config_map = _config_map(found, text_of(config)) if config is not None else None
            options = _vllm_options(doc, config_map, reading) if config_map is not None else None
            if config_map is not None:
                reading.taken.add(id(config_map))
            if options is not None:
                args += config_args(doc, options, reading.vllm_options)
            read_args(workload, args)
            reading.deployment.workloads.append(workload)
            reading.deployment.notes.append(
                f"{workload.location}: Workspace {name} is served by KAITO with vLLM (its default runtime from KAITO "
                "v0.4.0): the operator builds the pod and picks the image and release, which these files do not say"
                + ("" if options is not None or config is None else f"; its ConfigMap {text_of(config)} is not here")
            )
        return True


READER = KaitoReader()
