"""The input limits: bounds far above any deployment, so that what is pasted costs time in proportion
to its size, and the running totals of one call that are checked against them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..common import AdviceError

if TYPE_CHECKING:
    from .model import Deployment


# Bounds far above any deployment, so that what is pasted costs time in proportion to its size and
# the answer stays readable: vLLM servers in one call, and words in one command or in all the
# vLLM arguments of a call (vLLM has some 400 options), and characters in all the documents.
MAX_WORKLOADS = 1_000


MAX_ARGUMENTS = 50_000


MAX_DOCUMENTS_TEXT = 5_000_000


# A variable's value, and a command's words after expansion, that no deployment comes near: past
# them a value is not used (an assignment that doubles itself grows without end).
MAX_VALUE_CHARS = 100_000


MAX_EXPANDED_CHARS = MAX_DOCUMENTS_TEXT


# Bounds on one YAML document (a `---` section), far above any manifest, compose file or values
# file. Nesting: PyYAML's composer and this reader recurse once a level, and libyaml's composer
# overflows the C stack near 50,000 levels. Aliases: every use of an anchor is walked again, so
# nine aliases of nine aliases of ... grow as 9^n from a few hundred bytes; what aliases add is
# bounded both in nodes and in scalar characters (one long string named a thousand times).
MAX_YAML_DEPTH = 100


MAX_ALIAS_NODES = 100_000


MAX_ALIAS_CHARS = 2_000_000


# And the nodes of all the YAML one call reads (PyYAML resolves and builds each in Python, some
# 10 µs a node): a manifest has 15-20 bytes a node, so this is about the whole size bound.
MAX_YAML_NODES = 300_000


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextmanager
def reading_document(index: int) -> Iterator[None]:
    """An AdviceError about a document's text, said of ``documents[index].text``."""
    try:
        yield
    except AdviceError as exc:
        if exc.field != "text":
            raise
        raise AdviceError(f"documents[{index}].text", str(exc).removeprefix("text: ")) from None


@dataclass
class Totals:
    """What the documents of one call hold so far, checked against the bounds as it grows."""

    counted: int = 0  # workloads added to the sums below
    flags: int = 0
    env: int = 0
    yaml_nodes: int = 0  # counted by _check_yaml_shape, which enforces MAX_YAML_NODES itself
    patched_nodes: int = 0  # values kustomize patches copied in, bounded by MAX_PATCHED_NODES

    def check(self, deployment: Deployment) -> None:
        for workload in deployment.workloads[self.counted :]:
            self.flags += len(workload.flags)
            self.env += len(workload.env)
        self.counted = len(deployment.workloads)
        if self.counted > MAX_WORKLOADS:
            raise AdviceError(
                "documents",
                f"more than {MAX_WORKLOADS:,} vLLM servers in the documents; review at most {MAX_WORKLOADS:,} in one "
                "call",
            )
        if self.flags > MAX_ARGUMENTS:
            raise AdviceError(
                "documents",
                f"more than {MAX_ARGUMENTS:,} vLLM arguments in all the documents; no deployment has that many",
            )
        if self.env > MAX_ARGUMENTS:
            raise AdviceError(
                "documents",
                f"more than {MAX_ARGUMENTS:,} environment variables set for the vLLM servers in all; no deployment "
                "sets that many",
            )
