"""vLLM engine arguments given as keyword arguments (Ray Serve LLM's ``engine_kwargs``, an operator's
fields) read as the `vllm serve` words that set them, so every check of the command line applies."""

from __future__ import annotations

import json

from .bounds import clip
from .model import Document, Location
from .yaml_nodes import Located, node_location, text_of


def option_of(field: str) -> str:
    """The `vllm serve` option of an EngineArgs field: its name with dashes (``max_model_len`` is
    ``--max-model-len``, wheel:vllm==0.33.0:vllm/engine/arg_utils.py:991)."""
    return "--" + field.replace("_", "-")


def kwargs_words(doc: Document, kwargs: Located, prefix: str, notes: list[str]) -> list[tuple[str, Location]]:
    """The `vllm serve` words of a mapping of EngineArgs keyword arguments: true is the switch, false its
    ``--no-`` form (a boolean field is a BooleanOptionalAction, wheel:vllm==0.33.0:vllm/engine/arg_utils.py:386),
    a mapping its JSON (a config field parses JSON, arg_utils.py:372), a list its items as words (nargs +),
    null nothing (the field keeps its default)."""
    words: list[tuple[str, Location]] = []
    if not isinstance(kwargs.value, dict):
        notes.append(f"{node_location(doc, kwargs, prefix)}: engine arguments that are no mapping; not read")
        return words
    for key, item in kwargs.value.items():
        where = node_location(doc, item, prefix)
        value = item.value
        if value is None:
            continue
        if isinstance(value, bool):
            words.append((option_of(key) if value else "--no-" + option_of(key)[2:], where))
        elif isinstance(value, dict):
            words += [(option_of(key), where), (json.dumps(item.plain(), default=str), where)]
        elif isinstance(value, list):
            words.append((option_of(key), where))
            words += [(_scalar(doc, i, prefix, notes), node_location(doc, i, prefix)) for i in item.items()]
        else:
            words += [(option_of(key), where), (text_of(item), where)]
    return words


def _scalar(doc: Document, item: Located, prefix: str, notes: list[str]) -> str:
    if isinstance(item.value, (dict, list)):
        return json.dumps(item.plain(), default=str)
    text = text_of(item)
    if not text:
        notes.append(f"{node_location(doc, item, prefix)}: an empty item {clip(text, 20)!r} in a list argument")
    return text
