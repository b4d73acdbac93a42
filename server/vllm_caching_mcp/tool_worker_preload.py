"""Imported only by the fork server that tool workers are forked from (see tool_workers).

Importing it loads every tool and the knowledge in that one process, so each worker forked from
it starts with all of them already in memory, shared page by page with its siblings, instead of
spending a few hundred milliseconds loading its own copy. Nothing else imports this module.
"""

from __future__ import annotations

import gc
import logging


def _load() -> None:
    from .knowledge import load_knowledge
    from .tools import all_tools

    all_tools()
    load_knowledge()
    # Lives as long as every worker: kept out of the collector's sight, so a collection in a
    # worker neither walks it nor writes to (and so copies) the pages it shares.
    gc.freeze()


try:
    _load()
except Exception:  # a worker loads on its own call, and reports what is wrong there
    logging.getLogger(__name__).debug("preloading the tools failed", exc_info=True)
