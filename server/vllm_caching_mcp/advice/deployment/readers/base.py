"""The one interface every input shape implements, and what a reader is handed.

A reader imports the shared modules of the package (model, bounds, yaml_nodes, shell, launch, flags,
containers, lmcache_config, images, dockerfile) and this one, never another reader
(tests/test_deployment_layout.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ....knowledge import ServerListener
from ..bounds import Totals
from ..dockerfile import DockerBuild
from ..model import Deployment, Document
from ..yaml_nodes import Located


@dataclass
class Reading:
    """What every reader of one call shares: where workloads go, the bounds so far, and what the
    other documents give (the LMCache config keys the knowledge names, a compose `.env`, the Dockerfiles
    among them by document name, which a compose service's `build:` names), and the servers the knowledge
    knows how to recognise."""

    deployment: Deployment
    totals: Totals
    lmcache_keys: frozenset[str]
    dotenv: dict[str, str]
    # ids of the YAML documents a partial reader read: the readers after it are handed the others
    taken: set[int] = field(default_factory=set)
    # every document of the call, for a shape whose objects name another file's (a KServe InferenceService
    # is served by a ServingRuntime, often written apart)
    documents: tuple[Document, ...] = ()
    servers: tuple[ServerListener, ...] = ()  # the LMCache servers a container may start (knowledge/ports.yaml)
    proxy_scripts: tuple[str, ...] = ()  # the file names of the P/D proxies the knowledge knows
    dockerfiles: dict[str, DockerBuild] = field(default_factory=dict)
    vllm_options: frozenset[str] = frozenset()  # every option `vllm serve` takes in a covered release
    # the dispatcher, for YAML documents a reader finds inside another text (a Terraform heredoc): the YAML
    # readers read them as they read any file's
    read_yaml: Callable[[Document, list[Located]], object] | None = None


class Reader(Protocol):
    """One input shape. ``roots`` are the document's YAML documents (none when it is not YAML)."""

    # Whether the documents it claims are YAML: one of those that gives no vLLM server gets a note.
    yaml: bool
    # Whether it reads only some YAML documents of a file (an operator's custom resources beside plain
    # manifests), adding their ids to ``reading.taken``: the readers after it are asked for the rest.
    partial: bool

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        """Whether ``doc`` has this shape; the first reader in read.READERS that claims it reads it."""
        ...

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        """Add the workloads of ``doc`` to ``reading.deployment``; False (having added nothing) when,
        read, it turns out not to be of this shape after all, and the next reader is asked."""
        ...


def mappings(roots: list[Located]) -> list[Located]:
    """The YAML documents that are mappings (every shape but a shell script is one or more)."""
    return [r for r in roots if isinstance(r.value, dict)]
