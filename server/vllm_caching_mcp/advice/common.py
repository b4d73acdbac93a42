"""What every tool's answer shares: the version it assumed, the facts it cites, its input errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import advisories
from ..knowledge import Connector, Evidence, Knowledge, Sourced
from ..verification import VerificationState, newest_verified, verification_state
from ..versions import Version, parse_version

Package = Literal["vllm", "lmcache"]

# -- numbers a tool reads ---------------------------------------------------------------------------
# Every number an argument carries is finite and below a physical ceiling, so no arithmetic on it can
# overflow (int(inf) raises; inf - inf is NaN) and no answer holds NaN or infinity, which JSON cannot
# carry: the SDK would send null where the output schema promises a number. The field's own Field()
# adds the lower bound (gt=0 or ge=0) where it differs from these.
MAX_GPU_MEMORY_GIB = 4096.0  # 4 TiB on one GPU; the largest today hold under 300 GB
MAX_SIZE_GIB = float(1 << 20)  # 1 PiB: host RAM, a CPU, disk or remote tier
MAX_SIZE_BYTES = 1 << 50  # the same 1 PiB in bytes
MIN_PARAMS_B, MAX_PARAMS_B = 1e-6, 100_000.0  # a thousand to a hundred trillion parameters
MAX_TOKENS = 1 << 31  # context lengths, batch and window sizes: far past any model's context
MAX_COUNT = 1 << 31  # sessions, blocks, GPUs

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
GpuMemoryGiB = Annotated[float, Field(allow_inf_nan=False, le=MAX_GPU_MEMORY_GIB)]
SizeGiB = Annotated[float, Field(allow_inf_nan=False, le=MAX_SIZE_GIB)]
SizeBytes = Annotated[int, Field(le=MAX_SIZE_BYTES)]
ParamsB = Annotated[float, Field(allow_inf_nan=False, ge=MIN_PARAMS_B, le=MAX_PARAMS_B)]
TokenCount = Annotated[int, Field(le=MAX_TOKENS)]
Count = Annotated[int, Field(le=MAX_COUNT)]

# A number read from a document or a metrics dump rather than a typed argument: beyond this it is
# no count, size or rate a deployment has, and the products and sums the tools form from a few
# such numbers stay far inside the float range.
MAX_READ_NUMBER = 2.0**63


def readable_number(value: object) -> float | None:
    """``value`` as a float if it is a real number (not a bool) within ±MAX_READ_NUMBER, else None.

    NaN, the infinities (YAML's .inf, JSON's 1e999, a 400-digit literal) and integers too large
    for a float all come back as None, never as a number that would poison the arithmetic.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not -MAX_READ_NUMBER <= value <= MAX_READ_NUMBER:  # false for NaN too
        return None
    return float(value)


class AdviceError(ValueError):
    """Input a tool cannot answer; the message names the field and what it accepts."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Result(BaseModel):
    """Base of every tool result."""

    model_config = ConfigDict(extra="forbid")

    def summary(self) -> str:
        """A few lines for a person; the structured fields carry the detail."""
        raise NotImplementedError

    def structured(self) -> dict[str, Any]:
        """The result as the JSON an agent reads: an optional field that is empty (null, [] or {}) is left
        out, as its output schema's default says what it would have been; every required field stays."""
        return _without_empty_optionals(self, self.model_dump(mode="json"))

    def structured_bytes(self) -> int:
        """The size of `structured` as compact JSON."""
        return len(json.dumps(self.structured(), separators=(",", ":")).encode())


def _without_empty_optionals(model: BaseModel, dumped: dict[str, Any]) -> dict[str, Any]:
    fields = type(model).model_fields
    kept: dict[str, Any] = {}
    for name, value in dumped.items():
        field = fields.get(name)
        if field is not None and not field.is_required() and value in (None, [], {}):
            continue
        kept[name] = _lean_value(getattr(model, name, None), value)
    return kept


def _lean_value(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel) and isinstance(dumped, dict):
        return _without_empty_optionals(value, dumped)
    if isinstance(value, (list, tuple)) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_lean_value(v, d) for v, d in zip(value, dumped, strict=True)]
    if isinstance(value, dict) and isinstance(dumped, dict):
        return {k: _lean_value(value.get(k), d) for k, d in dumped.items()}
    return dumped


@dataclass(frozen=True)
class ToolSpec:
    """How a tool is offered: its name, its description for an LLM reader, its models and function."""

    name: str
    title: str
    description: str
    request: type[BaseModel]
    result: type[Result]
    run: Callable[[Any, Knowledge], Result]
    open_world: bool = False


class Citation(BaseModel):
    """A knowledge entry an answer relied on, and how well it is established."""

    id: str
    sources: list[str]
    verified_at: dt.date
    evidence: Evidence = Field(
        description="wheel: checked in released code (a wheel or the release's source distribution); "
        "primary: an issue, release or vendor page; "
        "reference: carried over from the founding reference text, not yet confirmed"
    )
    verification: VerificationState = Field(
        default_factory=lambda: VerificationState(status="not_yet_run"),
        description="what scripts/verify_knowledge.py found when it checked the fact against the released wheels",
    )


def cite(entry_id: str, fact: Sourced, knowledge: Knowledge) -> Citation:
    """The citation of ``fact``, with what the verifier last found for it in ``knowledge``."""
    package = getattr(fact, "component", "vllm")
    return Citation(
        id=entry_id,
        sources=list(fact.sources),
        verified_at=fact.verified_at,
        evidence=fact.evidence,
        verification=verification_state(entry_id, knowledge.directory, package),
    )


class VersionContext(BaseModel):
    """Which release an answer is for, and why the reader should be careful with it."""

    package: Package
    version: str = Field(description="the release the answer applies to")
    assumed: bool = Field(description="true when no version was given and the newest known release was used")
    newest_known: str
    oldest_known: str
    is_known_release: bool
    warnings: list[str] = Field(default_factory=list)


# How answers name each product.
PRODUCT_LABELS = {"vllm": "vLLM", "lmcache": "LMCache", "nixl": "NIXL", "mooncake": "Mooncake", "sglang": "SGLang"}


def connector_names(given: Sequence[str], known: Mapping[str, str], field: str = "connectors") -> list[str]:
    """Each given connector name (any case, or an alias: ``known`` maps them lower-cased) as the knowledge
    names it; an unknown one is an AdviceError naming ``field[index]`` and the closest names."""
    found = []
    for index, text in enumerate(given):
        key = text.strip().lower()
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(dict.fromkeys(known[c] for c in close))}?" if close else ""
            raise AdviceError(
                f"{field}[{index}]",
                f"{text[:60]!r} is not a KV connector the knowledge knows{hint} (names as in --kv-transfer-config, "
                "e.g. OffloadingConnector, LMCacheConnectorV1, NixlConnector, MooncakeConnector)",
            )
        found.append(known[key])
    return found


def patches_of(releases: Sequence[Version], text: str) -> list[Version]:
    """The releases a MAJOR.MINOR text such as 'v0.22' (or '0.5.x') can stand for; [] for a full release."""
    if not (found := re.fullmatch(r"\s*([vV]?\d+\.\d+)(\.[xX*])?\s*", text)):
        return []
    line = parse_version(found.group(1)).release[:2]
    return [v for v in releases if v.release[:2] == line]


def _line(text: str) -> str:
    """'0.22' of 'v0.22' or '0.22.x'."""
    return re.sub(r"\.[xX*]$", "", text.strip().lstrip("vV"))


def resolve_version(
    knowledge: Knowledge, text: str | None, *, package: Package = "vllm", field: str = "version"
) -> tuple[Version, VersionContext]:
    """Parse the user's version (or assume the newest) and say what the knowledge can promise for it."""
    releases = knowledge.release_versions(package)
    newest, oldest = releases[-1], releases[0]
    label = PRODUCT_LABELS[package]
    warnings: list[str] = []
    if text is None or not text.strip():
        version = newest
        assumed = True
        warnings.append(
            f"No {label} version was given; the answer is for {newest}, the newest release the knowledge covers. "
            "Give your version for an exact answer."
        )
    else:
        patches = patches_of(releases, text)
        try:
            version = patches[-1] if patches else parse_version(text, field=field)
        except ValueError as exc:
            raise AdviceError(field, str(exc).split(": ", 1)[1]) from None
        assumed = False
        if patches:
            version = patches[-1]
            others = ", ".join(str(v) for v in patches[:-1])
            warnings.append(
                f"{field} {text.strip()!r} is read as {version}, the newest {_line(text)}.x release"
                + (f" ({others} also exist{'s' if len(patches) == 2 else ''})" if others else "")
                + "; give the patch release for an exact answer."
            )
    if version > newest:
        date = next((r.date for r in knowledge.releases[package].releases if r.version == newest), None)
        when = f", published {date}" if date else ""
        warnings.append(
            f"{label} {version} is newer than the newest release the knowledge covers ({newest}{when}). "
            f"The answer describes {newest}; anything that changed after it is not known here."
        )
    elif version < oldest:
        warnings.append(
            f"{label} {version} is older than {oldest}, the oldest release the knowledge covers; "
            f"what was already in {oldest} may or may not be in your release."
        )
    verified = newest_verified(package, knowledge.directory)
    if verified is None:
        warnings.append(
            f"The knowledge has no record of a run of scripts/verify_knowledge.py against the {label} wheels; "
            "its facts were read from them by hand."
        )
    elif version > verified[0] and not (version > newest and verified[0] == newest):
        warnings.append(
            f"{label} {version} is newer than {verified[0]}, the newest release the knowledge was machine-verified "
            f"against ({verified[1]}); facts about later releases have not been re-checked against their code."
        )
    known = version in releases
    if not known and oldest <= version <= newest:
        warnings.append(f"{label} {version} is not a published release; the answer follows the version ranges.")
    context = VersionContext(
        package=package,
        version=str(version),
        assumed=assumed,
        newest_known=str(newest),
        oldest_known=str(oldest),
        is_known_release=known,
        warnings=warnings,
    )
    return version, context


# -- security advisories (knowledge/advisories.yaml; the lookups are in ..advisories) ---------------
# Offline tools answer from the stored snapshot only; the live list belongs to a network tool.

_COMPONENT_OF_REQUIREMENT = {"lmcache": "lmcache", "nixl": "nixl", "mooncake-transfer-engine": "mooncake"}
_LEGACY_COMPONENTS = {"LMCacheConnector": "lmcache", "MooncakeStoreConnectorV0": "mooncake"}


class AdvisoryNote(BaseModel):
    """One published advisory that hits (or may hit) a release."""

    id: str = Field(description="the GHSA id, else the CVE")
    cve: str | None
    severity: str = Field(description="critical, high, medium, low or unknown, as published")
    title: str
    applies: str = Field(description="when it applies, in one line")
    applies_here: Literal["yes", "unknown"] = Field(
        description="yes: every condition holds (or it has none); unknown: a condition could not be checked"
    )
    status: Literal["affected", "not_established"] = Field(
        description="affected: the release is in the published range; not_established: past an open-ended range"
    )
    fixed_in: str | None = Field(description="the lowest release above this one with the fix, if known")
    flaw_present_from: str | None = Field(
        default=None, description="set when the release is below the published range but its code has the flaw"
    )
    source: str = Field(description="the advisory page")

    def line(self) -> str:
        """id, severity, fixed_in, when it applies, source: one line."""
        ids = " / ".join(dict.fromkeys(i for i in (self.id, self.cve) if i))
        fix = f"fixed in {self.fixed_in}" if self.fixed_in else "no fixed release known"
        if self.status == "not_established":
            fix = "later releases not established clear"
        if self.flaw_present_from:
            fix += f"; below the published range, but the code has the flaw from {self.flaw_present_from}"
        when = "applies" if self.applies_here == "yes" else "applies only if"
        return f"{ids} [{self.severity}] {fix}; {when}: {self.applies} {self.source}"


class SecurityCheck(BaseModel):
    """The known advisories for one release of vLLM or LMCache, and the security floor.

    A tool's default answer carries it counted (``listed: counts``): the floor, how many advisories
    apply and how many only under conditions, and the critical and high ones that apply by id; a
    one-flag question should not carry the whole advisory list. ``detail: full`` on the tool, or
    `check_advisories`, lists every one.
    """

    package: Literal["vllm", "lmcache"]
    version: str
    source: str = Field(description="where the advisories come from: the stored snapshot, with its date")
    advisory_count: int = Field(description="advisories that affect this release, listed or not")
    applying_count: int = Field(description="of those, the ones that certainly apply; the rest have conditions")
    serious_applying: list[str] = Field(description="the critical and high advisories that certainly apply, by id")
    listed: Literal["all", "counts"] = Field(
        description="all: `advisories` lists every one; counts: none is listed, the counts and ids above stand for "
        "them (detail: full, or check_advisories, lists them)"
    )
    advisories: list[AdvisoryNote] = Field(description="advisories affecting this release, most severe first")
    security_floor: str | None = Field(
        description="the lowest known release from which on every release is clear of every critical and high "
        "advisory that applies (conditions that could not be checked taken as not met); null: none is"
    )
    floor_status: Literal["floor", "none_clear", "no_serious_advisory"] = Field(
        description="floor: security_floor is set; none_clear: no known release is clear; "
        "no_serious_advisory: no critical or high advisory applies, so no release is singled out"
    )
    below_floor: bool | None = Field(description="whether this release is below the floor; null: no floor")
    floor_caveat_ids: list[str] = Field(
        default_factory=list,
        description="critical or high advisories still open at the floor (or blocking one) when their conditions hold",
    )
    floor_caveats: list[AdvisoryNote] = Field(
        default_factory=list, description="the same advisories in full, when everything is listed"
    )

    def for_detail(self, detail: Literal["summary", "full"]) -> SecurityCheck:
        """This check as an answer of that detail carries it: everything, or counted (see the class)."""
        if detail == "full":
            return self
        return self.model_copy(update={"advisories": [], "floor_caveats": [], "listed": "counts"})

    def lines(self) -> list[str]:
        """A short block for a summary: the floor, the advisories that apply, a count of the conditional ones."""
        label = PRODUCT_LABELS[self.package]
        floor = {
            "floor": self.security_floor,
            "none_clear": "none (no known release is clear)",
            "no_serious_advisory": "none needed (no critical or high advisory applies)",
        }[self.floor_status]
        head = f"security ({self.source}): {label} {self.version}: {self.advisory_count} advisories; floor {floor}"
        head += " (BELOW THE FLOOR)" if self.below_floor else ""
        if self.listed == "counts":
            return [f"{head}; {self._counted()}"]
        lines = [head]
        serious = [a for a in self.advisories if a.id in self.serious_applying]
        lines += [f"  {a.line()}" for a in serious]
        more = [
            f"{self.applying_count - len(serious)} medium or low that apply"
            if self.applying_count > len(serious)
            else "",
            f"{self.conditional_count} only under conditions not checked here" if self.conditional_count else "",
        ]
        if any(more):
            lines.append(f"  and {'; '.join(m for m in more if m)} (see `advisories`)")
        if self.floor_caveat_ids:
            lines.append(f"  still open at the floor where their conditions hold: {', '.join(self.floor_caveat_ids)}")
        return lines

    @property
    def conditional_count(self) -> int:
        """The advisories that apply only under conditions not checked."""
        return self.advisory_count - self.applying_count

    def _counted(self) -> str:
        """The advisories in one clause: the serious ones that apply by id, the rest by count."""
        serious = self.serious_applying
        named = f" ({', '.join(serious)})" if serious else ""
        text = f"that apply: {len(serious)} critical or high{named}, {self.applying_count - len(serious)} medium or low"
        if self.conditional_count:
            text += f"; {self.conditional_count} only under conditions not checked"
        return text + "; check_advisories lists them"

    def serious_ids(self) -> list[str]:
        """The critical and high advisories that certainly apply to this release."""
        return list(self.serious_applying)

    def floor_warning(self) -> str | None:
        """One line when the release is below the floor, or no release is clear of an advisory that applies."""
        label = PRODUCT_LABELS[self.package]
        serious = self.serious_ids()
        if self.below_floor:
            named = f" ({first_few(serious)})" if serious else ""
            return (
                f"{label} {self.version} is below the security floor {self.security_floor}: critical or high "
                f"advisories affect it{named}; use {self.security_floor} or later ({self.source})."
            )
        if self.floor_status == "none_clear" and serious:
            blockers = self.floor_caveat_ids
            others = [a for a in self.advisories if a.id in serious and a.id not in blockers]
            text = f"No known {label} release is clear of {first_few(blockers)}"
            if others:
                fixes = [Version(a.fixed_in) for a in others if a.fixed_in]
                upto = f" (fixed by {max(fixes)})" if fixes and len(fixes) == len(others) else ""
                text += f"; {self.version} also has {len(others)} more critical or high advisories fixed later{upto}"
            return f"{text} ({self.source})."
        return None


def docker_run_options(
    words: Sequence[str], switches: AbstractSet[str]
) -> tuple[list[tuple[str, str | None, int]], int]:
    """The options after `docker run` as Docker's flag parser (pflag) reads them, up to the image:
    (name, value or None for a switch, index of the word) each, and the index of the image.

    ``--name=value`` and ``--name value``; ``-x value``, ``-xvalue`` and ``-x=value``; a word in
    ``switches`` (``--rm``, ``-it``) or short switches run together (``-dit``) take no value; ``--``
    ends the options. An option whose value would be past the last word gets None."""
    options: list[tuple[str, str | None, int]] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        word = words[i]
        if word == "--":
            return options, i + 1
        if word in switches or (not word.startswith("--") and word[:2] in switches):
            options.append((word, None, i))
            i += 1
            continue
        if word.startswith("--"):
            name, eq, inline = word.partition("=")
        else:
            name, eq, inline = word[:2], "=" if len(word) > 2 else "", word[2:].removeprefix("=")
        if eq:
            options.append((name, inline, i))
            i += 1
        else:
            options.append((name, words[i + 1] if i + 1 < len(words) else None, i))
            i += 2
    return options, i


def first_few(ids: list[str], shown: int = 3) -> str:
    """The first ``shown`` ids, with '…' when there are more."""
    return ", ".join(ids[:shown]) + (" …" if len(ids) > shown else "")


def components_of(knowledge: Knowledge, connectors: Iterable[str]) -> frozenset[str]:
    """The KV backends the named connectors bring in (lmcache, nixl, mooncake)."""
    found: set[str] = set()
    for name in connectors:
        if name in _LEGACY_COMPONENTS:
            found.add(_LEGACY_COMPONENTS[name])
        for c in knowledge.connectors:
            if c.name == name or name in c.aliases:
                found |= {_COMPONENT_OF_REQUIREMENT[r] for r in c.requires if r in _COMPONENT_OF_REQUIREMENT}
    return frozenset(found)


def backend_facts(knowledge: Knowledge, backend: str, tiers: Sequence[str] | None = None) -> advisories.DeploymentFacts:
    """What a KV caching backend (a recipe) brings in: its connectors and their components, and the native
    secondary tiers (none but for native_tiering, whose ``tiers`` are open when not given); the rest open."""
    recipe = next((r for r in knowledge.recipes.recipes if r.backend == backend), None)
    ids = [recipe.connector, recipe.pd_connector] if recipe is not None else []
    if backend == "multi_nixl_offload":
        ids += ["connector.nixl", "connector.offloading"]
    names = {entry.name for i in ids if i and isinstance(entry := knowledge.by_id.get(i), Connector)}
    offload_tiers = None if backend == "native_tiering" and tiers is None else frozenset(tiers or ())
    return advisories.DeploymentFacts(
        components=components_of(knowledge, names), connectors=frozenset(names), offload_tiers=offload_tiers
    )


def _note(finding: advisories.Finding) -> AdvisoryNote:
    a = finding.advisory
    source = next((s for s in a.sources if s.startswith("https://github.com/advisories/")), None)
    source = source or next((s for s in a.sources if s.startswith("https://")), a.sources[0])
    return AdvisoryNote(
        id=a.id,
        cve=a.cve,
        severity=a.severity,
        title=a.title,
        applies=a.applies,
        applies_here="yes" if finding.applies == "yes" else "unknown",
        status="affected" if finding.status == "affected" else "not_established",
        fixed_in=str(finding.fixed_in) if finding.fixed_in is not None else None,
        flaw_present_from=str(finding.flaw_present_from) if finding.flaw_present_from is not None else None,
        source=source,
    )


def snapshot_source(knowledge: Knowledge) -> str:
    return f"stored advisory snapshot of {knowledge.advisories.checked_at or 'unknown date'}"


def security_floor(knowledge: Knowledge, package: Package, facts: advisories.DeploymentFacts) -> advisories.Floor:
    """The floor for a deployment with these facts, every open condition taken as not met."""
    stored = advisories.stored(knowledge, package)
    return advisories.floor(stored, package, knowledge.release_versions(package), facts.closed())


# How much an answer lists: its decision and evidence, or everything (every advisory, not only those that apply).
Detail = Annotated[Literal["summary", "full"], Field(description="full: everything")]


def security_check(
    knowledge: Knowledge,
    package: Package,
    version: Version,
    facts: advisories.DeploymentFacts | None = None,
) -> SecurityCheck:
    """The stored advisories affecting ``version`` (those the facts rule out left out) and the floor, all listed;
    a tool's answer carries it `SecurityCheck.for_detail` its request's."""
    facts = facts or advisories.DeploymentFacts()
    if package == "lmcache":  # LMCache's own advisories concern deployments that use LMCache
        facts = dataclasses.replace(facts, components=(facts.components or frozenset()) | {"lmcache"})
    stored = advisories.stored(knowledge, package)
    found = advisories.affecting(stored, package, version, facts)
    floor = security_floor(knowledge, package, facts)
    serious = [a for a in stored if a.severity in advisories.FLOOR_SEVERITIES]
    if floor.release is not None:
        caveats = [f for f in advisories.affecting(serious, package, floor.release, facts) if f.applies != "yes"]
    else:
        caveats = list(floor.blockers)
    return SecurityCheck(
        package=package,
        version=str(version),
        source=snapshot_source(knowledge),
        advisory_count=len(found),
        applying_count=sum(f.applies == "yes" for f in found),
        serious_applying=[
            f.advisory.id for f in found if f.applies == "yes" and f.advisory.severity in advisories.FLOOR_SEVERITIES
        ],
        listed="all",
        advisories=[_note(f) for f in found],
        security_floor=str(floor.release) if floor.release is not None else None,
        floor_status="floor"
        if floor.release is not None
        else "none_clear"
        if floor.considered
        else "no_serious_advisory",
        below_floor=(version < floor.release) if floor.release is not None else None,
        floor_caveat_ids=[f.advisory.id for f in caveats],
        floor_caveats=[_note(f) for f in caveats],
    )
