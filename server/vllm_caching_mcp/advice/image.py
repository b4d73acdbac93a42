"""inspect_image: what a vllm/vllm-openai tag (or any image) contains, from registry metadata only.

The registry gives three small JSON documents — the tag's index, the platform's manifest and the
image config — and no layer is ever pulled. From the config this reads the CUDA and Python
versions (environment, labels, build history), entrypoint and cmd, the vLLM version (environment
or labels; else the tag, said so), and whether the KV-connector extras were installed at build
time, from the build history's ``created_by`` lines. The knowledge then adds the compatibility
pins for that vLLM release and what LMCacheMPConnector's HMA support depends on.

What metadata cannot prove (that ``import lmcache`` works in the image, which connectors the
installed vLLM registers) is left to the optional runtime check script, which the user runs on a
machine with Docker.

When the registry cannot be reached and nothing is cached, the answer is still a result, with
``source: unavailable`` and the reason: a network outage is not a wrong argument (tool errors are
kept for input the caller must change), and the parts that need no registry — the vLLM version a
``vX.Y.Z`` tag names, its pins, the runtime script — remain useful. An unknown tag, a missing
platform or refused credentials are the caller's to fix, so they are errors naming the field.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..http_client import SHAPE_ERRORS, Deadline, FailureReason
from ..knowledge import Connector, Knowledge, ranged_at
from ..registry import (
    ConfigError,
    ImageMetadata,
    ImageRef,
    InvalidImageReference,
    PlatformMissing,
    RegistryClient,
    RegistryError,
    RegistryNotAllowed,
    parse_image_reference,
)
from ..safe_text import join_lines
from ..versions import Version, in_range
from .common import (
    AdviceError,
    Citation,
    Result,
    SecurityCheck,
    ToolSpec,
    VersionContext,
    cite,
    resolve_version,
    security_check,
)

# Tests replace this with a factory pointing at a stand-in registry; it reads credentials itself,
# so no credential ever travels through a request field.
client_factory: Callable[[], RegistryClient] = RegistryClient.from_env

Arch = Literal["amd64", "arm64", "ppc64le", "s390x"]
Source = Literal["live", "cache", "unavailable"]
ExtrasVerdict = Literal["installed", "not_installed", "unknown", "no_evidence"]

# How vLLM's Dockerfile installs the extras (docker/Dockerfile, vllm-openai stage): a build arg
# INSTALL_KV_CONNECTORS, default false, gating `uv pip install --system -r requirements/kv_connectors.txt`.
# BuildKit records the arg values a RUN saw at the head of its created_by ("RUN |3 A=1 B=2 /bin/sh -c ...").
_KV_ARG = "INSTALL_KV_CONNECTORS"
_KV_REQUIREMENTS = "kv_connectors.txt"
_RUN_ARGS = re.compile(r"^RUN \|(?P<n>\d+) (?P<args>.*?)(?= /bin/(?:ba)?sh -c |$)")
_ARG_DEFAULT = re.compile(rf"^ARG {_KV_ARG}=(?P<value>\S*)")
_INSTALL = re.compile(r"\bpip3? install\b|\buv pip install\b|\bpip3? sync\b")
_CONDITIONAL = re.compile(rf"\$\{{?{_KV_ARG}\}}?")
# Direct installs of the extras, outside the requirements file (e.g. a cuXX NIXL wheel forced over it).
_EXTRA_PACKAGES: dict[str, re.Pattern[str]] = {
    "lmcache": re.compile(r"(?<![\w-])lmcache(?:[=<>~!\[ ]|$)", re.IGNORECASE),
    "nixl": re.compile(r"(?<![\w-])nixl(?:-cu\d+)?(?:[=<>~!\[ ]|$)", re.IGNORECASE),
    "mooncake": re.compile(r"(?<![\w-])mooncake-transfer-engine(?:-cuda\d+)?(?:[=<>~!\[ ]|$)", re.IGNORECASE),
}
_VERSION_TAG = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)(?:[-+].*)?$")
_VLLM_IN_HISTORY = re.compile(r"\bvllm(?:==|-)(?P<version>\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)(?=[+\s\-_]|\.whl|$)")
_PYTHON_IN_HISTORY = re.compile(r"\bPYTHON_VERSION=(?P<version>3\.\d+(?:\.\d+)?)\b")
_PYTHON_PATH = re.compile(r"\bpython(?P<version>3\.\d+)\b")
_CUDA_IN_HISTORY = re.compile(r"\bCUDA_VERSION=(?P<version>\d+\.\d+(?:\.\d+)?)\b")


class InspectImageRequest(BaseModel):
    image: str = Field(
        min_length=1,
        max_length=512,
        description="vllm/vllm-openai tag ('v0.22.1', 'latest') or any image reference",
    )
    arch: Arch = Field(default="amd64")
    runtime_check_script: bool = Field(
        default=False,
        description="a bash script reporting imports and KV connectors",
    )
    offline: bool = Field(default=False, description="cache only")
    deadline_seconds: float = Field(default=20.0, ge=1.0, le=120.0)


class Found(BaseModel):
    """A value read from the image, and exactly where."""

    value: str | None
    source: Literal["env", "label", "history", "tag", "none"]
    detail: str = Field(description="the variable, label or history step it was read from")


class HistoryMatch(BaseModel):
    step: int = Field(description="index in the config's history[]")
    created: str | None
    matched: str = Field(description="what was recognised in the step")
    text: str = Field(description="the step's created_by, shortened")


class ExtraPackage(BaseModel):
    package: Literal["lmcache", "nixl", "mooncake"]
    installed_at_build: ExtrasVerdict
    how: str


class KvConnectorExtras(BaseModel):
    verdict: ExtrasVerdict = Field(
        description="installed / not_installed: the history says so; unknown: an install step exists but whether it "
        "ran is not visible; no_evidence: no step mentions the extras (an older or custom build)"
    )
    reason: str
    build_arg: str | None = Field(description=f"the value of {_KV_ARG} the install step ran with, if recorded")
    build_arg_default: str | None = Field(description=f"the Dockerfile's default for {_KV_ARG} (ARG line), if recorded")
    packages: list[ExtraPackage]
    matches: list[HistoryMatch]


class CompatPinInfo(BaseModel):
    id: str
    package: str
    requirement: str
    applies_to: str = Field(description="the vLLM releases the pin applies to")
    note: str | None


class LmcacheMpHma(BaseModel):
    value: str = Field(description="yes, no or conditional, for the vLLM version of this answer")
    depends_on_bundled_lmcache: bool
    requirement: str | None = Field(description="the lmcache requirement for HMA support, when it depends on it")
    explanation: str


class Provenance(BaseModel):
    source: Source = Field(
        description="live: asked now; cache: the local cache (age given); unavailable: the registry could not be "
        "reached and nothing was cached"
    )
    cache_age_seconds: float | None = None
    failure_reason: FailureReason | None = None
    detail: str | None = None


class InspectImageResult(Result):
    version_context: VersionContext
    image: str = Field(description="the reference as understood, e.g. vllm/vllm-openai:v0.22.1")
    registry: str
    repository: str
    endpoint: str | None = Field(description="the registry API path asked (a mirror when configured)")
    platform: str
    provenance: Provenance
    digest: str | None = Field(description="digest of what the tag points at (index or manifest): pin with it")
    manifest_digest: str | None = Field(description="digest of the platform's image manifest")
    media_type: str | None
    platforms_available: list[str]
    config_digest: str | None
    created: str | None
    compressed_size_bytes: int | None = Field(description="sum of the layer sizes in the manifest (download size)")
    layers: int | None
    cuda_version: Found
    python_version: Found
    vllm_version: Found
    entrypoint: list[str] | None
    cmd: list[str] | None
    kv_connector_extras: KvConnectorExtras | None
    compat_pins: list[CompatPinInfo]
    lmcache_mp_hma: LmcacheMpHma | None
    runtime_check_script: str | None
    credentials_source: str | None = Field(description="where credentials came from (never the credentials)")
    requests_made: int
    notes: list[str]
    citations: list[Citation]
    security: SecurityCheck | None = Field(
        default=None,
        description="known advisories for the image's vLLM release and the security floor (stored snapshot); "
        "null when the image does not say which vLLM it carries",
    )

    def summary(self) -> str:
        p = self.provenance
        lines = [f"{self.image} ({self.platform})"]
        if p.source == "unavailable":
            lines.append(f"could not reach the registry ({(p.failure_reason or '').replace('_', ' ')}): {p.detail}")
        else:
            where = "live" if p.source == "live" else f"cache, {p.cache_age_seconds or 0:.0f} s old"
            if p.failure_reason:
                where += f"; registry unreachable: {p.failure_reason.replace('_', ' ')}"
            lines.append(f"digest {self.digest}  [{where}]")
            size = f"{self.compressed_size_bytes / 2**30:.2f} GiB" if self.compressed_size_bytes is not None else "?"
            lines.append(f"created {self.created or 'unknown'}, {size} compressed in {self.layers} layers")
            lines.append(f"CUDA {self.cuda_version.value or 'unknown'} ({self.cuda_version.detail})")
            lines.append(f"Python {self.python_version.value or 'unknown'} ({self.python_version.detail})")
            lines.append(f"entrypoint {self.entrypoint}, cmd {self.cmd}")
        lines.append(f"vLLM {self.vllm_version.value or 'unknown'} ({self.vllm_version.detail})")
        if self.kv_connector_extras is not None:
            extras = self.kv_connector_extras
            lines.append(f"KV-connector extras: {extras.verdict.replace('_', ' ').upper()} — {extras.reason}")
        for pin in self.compat_pins:
            lines.append(f"pin: {pin.requirement} ({pin.id})")
        if self.lmcache_mp_hma is not None:
            lines.append(f"LMCacheMPConnector HMA: {self.lmcache_mp_hma.value} — {self.lmcache_mp_hma.explanation}")
        if self.security is not None:
            lines += self.security.lines()
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"warning: {w}" for w in self.version_context.warnings]
        if self.runtime_check_script:
            lines.append("runtime check script: in the runtime_check_script field (--json)")
        return join_lines(lines)


# ---------------------------------------------------------------------------------------------
# Reading the config


def _env(config: dict[str, Any]) -> dict[str, str]:
    inner = config.get("config") if isinstance(config.get("config"), dict) else {}
    pairs = inner.get("Env") if isinstance(inner, dict) else None
    env: dict[str, str] = {}
    for item in pairs if isinstance(pairs, list) else []:
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            env[key] = value
    return env


def _labels(config: dict[str, Any]) -> dict[str, str]:
    inner = config.get("config") if isinstance(config.get("config"), dict) else {}
    labels = inner.get("Labels") if isinstance(inner, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _string_list(value: Any) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) else None


@dataclass(frozen=True)
class _Step:
    index: int
    created: str | None
    text: str


def _history(config: dict[str, Any]) -> list[_Step]:
    history: list[Any] = config["history"] if isinstance(config.get("history"), list) else []
    steps = []
    for index, entry in enumerate(history):
        if isinstance(entry, dict) and isinstance(entry.get("created_by"), str):
            created = entry.get("created") if isinstance(entry.get("created"), str) else None
            # Classic builders wrap steps as "/bin/sh -c #(nop) ENV ..." ; read them like BuildKit's.
            text = re.sub(r"^/bin/sh -c #\(nop\)\s+", "", entry["created_by"].strip())
            steps.append(_Step(index, created, text))
    return steps


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _from_history(steps: list[_Step], pattern: re.Pattern[str]) -> tuple[str, int] | None:
    for step in reversed(steps):  # the last step wins, as a later ARG/ENV would
        match = pattern.search(step.text)
        if match:
            return match["version"], step.index
    return None


def _cuda(env: dict[str, str], labels: dict[str, str], steps: list[_Step]) -> Found:
    if env.get("CUDA_VERSION"):
        return Found(value=env["CUDA_VERSION"], source="env", detail="ENV CUDA_VERSION")
    for label in ("com.nvidia.cuda.version", "cuda.version"):
        if labels.get(label):
            return Found(value=labels[label], source="label", detail=f"label {label}")
    hit = _from_history(steps, _CUDA_IN_HISTORY)
    if hit:
        return Found(value=hit[0], source="history", detail=f"CUDA_VERSION in history step {hit[1]}")
    return Found(value=None, source="none", detail="no CUDA_VERSION in env, labels or history")


def _python(env: dict[str, str], steps: list[_Step]) -> Found:
    if env.get("PYTHON_VERSION"):
        return Found(value=env["PYTHON_VERSION"], source="env", detail="ENV PYTHON_VERSION")
    hit = _from_history(steps, _PYTHON_IN_HISTORY)
    if hit:
        return Found(value=hit[0], source="history", detail=f"PYTHON_VERSION in history step {hit[1]}")
    path = _PYTHON_PATH.search(env.get("PATH", ""))
    if path:
        return Found(value=path["version"], source="env", detail="a python3.X directory on PATH")
    hit = _from_history(steps, _PYTHON_PATH)
    if hit:
        return Found(value=hit[0], source="history", detail=f"python{hit[0]} named in history step {hit[1]}")
    return Found(value=None, source="none", detail="not visible in env or history")


def _vllm_version(env: dict[str, str], labels: dict[str, str], steps: list[_Step], ref: ImageRef) -> Found:
    if env.get("VLLM_VERSION"):
        return Found(value=env["VLLM_VERSION"], source="env", detail="ENV VLLM_VERSION")
    for label in ("org.opencontainers.image.version", "vllm.version"):
        if labels.get(label) and _VERSION_TAG.match(labels[label]):
            return Found(value=_VERSION_TAG.match(labels[label])["version"], source="label", detail=f"label {label}")  # type: ignore[index]
    hit = _from_history(steps, _VLLM_IN_HISTORY)
    if hit:
        return Found(value=hit[0], source="history", detail=f"a vllm {hit[0]} install in history step {hit[1]}")
    return _version_from_tag(ref, "the image's env, labels and history do not state it")


def _version_from_tag(ref: ImageRef, why: str) -> Found:
    match = _VERSION_TAG.match(ref.tag or "")
    if match:
        return Found(
            value=match["version"],
            source="tag",
            detail=f"from the tag {ref.tag!r}, not from the image: {why}",
        )
    return Found(value=None, source="none", detail="neither the image nor the tag states it")


@dataclass(frozen=True)
class _Install:
    """A history step that installs requirements/kv_connectors.txt."""

    step: _Step
    ran_with: str | None  # the value of INSTALL_KV_CONNECTORS the step recorded, if it did
    conditional: bool  # whether the step installs only when INSTALL_KV_CONNECTORS is true


@dataclass
class _ExtrasScan:
    """What the build history says about the KV-connector extras, step by step."""

    matches: list[HistoryMatch] = field(default_factory=list)
    arg_default: str | None = None  # the Dockerfile's ARG default, the last one recorded
    installs: list[_Install] = field(default_factory=list)
    direct: dict[str, _Step] = field(default_factory=dict)  # package -> the first step naming it

    def read(self, step: _Step) -> None:
        default = _ARG_DEFAULT.match(step.text)
        if default:
            self.arg_default = default["value"]
            self._match(step, f"ARG {_KV_ARG} default")
            return
        if not _INSTALL.search(step.text):
            return
        run_args = _RUN_ARGS.match(step.text)
        found = re.search(rf"(?:^|\s){_KV_ARG}=(\S*)", run_args["args"]) if run_args else None
        ran_with = found.group(1) if found else None
        if _KV_REQUIREMENTS in step.text:
            install = _Install(step, ran_with, conditional=bool(_CONDITIONAL.search(step.text)))
            self.installs.append(install)
            what = f"install of requirements/{_KV_REQUIREMENTS}"
            what += f", conditional on ${_KV_ARG}" if install.conditional else ", unconditional"
            if ran_with is not None:
                what += f"; the step ran with {_KV_ARG}={ran_with}"
            self._match(step, what)
        for package, pattern in _EXTRA_PACKAGES.items():
            if pattern.search(step.text.split(" -c ", 1)[-1]):
                self.direct.setdefault(package, step)
                self._match(step, f"direct install of {package}")

    def _match(self, step: _Step, what: str) -> None:
        self.matches.append(HistoryMatch(step=step.index, created=step.created, matched=what, text=_short(step.text)))


def _kv_extras(steps: list[_Step]) -> KvConnectorExtras:
    scan = _ExtrasScan()
    for step in steps:
        scan.read(step)
    verdict, reason = _extras_verdict(scan)
    return KvConnectorExtras(
        verdict=verdict,
        reason=reason,
        build_arg=next((i.ran_with for i in reversed(scan.installs) if i.ran_with is not None), None),
        build_arg_default=scan.arg_default,
        packages=[_extra_package(scan, package, verdict) for package in ("lmcache", "nixl", "mooncake")],
        matches=scan.matches,
    )


def _extras_verdict(scan: _ExtrasScan) -> tuple[ExtrasVerdict, str]:
    """Whether the extras were installed, from the last requirements install, else from direct installs."""
    requirements = f"requirements/{_KV_REQUIREMENTS}"
    if not scan.installs:
        if scan.direct:
            return "installed", f"no {requirements} step, but direct installs of {', '.join(scan.direct)}"
        return (
            "no_evidence",
            f"no history step installs {requirements}, LMCache, NIXL or Mooncake; the image may "
            "predate bundling, be a custom build, or have been squashed (run the runtime check to be sure)",
        )
    last = scan.installs[-1]
    index, value = last.step.index, last.ran_with
    if not last.conditional:
        return "installed", f"history step {index} installs {requirements}"
    if value is not None and value.lower() == "true":
        return "installed", f"history step {index} installs {requirements} and ran with {_KV_ARG}={value}"
    if value is not None:
        return "not_installed", f"history step {index} would install {requirements} but ran with {_KV_ARG}={value}"
    default = f" (the Dockerfile default is {scan.arg_default})" if scan.arg_default is not None else ""
    return (
        "unknown",
        f"history step {index} installs {requirements} only if {_KV_ARG} is true, "
        f"and the history does not record the value it ran with{default}",
    )


def _extra_package(
    scan: _ExtrasScan, package: Literal["lmcache", "nixl", "mooncake"], verdict: ExtrasVerdict
) -> ExtraPackage:
    if package in scan.direct:
        return ExtraPackage(
            package=package, installed_at_build="installed", how=f"named in history step {scan.direct[package].index}"
        )
    if scan.installs:
        return ExtraPackage(
            package=package,
            installed_at_build=verdict,
            how=f"through requirements/{_KV_REQUIREMENTS}, which lists LMCache, NIXL and Mooncake in vLLM's "
            "source tree; the file's contents are not part of the image metadata",
        )
    return ExtraPackage(package=package, installed_at_build="no_evidence", how="not named in the history")


# ---------------------------------------------------------------------------------------------
# What the knowledge adds


def _pins(knowledge: Knowledge, version: Version) -> tuple[list[CompatPinInfo], list[Citation]]:
    pins, citations = [], []
    for pin in knowledge.pins:
        if in_range(pin.vllm_versions, version):
            pins.append(
                CompatPinInfo(
                    id=pin.id,
                    package=pin.package,
                    requirement=pin.requirement,
                    applies_to=pin.vllm_versions,
                    note=pin.note,
                )
            )
            citations.append(cite(pin.id, pin, knowledge))
    return pins, citations


def _lmcache_mp_hma(knowledge: Knowledge, version: Version) -> tuple[LmcacheMpHma | None, list[Citation]]:
    connector = next((c for c in knowledge.connectors if c.id == "connector.lmcache-mp"), None)
    if not isinstance(connector, Connector):
        return None, []
    citations = [cite(connector.id, connector, knowledge)]
    if connector.status_at(version) == "not_yet":
        return (
            LmcacheMpHma(
                value="no",
                depends_on_bundled_lmcache=False,
                requirement=None,
                explanation=f"{connector.name} is not in vLLM {version} (it arrives in {connector.introduced})",
            ),
            citations,
        )
    ranged = ranged_at(connector.hma, version)  # the range's note explains the value
    if ranged is None:
        return None, citations
    value = str(ranged.value)
    requirement = None
    if value == "conditional":
        # The related pin on lmcache that carries HMA support (pin.lmcache-mp-hma).
        pin = next(
            (
                p
                for p in knowledge.pins
                if p.id in connector.related
                and p.package == "lmcache"
                and "hma" in p.id
                and in_range(p.vllm_versions, version)
            ),
            None,
        )
        if pin is not None:
            requirement = pin.requirement
            citations.append(cite(pin.id, pin, knowledge))
    explanation = ranged.note or ""
    if value == "conditional":
        explanation = (
            f"depends on the lmcache bundled in the image ({requirement or 'see the connector entry'} for HMA); "
            "the runtime check shows which class vLLM resolves and whether it subclasses SupportsHMA. " + explanation
        )
    return (
        LmcacheMpHma(
            value=value,
            depends_on_bundled_lmcache=value == "conditional",
            requirement=requirement,
            explanation=explanation,
        ),
        citations,
    )


# ---------------------------------------------------------------------------------------------
# The runtime check script

_RUNTIME_PROBE = r"""
import importlib
import importlib.metadata as metadata
import sys

print(f"python {sys.version.split()[0]}")
DISTRIBUTIONS = {
    "vllm": ["vllm"],
    "lmcache": ["lmcache"],
    "nixl": ["nixl", "nixl-cu12", "nixl-cu13"],
    "mooncake": ["mooncake-transfer-engine", "mooncake-transfer-engine-cuda13"],
}
MODULES = {"vllm": "vllm", "lmcache": "lmcache", "nixl": "nixl", "mooncake": "mooncake.engine"}
for key, module in MODULES.items():
    found = []
    for dist in DISTRIBUTIONS[key]:
        try:
            found.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    try:
        importlib.import_module(module)
        state = "imports"
    except Exception as exc:  # report every failure: that is the point of the check
        state = f"IMPORT FAILED: {type(exc).__name__}: {str(exc)[:200]}"
    print(f"package {key}: {', '.join(found) or 'not installed'}; import {module}: {state}")

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA
except ImportError:
    SupportsHMA = None
registry = KVConnectorFactory._registry
print(f"registered KV connectors: {len(registry)}")
for name in sorted(registry):
    try:
        cls = registry[name]()
    except Exception as exc:
        print(f"connector {name}: LOAD FAILED: {type(exc).__name__}: {str(exc)[:200]}")
        continue
    if SupportsHMA is None:
        hma = "unknown (this vLLM has no SupportsHMA)"
    else:
        hma = "yes" if isinstance(cls, type) and issubclass(cls, SupportsHMA) else "no"
    print(f"connector {name}: {cls.__module__}.{cls.__qualname__}; SupportsHMA: {hma}")
"""


def runtime_check_script(image: str, platform: str) -> str:
    """A bash script that pulls ``image`` and reports its KV-connector packages and connectors.

    ``image`` must come from `parse_image_reference` (validated); it is still shell-quoted.
    """
    quoted_image, quoted_platform = shlex.quote(image), shlex.quote(platform)
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            "# Runtime check generated by vllm-caching-mcp inspect_image: which KV-connector packages import in the",
            "# image, and which connectors its vLLM registers with their SupportsHMA declaration. Needs Docker; it",
            "# pulls the image (several GB). No GPU is needed for the imports; if one fails on libcuda, add",
            "# --gpus all to the docker run line.",
            "set -euo pipefail",
            f"IMAGE={quoted_image}",
            f"PLATFORM={quoted_platform}",
            'docker pull --platform "$PLATFORM" "$IMAGE"',
            "# The entrypoint (vllm serve) is replaced by the Python interpreter reading the probe from stdin.",
            'docker run --rm -i --platform "$PLATFORM" --entrypoint python3 "$IMAGE" - <<\'PROBE\'',
            _RUNTIME_PROBE.strip("\n"),
            "PROBE",
            "",
        ]
    )


# ---------------------------------------------------------------------------------------------
# The tool


def _parse(request: InspectImageRequest) -> ImageRef:
    try:
        return parse_image_reference(request.image)
    except InvalidImageReference as exc:
        raise AdviceError(
            "image",
            f"{exc}; give a vllm/vllm-openai tag ('v0.22.1'), 'repo:tag', 'host[:port]/repo:tag' "
            "or 'repo@sha256:<64 hex>'",
        ) from None


def _created(config: dict[str, Any]) -> str | None:
    created = config.get("created")
    if not isinstance(created, str):
        return None
    try:
        return dt.datetime.fromisoformat(created.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return created[:40]


def inspect_image(request: InspectImageRequest, knowledge: Knowledge) -> InspectImageResult:
    ref = _parse(request)
    platform = f"linux/{request.arch}"
    fetched = _fetch(ref, request)
    read_config: tuple[Found, _Read] | None = None
    if fetched.metadata is not None:
        try:
            config = _Config.of(fetched.metadata.config)
            read_config = _vllm_version(config.env, config.labels, config.steps, ref), _read(fetched.metadata, config)
        except SHAPE_ERRORS as exc:  # a config of another shape than an image config's
            failure = RegistryError("bad_response", f"the image config is not shaped like one ({type(exc).__name__})")
            fetched = dataclasses.replace(fetched, metadata=None, failure=failure)
    if read_config is None:
        vllm_found = _version_from_tag(ref, "the image's metadata could not be read")
        read = _nothing_read(ref, fetched, platform)
    else:
        vllm_found, read = read_config
    release = _release(knowledge, vllm_found.value)
    pins, citations = _pins(knowledge, release.version)
    hma, hma_citations = _lmcache_mp_hma(knowledge, release.version)
    script_ref = str(ref)
    if fetched.metadata is not None and not ref.digest:
        script_ref = f"{ref}@{fetched.metadata.top_digest}"  # run exactly the image that was inspected
    notes = fetched.notes + release.notes
    if fetched.metadata is None:
        notes.append(
            "no image metadata: nothing about this image is cached locally; the vLLM version, pins and HMA note "
            "come from the tag and the knowledge only"
        )
    return InspectImageResult(
        version_context=release.context,
        image=str(ref),
        registry=ref.registry,
        repository=ref.repository,
        endpoint=read.endpoint,
        platform=read.platform,
        provenance=read.provenance,
        digest=read.digest,
        manifest_digest=read.manifest_digest,
        media_type=read.media_type,
        platforms_available=read.platforms_available,
        config_digest=read.config_digest,
        created=read.created,
        compressed_size_bytes=read.compressed_size_bytes,
        layers=read.layers,
        cuda_version=read.cuda_version,
        python_version=read.python_version,
        vllm_version=vllm_found,
        entrypoint=read.entrypoint,
        cmd=read.cmd,
        kv_connector_extras=read.kv_connector_extras,
        compat_pins=pins,
        lmcache_mp_hma=hma,
        runtime_check_script=runtime_check_script(script_ref, platform) if request.runtime_check_script else None,
        security=release.security.for_detail("summary") if release.security is not None else None,
        credentials_source=read.credentials_source,
        requests_made=fetched.requests_made,
        notes=notes,
        citations=citations + hma_citations,
    )


@dataclass(frozen=True)
class _Fetched:
    """What the registry (or the cache) gave for one image."""

    metadata: ImageMetadata | None
    failure: RegistryError | None  # why there is no metadata
    requests_made: int
    endpoint: tuple[str, str]  # the API base and the repository path asked
    notes: list[str]


def _fetch(ref: ImageRef, request: InspectImageRequest) -> _Fetched:
    """The image's metadata; an outage is a failure to report, what the caller must change an error."""
    try:
        client = client_factory()
    except ConfigError as exc:
        name, _, message = str(exc).partition(": ")
        raise AdviceError(name, message) from None
    metadata: ImageMetadata | None = None
    failure: RegistryError | None = None
    with client:
        client.offline = client.offline or request.offline
        try:
            metadata = client.inspect(ref, Deadline(request.deadline_seconds), arch=request.arch)
        except RegistryNotAllowed as exc:
            raise AdviceError("image", str(exc)) from None
        except PlatformMissing as exc:
            raise AdviceError(
                "arch",
                f"{ref} has no {exc.wanted} image; it is published for {', '.join(exc.available) or 'no platform'}",
            ) from None
        except RegistryError as exc:
            if exc.reason == "not_found":
                raise AdviceError("image", f"{ref}: {exc.detail}; check the tag (e.g. 'v0.22.1', 'latest')") from None
            if exc.reason in ("unauthorized", "forbidden"):
                raise AdviceError("image", f"{ref}: {exc.detail}") from None
            failure = exc
        notes = list(metadata.notes if metadata else dict.fromkeys(client.notes))
        return _Fetched(metadata, failure, client.requests_made, client.endpoint(ref), notes)


@dataclass(frozen=True)
class _Config:
    """The parts of an image config this tool reads."""

    env: dict[str, str]
    labels: dict[str, str]
    steps: list[_Step]
    inner: dict[str, Any]  # the config's "config" object: Env, Entrypoint, Cmd, Labels

    @classmethod
    def of(cls, config: dict[str, Any]) -> _Config:
        inner = config.get("config")
        return cls(_env(config), _labels(config), _history(config), inner if isinstance(inner, dict) else {})


@dataclass(frozen=True)
class _Read:
    """What the answer says about the image itself, from its metadata (or that there was none)."""

    endpoint: str
    platform: str
    provenance: Provenance
    digest: str | None
    manifest_digest: str | None
    media_type: str | None
    platforms_available: list[str]
    config_digest: str | None
    created: str | None
    compressed_size_bytes: int | None
    layers: int | None
    cuda_version: Found
    python_version: Found
    entrypoint: list[str] | None
    cmd: list[str] | None
    kv_connector_extras: KvConnectorExtras | None
    credentials_source: str | None


def _read(metadata: ImageMetadata, config: _Config) -> _Read:
    return _Read(
        endpoint=metadata.endpoint,
        platform=metadata.platform,
        provenance=Provenance(
            source=metadata.origin,
            cache_age_seconds=round(metadata.age_seconds, 1) if metadata.origin == "cache" else None,
            failure_reason=metadata.fallback.reason if metadata.fallback else None,
            detail=metadata.fallback.detail if metadata.fallback else None,
        ),
        digest=metadata.top_digest,
        manifest_digest=metadata.manifest_digest,
        media_type=metadata.top_media_type,
        platforms_available=list(metadata.platforms),
        config_digest=metadata.config_digest,
        created=_created(metadata.config),
        compressed_size_bytes=sum(metadata.layer_sizes),
        layers=len(metadata.layer_sizes),
        cuda_version=_cuda(config.env, config.labels, config.steps),
        python_version=_python(config.env, config.steps),
        entrypoint=_string_list(config.inner.get("Entrypoint")),
        cmd=_string_list(config.inner.get("Cmd")),
        kv_connector_extras=_kv_extras(config.steps),
        credentials_source=metadata.credentials_source,
    )


def _nothing_read(ref: ImageRef, fetched: _Fetched, platform: str) -> _Read:
    assert fetched.failure is not None
    return _Read(
        endpoint=f"{fetched.endpoint[0]}/v2/{fetched.endpoint[1]}",
        platform=platform,
        provenance=Provenance(
            source="unavailable", failure_reason=fetched.failure.reason, detail=fetched.failure.detail
        ),
        digest=ref.digest,
        manifest_digest=None,
        media_type=None,
        platforms_available=[],
        config_digest=None,
        created=None,
        compressed_size_bytes=None,
        layers=None,
        cuda_version=Found(value=None, source="none", detail="registry not reached"),
        python_version=Found(value=None, source="none", detail="registry not reached"),
        entrypoint=None,
        cmd=None,
        kv_connector_extras=None,
        credentials_source=None,
    )


@dataclass(frozen=True)
class _Release:
    """The vLLM release the answer is for, its advisories, and notes on how it was settled."""

    version: Version
    context: VersionContext
    security: SecurityCheck | None
    notes: list[str]


def _release(knowledge: Knowledge, version_text: str | None) -> _Release:
    """The release the image states; the newest (said so) when it states none or no release number."""
    notes: list[str] = []
    security: SecurityCheck | None = None
    try:
        version, context = resolve_version(knowledge, version_text, field="image")
    except AdviceError:
        version, context = resolve_version(knowledge, None, field="image")
        notes.append(
            f"the vLLM version {version_text!r} the image states is not a release number; pins are for the newest"
        )
    else:
        if version_text is not None:
            security = security_check(knowledge, "vllm", version)
            warning = security.floor_warning()
            if warning is not None:
                context.warnings.append(warning)
    if version_text is None:
        context.warnings.insert(
            0, "The image does not say which vLLM it carries; the pins below are for the newest release."
        )
    if security is None:
        notes.append("security advisories not checked: the vLLM release is not known (not a claim that it is clear)")
    return _Release(version, context, security, notes)


SPEC = ToolSpec(
    name="inspect_image",
    title="Inspect a vLLM container image",
    description=(
        "What a vllm/vllm-openai tag or other image holds, from registry metadata only: digest, size, CUDA, "
        "Python, vLLM, bundled LMCache / NIXL / Mooncake, version pins; optionally a Docker-host check script."
    ),
    request=InspectImageRequest,
    result=InspectImageResult,
    run=inspect_image,
    open_world=True,
)
