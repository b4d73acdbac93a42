"""Every secret this process holds, kept out of every string it returns or logs.

A server may echo what it was sent: a GitHub that copies the ``Authorization`` header into a pull
request's name, a registry that writes it into an image's labels. So secrets are not scrubbed
where they are expected; they are removed from whatever leaves the process, wherever the text
came from:

- `register` records a secret for the life of the process. `http_client.Secret` registers its
  value when it is made; the clients register what they derive from one (the base64 of a Basic
  ``user:password``, the pair itself) and the tokens token services issue them (``transient``:
  the newest of those are kept, so a long-running server's list stays bounded).
- `redact` replaces every registered secret in a text with ``***``; `redact_value` does the same
  through str, list, tuple, set, dict, dataclass and pydantic-model values, returning the value
  itself when nothing in it changed.
- `install_log_redaction` makes every log record, of any logger, leave the process redacted
  (message, arguments and the traceback text).

`tools.run_tool` passes every tool result through `redact_value`, so the MCP server and the CLI,
which both render from that result, print no secret in structured or text output.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

MASK = "***"
# Shorter values are not secrets worth the damage: masking "abc" would mangle ordinary words.
MIN_SECRET_LENGTH = 4
# Issued tokens kept for redaction; a token older than this many has long left every answer.
MAX_TRANSIENT = 256

T = TypeVar("T")

_lock = threading.Lock()
_lasting: set[str] = set()
_transient: OrderedDict[str, None] = OrderedDict()
_pattern: re.Pattern[str] | None = None
_log_hook_installed = False


def register(value: str | None, *, transient: bool = False) -> None:
    """Remember ``value`` as a secret; ``transient`` for issued tokens, of which the newest are kept."""
    global _pattern
    if not value or len(value) < MIN_SECRET_LENGTH:
        return
    with _lock:
        if value in _lasting:
            return
        if transient:
            _transient[value] = None
            _transient.move_to_end(value)
            while len(_transient) > MAX_TRANSIENT:
                _transient.popitem(last=False)
        else:
            _lasting.add(value)
            _transient.pop(value, None)
        _pattern = None
    install_log_redaction()


def _current_pattern() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and (_lasting or _transient):
            # Longest first, so a secret that contains another is masked whole.
            secrets = sorted({*_lasting, *_transient}, key=len, reverse=True)
            _pattern = re.compile("|".join(re.escape(s) for s in secrets))
        return _pattern


def has_secrets() -> bool:
    return _current_pattern() is not None


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    pattern = _current_pattern()
    if pattern is None or not text:
        return text
    return pattern.sub(MASK, text)


def redact_value(value: T, scrub: Callable[[str], str] = redact) -> T:
    """``value`` with ``scrub`` applied to every string in it (dict keys too); unchanged parts are kept as they are."""
    if scrub is redact and not has_secrets():
        return value
    return _walk(value, scrub)  # type: ignore[no-any-return]


def _walk(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        cleaned = scrub(value)
        return value if cleaned == value else cleaned
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_walk(item, scrub) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple takes its fields one by one
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        pairs = [(_walk(k, scrub), _walk(v, scrub)) for k, v in value.items()]
        if all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, value.items(), strict=True)):
            return value
        return type(value)(pairs)
    if _is_pydantic_model(value):
        changed = _changed_fields(value, type(value).model_fields, scrub)
        return value.model_copy(update=changed) if changed else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = {f.name: None for f in dataclasses.fields(value) if f.init}
        changed = _changed_fields(value, names, scrub)
        return dataclasses.replace(value, **changed) if changed else value
    return value


def _changed_fields(value: Any, names: Any, scrub: Callable[[str], str]) -> dict[str, Any]:
    changed = {}
    for name in names:
        old = getattr(value, name)
        new = _walk(old, scrub)
        if new is not old:
            changed[name] = new
    return changed


def _is_pydantic_model(value: Any) -> bool:
    # Duck-typed, so this module (imported by every network client) does not import pydantic itself.
    return hasattr(type(value), "model_fields") and hasattr(value, "model_copy")


# ---------------------------------------------------------------------------------------------
# Logs


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """The record with its message (arguments merged in), traceback and stack text redacted."""
    if not has_secrets():
        return record
    try:
        message = record.getMessage()
    except Exception:  # a malformed call; logging reports it when the record is formatted
        return record
    cleaned = redact(message)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


def install_log_redaction() -> None:
    """Redact each log record as it is made.

    A record factory rather than a filter: a filter on a logger misses its children's records
    (httpcore logs response headers on ``httpcore.http11``), and one on a handler misses handlers
    added later; every record of every logger is made by the factory.
    """
    global _log_hook_installed
    with _lock:
        if _log_hook_installed:
            return
        _log_hook_installed = True
        make_record = logging.getLogRecordFactory()

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redact_record(make_record(*args, **kwargs))

    logging.setLogRecordFactory(redacting_factory)
