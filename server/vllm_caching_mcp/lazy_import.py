"""Import a module on first attribute access: for the few third-party modules only some tools use.

httpx is needed only when a tool makes a network call, yet three modules refer to it throughout;
loading it lazily keeps it out of every server start-up. Use it as::

    if TYPE_CHECKING:
        import httpx
    else:
        httpx = lazy_import("httpx")

Not `importlib.util.LazyLoader`: on Python 3.11 it is not thread-safe, and the server runs tool
calls on worker threads, so two first calls at once could see a half-initialised module. Here each
attribute read goes through `importlib.import_module`, which holds the import lock.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule(ModuleType):
    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attribute)


def lazy_import(name: str) -> ModuleType:
    """A stand-in for module ``name`` that imports it when one of its attributes is first read."""
    return _LazyModule(name)
