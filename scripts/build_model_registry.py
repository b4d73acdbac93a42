"""Generate knowledge/model_registry.yaml: the model architectures each vLLM release serves, and what it refuses.

    python scripts/build_model_registry.py --src-dir SRC_DIR [--out knowledge/model_registry.yaml]

SRC_DIR holds extracted wheels as ``vllm-0.33.0/vllm/...`` and ``transformers-5.20.2/transformers/...`` (the
layout `scripts/build_name_inventory.py` reads). Everything is read statically with ``ast``; nothing is imported.

For each vLLM release of knowledge/releases.yaml from 0.11.0 on that has an extracted wheel, from
``vllm/model_executor/models/registry.py``:

- the architectures of ``_VLLM_MODELS`` (the dicts it merges: text generation, pooling, multimodal,
  speculative decoding, the Transformers-backend ones), which ``ModelRegistry`` resolves;
- ``_PREVIOUSLY_SUPPORTED_MODELS`` and ``_OOT_SUPPORTED_MODELS``, which ``_raise_for_unsupported``
  refuses with their own message;
- the model types of vLLM's own config classes (``_CONFIG_REGISTRY`` in
  ``vllm/transformers_utils/config.py``), which load without transformers knowing them.

For the transformers a release installs (the newest its wheel's requirement admits, named in
TRANSFORMERS_OF below and read when extracted): the model types of ``CONFIG_MAPPING_NAMES`` (what
``AutoConfig`` loads) and the model class names the package exports (each ``modeling_*.py``'s
``__all__``), which vLLM's Transformers backend can serve an architecture its registry lacks with.

An architecture present in a run of consecutive releases read gets one entry, as in the name inventory.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

import yaml

from vllm_caching_mcp.knowledge import ModelRegistry
from vllm_caching_mcp.versions import Version
from wheel_trees import ExtractionError, released, runs

REPO = Path(__file__).resolve().parents[1]
VERIFIED_AT = "2026-12-02"
REGISTRY = "vllm/model_executor/models/registry.py"
CONFIGS = "vllm/transformers_utils/config.py"
OLDEST = Version("0.11.0")
# The transformers each release installs with it: the newest release its wheel's Requires-Dist admits when it
# was recorded (wheel:vllm==0.33.0 METADATA: transformers<5.21.0,>=5.16.1; wheel:vllm==0.34.0 METADATA:
# transformers<5.23.0,>=5.16.1).
TRANSFORMERS_OF = {"0.33.0": "5.20.2", "0.34.0": "5.22.2"}


def _module(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError) as exc:
        raise ExtractionError(f"{path}: {exc}") from None


def _assigned(tree: ast.Module, name: str) -> tuple[ast.expr, int, int] | None:
    """The value assigned to ``name`` at the module's top level, with its first and last line."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return value, node.lineno, node.end_lineno or node.lineno
    return None


def _dict_keys(value: ast.expr, where: str) -> list[str]:
    if isinstance(value, ast.Dict):
        return [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(value, ast.Call):  # LazyConfigDict(model_type="Class", ...)
        return [k.arg for k in value.keywords if k.arg is not None]
    raise ExtractionError(f"{where}: not a dict literal")


def read_registry(src: Path) -> tuple[dict[str, Any], list[str]]:
    """One release's architectures, refusals and own config model types; and the source lines read."""
    path = src / REGISTRY
    tree = _module(path)
    merged = _assigned(tree, "_VLLM_MODELS")
    if merged is None or not isinstance(merged[0], ast.Dict):
        raise ExtractionError(f"{path}: no _VLLM_MODELS dict")
    architectures: set[str] = set()
    sources = [f"{REGISTRY}:{merged[1]}-{merged[2]}"]
    for part in merged[0].values:
        if not isinstance(part, ast.Name):
            raise ExtractionError(f"{path}: _VLLM_MODELS merges something other than a named dict")
        found = _assigned(tree, part.id)
        if found is None:
            raise ExtractionError(f"{path}: {part.id} is not assigned at the top level")
        architectures.update(_dict_keys(found[0], f"{path}:{part.id}"))
        sources.append(f"{REGISTRY}:{found[1]}-{found[2]}")
    refused: dict[str, str] = {}
    for name, kind in (("_PREVIOUSLY_SUPPORTED_MODELS", "until"), ("_OOT_SUPPORTED_MODELS", "plugin")):
        found = _assigned(tree, name)
        if found is None or not isinstance(found[0], ast.Dict):
            continue
        for key, value in zip(found[0].keys, found[0].values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                refused[str(key.value)] = f"{kind} {value.value!s}"
        sources.append(f"{REGISTRY}:{found[1]}-{found[2]}")
    config_types: list[str] = []
    configs = src / CONFIGS
    if configs.exists():
        found = _assigned(_module(configs), "_CONFIG_REGISTRY")
        if found is not None:
            config_types = _dict_keys(found[0], f"{configs}:_CONFIG_REGISTRY")
            sources.append(f"{CONFIGS}:{found[1]}-{found[2]}")
    return {"architectures": sorted(architectures), "refused": refused, "config_types": sorted(config_types)}, sources


def read_transformers(src: Path) -> dict[str, list[str]]:
    """transformers' model types (CONFIG_MAPPING_NAMES) and the model classes its modeling files export."""
    models = src / "transformers" / "models"
    types: set[str] = set()
    for file in (models / "auto" / "auto_mappings.py", models / "auto" / "configuration_auto.py"):
        if not file.exists():
            continue
        for node in ast.walk(_module(file)):
            if (
                isinstance(node, ast.Tuple)
                and len(node.elts) == 2
                and all(isinstance(e, ast.Constant) for e in node.elts)
            ):
                first, second = (e.value for e in node.elts)  # type: ignore[attr-defined]
                if isinstance(first, str) and isinstance(second, str) and second.endswith("Config"):
                    types.add(first)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    is_config = isinstance(value, ast.Constant) and str(value.value).endswith("Config")
                    if isinstance(key, ast.Constant) and is_config:
                        types.add(str(key.value))
    if not types:
        raise ExtractionError(f"{models / 'auto'}: no CONFIG_MAPPING_NAMES entries")
    classes: set[str] = set()
    for file in sorted(models.glob("*/modeling_*.py")):
        found = _assigned(_module(file), "__all__")
        if found is not None and isinstance(found[0], ast.List | ast.Tuple):
            classes.update(e.value for e in found[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return {"model_types": sorted(types), "model_classes": sorted(classes)}


def _runs(present: dict[str, set[str]]) -> list[dict[str, str]]:
    """One entry per name and run of consecutive releases read that have it."""
    entries: list[dict[str, str]] = []
    for run in runs(present):
        entry = {"name": run.name}
        if run.introduced:
            entry["introduced"] = run.introduced
        if run.removed:
            entry["removed"] = run.removed
        entries.append(entry)
    return entries


def build(src_dir: Path) -> dict[str, Any]:
    known = released(REPO / "knowledge" / "releases.yaml", "vllm")
    read = [v for v in known if Version(v) >= OLDEST and (src_dir / f"vllm-{v}" / REGISTRY).exists()]
    if not read:
        raise ExtractionError(f"{src_dir}: no extracted vLLM wheel of a release in knowledge/releases.yaml")
    per_release: dict[str, dict[str, Any]] = {}
    sources: list[str] = []
    for version in read:
        per_release[version], lines = read_registry(src_dir / f"vllm-{version}")
        if version in (read[0], read[-1]):
            sources += [f"wheel:vllm=={version}:{line}" for line in lines]
    transformers: dict[str, Any] = {}
    for version, pinned in TRANSFORMERS_OF.items():
        tf_src = src_dir / f"transformers-{pinned}"
        if version in per_release and tf_src.exists():
            transformers[pinned] = {"for_vllm": version, **read_transformers(tf_src)}
            sources.append(f"wheel:transformers=={pinned}:transformers/models/auto/auto_mappings.py")
    newest = per_release[read[-1]]
    return {
        "sources": sources,
        "verified_at": VERIFIED_AT,
        "releases_read": read,
        "architectures": _runs({v: set(p["architectures"]) for v, p in per_release.items()}),
        "config_types": _runs({v: set(p["config_types"]) for v, p in per_release.items()}),
        "refused": [{"name": k, "why": v} for k, v in sorted(newest["refused"].items())],
        "transformers": transformers,
    }


HEADER = """\
# The model architectures each vLLM release's ModelRegistry resolves, the ones it refuses with a message of its
# own, the model types of vLLM's own config classes, and what the transformers it installs knows.
# GENERATED: do not edit by hand; regenerate with
#   python scripts/build_model_registry.py --src-dir SRC_DIR
# (static ast reading of the extracted wheels; the script's docstring says what counts). `introduced` /
# `removed` are the first release read that has / no longer has the name; absent means already in the
# oldest release read / still in the newest.
"""


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=100_000).strip()


def _dump(data: dict[str, Any]) -> str:
    text = "sources:\n" + "".join(f"  - '{source}'\n" for source in data["sources"])
    text += f"verified_at: {data['verified_at']}\n"
    text += "releases_read: [" + ", ".join(f"'{v}'" for v in data["releases_read"]) + "]\n"
    for key in ("architectures", "config_types", "refused"):
        # name first; every value quoted (a model type such as 'yes' or a version such as '0.30' must stay text)
        text += f"{key}:\n" + "".join(
            "  - {" + ", ".join(f"{k}: '{e[k]}'" for k in ("name", "introduced", "removed", "why") if k in e) + "}\n"
            for e in data[key]
        )
    text += "transformers:\n" if data["transformers"] else "transformers: {}\n"
    for version, read in data["transformers"].items():
        text += f"  '{version}':\n    for_vllm: '{read['for_vllm']}'\n"
        for key in ("model_types", "model_classes"):
            text += f"    {key}: {_flow(read[key])}\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--src-dir", type=Path, required=True, help="extracted wheels: vllm-X.Y.Z/, transformers-X.Y.Z/"
    )
    parser.add_argument("--out", type=Path, default=REPO / "knowledge" / "model_registry.yaml")
    args = parser.parse_args(argv)
    try:
        data = build(args.src_dir.expanduser())
    except ExtractionError as exc:
        print(f"build_model_registry: {exc}", file=sys.stderr)
        return 1
    text = HEADER + _dump(data)
    ModelRegistry.model_validate(yaml.safe_load(text))  # what the server will load
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(data['architectures'])} architecture entries over {len(data['releases_read'])} releases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
