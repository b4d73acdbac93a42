"""Any YAML that starts vLLM where no reader of its own shape knows it (yaml_launches): Helm values of any
chart, an operator's custom resource such as KubeAI's Model, a tool's own config."""

from __future__ import annotations

from ..model import Document
from ..yaml_launches import read_generic
from ..yaml_nodes import Located
from .base import Reading, mappings


class GenericReader:
    """Any YAML document no reader of its own shape claims, and (asked by the dispatcher) a claimed one
    from which its reader gave no vLLM server: a custom resource the manifest reader finds no pod spec in."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return bool(mappings(roots))

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return read_generic(doc, roots, reading)


READER = GenericReader()
