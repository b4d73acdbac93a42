"""The knowledge base: schema, loader and cross-reference checks.

`knowledge/*.yaml` is the single source of truth. Each file is validated against the
pydantic models below when it is loaded, once per process; then the whole is checked
for references that do not resolve and versions that are not releases. A broken file
raises `KnowledgeError` naming the file, the entry and the field.

Every entry that states a fact carries `sources` and `verified_at`. A source is one of

- ``wheel:vllm==0.33.0:vllm/config/cache.py:120`` (released code, path, optional line),
- ``sdist:vllm==0.33.0:examples/...`` (the release's source distribution: examples and test
  scripts the wheel leaves out),
- ``issue:vllm-project/vllm#41847`` or ``pr:vllm-project/vllm#41847``,
- ``pypi:vllm`` (the registry's own metadata, e.g. upload dates),
- an ``https://`` address (vendor datasheets, documentation),
- ``reference:PATH`` (carried over from the founding reference text and not yet
  confirmed elsewhere: the answer says so).
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import itertools
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast, get_args

import packaging
import pydantic
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from . import __version__, startup_cache, versions
from .knowledge_files import FILE_NAMES, KnowledgeError, knowledge_dir
from .versions import Version, contains, in_range, parse_specifier, parse_version

Component = Literal["vllm", "lmcache", "nixl", "mooncake", "sglang"]
Evidence = Literal["wheel", "primary", "reference"]

_SOURCE_PATTERNS = (
    re.compile(
        r"^wheel:(vllm|lmcache|transformers)==\d+(\.\d+)+(\.post\d+)?:[\w./-]+(\.(py|txt|json|cfg|toml|in)|\.dist-info/METADATA)"
        r"(:\d+(-\d+)?)?$"
    ),
    # The release's source distribution: what the wheel leaves out (examples, tests, docs).
    re.compile(
        r"^sdist:(vllm|lmcache)==\d+(\.\d+)+(\.post\d+)?:[\w./-]+(\.(py|sh|md|txt|json|toml|yaml|yml)|/Dockerfile)"
        r"(:\d+(-\d+)?)?$"
    ),
    re.compile(r"^(issue|pr):[\w.-]+/[\w.-]+#\d+$"),
    re.compile(r"^pypi:[\w.-]+$"),
    re.compile(r"^https://\S+$"),
    re.compile(r"^reference:[\w./-]+$"),
)
_ID = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")


def _check_source(text: str) -> str:
    if not any(p.match(text) for p in _SOURCE_PATTERNS):
        raise ValueError(
            "a source is 'wheel:PKG==VERSION:PATH[:LINE]', 'sdist:PKG==VERSION:PATH[:LINE]', "
            "'issue:OWNER/REPO#N', 'pr:OWNER/REPO#N', "
            f"'pypi:NAME', an https:// address or 'reference:PATH'; got {text!r}"
        )
    return text


def _release(value: object) -> Version:
    """A release version field, parsed once at load: the schema holds `Version` values, not text."""
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a release version is written as text, e.g. '0.23.0'; got {value!r}")
    return parse_version(value)


def _check_specifier(text: str) -> str:
    parse_specifier(text)
    return text


def _check_id(text: str) -> str:
    if not _ID.match(text):
        raise ValueError(f"an id is lower-case letters, digits and . _ + -; got {text!r}")
    return text


Source = Annotated[str, AfterValidator(_check_source)]
# Read from YAML as text, held as `packaging` versions, written back (JSON, YAML, schemas) as text.
VersionText = Annotated[
    Version,
    PlainValidator(_release),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "description": "a release, e.g. '0.23.0'"}),
]
SpecifierText = Annotated[str, AfterValidator(_check_specifier)]
EntryId = Annotated[str, AfterValidator(_check_id)]


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Sourced(Frozen):
    """Anything that states a fact: where it comes from and when that was last checked."""

    sources: tuple[Source, ...] = Field(min_length=1)
    verified_at: dt.date

    @property
    def evidence(self) -> Evidence:
        """The strongest kind of source behind the fact."""
        kinds = {s.split(":", 1)[0] for s in self.sources}
        if kinds & {"wheel", "sdist"}:  # both are what the release published
            return "wheel"
        if kinds - {"reference"}:
            return "primary"
        return "reference"


# What code looks a change up by, where it acts on one (most changes are only reported).
ChangeKind = Literal[
    "keys-optional",  # a tier's access keys may be left out (the store's own credential chain is used)
    "path-list",  # a path setting takes a ','-separated list
]


class Change(Sourced):
    """A behaviour change that first holds in ``version``."""

    version: VersionText
    summary: str
    kind: ChangeKind | None = None


def change_of(changes: Iterable[Change], kind: ChangeKind) -> Change | None:
    """The change of ``kind`` among an entry's ``changes``; None when it has none."""
    return next((c for c in changes if c.kind == kind), None)


ProbeKind = Literal[
    "registered", "flag", "metric", "env_read", "config_key", "spec_key", "text",
    "subclass", "default", "env_default", "config_default", "literal", "requires_python", "requires_dist",
]  # fmt: skip
PRESENCE_PROBES: frozenset[str] = frozenset(
    {"registered", "flag", "metric", "env_read", "config_key", "spec_key", "text"}
)


class Probe(Frozen):
    """A static check of released source that backs a fact; `scripts/verify_knowledge.py` runs it.

    Presence kinds (``registered``: a connector name in KVConnectorFactory; ``flag``: an
    ``add_argument`` option; ``metric``: a metric name string; ``env_read``: an environment
    variable read; ``config_key``: an LMCache config key; ``spec_key``: an extra_config key, keyword
    or field; ``text``: a regex) must hold in every release where the entry exists and, unless
    ``absent_outside`` is false, fail in the others. Value kinds (``subclass``: the class
    ``target`` subclasses ``base``; ``default``: the default of ``Class.field``; ``env_default``;
    ``config_default``; ``literal``: the values a ``Literal`` type accepts) are compared with the
    entry's ``hma``, ``defaults`` or ``accepted_values`` in each range. Most entries need no
    probe written out: the verifier implies one from the entry's kind.
    """

    kind: ProbeKind
    target: str = ""
    files: tuple[str, ...] = Field(default=(), description="package paths or globs; empty = the kind's usual files")
    base: str = "SupportsHMA"
    absent_outside: bool = True
    unchecked: str | None = Field(default=None, description="why this cannot be checked statically")


class Ranged(Frozen):
    """A value that holds for the releases in ``versions`` (a PEP 440 range; empty means all)."""

    versions: SpecifierText = ""
    value: str | int | float | bool | tuple[str, ...] | None
    note: str | None = None
    # A probe here replaces the entry's (written or implied) probe of the same kind in this range.
    probes: tuple[Probe, ...] = ()


def ranged_at(values: tuple[Ranged, ...], version: Version) -> Ranged | None:
    """The value among ``values`` whose range holds ``version``; None when none does."""
    for r in values:
        if in_range(r.versions, version):
            return r
    return None


# Where a release falls in a gated entry's lifecycle.
Status = Literal["available", "deprecated", "removed", "not_yet"]


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
    # A deprecation older than the oldest release covered (`deprecated` is then that oldest release).
    deprecated_earlier: VersionText | None = None
    removed: VersionText | None = None
    instead: str | None = None
    replaced_by: EntryId | None = None
    changes: tuple[Change, ...] = ()
    related: tuple[EntryId, ...] = ()
    probes: tuple[Probe, ...] = ()

    @model_validator(mode="after")
    def _lifecycle_in_order(self) -> Gated:
        points = [(label, getattr(self, label)) for label in ("introduced", "deprecated", "removed")]
        present = [(label, v) for label, v in points if v is not None]
        for (a, va), (b, vb) in itertools.pairwise(present):
            if not va < vb and not (a == "deprecated" and va == vb):
                raise ValueError(f"{b} ({vb}) must come after {a} ({va})")
        return self

    def status_at(self, version: Version) -> Status:
        """Where ``version`` falls in the lifecycle: each point is the first release in which it holds."""
        if self.introduced is not None and version < self.introduced:
            return "not_yet"
        if self.removed is not None and version >= self.removed:
            return "removed"
        if self.deprecated is not None and version >= self.deprecated:
            return "deprecated"
        return "available"

    def exists_in(self, version: Version) -> bool:
        """Whether ``version`` has it: introduced by then (or always there) and not yet removed."""
        return self.status_at(version) in ("available", "deprecated")


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


# Deployment-hygiene checks the readers make where a workload is written (advice/deployment/hygiene.py):
# what a senior reviewer flags in any deployment, whatever its KV-cache configuration.
HygieneCheck = Literal[
    "secret-in-plain-text",
    "install-at-start",
    "install-pin-redirected",
    "floating-image-tag",
    "env-not-expanded",
    "duplicate-key",
    "liveness-kills-model-load",
    "probe-fails-on-one-miss",
    "rwo-claim-shared",
    "kills-by-name",
    "ray-dashboard-exposed",
    "variable-run-as-command",
    "compose-conflict",
    "secret-data-not-base64",
    "systemd-restart-invalid",
]


class TierSize(Sourced):
    """One place a connector's CPU tier size is written, in what unit, and for how many ranks.

    ``given_by``: ``kv_offloading_size`` is the offload shorthand's --kv-offloading-size, when the
    shorthand selects the connector; ``extra_config`` is ``key`` in the connector's own
    kv_connector_extra_config; ``env`` is the environment variable ``key`` (LMCache also reads its
    config file as LMCACHE_* variables). ``scope``: ``per_rank`` values are allocated by each of the
    engine's TP x PP workers.
    """

    given_by: Literal["kv_offloading_size", "extra_config", "env"]
    key: str | None = None
    unit: Literal["GiB", "bytes"]
    scope: Literal["total_across_ranks", "per_rank"]

    @model_validator(mode="after")
    def _key_names_the_value(self) -> TierSize:
        if self.given_by == "kv_offloading_size" and self.key is not None:
            raise ValueError("key: the kv_offloading_size reading takes no key (it is the --kv-offloading-size flag)")
        if self.given_by != "kv_offloading_size" and not self.key:
            raise ValueError(f"key: a {self.given_by} reading names its key (the extra-config key or variable)")
        return self


class Connector(Gated):
    """A KV connector as registered in vLLM's `KVConnectorFactory`."""

    module: str | None = None
    requires: tuple[str, ...] = ()
    hma: tuple[Ranged, ...] = ()
    roles: tuple[str, ...] = ()
    # How `resolve` reads the size of the CPU tier this connector allocates: in the order vLLM
    # applies them, so a later one that is given overrides an earlier one. Empty: not known.
    tier_size: tuple[TierSize, ...] = ()
    # The kv_connector_extra_config key that lists the connectors this one wraps (MultiConnector).
    children_key: str | None = None

    @model_validator(mode="after")
    def _hma_values(self) -> Connector:
        for r in self.hma:
            if r.value not in ("yes", "no", "conditional"):
                raise ValueError(f"hma value must be 'yes', 'no' or 'conditional'; got {r.value!r}")
        return self

    def hma_at(self, version: Version) -> HmaSupport | None:
        """Whether the connector keeps the hybrid KV cache manager on in ``version``; None where no range says."""
        found = ranged_at(self.hma, version)
        return None if found is None else cast(HmaSupport, found.value)


MetricType = Literal["counter", "gauge", "histogram", "info"]


class Metric(Gated):
    """A Prometheus metric family name as exposed on `/metrics`."""

    type: MetricType


Severity = Literal["error", "warning", "info"]


class ValueTest(Frozen):
    """A named value (flag, environment variable, connector extra-config key) tested with a regex."""

    name: str
    matches: str

    @model_validator(mode="after")
    def _regex_compiles(self) -> ValueTest:
        try:
            re.compile(self.matches)
        except re.error as exc:
            raise ValueError(f"matches: {self.matches!r} is not a regular expression ({exc})") from None
        return self


_OPERAND = re.compile(r"^((flag|env|fact|host|workload):[\w.-]+|\d+(\.\d+)?)$")

# The facts of a workload a condition compares (``fact:NAME``), declared once: the loader refuses any
# other name, and advice/deployment/facts.py, which works them out, is type-checked against the list.
FactName = Literal[
    "tp",
    "pp",
    "dp",
    "world_size",
    "offload_tier_gib",
    "host_offload_gib",
    "max_model_len",
    "container_memory_limit_gib",
    "container_memory_request_gib",
    "visible_gpus",
    "gpus_given",
    "gpus_used",
    "shm_gib",
    "shm_offload_gib",
    "worker_queues_shm_gib",
    "lmcache_disk_gib",
    "lmcache_disk_volume_gib",
    "lmcache_disk_memory_gib",
    "lmcache_disk_layer_gib",
    "lmcache_disk_unbounded_gib",
]
FACT_NAMES: tuple[str, ...] = get_args(FactName)


def _fact_problem(operand: str) -> str | None:
    """Why ``fact:NAME`` names no fact (a misspelled one would compare as unknown: the rule off), or None."""
    name = operand.removeprefix("fact:")
    if operand == name or name in FACT_NAMES:
        return None
    close = difflib.get_close_matches(name, FACT_NAMES, n=3)
    hint = f"did you mean {' or '.join(close)}?" if close else f"the facts are {', '.join(FACT_NAMES)}"
    return f"{operand!r} names no fact a workload has; {hint}"


class Comparison(Frozen):
    """``left op right``; each side is operands joined by ``*``, ``/``, ``+`` or ``-``, worked out
    left to right, such as ``flag:--kv-offloading-size / fact:world_size``, ``host:ram_gib * 0.8`` or
    ``fact:host_offload_gib * 1.1 + 4`` (a headroom last)."""

    left: str
    op: Literal["<", "<=", ">", ">=", "==", "!="]
    right: str

    @model_validator(mode="after")
    def _operands(self) -> Comparison:
        for side in (self.left, self.right):
            for operand in re.split(r"\s+[-+*/]\s+", side.strip()):
                if not _OPERAND.match(operand):
                    raise ValueError(
                        f"{operand!r} is not an operand: write flag:--NAME, env:NAME, fact:NAME, host:NAME, "
                        "workload:NAME or a number, joined by ' * ', ' / ', ' + ' or ' - '"
                    )
                if (problem := _fact_problem(operand)) is not None:
                    raise ValueError(problem)
        return self


class Condition(Frozen):
    """One test on a deployment's effective configuration; exactly one key is set.

    Evaluated by `advice.review` with three values: true, false, or unknown when an input
    the test needs (host RAM, the GPU, the model) was not given; a rule fires only on true.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    all_: tuple[Condition, ...] | None = Field(default=None, alias="all")
    any_: tuple[Condition, ...] | None = Field(default=None, alias="any")
    not_: Condition | None = Field(default=None, alias="not")
    flag: str | None = Field(default=None, description="the flag is given, with any value")
    flag_on: str | None = Field(default=None, description="given bare, true or non-zero")
    flag_off: str | None = Field(default=None, description="given as --no-X, false or 0")
    flag_value: ValueTest | None = None
    flag_unknown: bool | None = Field(default=None, description="each flag the release's CLI does not accept")
    flag_unavailable: tuple[str, ...] | None = Field(
        default=None, description="each known flag whose lifecycle excludes the release, except those listed"
    )
    env: str | None = Field(default=None, description="the variable is set (literal or by reference)")
    env_value: ValueTest | None = Field(default=None, description="set to a literal that matches")
    env_differs: str | None = Field(default=None, description="workloads reviewed together disagree on its value")
    connector: tuple[str, ...] | None = Field(default=None, description="an effective connector is one of these")
    connector_hma: HmaSupport | None = Field(default=None, description="an effective connector has this HMA support")
    lmcache_shared_backend: bool | None = Field(
        default=None,
        description="LMCache is given a backend another server can reach (remote_url, enable_pd, enable_p2p, a "
        "shared path), in its variables, its config file or the connector's lmcache.* extra config",
    )
    kv_role: tuple[str, ...] | None = Field(
        default=None, description="the --kv-transfer-config's kv_role is one of these (kv_producer, kv_consumer, ...)"
    )
    kv_role_missing: bool | None = Field(
        default=None, description="--kv-transfer-config names a kv_connector and no kv_role (the shorthand not given)"
    )
    connector_configured: bool | None = Field(
        default=None, description="any KV connector is in effect (--kv-transfer-config or the offload shorthand)"
    )
    transfer_config_replaced: bool | None = Field(
        default=None,
        description="the offload shorthand is in effect and --kv-transfer-config names another connector or role, "
        "which vLLM writes over",
    )
    connector_unavailable: tuple[str, ...] | None = Field(
        default=None, description="each effective connector not registered in the release, except those listed"
    )
    offload_shorthand: bool | None = Field(default=None, description="--kv-offloading-size/-backend is in effect")
    pd_proxy_mismatch: bool | None = Field(
        default=None, description="a P/D proxy the files start is not the one the effective connector needs here"
    )
    extra_config: ValueTest | None = Field(default=None, description="a kv_connector_extra_config key matches")
    tier: tuple[str, ...] | None = Field(default=None, description="a native secondary tier of one of these types")
    tier_unregistered: bool | None = Field(
        default=None, description="each secondary tier whose type the release does not register (spec.tier.type)"
    )
    model_matches: str | None = Field(default=None, description="the served model's name matches this regex")
    gpu_segment: tuple[Literal["datacenter", "workstation", "consumer"], ...] | None = None
    gpu_capability_below: str | None = Field(
        default=None, pattern=r"^\d+\.\d+$", description="the GPU's compute capability is below this (8.0)"
    )
    compare: Comparison | None = None
    entry_unavailable: EntryId | None = Field(default=None, description="the entry's lifecycle excludes the release")
    entry_deprecated: EntryId | None = Field(default=None, description="the entry is deprecated in the release")
    start_problem: bool | None = Field(default=None, description="the command as written never starts the server")
    engine_schema: Literal["refused", "ignored"] | None = Field(
        default=None,
        description="a transfer/events config field or extra-config key the release refuses or never reads",
    )
    lmcache_schema: Literal["refused", "ignored", "leftover"] | None = Field(
        default=None,
        description="an LMCache config key or LMCACHE_* variable its release refuses or never reads "
        "(leftover: no longer read, and set to the value it defaulted to while it was)",
    )
    model_layers: Literal["full_only", "sliding", "state"] | None = Field(
        default=None,
        description="the served model is a known one whose layers are all full attention (full_only), mix in "
        "sliding-window or chunked-local layers but no state (sliding), or have Mamba / linear-attention state",
    )
    vllm_env_unread: bool | Literal["leftover"] | None = Field(
        default=None,
        description="each VLLM_* variable the workload sets that no code of the release reads (leftover: set to "
        "the default its last reader had; true: the others)",
    )
    release_pinned_unknown: bool | None = Field(
        default=None,
        description="the release is assumed, yet the image is one fixed build whose release the files do not say",
    )
    weights_exceed_gpu: bool | None = Field(
        default=None, description="a known model's weights, split over TP x PP, exceed what vLLM may use of each GPU"
    )
    ray_cluster: bool | None = Field(
        default=None, description="the workload's container or script starts or joins a Ray cluster before vLLM"
    )
    python_unsupported: bool | None = Field(
        default=None, description="a pip install of a vLLM release into a Python its Requires-Python does not admit"
    )
    option_repeated: bool | None = Field(
        default=None, description="an option given twice in one command with two values (the parser keeps the last)"
    )
    install_breaks_model: bool | None = Field(
        default=None,
        description="a pip install of vLLM leaves a package outside a compat pin whose releases then cannot load "
        "the served model's class",
    )
    pin_outside_vllm_requirement: bool | None = Field(
        default=None, description="a torch or transformers pin the vLLM release's Requires-Dist excludes"
    )
    python_caps_release: bool | None = Field(
        default=None,
        description="an unpinned pip install of vLLM into a Python the newest release no longer admits",
    )
    entrypoint: str | None = Field(
        default=None, description="the module the workload's `python -m` launch runs (vllm.entrypoints.api_server)"
    )
    lmcache_settings_unused: bool | None = Field(
        default=None, description="LMCACHE_* variables on a vLLM server whose launch loads no KV connector"
    )
    hidden_metrics_version_mismatch: bool | None = Field(
        default=None,
        description="--show-hidden-metrics-for-version names another release line than the one before the release's",
    )
    vllm_env_value_refused: bool | None = Field(
        default=None, description="each VLLM_* variable set to a literal the release's own parse rule refuses"
    )
    flag_value_vanished: bool | None = Field(
        default=None, description="each value-taking option whose value expands to nothing (argparse stops)"
    )
    flag_release_dependent: bool | None = Field(
        default=None,
        description="release not stated: each option the assumed release accepts that covered releases after "
        "its introduction refuse",
    )
    flag_value_refused: bool | None = Field(
        default=None,
        description="each option whose value as written the release's parser refuses: a switch given a value, "
        "a value outside the choices of the config field's Literal",
    )
    vendor_build: bool | None = Field(
        default=None,
        description="release not stated and the workload's image names no vLLM: a vendor's build, whose options "
        "may not be upstream's",
    )
    gpu_build: bool | None = Field(
        default=None,
        description="the workload runs a GPU build of vLLM (CUDA or ROCm): not a CPU, simulator, Gaudi, Neuron, "
        "TPU or XPU build, judged by its image, --device and VLLM_TARGET_DEVICE",
    )
    hygiene: HygieneCheck | None = Field(
        default=None, description="each deployment-hygiene problem of this kind the readers found around the workload"
    )
    graph: (
        Literal[
            "exposed-without-key",
            "ingress-backend-missing",
            "port-mismatch",
            "no-gpu",
            "gpus-fewer-than-ranks",
            "lmcache-unreachable",
            "cache-server-unbounded",
            "cache-server-option-unknown",
            "vllm-not-in-image",
            "ports-bound-twice",
        ]
        | None
    ) = Field(
        default=None,
        description="each place where the workload disagrees with another object of the files reviewed together "
        "(advice/deployment/graph.py): its ports, GPUs, or the LMCache server it connects to",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Condition:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"a condition has exactly one key; got {', '.join(given) or 'none'}")
        if self.model_matches is not None:
            ValueTest(name="model", matches=self.model_matches)
        return self

    @property
    def key(self) -> str:
        """The name of the one field that is set (``all_`` for ``all:``), which says how to evaluate it."""
        return next(name for name in type(self).model_fields if getattr(self, name) is not None)


class OffloadShorthand(Sourced):
    """Which connector ``--kv-offloading-backend BACKEND`` configures in the releases in ``versions``;
    an entry with ``when_env`` applies instead when that variable is set to a matching value."""

    backend: str
    versions: SpecifierText = ""
    connector: EntryId
    when_env: ValueTest | None = None


class Reproduction(Frozen):
    """How a pitfall's failure mode was reproduced on a machine: a script `scripts/verify_knowledge.py
    --reproduce` runs again, and the one line it prints when the failure happens."""

    script: str = Field(pattern=r"^scripts/reproductions/[\w-]+\.py$")
    args: tuple[str, ...] = ()
    expect: str = Field(min_length=1, description="the outcome line the script prints, e.g. OSError(14, 'Bad address')")
    needs: str = Field(min_length=1, description="what the machine needs for it to run (root or user namespaces, ...)")
    recorded: dt.date


class Pitfall(Sourced):
    """A configuration mistake worth warning about, for the releases in ``versions``.

    With ``when`` it is also a review rule: `review_deployment` reports it where the condition
    holds; ``heuristic`` says how the rule guesses when the configuration cannot say for sure.
    ``failure`` says how the failure mode its ``why`` names is known: ``reproduced`` (with the
    ``reproduction`` the verifier re-runs) or ``read_from_code`` (the wheel lines in ``sources``).
    """

    id: EntryId
    title: str
    severity: Severity
    versions: SpecifierText = ""
    components: tuple[Component, ...] = ("vllm",)
    # The processes the rule is evaluated on: vLLM servers, or the LMCache servers the files start.
    subjects: tuple[Literal["vllm", "lmcache-server"], ...] = ("vllm",)
    why: str
    # The facts (knowledge entry ids) the `why` rests on; each resolves at load, and an error-severity
    # rule needs one the verifier checked against the wheels (tests/test_review.py holds that).
    premises: tuple[EntryId, ...] = ()
    fix: str
    related: tuple[EntryId, ...] = ()
    when: Condition | None = None
    heuristic: str | None = None
    failure: Literal["reproduced", "read_from_code"] | None = None
    reproduction: Reproduction | None = None
    # What vLLM prints when it refuses to start on this mistake (regular expressions, matched
    # case-insensitively), as the engine oracle recorded it (tests/test_engine_rules.py holds the
    # patterns to the records): `diagnose` names the pitfall from a start-up log.
    logged: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _reproduced_has_its_reproduction(self) -> Pitfall:
        if (self.failure == "reproduced") != (self.reproduction is not None):
            raise ValueError("failure 'reproduced' and a reproduction go together")
        for pattern in self.logged:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"logged: {pattern!r} is not a regular expression ({exc})") from None
        return self


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
    # False: the release was published as a source distribution only (no wheel on the index), so a source
    # that reads it is cited as sdist:PKG==VERSION:PATH, never wheel: (the loader holds that).
    wheel: bool = True
    # The Python versions pip installs it into: its metadata's Requires-Python, as written in the release's
    # dist-info/METADATA (the verifier reads it there); None where it was not read.
    requires_python: SpecifierText | None = None
    # Its Requires-Dist for the packages deployments pin beside it (torch, transformers), from the same METADATA.
    requires: dict[str, SpecifierText] = Field(default_factory=dict)


# What releases.yaml records of each release's METADATA, by the Release field that holds it.
ReleaseMetadata = Literal["requires_python", "requires"]


def release_metadata_fact(package: str, field: ReleaseMetadata) -> str:
    """The id the verifier reports a package's recorded METADATA field under, and a rule names as its premise:
    release.vllm.requires-python, release.vllm.requires-dist."""
    return f"release.{package}." + ("requires-python" if field == "requires_python" else "requires-dist")


class ReleaseLine(Sourced):
    """Published releases of one package, oldest first; ``date`` is the registry upload date."""

    package: Component
    releases: tuple[Release, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ascending(self) -> ReleaseLine:
        versions = [r.version for r in self.releases]
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
    bf16_dense_tflops: float | None = Field(default=None, gt=0, description="vendor peak dense BF16 tensor TFLOPS")
    fp8_dense_tflops: float | None = Field(default=None, gt=0, description="vendor peak dense FP8 tensor TFLOPS")

    @property
    def hbm_gib(self) -> float:
        """The GPU's memory in GiB (hbm_gb is the vendor's decimal GB)."""
        return self.hbm_gb * 1e9 / 2**30


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


class Instance(Sourced):
    """A cloud instance type and the GPUs it holds."""

    id: EntryId
    name: str
    provider: str
    gpu: EntryId
    gpus: int = Field(gt=0)


class Hardware(Frozen):
    gpus: tuple[Gpu, ...] = ()
    host_memory: tuple[HostMemory, ...] = ()
    nvme: tuple[Nvme, ...] = ()
    instances: tuple[Instance, ...] = ()

    @model_validator(mode="after")
    def _instances_name_gpus(self) -> Hardware:
        known = {g.id for g in self.gpus}
        unknown = sorted({i.gpu for i in self.instances} - known)
        if unknown:
            raise ValueError(f"instances name GPUs the file does not list: {unknown}")
        return self

    def find_instance(self, text: str) -> Instance | None:
        """The instance type a node label or chart value names ('g6.24xlarge')."""
        name = text.strip().lower()
        return next((i for i in self.instances if i.name == name), None)

    def find_gpu(self, text: str) -> Gpu | None:
        """The GPU meant by an id, a name, a node label or an instance type: 'gpu.h200-sxm', 'H200', 'H100 PCIe',
        'NVIDIA-H100-80GB-HBM3', 'rtx 4090', 'g6.24xlarge'. The model number (h100, l40s, l4, 4090) must match; among
        GPUs that share it the one sharing most other words wins, ties going to the first listed."""
        instance = self.find_instance(text)
        if instance is not None:
            return next(g for g in self.gpus if g.id == instance.gpu)
        words = set(re.findall(r"[a-z0-9]+", text.lower()))
        best: tuple[int, Gpu] | None = None
        for gpu in self.gpus:
            if text.strip().lower() == gpu.id:
                return gpu
            own = set(re.findall(r"[a-z0-9]+", f"{gpu.id.split('.', 1)[-1]} {gpu.name}".lower()))
            model_numbers = {w for w in own if re.fullmatch(r"[a-z]{1,2}\d+[a-z]?|\d{4,}", w)}
            if not words & model_numbers:
                continue
            score = len(words & own)
            if best is None or score > best[0]:
                best = (score, gpu)
        return best[1] if best else None


class InventoryFlag(Frozen):
    """One `vllm serve` option: the first release that accepts it and the first that no longer does."""

    flag: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9-]*$")
    introduced: VersionText | None = None
    removed: VersionText | None = None
    takes_value: bool = True


class CliInventory(Sourced):
    """Every option `vllm serve` accepts, by release; generated from the wheels by a script."""

    flags: tuple[InventoryFlag, ...]

    def accepted(self, version: Version) -> frozenset[str]:
        """The options ``version`` accepts; computed once per release, since reviews ask on every call."""
        cache = self._accepted_by_version
        if version not in cache:
            if len(cache) >= 256:  # versions are caller input: a long-lived server must not grow without bound
                cache.clear()
            cache[version] = frozenset(
                flag
                for flag, since, until in self._lifecycles
                if (since is None or since <= version) and (until is None or version < until)
            )
        return cache[version]

    @functools.cached_property
    def _lifecycles(self) -> tuple[tuple[str, Version | None, Version | None], ...]:
        return tuple((f.flag, f.introduced, f.removed) for f in self.flags)

    @functools.cached_property
    def _accepted_by_version(self) -> dict[Version, frozenset[str]]:
        return {}

    def entries(self, flag: str) -> tuple[InventoryFlag, ...]:
        """The entries for one spelling; more than one when an option left and later came back."""
        return tuple(f for f in self.flags if f.flag == flag)


# --- LMCache server command lines (knowledge/lmcache_server_cli.yaml; built by scripts/build_lmcache_server_cli.py) ---


class ServerOption(Frozen):
    """One option of an LMCache server command: the first release of the command that accepts it and the first
    that no longer does."""

    flag: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
    introduced: VersionText | None = None
    removed: VersionText | None = None
    takes_value: bool = True


class ServerCommandCli(Frozen):
    """One way to start an LMCache server (``lmcache server``, ``python -m M``, a console script) and its parser."""

    command: str
    server: str = Field(pattern=r"^ports\.[a-z0-9-]+$", description="the ports.yaml servers entry it starts")
    introduced: VersionText | None = None
    removed: VersionText | None = None
    parser: Literal["argparse", "argv"] = Field(
        default="argparse", description="argv: it reads sys.argv by position and takes no options"
    )
    allow_abbrev: bool = Field(default=True, description="argparse takes a unique prefix of a long option as it")
    options: tuple[ServerOption, ...] = ()

    def has(self, version: Version) -> bool:
        return (self.introduced is None or self.introduced <= version) and (
            self.removed is None or version < self.removed
        )

    def accepted(self, version: Version) -> dict[str, bool]:
        """The options ``version`` accepts, each with whether it takes a value."""
        return {
            o.flag: o.takes_value
            for o in self.options
            if (o.introduced is None or o.introduced <= version) and (o.removed is None or version < o.removed)
        }


class LMCacheServerCli(Sourced):
    """The options of every LMCache server command, by release; generated from the releases by a script."""

    commands: tuple[ServerCommandCli, ...]

    def options_named(self, flag: str) -> list[tuple[ServerCommandCli, ServerOption]]:
        """Each command that has (or had) an option of this spelling, with that option."""
        return [(c, o) for c in self.commands for o in c.options if o.flag == flag]

    def command(self, words: str, version: Version) -> ServerCommandCli | None:
        """The entry of ``words`` (``lmcache server``) in ``version``; None when that release has no such command."""
        return next((c for c in self.commands if c.command == words and c.has(version)), None)


# --- name inventory (knowledge/name_inventory.yaml; built by scripts/build_name_inventory.py) ---

InventoryKind = Literal["env_var", "lmcache_config", "class"]


class InventoryName(Frozen):
    """One name a package reads or defines: the first release read that has it and the first that no longer does."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: InventoryKind
    introduced: VersionText | None = None
    removed: VersionText | None = None
    alias_of: str | None = Field(default=None, description="LMCache: the key a deprecated name maps to")
    where: str = Field(
        pattern=r"^(vllm|lmcache)/[\w./-]+\.py$", description="the file of the newest release read that has it"
    )

    @property
    def package(self) -> Literal["vllm", "lmcache"]:
        return "lmcache" if self.where.startswith("lmcache/") else "vllm"

    @property
    def env_name(self) -> str | None:
        """The environment variable this name is: itself, or ``LMCACHE_<KEY>`` for an LMCache key."""
        if self.kind == "env_var":
            return self.name
        if self.kind == "lmcache_config":
            return f"LMCACHE_{self.name.upper()}"
        return None


def _is_vllm_env(entry: InventoryName) -> bool:
    return entry.kind == "env_var" and entry.package == "vllm"


class NameInventory(Sourced):
    """vLLM environment variables, LMCache config keys and KV-caching class names, by release."""

    releases_read: dict[Literal["vllm", "lmcache"], tuple[VersionText, ...]]
    names: tuple[InventoryName, ...]

    @functools.cached_property
    def _index(self) -> dict[str, tuple[InventoryName, ...]]:
        index: dict[str, list[InventoryName]] = {}
        for entry in self.names:
            for spelling in {entry.name, entry.env_name} - {None}:
                index.setdefault(normalize_name(str(spelling)), []).append(entry)
        return {key: tuple(found) for key, found in index.items()}

    @functools.cached_property
    def vllm_env_by_suffix(self) -> dict[str, str]:
        """Every VLLM_* variable some vLLM release reads, by what follows VLLM_ (for spotting misspellings)."""
        names = {e.name for e in self.names if _is_vllm_env(e) and e.name.startswith("VLLM_")}
        return {name.removeprefix("VLLM_"): name for name in sorted(names)}

    def vllm_env_runs(self, name: str) -> tuple[InventoryName, ...]:
        """The runs of releases in which vLLM reads the environment variable ``name``."""
        return tuple(e for e in self.find(name) if _is_vllm_env(e))

    def find(self, name: str) -> tuple[InventoryName, ...]:
        """The entries (one per run of releases) for ``name`` in any spelling of case, dashes and underscores."""
        return self._index.get(normalize_name(name), ())

    def spellings(self) -> list[str]:
        """Every normalised spelling `find` accepts, for suggestions."""
        return list(self._index)


# --- port layouts (knowledge/ports.yaml) ---


class PortLayout(Sourced):
    """A port a connector binds: ``base + dp_rank * dp_stride + tp_rank * tp_stride`` in ``versions``."""

    id: str = Field(pattern=r"^ports\.[a-z0-9-]+$")
    connector: str
    what: str
    versions: SpecifierText
    base_env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$")
    base_extra_config: str | None = None
    base_default: int = Field(gt=0, lt=65536)
    dp_stride: Literal["tp", "1", "0"] = Field(description="tp: the engine's tensor_parallel_size")
    tp_stride: Literal[0, 1]
    listener: str
    unless: str | None = None


class BufferFlag(Frozen):
    """An option of a server that sizes the host memory it pins, in GiB, in the ``versions`` of its package."""

    flag: str = Field(pattern=r"^--[a-z0-9-]+$")
    versions: SpecifierText = ""
    default_gib: float | None = Field(default=None, gt=0)


class ServerListener(Sourced):
    """A process that listens for others (the vLLM API server, an LMCache server): how its command line
    is recognised, the option or positional word (1-based, after the command) that sets its port and
    host, their defaults, and the options that size the host memory it pins."""

    id: str = Field(pattern=r"^ports\.[a-z0-9-]+$")
    package: Literal["vllm", "lmcache"]
    what: str
    versions: SpecifierText = ""
    entry_points: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    port_flag: str | None = None
    port_position: int | None = Field(default=None, ge=1)
    port_default: int | None = Field(default=None, gt=0, lt=65536)
    host_flag: str | None = None
    host_position: int | None = Field(default=None, ge=1)
    host_default: str | None = None
    buffer_flags: tuple[BufferFlag, ...] = ()
    keeps_every_chunk: bool = Field(
        default=False, description="it holds every chunk it is sent in memory and evicts none (no size bound)"
    )


class _PortsFile(Frozen):
    layouts: tuple[PortLayout, ...]
    servers: tuple[ServerListener, ...] = ()


# --- engine schema (knowledge/engine_schema.yaml; built by scripts/build_engine_schema.py) ---


class SchemaChange(Frozen):
    since: VersionText
    value: str | None = None


# An attribute that holds for a whole run of releases, or the list of the releases it changes in.
Varying = str | None | tuple[SchemaChange, ...]


class SchemaEntry(Frozen):
    """One name of the engine's configuration for a run of consecutive releases read."""

    config: str | None = None  # config_fields: the class
    name: str | None = None  # config classes and fields, LMCache keys and aliases
    key: str | None = None  # extra_config
    connectors: tuple[str, ...] | None = None  # extra_config: who reads it; empty: code every connector runs
    introduced: VersionText | None = None
    removed: VersionText | None = None
    type: Varying = None
    default: Varying = None
    parse: Varying = None  # vllm_env: how the lambda reads the value, the read itself spelt <env>
    converter: Varying = None  # LMCache keys: the env_converter where it is int or float
    unknown_fields: Varying = None  # configs: forbid or ignore
    access: Varying = None  # extra_config: get, index (required) or in
    effect: Varying = None  # LMCache aliases and the unknown key: what _resolve_config_aliases does
    message: Varying = None
    maps_to: Varying = None
    hands_to: Varying = None  # connectors: the package its extra config also goes to (lmcache: its adapter)
    file: str | None = None
    source: str = Field(pattern=r"^(wheel|sdist):(vllm|lmcache)==[\w.]+:[\w./-]+:\d+$")

    def at(self, attribute: str, version: Version) -> str | None:
        """The attribute's value in ``version`` (a release inside the run)."""
        value: Varying = getattr(self, attribute)
        if not isinstance(value, tuple):
            return value
        in_force = [c for c in value if c.since <= version]
        return in_force[-1].value if in_force else value[0].value

    def holds_at(self, version: Version) -> bool:
        return (self.introduced is None or self.introduced <= version) and (
            self.removed is None or version < self.removed
        )

    @property
    def package(self) -> Literal["vllm", "lmcache"]:
        return "lmcache" if ":lmcache==" in self.source else "vllm"


class EngineSchema(Sourced):
    """Config class fields (KV transfer and events, cache, scheduler, parallel, compilation), connectors'
    extra-config keys, vLLM's environment variables and LMCache's key table by release."""

    # The script that wrote the file (sha256); tests/test_engine_schema.py insists on the current one.
    generator_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    releases_read: dict[Literal["vllm", "lmcache"], tuple[VersionText, ...]]
    sdist_read: dict[Literal["vllm", "lmcache"], tuple[VersionText, ...]]
    connectors: tuple[SchemaEntry, ...]  # the names KVConnectorFactory registers
    configs: tuple[SchemaEntry, ...]
    config_fields: tuple[SchemaEntry, ...]
    extra_config: tuple[SchemaEntry, ...]
    lmcache_keys: tuple[SchemaEntry, ...]
    lmcache_aliases: tuple[SchemaEntry, ...]
    lmcache_unknown_key: tuple[SchemaEntry, ...]
    lmcache_bad_value: tuple[SchemaEntry, ...] = ()  # what loading a file does with a value the converter refuses
    lmcache_adapter_extra_config: tuple[SchemaEntry, ...]  # keys LMCache's vLLM adapter reads

    def was_read(self, package: Literal["vllm", "lmcache"], version: Version) -> bool:
        """Whether the release's wheel was read into the schema (else nothing can be said of its names)."""
        return version in self.releases_read.get(package, ())

    def has_config(self, name: str, version: Version) -> bool:
        """Whether the schema holds config class ``name`` as the (read) vLLM release ``version`` has it."""
        return self.was_read("vllm", version) and any(e.name == name and e.holds_at(version) for e in self.configs)

    # LMCACHE_* names code of either package spells outside the key table (access: name, or prefix)
    lmcache_env: tuple[SchemaEntry, ...] = ()
    vllm_env: tuple[SchemaEntry, ...] = ()  # vllm/envs.py's environment_variables: default and parse rule


# --- model registry (knowledge/model_registry.yaml; built by scripts/build_model_registry.py) ---


class RegistryName(Frozen):
    """An architecture (or a model type) over a run of releases read: the first that has it and the first that
    no longer does."""

    name: str = Field(pattern=r"^[A-Za-z0-9_][\w.-]*$", max_length=200)
    introduced: VersionText | None = None
    removed: VersionText | None = None

    def at(self, version: Version) -> bool:
        return (self.introduced is None or version >= self.introduced) and (
            self.removed is None or version < self.removed
        )


class RefusedArchitecture(Frozen):
    """An architecture vLLM names in its refusal: supported 'until X.Y.Z', or served by a 'plugin URL'."""

    name: str = Field(max_length=200)
    why: str = Field(pattern=r"^(until \d+\.\d+\.\d+|plugin https://\S+)$")


class TransformersRead(Frozen):
    """What one transformers release knows: the model types AutoConfig loads, the model classes it exports."""

    for_vllm: VersionText
    model_types: frozenset[str]
    model_classes: frozenset[str]


class ModelRegistry(Sourced):
    """The architectures each vLLM release resolves, those it refuses by name, vLLM's own config model types,
    and the transformers each release installs."""

    releases_read: tuple[VersionText, ...]  # empty: nothing read, nothing refused
    architectures: tuple[RegistryName, ...]
    config_types: tuple[RegistryName, ...]
    refused: tuple[RefusedArchitecture, ...]
    transformers: dict[str, TransformersRead]

    @functools.cached_property
    def _by_name(self) -> dict[str, tuple[RegistryName, ...]]:
        index: dict[str, list[RegistryName]] = {}
        for entry in self.architectures:
            index.setdefault(entry.name, []).append(entry)
        return {k: tuple(v) for k, v in index.items()}

    def was_read(self, version: Version) -> bool:
        return version in self.releases_read

    def serves(self, architecture: str, version: Version) -> bool:
        """Whether the release's ModelRegistry resolves ``architecture`` (only for a release read)."""
        return any(e.at(version) for e in self._by_name.get(architecture, ()))

    def has_own_config(self, model_type: str, version: Version) -> bool:
        return any(e.name == model_type and e.at(version) for e in self.config_types)

    def refusal(self, architecture: str) -> RefusedArchitecture | None:
        return next((r for r in self.refused if r.name == architecture), None)

    def transformers_for(self, version: Version) -> tuple[str, TransformersRead] | None:
        return next(((k, t) for k, t in self.transformers.items() if t.for_vllm == version), None)


class LinearAttentionState(Frozen):
    """Gated DeltaNet (linear attention) state sizes from config.json, as vLLM shapes its state."""

    # config.json's linear_<field> (linear_conv_kernel_dim, ...). No field descriptions: the size_offload
    # listing carries this schema and tests/test_compact_schema.py bounds its size.
    conv_kernel_dim: int = Field(gt=0, le=65536)
    num_key_heads: int = Field(gt=0, le=65536)
    num_value_heads: int = Field(gt=0, le=65536)
    key_head_dim: int = Field(gt=0, le=65536)
    value_head_dim: int = Field(gt=0, le=65536)


class Mamba2State(Frozen):
    # Mamba2 state sizes under Nemotron-H's config keys (no docstring or descriptions: the listing's size, as
    # above). Granite 4.0-H spells them mamba_n_heads, mamba_d_head, mamba_n_groups, mamba_d_state and
    # mamba_d_conv; vLLM's MambaMixer2 shapes the conv state by the inner width mamba_num_heads × mamba_head_dim.
    mamba_num_heads: int = Field(gt=0, le=65536)
    mamba_head_dim: int = Field(gt=0, le=65536)
    n_groups: int = Field(gt=0, le=65536)
    ssm_state_size: int = Field(gt=0, le=65536)
    conv_kernel: int = Field(gt=1, le=65536)


class ShortConvState(Frozen):
    # LFM2's short-convolution layers (config.json conv_dim, conv_L_cache): a conv state per sequence and no
    # recurrent state (wheel:vllm==0.33.0:vllm/model_executor/layers/mamba/mamba_utils.py:249-258).
    conv_dim: int = Field(gt=0, le=1 << 20)
    conv_kernel: int = Field(gt=1, le=65536)


SsmStateDType = Literal["bfloat16", "float16", "float32"]


# ModelArch fields that name or document the model rather than describe its layout.
_NOT_LAYOUT = frozenset({"id", "name", "hf_repo", "aliases", "class_defaults", "note", "sources", "verified_at"})


class ModelArch(Sourced):
    """A model's architecture, as KV-cache sizing needs it (owned by size_offload).

    Layer counts split ``num_layers`` by attention kind; full-attention layers are the rest.
    Each value is read from the model's config.json on huggingface.co (the first source);
    ``note`` says which values were not re-read.
    """

    id: EntryId
    name: str
    hf_repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    aliases: tuple[str, ...] = ()
    architecture: str
    num_layers: int = Field(
        gt=0, description="decoder layers that hold KV or state (MTP layers and MLP-only blocks excluded)"
    )
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0, description="num_key_value_heads (MLA: not used for the cache)")
    head_dim: int = Field(gt=0)
    attention: Literal["gqa", "mla"] = "gqa"
    kv_lora_rank: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0)
    # The full-attention layers' own head size and KV heads where they differ (Gemma 4's global layers).
    full_attention_head_dim: int | None = Field(default=None, gt=0)
    full_attention_kv_heads: int | None = Field(default=None, gt=0)
    v_head_dim: int | None = Field(default=None, gt=0, description="V's head size where it differs from K's")
    reported_kv_heads: int | None = Field(default=None, gt=0, description="the KV heads vLLM reports for the model")
    attention_chunk_size: int | None = Field(default=None, gt=0)
    chunked_local_layers: int = Field(default=0, ge=0)
    linear_attention_layers: int = Field(default=0, ge=0)
    linear_attention: LinearAttentionState | None = None
    mamba2: Mamba2State | None = Field(default=None, description="the linear layers are Mamba2 (not Gated DeltaNet)")
    short_conv: ShortConvState | None = Field(default=None, description="the linear layers are LFM2 short convolutions")
    ssm_state_dtype: SsmStateDType | None = Field(
        default=None, description="recurrent-state dtype the config declares (mamba_ssm_dtype / mamba_ssm_cache_dtype)"
    )
    index_topk: int | None = Field(default=None, gt=0, description="DeepSeek Sparse Attention's indexer top-k (MLA)")
    params_total_b: float = Field(gt=0, description="total parameters, billions")
    params_active_b: float = Field(gt=0, description="parameters active per token, billions (MoE)")
    weights_dtype: Literal["bfloat16", "float16", "fp8", "mxfp4"] = "bfloat16"
    default_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    max_position_embeddings: int = Field(gt=0)
    # Values that are a config class's defaults (transformers' or vLLM's), not read from the published
    # checkpoint: a checkpoint value, once read, replaces the default and leaves this list.
    class_defaults: tuple[str, ...] = ()
    note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelArch:
        layout = set(type(self).model_fields) - _NOT_LAYOUT
        unknown = sorted(set(self.class_defaults) - layout)
        if unknown:
            raise ValueError(
                f"class_defaults: {', '.join(unknown)} is not a layout value (one of {', '.join(sorted(layout))})"
            )
        special = self.sliding_window_layers + self.chunked_local_layers + self.linear_attention_layers
        if special > self.num_layers:
            raise ValueError("sliding, chunked and linear layers add up to more than num_layers")
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("an MLA model needs kv_lora_rank and qk_rope_head_dim")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers needs sliding_window")
        if self.chunked_local_layers and self.attention_chunk_size is None:
            raise ValueError("chunked_local_layers needs attention_chunk_size")
        states = (self.linear_attention, self.mamba2, self.short_conv)
        if self.linear_attention_layers and sum(state is not None for state in states) != 1:
            raise ValueError(
                "linear_attention_layers needs one of linear_attention (Gated DeltaNet), mamba2 or short_conv"
            )
        return self


class CompatPin(Sourced):
    """A backend package requirement that a vLLM release declares or needs."""

    id: EntryId
    vllm_versions: SpecifierText
    package: str
    requirement: str
    note: str | None = None
    breaks_architectures: tuple[str, ...] = Field(
        default=(),
        description="model classes of these releases that fail to load when the installed package is outside "
        "the requirement (recorded by importing each registered model module in the engine oracle)",
    )


VerificationStatus = Literal["verified", "contradicted", "not_checkable"]


class FactVerification(Frozen):
    """How one fact fared when its probes ran against the released wheels."""

    id: str = Field(description="an entry id, or OWNER/REPO#N for a bug")
    status: VerificationStatus
    versions: tuple[VersionText, ...] = Field(default=(), description="the releases its probes ran on")
    evidence: str | None = Field(default=None, description="the wheel file and line of the newest passing check")
    detail: str | None = None


class Verification(Frozen):
    """`knowledge/verification.yaml`: the last run of `scripts/verify_knowledge.py` (read by verification.py)."""

    checked_at: dt.date
    vllm: VersionText = Field(description="the newest vLLM release the knowledge was verified against")
    lmcache: VersionText | None = Field(default=None, description="the newest LMCache release verified against")
    facts: tuple[FactVerification, ...] = ()


# Recipes: how each backend is assembled from the parts above (used by choose_backend
# and render_config).

Backend = Literal[
    "none",
    "native_cpu",
    "native_tiering",
    "lmcache",
    "lmcache_p2p",
    "lmcache_mp",
    "nixl_pd",
    "mooncake_pd",
    "multi_nixl_offload",
]
Service = Literal["controller", "peer-headless", "lmcache-server", "side-channel-headless", "proxy"]
TierKind = Literal["fs", "obj", "p2p"]


class RequiredEnv(Frozen):
    name: str
    value: str
    setting: EntryId


RequirementKind = Literal["flag", "env", "package", "process", "service", "port"]


class RecipeRequirement(Frozen):
    """Something a backend needs in every release it runs on; what varies by release stays in code."""

    kind: RequirementKind
    name: str
    value: str | None = None
    why: str
    source: EntryId | None = None
    # Only when the request asks for an NVMe tier / GPUDirect Storage.
    when: Literal["nvme-tier", "gpudirect-storage"] | None = None


class Recipe(Sourced):
    id: EntryId
    backend: Backend
    title: str
    summary: str
    connector: EntryId | None = None
    spec: str | None = None
    roles: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    services: tuple[Service, ...] = ()
    required_env: tuple[RequiredEnv, ...] = ()
    requirements: tuple[RecipeRequirement, ...] = ()
    pd_connector: EntryId | None = Field(default=None, description="the connector carrying the P/D transfer")
    gates: tuple[EntryId, ...] = ()
    avoid: tuple[EntryId, ...] = ()


SecondaryTier = Literal["nvme", "object_store", "peers"]  # the tiers beyond DRAM a choose_backend caller asks for


class TierTypeNames(Sourced):
    """A native secondary tier kind: the choose_backend tier it serves, the feature that ships it, and its
    secondary_tiers[].type name by release."""

    kind: TierKind
    serves: SecondaryTier
    feature: EntryId
    names: tuple[Ranged, ...]


# Facts the renderer writes that no other file states (recipes.yaml `facts`): one typed shape each,
# read by attribute. A port or value of our own choosing, not an upstream default, says so in its summary.

Fabric = Literal["nvlink", "infiniband", "roce", "ethernet"]
PortNumber = Annotated[int, Field(ge=1, le=65535)]


class RenderFact(Sourced):
    """A value render_config writes that no other knowledge file states; ``summary`` says what it is and,
    for one of our own choosing rather than an upstream default, why it is the rendered default."""

    summary: str


class KvTransferConfigKeys(RenderFact):
    """The three keys of a --kv-transfer-config object."""

    connector: str
    role: str
    extra_config: str

    @property
    def names(self) -> tuple[str, str, str]:
        return (self.connector, self.role, self.extra_config)


class ServicePort(RenderFact):
    """The port a rendered process serves on."""

    port: PortNumber


class LmcacheMpAddress(RenderFact):
    """Where LMCacheMPConnector finds the LMCache server: two kv_connector_extra_config keys, and the
    port both the connector and the server default to."""

    host_key: str
    port_key: str
    port: PortNumber


class LmcacheServerCommand(RenderFact):
    """How the LMCache MP server starts, by LMCache release, and the eviction policy it is given."""

    command: tuple[str, ...] = Field(min_length=1)
    command_versions: SpecifierText = Field(description="the LMCache releases that have `command`")
    older_command: tuple[str, ...] = Field(min_length=1)
    eviction_policy: str

    def command_for(self, version: Version) -> tuple[str, ...]:
        return self.command if in_range(self.command_versions, version) else self.older_command


class LmcacheControllerCommand(RenderFact):
    """The LMCache controller's command, its HTTP port and the two monitor ports instances report to."""

    command: tuple[str, ...] = Field(min_length=1)
    http_port: PortNumber
    pull_port: PortNumber
    reply_port: PortNumber


class LmcacheP2pPorts(RenderFact):
    """Where the ports of LMCache P2P instances start; the renderer hands them out in turn from ``base``."""

    base: PortNumber


class UcxTlsByFabric(RenderFact):
    """UCX_TLS for NIXL on each fabric."""

    nvlink: str
    infiniband: str
    roce: str
    ethernet: str

    def transports(self, fabric: Fabric) -> str:
        by_fabric = {"nvlink": self.nvlink, "infiniband": self.infiniband, "roce": self.roce, "ethernet": self.ethernet}
        return by_fabric[fabric]


class MooncakeProtocolKey(RenderFact):
    """The kv_connector_extra_config key that picks Mooncake's transport, where the connector reads it."""

    key: str
    default: str
    without_rdma: str = Field(description="the value for a fabric without RDMA")
    versions: SpecifierText = Field(description="the vLLM releases whose MooncakeConnector reads the key")


class P2pTierHostInConfig(RenderFact):
    """Where the p2p tier's host comes from: the tier entry, or VLLM_P2P_SIDE_CHANNEL_HOST in ``env_fallback``."""

    env_fallback: SpecifierText = Field(description="the vLLM releases in which an unset host falls back to the env")


class SharedMemoryFacts(RenderFact):
    """What a release keeps in /dev/shm, and the headroom and defaults the renderer sizes it against."""

    native_cpu_versions: SpecifierText = Field(description="releases whose CPUOffloadingSpec tier is in /dev/shm")
    tiering_versions: SpecifierText = Field(description="releases whose TieringOffloadingSpec tier is in /dev/shm")
    free_space_check_versions: SpecifierText = Field(description="releases that check /dev/shm's free space")
    headroom_gib: float = Field(gt=0, le=1024)
    multi_worker_headroom_gib: float = Field(gt=0, le=1024)
    docker_default_mib: int = Field(gt=0)
    host_default_fraction_of_ram: float = Field(gt=0, le=1)


class HostMemoryFacts(RenderFact):
    """What a rendered container is given beyond what it pins: the process, per-GPU buffers, helpers."""

    pinned_headroom: float = Field(ge=0, le=1, description="the share of the pinned memory added on top of it")
    process_gib: float = Field(ge=0, le=1024)
    per_gpu_gib: float = Field(ge=0, le=1024)
    helper_gib: float = Field(gt=0, le=1024)


class StartupBudget(Frozen):
    below_b: float = Field(gt=0, description="models with fewer parameters than this, billions")
    minutes: int = Field(ge=1, le=600)


class VllmStartup(RenderFact):
    """The health endpoint the probes call and the start-up budget by model size."""

    path: str = Field(pattern=r"^/[\w/-]*$")
    period_seconds: int = Field(ge=1, le=300)
    budget_minutes: tuple[StartupBudget, ...]
    default_minutes: int = Field(ge=1, le=600)

    def minutes_for(self, params_b: float | None) -> int:
        """The start-up budget for a model of ``params_b`` billion parameters (None: not known)."""
        if params_b is not None:
            for step in sorted(self.budget_minutes, key=lambda s: s.below_b):
                if params_b < step.below_b:
                    return step.minutes
        return self.default_minutes


class ModelCacheFacts(RenderFact):
    """Where the image keeps downloaded models, the token variable, and the rendered Secret and volume defaults."""

    mount_path: str = Field(pattern=r"^/[\w./-]+$")
    token_env: str
    secret_name: str
    secret_key: str
    volume_gib: int = Field(ge=1)


class RdmaFacts(RenderFact):
    """What a container needs for RDMA: the device-plugin resource (a convention), a capability, a device."""

    resource: str
    capability: str
    docker_device: str = Field(pattern=r"^/[\w./-]+$")


class LmcacheImage(RenderFact):
    """The image the LMCache controller and server run from when the caller names none."""

    image: str
    bin_dir: str = Field(pattern=r"^/[\w./-]+$")


class PdProxyFetch(RenderFact):
    """The image that fetches the P/D proxy script into the proxy pod (render_config proxy_source fetch)."""

    image: str


class RenderFacts(Frozen):
    """recipes.yaml ``facts``: one entry per fact, each in its own shape."""

    kv_transfer_config_keys: KvTransferConfigKeys
    vllm_http_port: ServicePort
    pd_proxy_port: ServicePort
    lmcache_mp_address: LmcacheMpAddress
    lmcache_server: LmcacheServerCommand
    lmcache_controller: LmcacheControllerCommand
    lmcache_p2p_ports: LmcacheP2pPorts
    ucx_tls_by_fabric: UcxTlsByFabric
    mooncake_protocol_key: MooncakeProtocolKey
    p2p_tier_host_in_config: P2pTierHostInConfig
    shared_memory: SharedMemoryFacts
    host_memory: HostMemoryFacts
    vllm_startup: VllmStartup
    model_cache: ModelCacheFacts
    rdma: RdmaFacts
    single_host_ports: RenderFact
    lmcache_image: LmcacheImage
    pd_proxy_fetch: PdProxyFetch


class PdProxy(Sourced):
    """The proxy that sends each request to prefill, then decode, for one connector and range of
    releases: a script in the vLLM source tree (neither the wheel nor the image carries it)."""

    id: EntryId
    connector: EntryId
    versions: SpecifierText
    path: str = Field(pattern=r"^[\w./-]+\.py$", description="in the vLLM repository at the release's tag")
    # toy: --prefiller-hosts/--prefiller-ports/--decoder-hosts/--decoder-ports;
    # mooncake: --prefill URL BOOTSTRAP_PORT / --decode URL
    cli: Literal["toy", "mooncake"]
    summary: str

    @property
    def script(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Recipes(Frozen):
    recipes: tuple[Recipe, ...]
    tier_types: tuple[TierTypeNames, ...]
    pd_proxies: tuple[PdProxy, ...]
    facts: RenderFacts

    @model_validator(mode="after")
    def _one_entry_per_tier(self) -> Recipes:
        for field, wanted in (("kind", TierKind), ("serves", SecondaryTier)):
            listed = [getattr(t, field) for t in self.tier_types]
            if sorted(listed) != sorted(get_args(wanted)):
                raise ValueError(f"tier_types: each of {', '.join(get_args(wanted))} is the {field} of one entry")
        return self

    def pd_proxy(self, connector: str, version: Version) -> PdProxy | None:
        return next((p for p in self.pd_proxies if p.connector == connector and in_range(p.versions, version)), None)

    def recipe(self, backend: Backend) -> Recipe:
        return next(r for r in self.recipes if r.backend == backend)

    def tier_type(self, kind: TierKind, version: Version) -> str | None:
        """The secondary_tiers[].type name of ``kind`` in ``version``; None when the tier is not there."""
        ranged = ranged_at(self.tier_names_entry(kind).names, version)
        return None if ranged is None else str(ranged.value)

    def tier_names_entry(self, kind: TierKind) -> TierTypeNames:
        return next(t for t in self.tier_types if t.kind == kind)

    def tier_serving(self, wanted: SecondaryTier) -> TierTypeNames:
        """The native tier kind that gives what a choose_backend caller asks for (nvme: fs, ...)."""
        return next(t for t in self.tier_types if t.serves == wanted)


# ---------------------------------------------------------------------------
# Security advisories (knowledge/advisories.yaml; the lookups are in advisories.py)

AdvisoryPackage = Literal["vllm", "lmcache", "nixl", "mooncake"]
AdvisorySeverity = Literal["critical", "high", "medium", "low", "unknown"]  # GitHub's words
# The package names the GitHub Advisory Database files them under (ecosystem pip).
PIP_NAMES: dict[str, str] = {
    "vllm": "vllm",
    "lmcache": "lmcache",
    "nixl": "nixl",
    "mooncake": "mooncake-transfer-engine",
}
# KV connectors of the removed V0 engine that advisories name; they have no entry in connectors.yaml.
LEGACY_CONNECTORS: frozenset[str] = frozenset({"PyNcclConnector", "LMCacheConnector", "MooncakeStoreConnectorV0"})
GHSA_ID = re.compile(r"^GHSA(-[23456789cfghjmpqrvwx]{4}){3}$")
CVE_ID = re.compile(r"^CVE-\d{4}-\d{4,}$")
_CVSS_VECTOR = re.compile(r"^CVSS:(?P<version>3\.0|3\.1|4\.0)(/[A-Z]{1,3}:[A-Z])+$")


class Cvss(Frozen):
    """One CVSS score as published, with its vector."""

    version: Literal["3.0", "3.1", "4.0"]
    score: float = Field(ge=0.0, le=10.0)
    vector: str

    @model_validator(mode="after")
    def _vector_matches_version(self) -> Cvss:
        match = _CVSS_VECTOR.match(self.vector)
        if match is None:
            raise ValueError(f"vector: {self.vector!r} is not a CVSS vector such as 'CVSS:3.1/AV:N/AC:L/...'")
        if match["version"] != self.version:
            raise ValueError(f"vector: {self.vector!r} is a CVSS {match['version']} vector, not {self.version}")
        return self


class AffectedRange(Frozen):
    """The releases one range of an advisory covers, and where it ends.

    ``fixed_in`` is the first patched release (as published, or ``derived`` from the wheels when the
    advisory names none); ``open_ended`` says the published range stops at the newest release of its
    day rather than at a fix; ``unfixed_through`` is the newest release read and found still unfixed.
    ``probes`` (presence kinds) match the vulnerable code the fix removes: `scripts/verify_knowledge.py`
    expects them to hold in the last release ``affected`` covers and in ``unfixed_through`` and,
    unless ``absent_outside`` is false, to fail in ``fixed_in`` and the newest release.
    ``flaw_present_from`` is the first release whose code, read in the wheels, already has the flaw when
    that is earlier than the published range: the releases from it up to the range count as affected too.
    """

    affected: SpecifierText
    fixed_in: VersionText | None = None
    fix_basis: Literal["published", "derived"] = "published"
    open_ended: bool = False
    unfixed_through: VersionText | None = None
    flaw_present_from: VersionText | None = None
    probes: tuple[Probe, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> AffectedRange:
        spec = parse_specifier(self.affected, field="affected")
        if self.fixed_in is not None and versions.contains(spec, self.fixed_in):
            raise ValueError(f"fixed_in {self.fixed_in} is inside the affected range {self.affected!r}")
        if self.fix_basis == "derived" and (self.fixed_in is None or not self.open_ended):
            raise ValueError("fix_basis 'derived' is for a fixed_in read in the wheels where the range is open_ended")
        if self.unfixed_through is not None:
            if not self.open_ended:
                raise ValueError("unfixed_through extends an open_ended range; this range ends at a fix")
            if self.fixed_in is not None and self.unfixed_through >= self.fixed_in:
                raise ValueError(f"unfixed_through {self.unfixed_through} must come before fixed_in {self.fixed_in}")
        if self.flaw_present_from is not None:
            lowers = [Version(s.version) for s in spec if s.operator in (">", ">=")]
            if versions.contains(spec, self.flaw_present_from) or not lowers or self.flaw_present_from > min(lowers):
                raise ValueError(
                    f"flaw_present_from {self.flaw_present_from} must come before the start of {self.affected!r}"
                )
        if self.probes and self.fixed_in is None and self.unfixed_through is None:
            raise ValueError("probes check where a range ends: they need fixed_in or unfixed_through")
        if any(p.kind not in PRESENCE_PROBES for p in self.probes):
            raise ValueError(f"a range's probes are presence kinds ({', '.join(sorted(PRESENCE_PROBES))})")
        return self


class AdvisoryRequires(Frozen):
    """When an advisory applies; every key given must hold for the deployment (three-valued in advisories.py)."""

    components: tuple[Component, ...] | None = Field(default=None, description="one of these is in use")
    connectors: tuple[str, ...] | None = Field(default=None, description="an effective KV connector, by name")
    configured: tuple[str, ...] | None = Field(default=None, description="one of these flags or variables is set")
    engine: Literal["v0", "v1"] | None = None
    multi_node: bool | None = Field(default=None, description="the deployment spans hosts")
    multimodal: tuple[Literal["image", "video", "audio"], ...] | None = Field(
        default=None, description="the served model takes one of these inputs"
    )
    endpoints: tuple[str, ...] | None = Field(default=None, description="the server exposes one of these")
    architectures: tuple[str, ...] | None = Field(default=None, description="the served model is one of these")
    offload_tiers: tuple[str, ...] | None = Field(
        default=None, description="a native secondary tier of one of these types is configured (fs, obj, p2p, ...)"
    )

    def given(self) -> list[str]:
        """The condition keys this advisory sets."""
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


class Advisory(Sourced):
    """A published security advisory for one package, with the conditions under which it applies."""

    ghsa: Annotated[str, Field(pattern=GHSA_ID.pattern)] | None = None
    cve: Annotated[str, Field(pattern=CVE_ID.pattern)] | None = None
    package: AdvisoryPackage
    title: str
    severity: AdvisorySeverity
    cvss: tuple[Cvss, ...] = ()
    ranges: tuple[AffectedRange, ...] = Field(min_length=1)
    requires: AdvisoryRequires = Field(default_factory=AdvisoryRequires)
    applies: str = Field(description="one plain line: when it applies")
    residual: str | None = Field(default=None, description="what still holds after the fix")
    mitigation: str | None = Field(
        default=None,
        description="for an advisory no release fixes: what keeps its precondition (applies) from holding, "
        "as the fix a review gives in place of an upgrade",
    )
    published: dt.date

    @property
    def id(self) -> str:
        """The GHSA id where there is one, else the CVE."""
        return self.ghsa or self.cve or ""

    @model_validator(mode="after")
    def _identified_and_sourced(self) -> Advisory:
        if self.ghsa is None and self.cve is None:
            raise ValueError("an advisory needs a ghsa or a cve id")
        read = [
            r
            for r in self.ranges
            if r.fix_basis == "derived" or r.unfixed_through is not None or r.flaw_present_from is not None
        ]
        if read and not any(s.startswith(f"wheel:{self.package}==") for s in self.sources):
            raise ValueError(
                f"a derived fix, unfixed_through or flaw_present_from needs the wheel:{self.package}==... lines "
                "it was read from"
            )
        return self


class AdvisorySnapshot(Frozen):
    """`knowledge/advisories.yaml`: the advisories as last checked, and when (an empty file is valid)."""

    checked_at: dt.date | None = None
    advisories: tuple[Advisory, ...] = ()

    @model_validator(mode="after")
    def _dated(self) -> AdvisorySnapshot:
        if self.advisories and self.checked_at is None:
            raise ValueError("checked_at: the date the snapshot was checked is required once advisories are listed")
        return self


def _cross_check_advisories(k: Knowledge) -> list[str]:
    """Duplicate ids, connector names no connector has, fixes that are not releases."""
    problems: list[str] = []
    seen: set[str] = set()
    connector_names = {n for c in k.connectors for n in (c.name, *c.aliases)} | LEGACY_CONNECTORS
    for a in k.advisories.advisories:
        label = f"advisories.yaml: entry {a.id!r}"
        for identifier in (a.ghsa, a.cve):
            if identifier is not None and identifier in seen:
                problems.append(f"{label}: {identifier} is listed twice")
            seen.add(identifier or "")
        for name in a.requires.connectors or ():
            if name not in connector_names:
                problems.append(f"{label}, field 'requires.connectors': no connector is called {name!r}")
        releases = {str(v) for v in k.release_versions(a.package)} if a.package in k.releases else set()
        if not releases:
            continue
        oldest = k.oldest(a.package)
        for r in a.ranges:
            for field, value in (
                ("fixed_in", r.fixed_in),
                ("unfixed_through", r.unfixed_through),
                ("flaw_present_from", r.flaw_present_from),
            ):
                read_in_wheel = field == "unfixed_through" or r.fix_basis == "derived"
                known_span = value is not None and value >= oldest
                if value is not None and (read_in_wheel or known_span) and str(value) not in releases:
                    problems.append(f"{label}, field 'ranges.{field}': {value} is not a {a.package} release")
    return problems


# ---------------------------------------------------------------------------
# Files and the loaded whole


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
    offload_shorthand: tuple[OffloadShorthand, ...] = ()


class _BugsFile(Frozen):
    bugs: tuple[Bug, ...]


class _CompatFile(Frozen):
    pins: tuple[CompatPin, ...]


class _ModelsFile(Frozen):
    models: tuple[ModelArch, ...]


# ---------------------------------------------------------------------------
# The engine's KV cache arithmetic (knowledge/engine.yaml; size_offload computes with it)


class EngineRule(Sourced):
    """One rule of vLLM's KV cache planning that size_offload follows: what the engine computes and
    where in its code. Where the rule differs by release, ``values`` holds what applies in each range
    (the code maps each value to its formula); empty means one rule for every release covered."""

    id: EntryId = Field(pattern=r"^engine\.")
    summary: str
    values: tuple[Ranged, ...] = ()

    def value_at(self, version: Version) -> Ranged | None:
        return ranged_at(self.values, version)


class GpuCapability(Sourced):
    """The CUDA compute capability of a GPU in hardware.yaml: what vLLM picks attention kernels by."""

    gpu: EntryId
    compute_capability: str = Field(pattern=r"^\d+\.\d+$")

    @property
    def as_tuple(self) -> tuple[int, int]:
        major, minor = self.compute_capability.split(".", 1)
        return int(major), int(minor)

    @property
    def major(self) -> int:
        return self.as_tuple[0]


class AttentionBackendBlock(Sourced):
    """The attention backend a release picks by default for one GPU family (compute capability major),
    attention kind and KV cache dtype, and the block size it brings when --block-size is not given."""

    versions: SpecifierText = ""
    compute_capability_major: int = Field(ge=1)
    attention: Literal["gqa", "mla"]  # ModelArch.attention: gqa is every non-MLA layout
    kv_cache_dtype: Literal["16-bit", "fp8"]
    # The row holds only for a model whose largest attention head is this wide (vLLM's model head size is the
    # largest layer's); a row without it holds for any head size the case does not name.
    head_size: int | None = Field(default=None, gt=0)
    backend: str
    block_size: int = Field(gt=0)


class EngineRules(Frozen):
    rules: tuple[EngineRule, ...]
    gpu_capabilities: tuple[GpuCapability, ...] = ()
    attention_backends: tuple[AttentionBackendBlock, ...] = ()

    @model_validator(mode="after")
    def _each_once(self) -> EngineRules:
        for label, keys in (
            ("rules", [r.id for r in self.rules]),
            ("gpu_capabilities", [g.gpu for g in self.gpu_capabilities]),
        ):
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice:
                raise ValueError(f"{label}: listed more than once: {', '.join(twice)}")
        return self

    def rule(self, rule_id: str) -> EngineRule:
        found = next((r for r in self.rules if r.id == rule_id), None)
        if found is None:  # pragma: no cover - the knowledge tests guard the ids the code asks for
            raise LookupError(f"knowledge/engine.yaml has no rule {rule_id!r}")
        return found

    def capability(self, gpu_id: str) -> GpuCapability | None:
        return next((g for g in self.gpu_capabilities if g.gpu == gpu_id), None)

    def backend_block(
        self, version: Version, major: int, attention: str, kv_cache_dtype: str, head_size: int
    ) -> AttentionBackendBlock | None:
        """The default backend and its block for this case in ``version``: the row for this head size, else the
        row for any head size; None when not recorded."""
        rows = [
            b
            for b in self.attention_backends
            if in_range(b.versions, version)
            and b.compute_capability_major == major
            and b.attention == attention
            and b.kv_cache_dtype == kv_cache_dtype
            and b.head_size in (None, head_size)
        ]
        return next((b for b in rows if b.head_size is not None), rows[0] if rows else None)


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
    "engine.yaml": EngineRules,
    "cli_inventory.yaml": CliInventory,
    "lmcache_server_cli.yaml": LMCacheServerCli,
    "name_inventory.yaml": NameInventory,
    "engine_schema.yaml": EngineSchema,
    "ports.yaml": _PortsFile,
    "model_registry.yaml": ModelRegistry,
    "recipes.yaml": Recipes,
    "advisories.yaml": AdvisorySnapshot,
}
if tuple(FILES) != FILE_NAMES:  # pragma: no cover - a module that cannot import fails every test
    raise KnowledgeError("knowledge.FILES and knowledge_files.FILE_NAMES name different files")


class Knowledge(Frozen):
    """Everything in `knowledge/`, validated; build it with `load_knowledge`."""

    releases: dict[str, ReleaseLine]
    features: tuple[Feature, ...]
    settings: tuple[Setting, ...]
    connectors: tuple[Connector, ...]
    metrics: tuple[Metric, ...]
    pitfalls: tuple[Pitfall, ...]
    offload_shorthand: tuple[OffloadShorthand, ...] = ()
    bugs: tuple[Bug, ...]
    hardware: Hardware
    pins: tuple[CompatPin, ...]
    models: tuple[ModelArch, ...]
    cli_inventory: CliInventory
    lmcache_server_cli: LMCacheServerCli
    name_inventory: NameInventory
    engine_schema: EngineSchema
    port_layouts: tuple[PortLayout, ...]
    servers: tuple[ServerListener, ...] = ()
    model_registry: ModelRegistry
    recipes: Recipes
    advisories: AdvisorySnapshot
    engine: EngineRules
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

    @functools.cached_property
    def _model_index(self) -> dict[str, ModelArch]:
        index: dict[str, ModelArch] = {}
        for m in self.models:
            for spelling in (m.id, m.id.split(".", 1)[-1], m.name, m.hf_repo, *m.aliases):
                index.setdefault(model_key(spelling), m)
        return index

    def find_model(self, name: str) -> ModelArch | None:
        """The model called ``name``: its id, name, alias or Hugging Face repo, with or without the org."""
        return self._model_index.get(model_key(name))

    def model_spellings(self) -> list[str]:
        """Every (normalised) spelling `find_model` accepts, for suggestions."""
        return list(self._model_index)

    def known_names(self) -> list[str]:
        """Every spelling `find` accepts, for suggestions."""
        return sorted(self._name_index)

    @functools.cached_property
    def _release_versions(self) -> dict[str, tuple[Version, ...]]:
        return {package: tuple(r.version for r in line.releases) for package, line in self.releases.items()}

    def release_versions(self, package: str = "vllm") -> list[Version]:
        return list(self._release_versions.get(package, ()))

    def newest(self, package: str = "vllm") -> Version:
        return self.release_versions(package)[-1]

    def oldest(self, package: str = "vllm") -> Version:
        return self.release_versions(package)[0]

    def requires_python(self, package: str, version: Version) -> str | None:
        """The release's Requires-Python (``<3.15,>=3.11``), or None when it is not recorded."""
        line = self.releases.get(package)
        found = next((r for r in line.releases if r.version == version), None) if line else None
        return found.requires_python if found is not None else None

    def release_requires(self, package: str, version: Version, dependency: str) -> str | None:
        """The release's Requires-Dist range for ``dependency`` (torch, transformers), or None when not recorded."""
        line = self.releases.get(package)
        found = next((r for r in line.releases if r.version == version), None) if line else None
        return found.requires.get(dependency) if found is not None else None

    def capped_by_python(self, package: str, python: str) -> Version | None:
        """The release an unpinned `pip install` takes in Python ``python`` when the newest release no longer
        admits that Python (an older one, whatever day it runs); None when the newest admits it, or none does."""
        taken = self.newest_for_python(package, python)
        return taken if taken is not None and taken < self.newest(package) else None

    def newest_for_python(self, package: str, python: str) -> Version | None:
        """The newest release whose Requires-Python admits Python ``python`` (``3.9``), the one an unpinned
        `pip install` there takes; None when no recorded release admits it."""
        line = self.releases.get(package)
        for release in reversed(line.releases if line else ()):
            if release.requires_python is not None and contains(
                parse_specifier(release.requires_python), Version(python)
            ):
                return release.version
        return None


def normalize_name(name: str) -> str:
    """Fold the spellings people use for one name: dashes, underscores, case, prefixes."""
    key = name.strip().lower()
    if key.startswith("vllm:"):
        key = key[len("vllm:") :]
    key = re.sub(r"[\s_.]+", "-", key).strip("-")
    if key.endswith("-total"):
        key = key[: -len("-total")]
    return key


def model_key(name: str) -> str:
    # "Qwen/Qwen3-32B", "qwen3-32b" and "model.qwen3-32b" name one model: the org is dropped.
    return normalize_name(name.rsplit("/", 1)[-1])


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


# libyaml's safe loader and dumper where PyYAML was built with it: the same safe behaviour, ten times
# faster. Everything in the package that reads or writes YAML uses these two.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


_FileModel = TypeVar("_FileModel", bound=Frozen)


def _load_file(path: Path, model: type[_FileModel]) -> _FileModel:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
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
        ("hardware.yaml", (*k.hardware.gpus, *k.hardware.host_memory, *k.hardware.nvme, *k.hardware.instances)),
    ]
    for file, entries in groups:
        for entry in entries:
            if entry.id in seen:
                problems.append(f"{file}: entry {entry.id!r}: id already used in {seen[entry.id]}")
            seen[entry.id] = file
    known = set(seen)
    # What releases.yaml records of a package's METADATA, read in its wheels, is a fact a rule may rest on too.
    known |= {
        release_metadata_fact(pkg, field)
        for pkg, line in k.releases.items()
        for field in get_args(ReleaseMetadata)
        if any(getattr(r, field) for r in line.releases)
    }
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
                if v is not None and str(v) not in releases:
                    problems.append(f"{file}: entry {g.id!r}, field {label!r}: {v} is not a {g.component} release")
            for c in g.changes:
                if str(c.version) not in releases:
                    problems.append(f"{file}: entry {g.id!r}, field 'changes': {c.version} is not a release")
    for p in k.pitfalls:
        check_refs("pitfalls.yaml", p.id, "related", p.related)
        check_refs("pitfalls.yaml", p.id, "premises", p.premises)
    for b in k.bugs:
        check_refs("bugs.yaml", b.id, "related", b.related)
    return problems


def _cross_check_recipes(recipes: Recipes, knowledge: Knowledge) -> list[str]:
    problems: list[str] = []
    known = set(knowledge.by_id)
    for r in recipes.recipes:
        refs = [
            r.connector,
            *r.gates,
            *r.avoid,
            *(e.setting for e in r.required_env),
            *(q.source for q in r.requirements),
            r.pd_connector,
        ]
        problems += [
            f"recipes.yaml: entry {r.id!r}: no knowledge entry has the id {ref!r}"
            for ref in refs
            if ref and ref not in known
        ]
    for proxy in recipes.pd_proxies:
        if proxy.connector not in known:
            problems.append(f"recipes.yaml: pd_proxies {proxy.id!r}: no knowledge entry has the id {proxy.connector!r}")
    problems += [
        f"recipes.yaml: tier_types {t.kind!r}: no knowledge entry has the id {t.feature!r}"
        for t in recipes.tier_types
        if t.feature not in known
    ]
    # Exactly one proxy for each P/D connector in every release that has the connector.
    for connector_id in {r.pd_connector for r in recipes.recipes if r.pd_connector}:
        connector = knowledge.by_id.get(connector_id)
        if not isinstance(connector, Gated):
            continue
        for release in knowledge.release_versions():
            proxies = [
                p.id for p in recipes.pd_proxies if p.connector == connector_id and in_range(p.versions, release)
            ]
            if connector.exists_in(release) and len(proxies) != 1:
                problems.append(
                    f"recipes.yaml: pd_proxies: {connector_id} in {release} needs exactly one proxy, found {proxies}"
                )
    backends = [r.backend for r in recipes.recipes]
    if len(set(backends)) != len(backends):
        problems.append("recipes.yaml: each backend must have exactly one recipe")
    tier_setting = knowledge.by_id.get("spec.tier.type")
    if isinstance(tier_setting, Setting):
        # The names here must be ones the tier factory of that release registers.
        for release in knowledge.release_versions():
            found = ranged_at(tier_setting.accepted_values, release)
            accepted = found.value if found is not None else ()
            for entry in recipes.tier_types:
                name = recipes.tier_type(entry.kind, release)
                if name is not None and (not isinstance(accepted, tuple) or name not in accepted):
                    problems.append(
                        f"recipes.yaml: tier_types {entry.kind!r}: {name!r} is not a registered tier type in {release}"
                    )
    return problems


@functools.cache
def load_knowledge(directory: str | None = None) -> Knowledge:
    """Load and validate every knowledge file; cached, so the work happens once per process.

    The installed knowledge (no ``directory``) is also cached across processes, keyed by every
    byte it is built from: start-up reuses the copy the last start-up validated (see startup_cache).
    """
    root = Path(directory) if directory else knowledge_dir()
    if directory:
        return _load_and_check(root)
    try:
        inputs = _cache_inputs(root)
    except OSError:  # a file is missing or unreadable: the normal load says which
        return _load_and_check(root)
    return startup_cache.load_or_build("knowledge", inputs, Knowledge, lambda: _load_and_check(root))


_WHEEL_SOURCE = re.compile(r"wheel:(?P<pkg>vllm|lmcache)==(?P<ver>[\w.]+):(?P<path>[\w./-]+)")


def _wheel_sources_without_a_wheel(root: Path, k: Knowledge) -> list[str]:
    """``wheel:`` sources naming a release that has no wheel (``wheel: false`` in releases.yaml)."""
    sdist_only = {(line.package, str(r.version)) for line in k.releases.values() for r in line.releases if not r.wheel}
    problems: list[str] = []
    for name in FILES:
        for m in _WHEEL_SOURCE.finditer((root / name).read_text(encoding="utf-8")) if sdist_only else ():
            if (m["pkg"], m["ver"]) in sdist_only:
                problems.append(
                    f"{name}: {m.group(0)}: {m['pkg']} {m['ver']} has no wheel on the index; cite its source "
                    f"distribution, sdist:{m['pkg']}=={m['ver']}:{m['path']}"
                )
    return problems


def _cache_inputs(root: Path) -> list[bytes]:
    """Everything a loaded `Knowledge` depends on: the files, where they are, and the code that reads them."""
    code = [Path(__file__), Path(versions.__file__)]
    return [
        f"{__version__} {pydantic.VERSION} {yaml.__version__} {packaging.__version__} {sys.version}".encode(),
        str(root).encode(),
        *(path.read_bytes() for path in code),
        *(part for name in FILES for part in (name.encode(), (root / name).read_bytes())),
    ]


def _load_and_check(root: Path) -> Knowledge:
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
            offload_shorthand=parts["pitfalls.yaml"].offload_shorthand,  # type: ignore[attr-defined]
            bugs=parts["bugs.yaml"].bugs,  # type: ignore[attr-defined]
            hardware=cast(Hardware, parts["hardware.yaml"]),
            pins=parts["compat.yaml"].pins,  # type: ignore[attr-defined]
            models=parts["models.yaml"].models,  # type: ignore[attr-defined]
            cli_inventory=cast(CliInventory, parts["cli_inventory.yaml"]),
            lmcache_server_cli=cast(LMCacheServerCli, parts["lmcache_server_cli.yaml"]),
            name_inventory=cast(NameInventory, parts["name_inventory.yaml"]),
            engine_schema=cast(EngineSchema, parts["engine_schema.yaml"]),
            port_layouts=parts["ports.yaml"].layouts,  # type: ignore[attr-defined]
            servers=parts["ports.yaml"].servers,  # type: ignore[attr-defined]
            model_registry=cast(ModelRegistry, parts["model_registry.yaml"]),
            recipes=cast(Recipes, parts["recipes.yaml"]),
            advisories=cast(AdvisorySnapshot, parts["advisories.yaml"]),
            engine=cast(EngineRules, parts["engine.yaml"]),
            directory=str(root),
        )
    except ValidationError as exc:  # pragma: no cover - each part was validated above
        raise KnowledgeError(str(exc)) from None
    if "vllm" not in k.releases:
        raise KnowledgeError("knowledge/releases.yaml: the vllm release line is missing")
    problems = _cross_check(k) + _cross_check_recipes(k.recipes, k) + _cross_check_advisories(k)
    problems += _wheel_sources_without_a_wheel(root, k)
    if problems:
        raise KnowledgeError("; ".join(problems))
    return k
