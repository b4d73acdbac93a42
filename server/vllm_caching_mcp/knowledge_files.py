"""The knowledge base on disk: where it is, which files make it up, and the error a broken one raises.

Apart from the models in knowledge.py so that the server can find and fingerprint the files at
start-up without importing pydantic models, YAML or packaging (see mcp_server.build_server).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# In load order; knowledge.FILES gives each its model. verification.yaml is read by verification.py.
FILE_NAMES: tuple[str, ...] = (
    "releases.yaml",
    "features.yaml",
    "flags.yaml",
    "offloading.yaml",
    "lmcache.yaml",
    "connectors.yaml",
    "metrics.yaml",
    "pitfalls.yaml",
    "bugs.yaml",
    "hardware.yaml",
    "compat.yaml",
    "models.yaml",
    "engine.yaml",
    "cli_inventory.yaml",
    "lmcache_server_cli.yaml",
    "name_inventory.yaml",
    "engine_schema.yaml",
    "ports.yaml",
    "model_registry.yaml",
    "recipes.yaml",
    "advisories.yaml",
)


class KnowledgeError(Exception):
    """A knowledge file is missing, malformed, or refers to something that does not exist."""


def knowledge_dir() -> Path:
    """Where the knowledge files are: inside the installed package, or at the checkout root."""
    packaged = resources.files("vllm_caching_mcp") / "knowledge"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "knowledge"
    if checkout.is_dir():
        return checkout
    raise KnowledgeError("the knowledge files are missing from this installation; reinstall the package")
