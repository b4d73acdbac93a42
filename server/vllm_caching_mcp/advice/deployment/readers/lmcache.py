"""LMCache's own config file: one YAML mapping whose keys are LMCache settings."""

from __future__ import annotations

from ..lmcache_config import lmcache_config
from ..model import Document
from ..yaml_nodes import Located
from .base import Reading


class LMCacheConfigReader:
    """An LMCache config file (also read from a Kubernetes ConfigMap, by the manifest reader)."""

    yaml = True
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return len(roots) == 1 and isinstance(roots[0].value, dict) and bool(set(roots[0].value) & reading.lmcache_keys)

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return lmcache_config(doc.name, roots, reading.deployment, reading.lmcache_keys)


READER = LMCacheConfigReader()
