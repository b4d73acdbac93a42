"""What every tool's answer shares: the version it assumed, the facts it cites, its input errors."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..knowledge import Evidence, Knowledge, Sourced, load_knowledge
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

    @model_validator(mode="before")
    @classmethod
    def _look_up_verification(cls, data: Any) -> Any:
        """A citation built without its verdict gets it from knowledge/verification.yaml."""
        if isinstance(data, dict) and "verification" not in data and isinstance(data.get("id"), str):
            data = {**data, "verification": verification_state(data["id"], load_knowledge().directory)}
        return data


def cite(entry_id: str, fact: Sourced) -> Citation:
    package = getattr(fact, "component", "vllm")
    return Citation(
        id=entry_id,
        sources=list(fact.sources),
        verified_at=fact.verified_at,
        evidence=fact.evidence,
        verification=verification_state(entry_id, load_knowledge().directory, package),
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


_NAMES = {"vllm": "vLLM", "lmcache": "LMCache"}


def resolve_version(
    knowledge: Knowledge, text: str | None, *, package: Package = "vllm", field: str = "version"
) -> tuple[Version, VersionContext]:
    """Parse the user's version (or assume the newest) and say what the knowledge can promise for it."""
    releases = knowledge.release_versions(package)
    newest, oldest = releases[-1], releases[0]
    label = _NAMES[package]
    warnings: list[str] = []
    if text is None or not text.strip():
        version = newest
        assumed = True
        warnings.append(
            f"No {label} version was given; the answer is for {newest}, the newest release the knowledge covers. "
            "Give your version for an exact answer."
        )
    else:
        try:
            version = parse_version(text, field=field)
        except ValueError as exc:
            raise AdviceError(field, str(exc).split(": ", 1)[1]) from None
        assumed = False
    if version > newest:
        date = next((r.date for r in knowledge.releases[package].releases if Version(r.version) == newest), None)
        when = f", published {date}" if date else ""
        warnings.append(
            f"{label} {version} is newer than the newest release the knowledge covers ({newest}{when}). "
            f"The answer describes {newest}; anything that changed after it is not known here."
        )
    elif version < oldest:
        warnings.append(
            f"{label} {version} is older than {oldest}, the oldest release the knowledge covers; "
            "features that predate it are reported as present, which may not hold for your release."
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
