"""The knowledge base: schema, loader and cross-reference checks.

`knowledge/*.yaml` is the single source of truth. Each file is validated against the
pydantic models below when it is loaded, once per process; then the whole is checked
for references that do not resolve and versions that are not releases. A broken file
raises `KnowledgeError` naming the file, the entry and the field.

Every entry that states a fact carries `sources` and `verified_at`. A source is one of

- ``wheel:vllm==0.33.0:vllm/config/cache.py:120`` (released code, path, optional line),
- ``issue:vllm-project/vllm#41847`` or ``pr:vllm-project/vllm#41847``,
- ``pypi:vllm`` (the registry's own metadata, e.g. upload dates),
- an ``https://`` address (vendor datasheets, documentation),
- ``reference:PATH`` (carried over from the founding reference text and not yet
  confirmed elsewhere: the answer says so).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import re
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .versions import Version, parse_specifier, parse_version

Component = Literal["vllm", "lmcache", "nixl", "mooncake", "sglang"]
Evidence = Literal["wheel", "primary", "reference"]

_SOURCE_PATTERNS = (
    re.compile(r"^wheel:(vllm|lmcache)==\d+(\.\d+)+(\.post\d+)?:[\w./-]+\.(py|txt|json|cfg|toml|in)(:\d+(-\d+)?)?$"),
    re.compile(r"^(issue|pr):[\w.-]+/[\w.-]+#\d+$"),
    re.compile(r"^pypi:[\w.-]+$"),
    re.compile(r"^https://\S+$"),
    re.compile(r"^reference:[\w./-]+$"),
)
_ID = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")


def _check_source(text: str) -> str:
    if not any(p.match(text) for p in _SOURCE_PATTERNS):
        raise ValueError(
            "a source is 'wheel:PKG==VERSION:PATH[:LINE]', 'issue:OWNER/REPO#N', 'pr:OWNER/REPO#N', "
            f"'pypi:NAME', an https:// address or 'reference:PATH'; got {text!r}"
        )
    return text


def _check_version(text: str) -> str:
    parse_version(text)
    return text


def _check_specifier(text: str) -> str:
    parse_specifier(text)
    return text


def _check_id(text: str) -> str:
    if not _ID.match(text):
        raise ValueError(f"an id is lower-case letters, digits and . _ + -; got {text!r}")
    return text


Source = Annotated[str, AfterValidator(_check_source)]
VersionText = Annotated[str, AfterValidator(_check_version)]
SpecifierText = Annotated[str, AfterValidator(_check_specifier)]
EntryId = Annotated[str, AfterValidator(_check_id)]


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(Frozen):
    """Anything that states a fact: where it comes from and when that was last checked."""

    sources: tuple[Source, ...] = Field(min_length=1)
    verified_at: dt.date

    @property
    def evidence(self) -> Evidence:
        """The strongest kind of source behind the fact."""
        kinds = {s.split(":", 1)[0] for s in self.sources}
        if "wheel" in kinds:
            return "wheel"
        if kinds - {"reference"}:
            return "primary"
        return "reference"


class Change(Sourced):
    """A behaviour change that first holds in ``version``."""

    version: VersionText
    summary: str


class Ranged(Frozen):
    """A value that holds for the releases in ``versions`` (a PEP 440 range; empty means all)."""

    versions: SpecifierText = ""
    value: str | int | float | bool | tuple[str, ...] | None
    note: str | None = None


class Gated(Sourced):
    """Something that exists in some releases and not others: a flag, a connector, a metric."""

    id: EntryId
    name: str
    aliases: tuple[str, ...] = ()
    component: Component = "vllm"
    summary: str
    # Each is the first release in which the state holds; `introduced: null` means the
    # thing is already in the oldest release the knowledge covers.
    introduced: VersionText | None = None
    deprecated: VersionText | None = None
    removed: VersionText | None = None
    instead: str | None = None
    replaced_by: EntryId | None = None
    changes: tuple[Change, ...] = ()
    related: tuple[EntryId, ...] = ()

    @model_validator(mode="after")
    def _lifecycle_in_order(self) -> Gated:
        points = [(label, getattr(self, label)) for label in ("introduced", "deprecated", "removed")]
        present = [(label, Version(v)) for label, v in points if v is not None]
        for (a, va), (b, vb) in itertools.pairwise(present):
            if not va < vb and not (a == "deprecated" and va == vb):
                raise ValueError(f"{b} ({vb}) must come after {a} ({va})")
        return self


SettingKind = Literal["cli_flag", "config_field", "env_var", "spec_key", "lmcache_config", "sglang_flag"]
Scope = Literal[
    "total_across_ranks",
    "per_rank",
    "per_gpu",
    "per_process",
    "per_instance",
    "per_request",
    "global",
]


class Setting(Gated):
    """A CLI flag, engine config field, environment variable or connector config key."""

    kind: SettingKind
    unit: str | None = None
    scope: Scope | None = None
    type: str | None = None
    config_path: str | None = None
    defaults: tuple[Ranged, ...] = ()
    accepted_values: tuple[Ranged, ...] = ()


class Feature(Gated):
    """A capability that appeared (or went) in a release, beyond any single flag."""


HmaSupport = Literal["yes", "no", "conditional"]


class Connector(Gated):
    """A KV connector as registered in vLLM's `KVConnectorFactory`."""

    module: str | None = None
    requires: tuple[str, ...] = ()
    hma: tuple[Ranged, ...] = ()
    roles: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _hma_values(self) -> Connector:
        for r in self.hma:
            if r.value not in ("yes", "no", "conditional"):
                raise ValueError(f"hma value must be 'yes', 'no' or 'conditional'; got {r.value!r}")
        return self


MetricType = Literal["counter", "gauge", "histogram", "info"]


class Metric(Gated):
    """A Prometheus metric family name as exposed on `/metrics`."""

    type: MetricType


Severity = Literal["error", "warning", "info"]


class Pitfall(Sourced):
    """A configuration mistake worth warning about, for the releases in ``versions``."""

    id: EntryId
    title: str
    severity: Severity
    versions: SpecifierText = ""
    components: tuple[Component, ...] = ("vllm",)
    why: str
    fix: str
    related: tuple[EntryId, ...] = ()


BugState = Literal["open", "closed"]
StateReason = Literal["completed", "not_planned", "duplicate", "reopened"]


class LinkedPull(Frozen):
    ref: Annotated[str, AfterValidator(_check_source)]
    merged: bool | None = None


class BugSnapshot(Frozen):
    """The issue's state as last read from its tracker."""

    state: BugState
    state_reason: StateReason | None = None
    closed_at: dt.date | None = None
    closed_by: str | None = None
    linked_pulls: tuple[LinkedPull, ...] = ()
    checked_at: dt.date


class FixedIn(Frozen):
    package: Component
    version: VersionText


class Bug(Sourced):
    """An upstream issue that bites tiered KV caching, with what to do about it."""

    repo: Annotated[str, Field(pattern=r"^[\w.-]+/[\w.-]+$")]
    number: int = Field(gt=0)
    title: str
    affects: str
    affected_versions: dict[Component, SpecifierText] = Field(default_factory=dict)
    avoidance: str
    snapshot: BugSnapshot
    fixed_in: FixedIn | None = None
    related: tuple[EntryId, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.repo}#{self.number}"


class Release(Frozen):
    version: VersionText
    date: dt.date | None = None


class ReleaseLine(Sourced):
    """Published releases of one package, oldest first; ``date`` is the registry upload date."""

    package: Component
    releases: tuple[Release, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ascending(self) -> ReleaseLine:
        versions = [Version(r.version) for r in self.releases]
        if versions != sorted(versions) or len(set(versions)) != len(versions):
            raise ValueError("releases must be listed oldest first, each once")
        return self


class Gpu(Sourced):
    id: EntryId
    name: str
    segment: Literal["datacenter", "workstation", "consumer"]
    hbm_gb: float = Field(gt=0, description="memory as the vendor states it, decimal GB")
    memory_bandwidth_tb_s: float = Field(gt=0)
    host_link: str
    host_link_gb_s: float = Field(gt=0, description="theoretical one-direction host link bandwidth, GB/s")
    host_link_practical_gb_s: float = Field(gt=0, description="pinned-memory copy rate to plan with, GB/s")
    nvlink_gb_s: float | None = None


class HostMemory(Sourced):
    id: EntryId
    name: str
    channel_gb_s: float = Field(gt=0)
    note: str | None = None


class Nvme(Sourced):
    id: EntryId
    name: str
    seq_read_gb_s: float = Field(gt=0)
    practical_read_gb_s: float = Field(gt=0)
    note: str | None = None


class Hardware(Frozen):
    gpus: tuple[Gpu, ...] = ()
    host_memory: tuple[HostMemory, ...] = ()
    nvme: tuple[Nvme, ...] = ()


class InventoryFlag(Frozen):
    """One `vllm serve` option: the first release that accepts it and the first that no longer does."""

    flag: str = Field(pattern=r"^--?[a-z0-9][a-z0-9-]*$")
    introduced: VersionText | None = None
    removed: VersionText | None = None
    takes_value: bool = True


class CliInventory(Sourced):
    """Every option `vllm serve` accepts, by release; generated from the wheels by a script."""

    flags: tuple[InventoryFlag, ...]

    def accepted(self, version: Version) -> set[str]:
        return {
            f.flag
            for f in self.flags
            if (f.introduced is None or Version(f.introduced) <= version)
            and (f.removed is None or version < Version(f.removed))
        }


class ModelArch(Sourced):
    """A model's architecture, as KV-cache sizing needs it (owned by size_offload)."""

    id: EntryId
    name: str


class CompatPin(Sourced):
    """A backend package requirement that a vLLM release declares or needs."""

    id: EntryId
    vllm_versions: SpecifierText
    package: str
    requirement: str
    note: str | None = None


# ---------------------------------------------------------------------------
# Files and the loaded whole


class KnowledgeError(Exception):
    """A knowledge file is missing, malformed, or refers to something that does not exist."""


class _ReleasesFile(Frozen):
    lines: tuple[ReleaseLine, ...]


class _FeaturesFile(Frozen):
    features: tuple[Feature, ...]


class _FlagsFile(Frozen):
    settings: tuple[Setting, ...]


class _ConnectorsFile(Frozen):
    connectors: tuple[Connector, ...]


class _MetricsFile(Frozen):
    metrics: tuple[Metric, ...]


class _PitfallsFile(Frozen):
    pitfalls: tuple[Pitfall, ...]


class _BugsFile(Frozen):
    bugs: tuple[Bug, ...]


class _CompatFile(Frozen):
    pins: tuple[CompatPin, ...]


class _ModelsFile(Frozen):
    models: tuple[ModelArch, ...]


FILES: dict[str, type[Frozen]] = {
    "releases.yaml": _ReleasesFile,
    "features.yaml": _FeaturesFile,
    "flags.yaml": _FlagsFile,
    "offloading.yaml": _FlagsFile,
    "lmcache.yaml": _FlagsFile,
    "connectors.yaml": _ConnectorsFile,
    "metrics.yaml": _MetricsFile,
    "pitfalls.yaml": _PitfallsFile,
    "bugs.yaml": _BugsFile,
    "hardware.yaml": Hardware,
    "compat.yaml": _CompatFile,
    "models.yaml": _ModelsFile,
    "cli_inventory.yaml": CliInventory,
}


class Knowledge(Frozen):
    """Everything in `knowledge/`, validated; build it with `load_knowledge`."""

    releases: dict[str, ReleaseLine]
    features: tuple[Feature, ...]
    settings: tuple[Setting, ...]
    connectors: tuple[Connector, ...]
    metrics: tuple[Metric, ...]
    pitfalls: tuple[Pitfall, ...]
    bugs: tuple[Bug, ...]
    hardware: Hardware
    pins: tuple[CompatPin, ...]
    models: tuple[ModelArch, ...]
    cli_inventory: CliInventory
    directory: str

    def gated(self) -> Iterator[Gated]:
        """Every entry with a release lifecycle, in file order."""
        yield from self.features
        yield from self.settings
        yield from self.connectors
        yield from self.metrics

    @functools.cached_property
    def by_id(self) -> dict[str, Gated | Pitfall | Bug | CompatPin | Gpu | HostMemory | Nvme]:
        table: dict[str, Any] = {}
        entries: tuple[Any, ...] = (
            *self.gated(),
            *self.pitfalls,
            *self.bugs,
            *self.pins,
            *self.models,
            *self.hardware.gpus,
            *self.hardware.host_memory,
            *self.hardware.nvme,
        )
        for entry in entries:
            table[entry.id] = entry
        return table

    @functools.cached_property
    def _name_index(self) -> dict[str, list[Gated]]:
        index: dict[str, list[Gated]] = {}
        for entry in self.gated():
            keys = {normalize_name(n) for n in (entry.name, *entry.aliases)}
            keys.add(normalize_name(entry.id.split(".", 1)[-1]))
            keys.add(normalize_name(entry.id))
            for key in keys:
                index.setdefault(key, []).append(entry)
        return index

    def find(self, name: str) -> list[Gated]:
        """Entries called ``name`` in any spelling: ``--kv-offloading-size``, ``kv_offloading_size``,
        ``--no-enable-prefix-caching``, ``vllm:prefix_cache_hits``, ``OffloadingConnector``."""
        key = normalize_name(name)
        found = self._name_index.get(key)
        if not found and key.startswith("no-"):
            found = self._name_index.get(key[3:])
        return list(found or [])

    def known_names(self) -> list[str]:
        """Every spelling `find` accepts, for suggestions."""
        return sorted(self._name_index)

    def release_versions(self, package: str = "vllm") -> list[Version]:
        line = self.releases.get(package)
        return [Version(r.version) for r in line.releases] if line else []

    def newest(self, package: str = "vllm") -> Version:
        return self.release_versions(package)[-1]

    def oldest(self, package: str = "vllm") -> Version:
        return self.release_versions(package)[0]


def normalize_name(name: str) -> str:
    """Fold the spellings people use for one name: dashes, underscores, case, prefixes."""
    key = name.strip().lower()
    if key.startswith("vllm:"):
        key = key[len("vllm:") :]
    key = re.sub(r"[\s_.]+", "-", key).strip("-")
    if key.endswith("-total"):
        key = key[: -len("-total")]
    return key


def knowledge_dir() -> Path:
    """Where the knowledge files are: inside the installed package, or at the checkout root."""
    packaged = resources.files("vllm_caching_mcp") / "knowledge"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "knowledge"
    if checkout.is_dir():
        return checkout
    raise KnowledgeError("the knowledge files are missing from this installation; reinstall the package")


def _label(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    if "repo" in item:
        return f"{item.get('repo')}#{item.get('number')}"
    for key in ("id", "package", "version"):
        if key in item:
            return str(item[key])
    return None


def _describe(error: Any, raw: Any) -> str:
    """One pydantic error as 'entry <id> (<list>[i]), field <path>: message'."""
    loc = list(error["loc"])
    message = error["msg"]
    if len(loc) >= 2 and isinstance(loc[0], str) and isinstance(loc[1], int) and isinstance(raw, dict):
        items = raw.get(loc[0])
        item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        field = ".".join(map(str, loc[2:])) or "(the entry)"
        return f"entry {_label(item)!r} ({loc[0]}[{loc[1]}]), field {field!r}: {message}"
    return f"field {'.'.join(map(str, loc)) or '(top level)'!r}: {message}"


def _load_file(path: Path, model: type[Frozen]) -> Frozen:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KnowledgeError(f"knowledge/{path.name}: file is missing") from None
    except yaml.YAMLError as exc:
        raise KnowledgeError(f"knowledge/{path.name}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise KnowledgeError(f"knowledge/{path.name}: the top level must be a mapping")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        problems = "; ".join(_describe(e, raw) for e in errors[:5])
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise KnowledgeError(f"knowledge/{path.name}: {problems}{more}") from None


def _cross_check(k: Knowledge) -> list[str]:
    """References that do not resolve, versions that are not releases, duplicate ids."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    groups: list[tuple[str, Iterable[Any]]] = [
        ("features.yaml", k.features),
        ("flags.yaml, offloading.yaml or lmcache.yaml", k.settings),
        ("connectors.yaml", k.connectors),
        ("metrics.yaml", k.metrics),
        ("pitfalls.yaml", k.pitfalls),
        ("bugs.yaml", k.bugs),
        ("compat.yaml", k.pins),
        ("models.yaml", k.models),
        ("hardware.yaml", (*k.hardware.gpus, *k.hardware.host_memory, *k.hardware.nvme)),
    ]
    for file, entries in groups:
        for entry in entries:
            if entry.id in seen:
                problems.append(f"{file}: entry {entry.id!r}: id already used in {seen[entry.id]}")
            seen[entry.id] = file
    known = set(seen)
    known_versions = {pkg: {str(v) for v in k.release_versions(pkg)} for pkg in k.releases}

    def check_refs(file: str, entry_id: str, field: str, refs: Iterable[str | None]) -> None:
        for ref in refs:
            if ref is not None and ref not in known:
                problems.append(f"{file}: entry {entry_id!r}, field {field!r}: no entry has the id {ref!r}")

    for file, entries in groups[:4]:
        for g in entries:
            check_refs(file, g.id, "related", g.related)
            check_refs(file, g.id, "replaced_by", [g.replaced_by])
            releases = known_versions.get(g.component)
            if releases is None:
                continue
            for label in ("introduced", "deprecated", "removed"):
                v = getattr(g, label)
                if v is not None and str(Version(v)) not in releases:
                    problems.append(f"{file}: entry {g.id!r}, field {label!r}: {v} is not a {g.component} release")
            for c in g.changes:
                if str(Version(c.version)) not in releases:
                    problems.append(f"{file}: entry {g.id!r}, field 'changes': {c.version} is not a release")
    for p in k.pitfalls:
        check_refs("pitfalls.yaml", p.id, "related", p.related)
    for b in k.bugs:
        check_refs("bugs.yaml", b.id, "related", b.related)
    return problems


@functools.cache
def load_knowledge(directory: str | None = None) -> Knowledge:
    """Load and validate every knowledge file; cached, so the work happens once per process."""
    root = Path(directory) if directory else knowledge_dir()
    parts = {name: _load_file(root / name, model) for name, model in FILES.items()}
    releases_file = parts["releases.yaml"]
    assert isinstance(releases_file, _ReleasesFile)
    try:
        k = Knowledge(
            releases={line.package: line for line in releases_file.lines},
            features=parts["features.yaml"].features,  # type: ignore[attr-defined]
            settings=(
                *parts["flags.yaml"].settings,  # type: ignore[attr-defined]
                *parts["offloading.yaml"].settings,  # type: ignore[attr-defined]
                *parts["lmcache.yaml"].settings,  # type: ignore[attr-defined]
            ),
            connectors=parts["connectors.yaml"].connectors,  # type: ignore[attr-defined]
            metrics=parts["metrics.yaml"].metrics,  # type: ignore[attr-defined]
            pitfalls=parts["pitfalls.yaml"].pitfalls,  # type: ignore[attr-defined]
            bugs=parts["bugs.yaml"].bugs,  # type: ignore[attr-defined]
            hardware=parts["hardware.yaml"],
            pins=parts["compat.yaml"].pins,  # type: ignore[attr-defined]
            models=parts["models.yaml"].models,  # type: ignore[attr-defined]
            cli_inventory=parts["cli_inventory.yaml"],
            directory=str(root),
        )
    except ValidationError as exc:  # pragma: no cover - each part was validated above
        raise KnowledgeError(str(exc)) from None
    if "vllm" not in k.releases:
        raise KnowledgeError("knowledge/releases.yaml: the vllm release line is missing")
    problems = _cross_check(k)
    if problems:
        raise KnowledgeError("; ".join(problems))
    return k
