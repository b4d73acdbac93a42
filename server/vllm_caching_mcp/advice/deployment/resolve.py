"""What one workload means for a vLLM release: its effective flags, environment, connectors in use,
offload tiers and the facts review rules compare."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, cast

from ...knowledge import Connector, FactName, Gpu, Knowledge, Setting, ranged_at
from ...versions import Version, in_range
from .bounds import clip
from .facts import InUse, Numbers, container_facts, lmcache_disk_facts, memory_facts, visible_gpus, workload_facts
from .flags import SWITCHES, canonical_flag, flag_bool, switches_fixed
from .model import (
    ConnectorUse,
    Deployment,
    Effective,
    EnvUse,
    FlagUse,
    LMCacheConfig,
    Location,
    VersionSource,
    Workload,
)


def find_gpu(knowledge: Knowledge, text: str | None) -> Gpu | None:
    """A GPU entry from a name or node label: 'H100 SXM', 'NVIDIA-H100-80GB-HBM3', 'gpu.h200-sxm', 'L40S'."""
    return knowledge.hardware.find_gpu(text) if text else None


def _connector_entry(knowledge: Knowledge, name: str) -> Connector | None:
    for c in knowledge.connectors:
        if c.name == name or name in c.aliases:
            return c
    return None


def _env_literal(env: dict[str, EnvUse], name: str) -> str | None:
    use = env.get(name)
    return use.value if use is not None else None


# A --kv-transfer-config nests a few levels (MultiConnector > connectors > extra config > tiers).
_MAX_JSON_DEPTH = 20


def _effective_flags(
    workload: Workload, knowledge: Knowledge, notes: list[str], version: Version | None = None
) -> tuple[dict[str, FlagUse], dict[str, Any] | None, Location | None]:
    """Each flag under its full name (an abbreviation under the option it abbreviates in ``version``),
    the last occurrence winning as in argparse, and the --kv-transfer-config (JSON or dotted keys)
    with where it was given."""
    flags: dict[str, FlagUse] = {}
    transfer: dict[str, Any] | None = None
    transfer_location: Location | None = None
    accepted = knowledge.cli_inventory.accepted(version) if version is not None else frozenset()
    for flag in workload.flags:
        name = canonical_flag(flag.name, accepted)
        if name != flag.name:
            flag = flag.model_copy(update={"name": name})
        if name.startswith("--no-"):
            name, flag = "--" + name[5:], flag.model_copy(update={"name": "--" + name[5:], "value": False})
        if name.startswith("-O") and version is not None:
            flag = _optimization_word(flag, version, notes)
            name = flag.name
        base, dot, sub = name.partition(".")
        base = "--compilation-config" if base == "-cc" else base
        if dot and base == "--kv-transfer-config":
            transfer = transfer or {}
            if _set_dotted(transfer, sub, flag, notes):
                transfer_location = flag.location
            flags[base] = flag.model_copy(update={"name": base})
            continue
        if base == "--compilation-config":
            flags[base] = _compilation_config(flags.get(base), sub if dot else None, flag, notes)
            continue
        if not name.startswith("--"):  # short aliases such as -tp, -pp
            full = next((g.name for g in knowledge.find(name) if name in g.aliases and g.name.startswith("--")), None)
            if full is not None:
                name, flag = full, flag.model_copy(update={"name": full})
        if name == "--enable-hybrid-kv-cache-manager":
            on = flag_bool(flag)
            name = "--disable-hybrid-kv-cache-manager"
            flag = flag.model_copy(update={"name": name, "value": (not on) if on is not None else None})
        flags[name] = flag
        if name == "--kv-transfer-config" and isinstance(flag.value, str):
            # A config with a reference the files do not set (`"kv_port":"$kv_port"` in a loop) is still JSON:
            # what is written out is read, and the fields that hold the reference are not judged.
            parsed = _transfer_json(flag, notes, quiet=flag.unresolved is not None)
            if isinstance(parsed, dict):
                transfer, transfer_location = _without_references(parsed, flag, notes), flag.location
    return flags, transfer, transfer_location


# What vLLM's parser makes of -O words (FlexibleArgumentParser.parse_args): up to 0.11.x -O is --compilation-config
# (-O3 its level); from 0.12.0 -O N is --optimization-level N, -cc is --compilation-config, and -O.KEY is rewritten
# to -cc.KEY with a deprecation warning; from 0.13.0 -O.KEY=V is read as --optimization-level .KEY=V.
_OPTIMIZATION_LEVEL_FROM = Version("0.12.0")
_DOTTED_O_REFUSED_FROM = Version("0.13.0")


def _optimization_word(flag: FlagUse, version: Version, notes: list[str]) -> FlagUse:
    """An -O word as the release's parser reads it (wheel:vllm==0.11.0:vllm/utils/__init__.py:1891-1902,
    wheel:vllm==0.12.0:vllm/utils/argparse_utils.py:247-270,
    wheel:vllm==0.13.0:vllm/utils/argparse_utils.py:247-251)."""
    dotted = flag.name.startswith("-O.")
    if version < _OPTIMIZATION_LEVEL_FROM:
        if dotted:
            return flag.model_copy(update={"name": "--compilation-config" + flag.name[2:]})
        level = flag.value if isinstance(flag.value, str) and flag.value.isdigit() else None
        value = json.dumps({"level": int(level)}) if level is not None else flag.value
        return flag.model_copy(update={"name": "--compilation-config", "value": value})
    if not dotted:
        return flag.model_copy(update={"name": "--optimization-level"})
    if version < _DOTTED_O_REFUSED_FROM:
        notes.append(
            f"{flag.location}: {clip(flag.written, 60)}: vLLM {version} reads -O.KEY as -cc.KEY (--compilation-config) "
            "with a deprecation warning; from 0.13.0 it is read as an optimization level and refused"
        )
        return flag.model_copy(update={"name": "--compilation-config" + flag.name[2:]})
    value = f"{flag.name[2:]}={flag.value}" if isinstance(flag.value, str) else flag.name[2:]
    return flag.model_copy(update={"name": "--optimization-level", "value": value})


def _compilation_config(before: FlagUse | None, keys: str | None, flag: FlagUse, notes: list[str]) -> FlagUse:
    """--compilation-config as vLLM's parser reads it, kept as one flag whose value is JSON: each occurrence (its
    JSON, or a ``--compilation-config.a.b`` / ``-O.a.b`` value, read as JSON, else as text) is validated against
    the class on its own, so every key given in any of them is kept, merged into one object."""
    renamed = flag.model_copy(update={"name": "--compilation-config"})
    merged = _json_object_of(before)
    if keys is None:
        given = _json_object_of(flag)
        if not merged or not given:
            return renamed
        _merge(merged, given)
    else:
        try:
            value: Any = json.loads(flag.value) if isinstance(flag.value, str) else flag.value
        except ValueError:
            value = flag.value
        if not _set_dotted(merged, keys, flag.model_copy(update={"value": value}), notes):
            return before or renamed
    return renamed.model_copy(update={"value": json.dumps(merged)})


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _json_object_of(flag: FlagUse | None) -> dict[str, Any]:
    if flag is None or not isinstance(flag.value, str):
        return {}
    try:
        parsed = json.loads(flag.value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _set_dotted(transfer: dict[str, Any], keys: str, flag: FlagUse, notes: list[str]) -> bool:
    """Apply ``--kv-transfer-config.a.b value``; false (with a note) when it cannot be."""
    parts = keys.split(".")
    if len(parts) > _MAX_JSON_DEPTH:
        deep = f"is nested {len(parts):,} keys deep, more than {_MAX_JSON_DEPTH}"
        notes.append(f"{flag.location}: {clip(flag.written, 60)} {deep}; it is not used")
        return False
    target = transfer
    for depth, part in enumerate(parts[:-1]):
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            given = ".".join(parts[: depth + 1])
            notes.append(
                f"{flag.location}: {clip(flag.written, 80)} sets a key inside {given}, which is already "
                f"{clip(repr(child), 40)}; it is not used"
            )
            return False
        target = child
    target[parts[-1]] = flag.value
    return True


_REFERENCE = re.compile(r"\$(\{[^}]*\}|\(\([^)]*\)\)|\w+)")


def _without_references(config: dict[str, Any], flag: FlagUse, notes: list[str]) -> dict[str, Any]:
    """``config`` without the values that still hold a shell reference the files do not set (a note names them)."""
    if flag.unresolved is None:
        return config
    dropped: list[str] = []

    def keep(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {k: v for k, item in value.items() if (v := keep(item, f"{path}{k}.")) is not _DROPPED}
        if isinstance(value, str) and _REFERENCE.search(value):
            dropped.append(path.rstrip("."))
            return _DROPPED
        return value

    kept = keep(config, "")
    if dropped:
        notes.append(
            f"{flag.location}: --kv-transfer-config is read without {', '.join(dropped)}: "
            f"{'they hold' if len(dropped) > 1 else 'it holds'} a value the files do not set ({flag.unresolved})"
        )
    return cast(dict[str, Any], kept)


_DROPPED = object()


def _transfer_json(flag: FlagUse, notes: list[str], quiet: bool = False) -> Any:
    """The --kv-transfer-config JSON, or None with a note on why it cannot be read (none when ``quiet``: the
    value holds a reference the files do not set, and the reader has said so)."""
    try:
        parsed = json.loads(str(flag.value))
    except RecursionError:
        notes.append(f"{flag.location}: --kv-transfer-config is nested too deep to read; it is not used")
        return None
    except ValueError as exc:  # a JSONDecodeError, or an integer of more than 4,300 digits
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        if not quiet:
            notes.append(
                f"{flag.location}: --kv-transfer-config is not valid JSON ({clip(problem, 90)}); vLLM rejects it"
            )
        return None
    if _json_depth(parsed) > _MAX_JSON_DEPTH:
        notes.append(f"{flag.location}: --kv-transfer-config is nested more than {_MAX_JSON_DEPTH} levels; not used")
        return None
    return parsed


def _json_depth(value: Any) -> int:
    """How deep lists and objects nest in ``value``, counted without recursion (stops past the limit)."""
    deepest, pending = 0, [(value, 1)]
    while pending and deepest <= _MAX_JSON_DEPTH:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            pending += [(child, depth + 1) for child in children]
    return deepest


def resolve(
    workload: Workload,
    deployment: Deployment,
    knowledge: Knowledge,
    version: Version,
    version_source: VersionSource,
    gpu_hint: str | None = None,
) -> Effective:
    """The configuration vLLM ``version`` runs this workload with; the workload and deployment are not changed."""
    workload = switches_fixed(workload, SWITCHES(knowledge))
    notes: list[str] = []
    flags, transfer, transfer_location = _effective_flags(workload, knowledge, notes, version)
    env = _effective_env(workload, deployment, notes)
    numbers = Numbers(flags, notes, transfer_location)
    backend_flag = flags.get("--kv-offloading-backend")
    backend = _offload_backend(backend_flag, knowledge, version)
    size = numbers.flag("--kv-offloading-size")
    shorthand = size is not None and backend is not None
    extras = _extra_configs(knowledge, transfer, notes, transfer_location)
    if shorthand:
        where = (backend_flag or flags["--kv-offloading-size"]).location
        in_use = _shorthand_connectors(knowledge, version, str(backend), env, where)
    else:
        in_use = _transfer_connectors(knowledge, version, transfer, transfer_location, extras)
    tiers = _secondary_tiers(extras, notes, transfer_location)
    facts, fact_locations = workload_facts(workload, numbers, in_use, env)
    visible_gpus(env, facts, fact_locations)
    container_facts(workload, in_use, numbers, env, knowledge, version, facts, fact_locations)
    lmcache_disk_facts(workload, in_use, numbers, env, facts, fact_locations)
    gpu = find_gpu(knowledge, gpu_hint) or find_gpu(knowledge, workload.gpu_label)
    model, model_flag = workload.model, flags.get("--model")
    if model is None and model_flag is not None and isinstance(model_flag.value, str) and not model_flag.unresolved:
        model = model_flag.value
    return Effective(
        workload=workload.name,
        version=str(version),
        version_source=version_source,
        flags=flags,
        env=env,
        model=model,
        image=workload.image,
        connectors=[c.use for c in in_use],
        offload_shorthand=shorthand,
        offload_backend=backend if shorthand else None,
        transfer_config=transfer,
        transfer_location=transfer_location,
        extra_configs=extras,
        tiers=tiers,
        gpu=gpu.id if gpu else None,
        facts=facts,
        fact_locations=fact_locations,
        notes=notes,
    )


def _effective_env(workload: Workload, deployment: Deployment, notes: list[str]) -> dict[str, EnvUse]:
    """The variables the workload sees: its LMCache config files', then its own, which override them."""
    env: dict[str, EnvUse] = {}
    for config in _applied_lmcache_configs(workload, deployment.lmcache_configs, notes):
        for use in config.env:
            env[use.name] = use
    for use in workload.env:
        env[use.name] = use
    return env


def _applied_lmcache_configs(workload: Workload, configs: list[LMCacheConfig], notes: list[str]) -> list[LMCacheConfig]:
    """The LMCache config files this server reads: the one its LMCACHE_CONFIG_FILE names (matched by
    file name: a mount path and a document or ConfigMap key seldom share directories), else all given."""
    named = next((use for use in reversed(workload.env) if use.name == "LMCACHE_CONFIG_FILE"), None)
    if named is None or not configs:
        return configs
    if named.value is None:
        notes.append(
            f"{named.location}: LMCACHE_CONFIG_FILE is set from {named.reference}, so which LMCache config file "
            "this server reads is not known; every one given is read"
        )
        return configs
    wanted = named.value.rsplit("/", 1)[-1]
    applied = [c for c in configs if c.name.rsplit("/", 1)[-1] == wanted]
    others = sorted({c.name for c in configs if c not in applied})
    said = f"{named.location}: LMCACHE_CONFIG_FILE={clip(named.value, 200)}"
    if not applied:
        notes.append(
            f"{said} names a file that is not among the documents, so its settings are not known; "
            f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} not read by {workload.name}"
        )
    else:
        notes.append(
            f"{said}: {workload.name} reads {', '.join(sorted({c.name for c in applied}))}"
            + (f", not {', '.join(others)}" if others else "")
        )
    return applied


def _offload_backend(flag: FlagUse | None, knowledge: Knowledge, version: Version) -> str | None:
    """The --kv-offloading-backend given, else the release's default (none before 0.14.0)."""
    if flag is not None and isinstance(flag.value, str):
        return flag.value
    setting = next((s for s in knowledge.settings if s.id == "flag.kv-offloading-backend"), None)
    default = ranged_at(setting.defaults, version) if isinstance(setting, Setting) else None
    return str(default.value) if default is not None and default.value is not None else None


_Via = Literal["kv-transfer-config", "offload-shorthand", "multi-connector"]


def _in_use(
    knowledge: Knowledge, version: Version, name: str, via: _Via, where: Location, extra: dict[str, Any] | None
) -> InUse:
    entry = _connector_entry(knowledge, name)
    use = ConnectorUse(
        name=name,
        entry_id=entry.id if entry else None,
        via=via,
        location=where,
        hma=entry.hma_at(version) if entry is not None else None,
    )
    return InUse(use, entry, extra)


def _shorthand_connectors(
    knowledge: Knowledge,
    version: Version,
    backend: str,
    env: dict[str, EnvUse],
    where: Location,
) -> list[InUse]:
    """The connector --kv-offloading-backend ``backend`` selects in this release: the mapping whose
    variable is set to a matching value, else the plain one; none when no mapping covers the release.
    The shorthand writes the connector's config itself, so it has no extra config of the user's."""
    mapping = None
    for m in knowledge.offload_shorthand:
        if m.backend != backend or not in_range(m.versions, version):
            continue
        if m.when_env is not None:
            value = _env_literal(env, m.when_env.name)
            if value is None or not re.search(m.when_env.matches, value):
                continue
            mapping = m
            break
        mapping = mapping or m
    if mapping is None:
        return []
    entry = knowledge.by_id.get(mapping.connector)
    name = entry.name if isinstance(entry, Connector) else mapping.connector
    return [_in_use(knowledge, version, name, "offload-shorthand", where, None)]


def _transfer_connectors(
    knowledge: Knowledge,
    version: Version,
    transfer: dict[str, Any] | None,
    where: Location | None,
    extras: list[dict[str, Any]],
) -> list[InUse]:
    """The --kv-transfer-config connector, then the ones it wraps, each with its own extra config."""
    if transfer is None or not isinstance(transfer.get("kv_connector"), str) or where is None:
        return []
    root = _in_use(
        knowledge, version, transfer["kv_connector"], "kv-transfer-config", where, extras[0] if extras else None
    )
    found = [root]
    for child in _children(root.entry, transfer.get("kv_connector_extra_config")):
        if isinstance(child.get("kv_connector"), str):
            extra = child.get("kv_connector_extra_config")
            found.append(
                _in_use(
                    knowledge,
                    version,
                    child["kv_connector"],
                    "multi-connector",
                    where,
                    extra if isinstance(extra, dict) else None,
                )
            )
    return found


def _children(entry: Connector | None, extra: Any) -> list[dict[str, Any]]:
    """The configs of the connectors a wrapping connector (MultiConnector) lists in its extra config."""
    key = entry.children_key if entry is not None else None
    listed = extra.get(key) if key is not None and isinstance(extra, dict) else None
    return [child for child in listed if isinstance(child, dict)] if isinstance(listed, list) else []


def _extra_configs(
    knowledge: Knowledge, transfer: dict[str, Any] | None, notes: list[str], where: Location | None
) -> list[dict[str, Any]]:
    """The kv_connector_extra_config of the --kv-transfer-config, then those of the connectors it wraps."""
    root = (transfer or {}).get("kv_connector_extra_config")
    if not isinstance(root, dict):
        return []
    name = (transfer or {}).get("kv_connector")
    entry = _connector_entry(knowledge, name) if isinstance(name, str) else None
    if entry is not None and entry.children_key is not None:
        listed = root.get(entry.children_key)
        if listed is not None and not isinstance(listed, list):
            notes.append(f"{where}: kv_connector_extra_config.{entry.children_key} is not a list; it is not used")
    children = [child.get("kv_connector_extra_config") for child in _children(entry, root)]
    return [root, *(extra for extra in children if isinstance(extra, dict))]


def _secondary_tiers(extras: list[dict[str, Any]], notes: list[str], where: Location | None) -> list[str]:
    """The types of the native secondary tiers (TieringOffloadingSpec) the extra configs list."""
    tiers: list[str] = []
    for extra in extras:
        listed = extra.get("secondary_tiers")
        if listed is not None and not isinstance(listed, list):
            notes.append(f"{where}: kv_connector_extra_config.secondary_tiers is not a list; it is not used")
            continue
        tiers += [t["type"] for t in listed or [] if isinstance(t, dict) and isinstance(t.get("type"), str)]
    return tiers


def resolve_cache_server(workload: Workload, knowledge: Knowledge, version: Version) -> Effective:
    """An LMCache server as the rules about it see it: its options, variables, and the host memory it pins
    (``host_offload_gib``: its buffer option, of any release that has one, since its image seldom names the
    release) against its container's memory."""
    flags = {f.name: f for f in workload.flags}
    notes: list[str] = []
    numbers = Numbers(flags, notes, None)
    facts: dict[FactName, float] = {}
    locations: dict[FactName, Location] = {}
    server = next((s for s in knowledge.servers if s.id == workload.server), None)
    for option in server.buffer_flags if server is not None else ():
        gib = numbers.flag(option.flag)
        if gib is not None:
            facts["host_offload_gib"], locations["host_offload_gib"] = gib, flags[option.flag].location
    memory_facts(workload, facts, locations)
    return Effective(
        workload=workload.name,
        version=str(version),
        version_source="assumed-newest",
        flags=flags,
        env={use.name: use for use in workload.env},
        model=None,
        image=workload.image,
        connectors=[],
        offload_shorthand=False,
        offload_backend=None,
        transfer_config=None,
        transfer_location=None,
        tiers=[],
        facts=facts,
        fact_locations=locations,
        notes=notes,
    )
