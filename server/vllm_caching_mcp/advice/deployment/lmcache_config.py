"""LMCache's config file, read where it stands alone and where a Kubernetes ConfigMap holds it."""

from __future__ import annotations

import json

from ...knowledge import Knowledge
from ..common import AdviceError
from .bounds import MAX_YAML_NODES, Totals
from .model import Deployment, EnvUse, LMCacheConfig, Location, PerKnowledge
from .yaml_nodes import Located, load_yaml, text_of


def _lmcache_keys(knowledge: Knowledge) -> frozenset[str]:
    """The keys of LMCache's config file: its LMCACHE_* variables, lower case without the prefix."""
    return frozenset(
        s.name[len("LMCACHE_") :].lower()
        for s in knowledge.settings
        if s.component == "lmcache" and s.name.startswith("LMCACHE_")
    )


LMCACHE_KEYS = PerKnowledge(_lmcache_keys)


def maybe_lmcache_config(
    name: str,
    text: str,
    deployment: Deployment,
    totals: Totals,
    first_line: int,
    lmcache_keys: frozenset[str],
    known_as: str,
) -> bool:
    """Read ``text`` as an LMCache config file when it is one (its first line is ``first_line`` of file ``name``;
    ``known_as``: the ConfigMap key it is stored under, which a mount makes its file name)."""
    try:
        roots = load_yaml(name, text, totals, first_line)
    except AdviceError:
        if totals.yaml_nodes > MAX_YAML_NODES:
            raise
        return False
    return lmcache_config(name, roots, deployment, lmcache_keys, known_as)


def lmcache_config(
    name: str, roots: list[Located], deployment: Deployment, lmcache_keys: frozenset[str], known_as: str | None = None
) -> bool:
    """Read the YAML documents of file ``name`` as an LMCache config file when they are one."""
    if len(roots) != 1 or not isinstance(roots[0].value, dict):
        return False
    root = roots[0]
    keys = set(root.value)
    if not keys or not keys & lmcache_keys:
        return False
    env = []
    for key, item in root.value.items():
        value = item.plain()
        # default=str: YAML also builds dates, timestamps and bytes, which JSON has no type for
        shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else text_of(item)
        env.append(
            EnvUse(name="LMCACHE_" + key.upper(), value=shown, location=Location(file=name, line=item.line, path=key))
        )
    deployment.lmcache_configs.append(LMCacheConfig(name=known_as or name, env=env))
    return True
