"""A vLLM config file, the YAML `vllm serve --config FILE` reads: a mapping whose keys are `vllm serve`
option names without their dashes (`max-model-len: 4096`, `tensor-parallel-size: 2`).

FlexibleArgumentParser.load_config_file turns each key into `--key` followed by its value: `true` is the
switch alone, a list is the option followed by each item, a mapping is its JSON, and any other value its
text (wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:653-671; the same in
wheel:vllm==0.11.0:vllm/utils/__init__.py:2110-2121). Options given on the command line besides override
the file's (wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:567-571). `false` is `--no-key` where the
option has that form in 0.33.0 and is left out in 0.11.0, so it is read as `--no-key` only where that
form exists."""

from __future__ import annotations

from ..flags import read_args
from ..launch import looks_like_vllm_args
from ..model import Document, Workload
from ..yaml_launches import config_args, option_words
from ..yaml_nodes import Located, node_location
from .base import Reading, mappings


def _is_config(roots: list[Located], options: frozenset[str]) -> bool:
    found = mappings(roots)
    if len(found) != 1 or found[0].get("kind") is not None:
        return False
    keys = [str(k) for k in found[0].value]
    return all(not k.startswith("-") for k in keys) and looks_like_vllm_args(option_words(found[0]), options)


class VllmConfigReader:
    """A YAML mapping whose keys are overwhelmingly `vllm serve` options (launch.looks_like_vllm_args)."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return _is_config(roots, reading.vllm_options)

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        root = mappings(roots)[0]
        workload = Workload(
            name=f"vllm serve --config {doc.name.rsplit('/', 1)[-1]}",
            file=doc.name,
            source="command-line",
            location=node_location(doc, root),
            pod_elsewhere=True,
        )
        read_args(workload, config_args(doc, root, reading.vllm_options))
        reading.deployment.workloads.append(workload)
        reading.deployment.notes.append(
            f"{doc.name}: read as a vLLM config file (`vllm serve --config {doc.name.rsplit('/', 1)[-1]}`): the "
            "command, image and machine that run it are not in it; options given on the command line besides "
            "override its values"
        )
        return True


READER = VllmConfigReader()
