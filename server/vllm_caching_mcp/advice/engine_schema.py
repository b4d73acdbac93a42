"""What the engine does with a configuration key, read from knowledge/engine_schema.yaml.

The schema file is generated from the wheels (scripts/build_engine_schema.py): every field of
``KVTransferConfig``, ``KVEventsConfig``, ``CacheConfig``, ``SchedulerConfig`` and ``ParallelConfig``,
every ``kv_connector_extra_config`` key a connector reads, vLLM's environment variables (vllm/envs.py:
default and parse rule), LMCache's key table, its aliases and what it does with a key it does not have,
each by release with its source. Two uses:

- ``lookup``: one name, answered by kind (config field, extra-config key, vLLM environment variable,
  LMCache key or alias) for ``check_version``;
- ``check_kv_transfer_config``, ``check_extra_config``, ``check_lmcache_keys``: the keys a deployment
  sets, checked against its release. A key the engine refuses is an error with the engine's own
  message; a key it drops or never reads is a warning naming what does that job in that release.
  Pure functions of (keys, release, knowledge); the deployment review calls them.
"""

from __future__ import annotations

import ast
import difflib
import functools
import itertools
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from ..knowledge import EngineSchema, Gated, Knowledge, SchemaEntry, normalize_name, ranged_at
from ..versions import Version, as_text, parse_version
from .common import PRODUCT_LABELS

Severity = Literal["error", "warning", "info"]  # info: a leftover that does nothing, as it did before
SchemaKind = Literal["config_field", "extra_config_key", "env_var", "lmcache_key", "lmcache_alias"]
_KIND_WORDS = {
    "config_field": "field of {owner}",
    "env_var": "environment variable of {owner}",
    "extra_config_key": "kv_connector_extra_config key of {owner}",
    "lmcache_key": "LMCache config key",
    "lmcache_alias": "old LMCache key name",
}
LMCACHE_ENV_PREFIX = "LMCACHE_"
ENVS_OWNER = "vllm/envs.py"
ADAPTER = "LMCache's vLLM adapter (for LMCacheConnectorV1 and LMCacheMPConnector)"


class Problem(BaseModel):
    """One key a deployment sets that the engine refuses (error), drops or never reads (warning), or no longer
    reads where it was set to what it defaulted to (info)."""

    severity: Severity
    key: str = Field(description="the key as set: 'kv_buffer_size', 'extra_config.eviction_policy', 'nixl_role'")
    message: str = Field(description="what happens, in one sentence")
    engine_message: str | None = Field(default=None, description="what the engine prints, where it prints something")
    instead: str | None = Field(default=None, description="the key that does this job in the release")
    sources: list[str] = Field(default_factory=list)


class SchemaMatch(BaseModel):
    """A name of the engine's configuration schema, its state in the release asked about."""

    name: str
    kind: SchemaKind
    owner: str = Field(description="the config class, the connectors that read the key, or LMCache")
    package: Literal["vllm", "lmcache"]
    version: str = Field(description="the release of `package` this status is for")
    status: Literal["available", "removed", "not_yet", "unknown"]
    answer: str = Field(description="the status in one sentence, with what setting it there does")
    introduced: str | None = Field(description="first release read that has it; null: already in the oldest read")
    removed: str | None
    type: str | None = None
    default: str | None = Field(default=None, description="the default in this release, as the code writes it")
    default_changes: list[str] = Field(
        default_factory=list, description="where the default changed: \"0.13.0: 'recompute'\", \"0.17.0: 'fail'\""
    )
    parse: str | None = Field(default=None, description="vLLM variables: how envs.py reads it, the read as <env>")
    env_name: str | None = Field(default=None, description="LMCache: the LMCACHE_* variable that sets the key")
    if_set: str | None = Field(default=None, description="what the engine does when it is set in this release")
    instead: str | None = None
    siblings: list[str] = Field(
        default_factory=list,
        description="a config field's: the class's other fields in this release with their defaults (and where a "
        "default changes later), the settings that come with it",
    )
    sources: list[str]


# --- the schema's view of one release ----------------------------------------------------------


def _read(schema: EngineSchema, package: Literal["vllm", "lmcache"]) -> list[Version]:
    return list(schema.releases_read.get(package, ()))


def _status(
    entry: SchemaEntry, version: Version, read: list[Version]
) -> Literal["available", "removed", "not_yet", "unknown"]:
    if not read or version < read[0]:
        return "unknown"
    if entry.introduced is not None and version < entry.introduced:
        return "not_yet"
    if entry.removed is not None and version >= entry.removed:
        return "removed"
    return "available"


def _runs(entries: Iterable[SchemaEntry], version: Version) -> tuple[SchemaEntry | None, list[SchemaEntry]]:
    """The entry in force at ``version`` (None: none), and every run of the name."""
    runs = list(entries)
    return next((e for e in runs if e.holds_at(version)), None), runs


def _span(runs: list[SchemaEntry], read: list[Version]) -> str:
    parts = []
    for e in runs:
        first = str(e.introduced) if e.introduced else f"{read[0]} (the oldest read)"
        parts.append(f"from {first} until {e.removed}" if e.removed else f"from {first} on")
    return "; ".join(parts)


def _lifetime_hint(runs: list[SchemaEntry], version: Version) -> str | None:
    """'removed in 0.32.0' / 'first in 0.13.0' for a name that exists in other releases."""
    earlier = [e for e in runs if e.removed is not None and e.removed <= version]
    later = [e for e in runs if e.introduced is not None and e.introduced > version]
    if earlier:
        return f"removed in {max(e.removed for e in earlier if e.removed)}"
    if later:
        return f"first in {min(e.introduced for e in later if e.introduced)}"
    return None


def _fields(schema: EngineSchema, config: str, name: str) -> list[SchemaEntry]:
    return [e for e in schema.config_fields if e.config == config and e.name == name]


def _config(schema: EngineSchema, config: str, version: Version) -> SchemaEntry | None:
    return next((e for e in schema.configs if e.name == config and e.holds_at(version)), None)


def refusal_message(config: str, key: str, value: Any, flag: str) -> str:
    """What ``vllm serve`` prints for an unknown field of a config class that forbids them.

    vLLM parses the flag's JSON with ``TypeAdapter(cls).validate_json`` and raises the pydantic
    ValidationError as an argparse error (``parse_dataclass`` in vllm/engine/arg_utils.py); pydantic
    words an unknown field of an ``extra="forbid"`` dataclass as below (its input part shortened)."""
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    return (
        f"vllm serve: error: argument {flag}: 1 validation error for {config}\n{key}\n"
        f"  Unexpected keyword argument [type=unexpected_keyword_argument, input_value={shown}, ...]"
    )


# --- checks a review calls ----------------------------------------------------------------------

# The `vllm serve` option whose JSON each config class is validated from (PassConfig: the pass_config object
# inside --compilation-config).
CONFIG_FLAGS = {
    "KVTransferConfig": "--kv-transfer-config",
    "KVEventsConfig": "--kv-events-config",
    "CompilationConfig": "--compilation-config",
    "PassConfig": "--compilation-config",
}


def check_kv_transfer_config(
    config: Mapping[str, Any],
    version: Version | str,
    knowledge: Knowledge,
    *,
    config_class: str = "KVTransferConfig",
    lmcache_version: Version | str | None = None,
) -> list[Problem]:
    """Every field of a ``--kv-transfer-config`` JSON (or of another class of CONFIG_FLAGS: ``--kv-events-config``,
    ``--compilation-config`` and its ``pass_config``) that the release refuses (an unknown field where the class
    forbids them) or ignores; extra-config keys of the named connector are checked too."""
    schema, release = knowledge.engine_schema, _version(version)
    flag = CONFIG_FLAGS[config_class]
    cls = _config(schema, config_class, release)
    if cls is None:
        raise ValueError(f"{config_class} is not in vLLM {release}'s schema")
    forbid = cls.at("unknown_fields", release) == "forbid"
    problems: list[Problem] = []
    for key, value in config.items():
        entry, runs = _runs(_fields(schema, config_class, key), release)
        if entry is not None:
            problems += _value_problems(entry, key, value, release, flag)
            continue
        hint = _lifetime_hint(runs, release)
        was = f" ({key} was {hint})" if hint else ""
        sources = [runs[-1].source] if runs else [cls.source]
        if forbid:
            problems.append(
                Problem(
                    severity="error",
                    key=key,
                    message=f"{config_class} of vLLM {release} has no field {key}{was} and forbids unknown fields: "
                    "vLLM refuses to start.",
                    engine_message=refusal_message(config_class, key, value, flag),
                    sources=[*sources, cls.source],
                )
            )
        else:
            problems.append(
                Problem(
                    severity="warning",
                    key=key,
                    message=f"{config_class} of vLLM {release} has no field {key}{was}; pydantic drops unknown "
                    "fields of this class silently, so the setting does nothing.",
                    sources=[*sources, cls.source],
                )
            )
    connector, extra = config.get("kv_connector"), config.get("kv_connector_extra_config")
    if config_class == "KVTransferConfig" and isinstance(connector, str) and isinstance(extra, Mapping):
        problems += check_extra_config(connector, list(extra), release, knowledge, lmcache_version)
    return problems


def _value_problems(entry: SchemaEntry, key: str, value: Any, version: Version, flag: str) -> list[Problem]:
    """A value the field's type refuses, decided by pydantic (the validator vLLM runs on the flag's JSON) for
    the annotations this module can rebuild (scalars, ``Literal``, ``X | None``, ``dict[str, Any]``)."""
    annotation = entry.at("type", version) or ""
    adapter = _adapter(annotation)
    if adapter is None:
        return []
    try:
        adapter.validate_json(json.dumps(value))
    except ValidationError as exc:
        error = exc.errors()[0]
        return [
            Problem(
                severity="error",
                key=key,
                message=f"{entry.config}.{key} is {annotation} in vLLM {version}; {value!r} is refused: "
                "vLLM refuses to start.",
                engine_message=f"vllm serve: error: argument {flag}: 1 validation error for {entry.config}\n{key}\n"
                f"  {error['msg']} [type={error['type']}, ...]",
                sources=[entry.source],
            )
        ]
    except (TypeError, ValueError):  # a value JSON cannot carry: not what a deployment file holds
        return []
    return []


_SCALARS: dict[str, Any] = {"int": int, "float": float, "bool": bool, "str": str, "None": type(None)}


@functools.cache
def _adapter(annotation: str) -> TypeAdapter[Any] | None:
    """pydantic's validator for an annotation's text, built once: a review checks the same few fields for
    every workload, and building a TypeAdapter costs far more than validating with it."""
    python_type = _python_type(annotation)
    return None if python_type is None else TypeAdapter(python_type)


def _python_type(annotation: str) -> Any:
    """The type an annotation's text names, for the shapes a config field of these classes has; None: not built."""
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    return _build(node)


def _build(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in _SCALARS:
        return _SCALARS[node.id]
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _build(node.left), _build(node.right)
        return None if left is None or right is None else Union[left, right]  # noqa: UP007 - built at run time
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        if node.value.id == "Literal":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            try:
                return Literal[tuple(ast.literal_eval(i) for i in items)]
            except ValueError:
                return None
        if node.value.id == "dict" and ast.unparse(node.slice).strip("()") == "str, Any":
            return dict[str, Any]
    return None


def extra_keys(schema: EngineSchema, connector: str) -> list[SchemaEntry]:
    """Every run of every extra-config key that ``connector`` (or code every connector runs) reads."""
    return [
        e for e in schema.extra_config if e.connectors is not None and (not e.connectors or connector in e.connectors)
    ]


# Extra-config keys that load a class from another package, which is given the whole extra config.
_EXTERNAL_CLASS_KEYS = frozenset({"spec_module_path"})


def check_extra_config(
    connector: str,
    keys: Iterable[str],
    version: Version | str,
    knowledge: Knowledge,
    lmcache_version: Version | str | None = None,
) -> list[Problem]:
    """Extra-config keys no code of ``connector`` reads in the release: silently ignored (warnings).

    A connector that hands its extra config to LMCache (LMCacheConnectorV1, LMCacheMPConnector) also has the
    keys LMCache's own vLLM adapter reads, in ``lmcache_version`` (any release read when it is not given), and
    ``lmcache.<key>`` for every LMCache config key where the adapter passes that namespace on. A connector that
    hands it to another package's adapter (FlexKVConnectorV1: flexkv) gets no warning for a key vLLM does not
    read: that package is not read here."""
    schema, release = knowledge.engine_schema, _version(version)
    registered, _ = _runs((e for e in schema.connectors if e.name == connector), release)
    if registered is None:
        return [
            Problem(
                severity="warning",
                key="kv_connector",
                message=f"{connector} is not a connector vLLM {release} registers; its extra-config keys are not "
                "checked (a connector loaded through kv_connector_module_path is not in the schema).",
                sources=[schema.sources[1]],
            )
        ]
    lm_release = _version(lmcache_version) if lmcache_version is not None else None
    own = [e for e in extra_keys(schema, connector) if e.holds_at(release)]
    if registered.at("hands_to", release) == "lmcache":
        own += [e for e in schema.lmcache_adapter_extra_config if lm_release is None or e.holds_at(lm_release)]
    handed_to = registered.at("hands_to", release)
    keys = list(keys)
    # The offloading spec class named by spec_module_path is another package's, built with the whole extra
    # config (vllm/v1/kv_offload/factory.py): a key vLLM does not read may be that class's own.
    external_spec = any(e.key in _EXTERNAL_CLASS_KEYS and e.key in keys for e in own)
    problems: list[Problem] = []
    for key in keys:
        if any(e.key == key for e in own):
            continue
        if handed_to not in (None, "lmcache") or external_spec:  # another package's code may read it
            continue
        prefix = next((e for e in own if e.access == "prefix" and key.startswith((e.key or "")[:-1])), None)
        if prefix is not None:
            problems += _namespaced(key, (prefix.key or "")[:-1], prefix, lm_release, knowledge)
            continue
        problems.append(_unread(schema, connector, key, release, registered, lm_release))
    return problems


def _namespaced(
    key: str, prefix: str, entry: SchemaEntry, lm_release: Version | None, knowledge: Knowledge
) -> list[Problem]:
    """``lmcache.<key>``: LMCache sets its config key of the rest, and skips one it does not have."""
    rest = key[len(prefix) :]
    if prefix != "lmcache." or lm_release is None:
        return []
    schema = knowledge.engine_schema
    if any(e.name == rest and e.holds_at(lm_release) for e in schema.lmcache_keys):
        return []
    return [
        Problem(
            severity="warning",
            key=f"kv_connector_extra_config.{key}",
            message=f"LMCache {lm_release} has no config key {rest}: its vLLM adapter passes {prefix}* keys on to "
            "its config and skips this one, with a warning.",
            sources=[entry.source],
        )
    ]


def _unread(
    schema: EngineSchema, connector: str, key: str, release: Version, registered: SchemaEntry, lm: Version | None
) -> Problem:
    _, runs = _runs((e for e in extra_keys(schema, connector) if e.key == key), release)
    hint = _lifetime_hint(runs, release)
    readers = sorted(
        {c for e in schema.extra_config if e.key == key and e.holds_at(release) for c in e.connectors or ()}
    )
    elsewhere = f"; in {release} it is read by {', '.join(readers)}" if readers else ""
    was = f" ({connector} read it: {hint})" if hint else ""
    also = ""
    if registered.at("hands_to", release) == "lmcache":
        also = f" nor LMCache {lm}'s vLLM adapter" if lm else " nor LMCache's vLLM adapter in any release read"
    return Problem(
        severity="warning",
        key=f"kv_connector_extra_config.{key}",
        message=f"No code of {connector} in vLLM {release}{also} reads kv_connector_extra_config[{key!r}]{was}"
        f"{elsewhere}: it is silently ignored.",
        sources=[e.source for e in runs[-1:]] or [registered.source],
    )


def lmcache_key_name(name: str) -> str:
    """``LMCACHE_PD_ROLE`` and ``pd_role`` name one key (LMCache's get_env_name adds the prefix)."""
    text = name.strip()
    if text.upper().startswith(LMCACHE_ENV_PREFIX) and text == text.upper():
        text = text[len(LMCACHE_ENV_PREFIX) :].lower()
    return text


def check_lmcache_keys(keys: Iterable[str], lmcache_version: Version | str, knowledge: Knowledge) -> list[Problem]:
    """LMCache YAML keys (or ``LMCACHE_*`` variables) the release drops, ignores or only maps with a warning."""
    schema, release = knowledge.engine_schema, _version(lmcache_version)
    unknown, _ = _runs(schema.lmcache_unknown_key, release)
    problems: list[Problem] = []
    for raw in keys:
        key = lmcache_key_name(raw)
        known, alias, runs = _key_at(schema, key, release)
        if known:
            continue
        if alias is not None:
            problems.append(_alias_problem(raw, alias, release))
            continue
        hint = _lifetime_hint(runs, release)
        was = f" ({key} was a key: {hint})" if hint else ""
        effect = unknown.at("effect", release) if unknown else "unknown"
        message = unknown.at("message", release) if unknown else None
        problems.append(
            Problem(
                severity="warning",
                key=raw,
                message=f"LMCache {release} has no config key {key}{was}; "
                + (
                    "it drops the key with a warning and runs without it."
                    if effect == "dropped"
                    else "it never reads it: the setting does nothing."
                ),
                engine_message=message.replace("{key}", key).replace("<source>", "…") if message else None,
                sources=[*(e.source for e in runs[-1:]), *([unknown.source] if unknown else [])],
            )
        )
    return problems


def _key_at(schema: EngineSchema, key: str, release: Version) -> tuple[bool, SchemaEntry | None, list[SchemaEntry]]:
    """Whether ``release`` has the LMCache config key ``key``; else the alias entry that holds the name there,
    if one does; and the key's runs (what a lifetime hint says of a key the release lacks)."""
    known, runs = _runs((e for e in schema.lmcache_keys if e.name == key), release)
    if known is not None:
        return True, None, runs
    alias, _ = _runs((e for e in schema.lmcache_aliases if e.name == key), release)
    return False, alias, runs


def _alias_problem(raw: str, alias: SchemaEntry, release: Version) -> Problem:
    effect = alias.at("effect", release) or "unknown"
    target = alias.at("maps_to", release)
    message = alias.at("message", release)
    if effect.startswith("mapped"):
        text = f"{alias.name} is an old LMCache key name; LMCache {release} maps it to {target}, with a warning."
    elif effect == "dropped":
        text = (
            f"LMCache {release} lists {alias.name} as an alias of {target} but drops it as an unknown key: "
            "the setting never takes effect."
        )
    else:
        text = f"LMCache {release} keeps {alias.name} under its own name, which no key reads: the setting does nothing."
    return Problem(
        severity="warning",
        key=raw,
        message=text,
        engine_message=message.replace("<source>", "…") if message else None,
        instead=target if not effect.startswith("mapped") else None,
        sources=[alias.source],
    )


def _version(version: Version | str) -> Version:
    return version if isinstance(version, Version) else parse_version(version)


# --- check_version's lookup -------------------------------------------------------------------


def lookup(knowledge: Knowledge, name: str, vllm_version: Version, lmcache_version: Version) -> list[SchemaMatch]:
    """Every schema name spelled ``name`` (case, dashes, underscores and dots folded)."""
    schema = knowledge.engine_schema
    key = normalize_name(name)
    lm_key = normalize_name(lmcache_key_name(name))
    found: list[SchemaMatch] = []
    groups: dict[tuple[str, str, str], list[SchemaEntry]] = {}
    for entry in schema.config_fields:
        if normalize_name(entry.name or "") == key:
            groups.setdefault(("config_field", entry.name or "", entry.config or ""), []).append(entry)
    for entry in schema.extra_config:
        if normalize_name(entry.key or "") == key:
            owner = ", ".join(entry.connectors or ()) or "every connector"
            groups.setdefault(("extra_config_key", entry.key or "", owner), []).append(entry)
    for entry in schema.lmcache_adapter_extra_config:
        if normalize_name(entry.key or "") == key:
            groups.setdefault(("extra_config_key", entry.key or "", ADAPTER), []).append(entry)
    for entry in schema.vllm_env:
        if normalize_name(entry.name or "") == key:
            groups.setdefault(("env_var", entry.name or "", ENVS_OWNER), []).append(entry)
    for kind, table in (("lmcache_key", schema.lmcache_keys), ("lmcache_alias", schema.lmcache_aliases)):
        for entry in table:
            if normalize_name(entry.name or "") == lm_key:
                groups.setdefault((kind, entry.name or "", "LMCache"), []).append(entry)
    for (kind, entry_name, owner), runs in groups.items():
        version = lmcache_version if runs[0].package == "lmcache" else vllm_version
        found.append(_match(schema, kind, entry_name, owner, runs, version))  # type: ignore[arg-type]
    return _fold(found)


def _fold(found: list[SchemaMatch]) -> list[SchemaMatch]:
    """An LMCache name that is a key in some releases and an old name in others: the kind in force answers,
    and the other only adds its span (nixl_role: an alias from 0.3.7, a key before)."""
    live = [m for m in found if m.status == "available" and m.package == "lmcache"]
    if not live:
        return found
    kept = []
    for m in found:
        if m.package == "lmcache" and m.status != "available":
            other = next((x for x in live if x.name == m.name), None)
            if other is not None:
                other.answer += f" It was {_a(_KIND_WORDS[m.kind])} {_span_of(m)}."
                continue
        kept.append(m)
    return kept


def _span_of(match: SchemaMatch) -> str:
    first = f"from {match.introduced}" if match.introduced else "from the oldest release read"
    return f"{first} until {match.removed}" if match.removed else f"{first} on"


def _a(what: str) -> str:
    return ("an " if what[:1].lower() in "aeiou" or what.startswith("LMCache") else "a ") + what


def _match(
    schema: EngineSchema, kind: SchemaKind, name: str, owner: str, runs: list[SchemaEntry], version: Version
) -> SchemaMatch:
    package: Literal["vllm", "lmcache"] = runs[0].package
    read = _read(schema, package)
    asked = min(version, read[-1]) if read else version  # newer than the newest read: answered as of it
    entry = next((e for e in runs if e.holds_at(asked)), None)
    ended = [e for e in runs if e.removed is not None and e.removed <= asked]
    shown = entry or (ended[-1] if ended else runs[0])  # the run in force, else the last one before or the next
    status = _status(shown, asked, read)
    if_set = _if_set(schema, kind, shown, name, asked, status)
    changes = shown.default if isinstance(shown.default, tuple) else ()
    what = _KIND_WORDS[kind].format(owner=owner)
    label = f"{PRODUCT_LABELS[package]} {version}"
    span = _span(runs, read)
    if status == "available":
        env = (
            f"; set it as the environment variable {LMCACHE_ENV_PREFIX}{name.upper()}" if kind == "lmcache_key" else ""
        )
        answer = f"{name} is {_a(what)} in {label} (read {span}){env}."
    elif status == "unknown":
        answer = (
            f"{name} ({what}): unknown in {label}, older than {read[0]}, the oldest release read; it exists {span}."
        )
    else:
        answer = f"{name} is not {_a(what)} in {label}; it exists {span}."
    return SchemaMatch(
        name=name,
        kind=kind,
        owner=owner,
        package=package,
        version=str(version),
        status=status,
        answer=answer,
        introduced=as_text(shown.introduced),
        removed=as_text(shown.removed),
        type=shown.at("type", asked),
        default=shown.at("default", asked) if entry is not None else None,
        default_changes=[f"{c.since}: {c.value}" for c in changes],
        parse=shown.at("parse", asked) if kind == "env_var" else None,
        env_name=LMCACHE_ENV_PREFIX + name.upper() if package == "lmcache" else None,
        if_set=if_set,
        instead=shown.at("maps_to", asked) if kind == "lmcache_alias" else None,
        siblings=_siblings(schema, shown, asked) if kind == "config_field" and status == "available" else [],
        sources=[shown.source],
    )


# A class with more fields than this lists the first ones and says how many more.
_MAX_SIBLINGS = 10


def _siblings(schema: EngineSchema, entry: SchemaEntry, version: Version) -> list[str]:
    """The other fields of ``entry``'s class in ``version``: name, default, and a later default's release."""
    shown = []
    for other in schema.config_fields:
        if other.config != entry.config or other.name == entry.name or not other.holds_at(version):
            continue
        default = other.at("default", version)
        later = [c for c in other.default if c.since > version] if isinstance(other.default, tuple) else []
        moved = f" ({later[0].since}: {later[0].value})" if later else ""
        shown.append(f"{other.name} {default}{moved}")
    if len(shown) > _MAX_SIBLINGS:
        shown = [*shown[:_MAX_SIBLINGS], f"and {len(shown) - _MAX_SIBLINGS} more"]
    return shown


def _if_set(
    schema: EngineSchema, kind: SchemaKind, entry: SchemaEntry, name: str, version: Version, status: str
) -> str | None:
    """What setting the name does in ``version`` when it is not (or not plainly) there."""
    if kind == "lmcache_alias" and status == "available":
        return _alias_problem(name, entry, version).message
    if status not in ("removed", "not_yet"):
        return None
    if kind == "config_field":
        return _unknown_field_sentence(schema, entry.config or "", name, version)
    if kind == "extra_config_key":
        return f"Set in {version}, no code reads it: it is silently ignored."
    if kind == "env_var":  # other code may still read it by name: the name inventory's lines say where
        return f"Set in {version}, vllm/envs.py does not read it."
    unknown = next((e for e in schema.lmcache_unknown_key if e.holds_at(version)), None)
    effect = unknown.at("effect", version) if unknown else None
    if effect == "dropped":
        return f'Set in LMCache {version}, it is dropped with "Unknown configuration key: {name}".'
    return f"Set in LMCache {version}, it is never read."


def _unknown_field_sentence(schema: EngineSchema, config: str, name: str, version: Version) -> str:
    cls = _config(schema, config, version)
    if cls is not None and cls.at("unknown_fields", version) == "forbid":
        return (
            f"Set in {version}, vLLM refuses to start: {config} forbids unknown fields "
            f"(pydantic: '{name}: Unexpected keyword argument')."
        )
    return f"Set in {version}, pydantic drops it silently: {config} ignores unknown fields there."


# --- LMCACHE_* environment variables ----------------------------------------------------------


def _env_reader(schema: EngineSchema, name: str, lm: Version, vllm: Version | None) -> SchemaEntry | None:
    """The code of either package that spells ``name`` outside the key table (a whole name or its prefix)."""
    for entry in schema.lmcache_env:
        release = lm if entry.package == "lmcache" else vllm
        if release is None or not entry.holds_at(release):
            continue
        spelt = entry.name or ""
        if name == spelt or (entry.at("access", release) == "prefix" and name.startswith(spelt)):
            return entry
    return None


def check_lmcache_env(
    names: Iterable[str],
    lmcache_version: Version | str,
    knowledge: Knowledge,
    vllm_version: Version | str | None = None,
) -> list[Problem]:
    """``LMCACHE_*`` environment variables no code of the release reads, and old key names it maps or drops.

    LMCache reads each key of its table (and each alias) from ``LMCACHE_<KEY>``; any other variable is read only
    where some code spells it (``lmcache_env``: LMCache's own files, and vLLM's in-tree adapter when
    ``vllm_version`` is given). A variable nothing reads gets no message from LMCache: it is never looked at."""
    schema, release = knowledge.engine_schema, _version(lmcache_version)
    vllm = _version(vllm_version) if vllm_version is not None else None
    problems: list[Problem] = []
    for name in names:
        if not name.startswith(LMCACHE_ENV_PREFIX) or name != name.upper():
            continue
        key = lmcache_key_name(name)
        known, alias, runs = _key_at(schema, key, release)
        if known or _env_reader(schema, name, release, vllm) is not None:
            continue
        if alias is not None:
            problems.append(_alias_problem(name, alias, release))
            continue
        hint = _lifetime_hint(runs, release)
        was = f" ({key} was a config key: {hint})" if hint else ""
        also = f" nor vLLM {vllm}" if vllm is not None else ""
        problems.append(
            Problem(
                severity="warning",
                key=name,
                message=f"No code of LMCache {release}{also} reads the environment variable {name}{was}: LMCache "
                f"reads its config keys as {LMCACHE_ENV_PREFIX}<KEY> and {key} is none of them, so the setting "
                "does nothing.",
                sources=[*(e.source for e in runs[-1:]), schema.sources[-1]],
            )
        )
    return problems


_TRUE_WORDS, _FALSE_WORDS = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _same_value(written: str, default: str | int | float | bool | tuple[str, ...] | None) -> bool:
    text = written.strip().strip("\"'").lower()
    if isinstance(default, bool):
        return text in (_TRUE_WORDS if default else _FALSE_WORDS)
    return default is not None and text == str(default).lower()


def lmcache_leftover_default(
    name: str, value: str | None, lmcache_version: Version | str, knowledge: Knowledge
) -> Problem | None:
    """An ``LMCACHE_*`` variable the release no longer reads, set to the value it defaulted to while it was
    read: the line does nothing, and it did nothing before either (a leftover, not a lost setting)."""
    release = _version(lmcache_version)
    if value is None:
        return None
    for setting in knowledge.settings:
        if setting.name != name or setting.kind != "env_var" or setting.removed is None or release < setting.removed:
            continue
        before = [v for v in map(_version, knowledge.engine_schema.releases_read["lmcache"]) if v < setting.removed]
        last = ranged_at(setting.defaults, max(before)) if before else None
        if last is None or not _same_value(value, last.value):
            return None
        return Problem(
            severity="info",
            key=name,
            message=f"LMCache {release} no longer reads {name} (gone in {setting.removed}); {name}={value} was its "
            f"default while it was read, so the line changed nothing before and changes nothing now: drop it.",
            sources=list(setting.sources),
        )
    return None


# --- VLLM_* environment variables -------------------------------------------------------------

# The engine's argument parsing checks every VLLM_* variable against vllm/envs.py's environment_variables and
# logs the ones it does not define, from the release this feature entry gives (knowledge/features.yaml).
ENV_VALIDATION = "feature.unknown-vllm-env-logged"


def check_vllm_env(names: Iterable[str], vllm_version: Version | str, knowledge: Knowledge) -> list[Problem]:
    """``VLLM_*`` variables no code of the release reads (the name inventory's runs), so setting them does nothing."""
    release = _version(vllm_version)
    if not knowledge.name_inventory.releases_read.get("vllm") or not knowledge.engine_schema.was_read("vllm", release):
        return []
    validation = knowledge.by_id[ENV_VALIDATION]
    validated = isinstance(validation, Gated) and validation.exists_in(release)
    problems = []
    for name in names:
        if not name.startswith("VLLM_") or name != name.upper():
            continue
        runs = knowledge.name_inventory.vllm_env_runs(name)
        if any(_in_run(e.introduced, e.removed, release) for e in runs):
            continue
        gone = [e.removed for e in runs if e.removed is not None and e.removed <= release]
        was = f" (no longer from {max(gone)})" if gone else ""
        logged = ' and logs "Unknown vLLM environment variable detected"' if validated else ""
        problems.append(
            Problem(
                severity="warning",
                key=name,
                message=f"No code of vLLM {release} reads {name}{was}: the engine ignores it{logged}, so the setting "
                "does nothing.",
                sources=[*(knowledge.name_inventory.sources[:1]), "wheel:vllm==0.17.0:vllm/envs.py:1704-1710"],
            )
        )
    return problems


# How vllm/envs.py turns a variable's text into its value, for the parse rules whose refusal can be decided here:
# the Python conversion each runs on the text (`int("true")` raises ValueError as the engine's would).
_NUMERIC_PARSE = {
    "int(<env>)": int,
    "maybe_convert_int(<env>)": int,
    "bool(int(<env>))": int,
    "maybe_convert_bool(<env>)": int,
    "float(<env>)": float,
    "get_vllm_port": int,
}
_CHOICES_PARSE = re.compile(r"env_with_choices\(<env>, [^\[]*?(?P<choices>\[[^\]]*\])(?P<rest>[^\]]*)\)$")
ENV_READ_AT_START = "feature.engine-reads-every-vllm-env"


def _refusal(name: str, parse: str, text: str) -> str | None:
    """What ``parse`` raises for the variable's ``text``, or None where it takes it (or cannot be decided here)."""
    rule = parse.split(" if ", 1)[0]  # `int(<env>) if 'X' in os.environ else None`: the int() is what runs
    convert = _NUMERIC_PARSE.get(rule)
    if convert is not None:
        try:
            convert(text)
        except ValueError as exc:
            if rule == "get_vllm_port" and re.match(r"[a-z][a-z0-9+.-]*://", text, re.I):
                return f"ValueError: VLLM_PORT '{text}' appears to be a URI"
            return f"ValueError: {exc}"
        return None
    found = _CHOICES_PARSE.match(rule)
    if found is None:
        return None
    try:
        choices = [str(c) for c in ast.literal_eval(found["choices"])]
    except (ValueError, SyntaxError):
        return None
    folded = "case_sensitive=False" in found["rest"]
    if (text.lower() in [c.lower() for c in choices]) if folded else (text in choices):
        return None
    return f"ValueError: Invalid value '{text}' for {name}. Valid options: {choices}."


def check_vllm_env_values(
    items: Iterable[tuple[str, str]], vllm_version: Version | str, knowledge: Knowledge
) -> list[Problem]:
    """``VLLM_*`` variables (name, the text as set) whose text the release's own parse rule refuses
    (``int("true")``, a choice not in the list): the engine reads every variable once it has started
    (feature.engine-reads-every-vllm-env), so the ValueError stops it there."""
    release = _version(vllm_version)
    feature = knowledge.by_id.get(ENV_READ_AT_START)
    if not (isinstance(feature, Gated) and feature.exists_in(release)):
        return []
    if not knowledge.engine_schema.was_read("vllm", release):
        return []
    problems = []
    for name, text in items:
        entry, _ = _runs((e for e in knowledge.engine_schema.vllm_env if e.name == name), release)
        parse = entry.at("parse", release) if entry is not None else None
        raised = _refusal(name, parse, text) if parse else None
        if entry is None or parse is None or raised is None:
            continue
        problems.append(
            Problem(
                severity="error",
                key=name,
                message=f"vLLM {release} reads {name} with {parse.replace('<env>', repr(text))}, which raises: once "
                "started, the engine reads every variable it defines, so the server does not start",
                engine_message=raised,
                sources=[entry.source, *feature.sources[-1:]],
            )
        )
    return problems


# Prefixes of other programs' variables that are one letter from VLLM (an app's LLM_HOST, a VLM's VLM_MODEL).
_OTHER_PREFIXES = frozenset({"LLM", "VLM", "ELM", "HELM", "LM"})


def _env_value(parse: str, text: str) -> object:
    """What the release's parse rule made of the text, where this module can run the rule (else the text)."""
    convert = _NUMERIC_PARSE.get(parse.split(" if ", 1)[0])
    try:
        value = convert(text) if convert is not None else text
    except ValueError:
        return text
    return bool(value) if parse.startswith(("bool(", "maybe_convert_bool(")) else value


def vllm_leftover_default(
    name: str, value: str | None, vllm_version: Version | str, knowledge: Knowledge
) -> Problem | None:
    """A ``VLLM_*`` variable the release no longer reads, set to what its last reader made of its default
    (VLLM_USE_V1=1 after 0.11.0): the line does nothing, and did nothing before (a leftover, not a lost setting)."""
    release = _version(vllm_version)
    if value is None:
        return None
    read = sorted(map(_version, knowledge.engine_schema.releases_read.get("vllm", ())))
    for entry in knowledge.engine_schema.vllm_env:
        if entry.name != name or entry.removed is None or release < entry.removed:
            continue
        last = max((v for v in read if entry.holds_at(v)), default=None)
        default, parse = (entry.at("default", last), entry.at("parse", last)) if last else (None, None)
        if default is None or parse is None:
            continue
        try:
            default_text = str(ast.literal_eval(default))
        except (ValueError, SyntaxError):
            continue  # a default computed at run time (a path, another variable) is not compared
        written = value.strip().strip("\"'")
        if _env_value(parse, written) != _env_value(parse, default_text):
            continue
        return Problem(
            severity="info",
            key=name,
            message=f"No code of vLLM {release} reads {name} (gone in {entry.removed}); {name}={value} is the default "
            f"{last}, the last release that read it, had: the line changed nothing before and changes nothing now.",
            sources=[entry.source],
        )
    return None


def misspelt_vllm_env(name: str, knowledge: Knowledge) -> str | None:
    """The vLLM variable a name outside VLLM_* looks like a misspelling of (VLLLM_ATTENTION_BACKEND,
    WILM_USE_TRITON_FLASH_ATTENTION), or None. The prefix must be within two edits of VLLM and not another
    program's, and the rest close to a vLLM variable's: of two words or more one edit away (unless the prefix keeps
    VLL), of three or more two edits away."""
    prefix, _, rest = name.partition("_")
    if not name.isupper() or not rest or prefix == "VLLM" or prefix in _OTHER_PREFIXES:
        return None
    edits = _edits(prefix, "VLLM")
    if edits > 2:
        return None
    suffixes = knowledge.name_inventory.vllm_env_by_suffix
    close = difflib.get_close_matches(rest, list(suffixes), n=1, cutoff=0.85)
    # the further the prefix is from VLLM, the more words of a vLLM name the rest must have (MLLM_PORT is an app's)
    words_needed = 1 if "VLL" in prefix else edits + 1
    if not close or close[0].count("_") + 1 < words_needed:
        return None
    return suffixes[close[0]]


def _edits(a: str, b: str) -> int:
    """Levenshtein distance between two short words."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def vllm_env_ever_read(name: str, knowledge: Knowledge) -> bool:
    """Whether some covered vLLM release reads the variable (the name inventory's runs)."""
    return bool(knowledge.name_inventory.vllm_env_runs(name))


def _in_run(introduced: Version | None, removed: Version | None, release: Version) -> bool:
    return (introduced is None or introduced <= release) and (removed is None or release < removed)


# --- values of LMCache config file keys -------------------------------------------------------

_CONVERTERS: dict[str, Callable[[Any], Any]] = {"int": int, "float": float}


def check_lmcache_values(
    items: Iterable[tuple[str, str]], lmcache_version: Version | str, knowledge: Knowledge
) -> list[Problem]:
    """Values of an LMCache config file (key, the YAML scalar as written) that the key's converter refuses.

    The converters checked are the builtins the key table names (``int``, ``float``), run here on the value
    as YAML loads it, as LMCache's file loader does; what a refusal does is the release's own behaviour
    (``lmcache_bad_value``): the ValueError ends the load (error), or the key is set to None with a warning."""
    schema, release = knowledge.engine_schema, _version(lmcache_version)
    behaviour, _ = _runs(schema.lmcache_bad_value, release)
    effect = behaviour.at("effect", release) if behaviour else None
    if behaviour is None or effect not in ("raises", "set to None"):
        return []
    problems: list[Problem] = []
    for key, text in items:
        entry, _ = _runs((e for e in schema.lmcache_keys if e.name == key), release)
        converter = _CONVERTERS.get(entry.at("converter", release) or "") if entry else None
        if entry is None or converter is None:
            continue
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if value is None or isinstance(value, bool):  # None skips the converter; int(True) is 1
            continue
        try:
            converter(value)
            continue
        except (TypeError, ValueError) as exc:
            error = str(exc)
        said = (behaviour.at("message", release) or "{error}").replace("{key}", key)
        said = said.replace("'{value}'", repr(value)).replace("{value}", str(value)).replace("{error}", error)
        raises = effect == "raises"
        problems.append(
            Problem(
                severity="error" if raises else "warning",
                key=key,
                message=f"{key} is {entry.at('type', release)} in LMCache {release}; {value!r} is refused by its "
                f"converter {entry.at('converter', release)}(): "
                + (
                    "the ValueError ends loading the config, so the LMCache connector fails at start-up."
                    if raises
                    else f"LMCache warns and sets {key} to None, not its default {entry.at('default', release)}."
                ),
                engine_message=f"ValueError: {said}" if raises else said,
                sources=[entry.source, behaviour.source],
            )
        )
    return problems


# --- what the schema says changed between two releases -------------------------------------------

# The config classes whose fields an upgrade's notes list: what a KV-caching deployment writes into
# --kv-transfer-config, --kv-events-config and the cache flags.
NOTED_CONFIGS = ("KVTransferConfig", "KVEventsConfig", "CacheConfig")


class SchemaChange(BaseModel):
    """Names of the engine's schema that appear or go in one release: a config class's fields, the connectors
    KVConnectorFactory registers, one connector's kv_connector_extra_config keys."""

    version: str
    owner: str = Field(description="the config class, 'KVConnectorFactory', or the connector whose keys these are")
    added: list[str]
    removed: list[str]
    refused: bool = Field(
        default=False,
        description="the class forbids unknown fields there: a config that still sets a removed one "
        "is refused at start-up",
    )

    def line(self) -> str:
        what = "; ".join(
            f"{verb} {', '.join(names)}" for verb, names in (("added", self.added), ("removed", self.removed)) if names
        )
        kind = (
            "registers" if self.owner == "KVConnectorFactory" else "fields" if self.owner in NOTED_CONFIGS else "keys"
        )
        text = f"  {self.version}  [engine schema] {self.owner} {kind}: {what}"
        if self.refused and self.removed:
            text += " (the class refuses unknown fields there: a config that still sets one does not start)"
        return text


def schema_changes(
    schema: EngineSchema, low: Version, high: Version, connectors: Collection[str] | None = None
) -> list[SchemaChange]:
    """What the read releases after ``low`` up to ``high`` add and remove, release by release; with
    ``connectors``, only theirs among the registrations and extra-config keys."""
    read = [v for v in _read(schema, "vllm") if low <= v <= high]
    groups: dict[str, list[tuple[str, SchemaEntry]]] = {}
    for entry in schema.config_fields:
        if entry.config in NOTED_CONFIGS and entry.name:
            groups.setdefault(entry.config, []).append((entry.name, entry))
    for entry in schema.connectors:
        if entry.name and (connectors is None or entry.name in connectors):
            groups.setdefault("KVConnectorFactory", []).append((entry.name, entry))
    for entry in schema.extra_config:
        for owner in entry.connectors or ():
            if entry.key and (connectors is None or owner in connectors):
                groups.setdefault(owner, []).append((entry.key, entry))
    found: list[SchemaChange] = []
    for before, after in itertools.pairwise(read):
        for owner, names in groups.items():
            had = {n for n, e in names if e.holds_at(before)}
            has = {n for n, e in names if e.holds_at(after)}
            if had != has:
                config = _config(schema, owner, after) if owner in NOTED_CONFIGS else None
                # a JSON config refuses what it no longer has; a CacheConfig field goes with its flag
                json_config = owner in ("KVTransferConfig", "KVEventsConfig")
                refused = json_config and config is not None and config.at("unknown_fields", after) == "forbid"
                found.append(
                    SchemaChange(
                        version=str(after),
                        owner=owner,
                        added=sorted(has - had),
                        removed=sorted(had - has),
                        refused=refused,
                    )
                )
    return found
