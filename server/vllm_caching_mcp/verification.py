"""What the last verification run found for each fact, from `knowledge/verification.yaml`.

`scripts/verify_knowledge.py --update` runs every fact's probes against the released vLLM and
LMCache wheels and writes that file: the newest releases checked, the date, and a verdict per
fact. Answers carry a fact's verdict next to its sources, and `resolve_version` warns when a
question is about a release newer than the newest one verified. A missing file is not an error:
every fact is then "not yet run".
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from .knowledge import SAFE_LOADER, FactVerification, Verification, load_knowledge
from .knowledge_files import KnowledgeError
from .versions import Version, as_text

FILE = "verification.yaml"
State = Literal["verified", "contradicted", "not_checkable", "not_yet_run"]


class VerificationState(BaseModel):
    """How a cited fact stood when the knowledge was last checked against the released wheels."""

    status: State = Field(
        description="verified: its probes agreed with the released code; contradicted: a probe disagreed; "
        "not_checkable: no static probe can settle it (e.g. a pitfall or a measured figure); "
        "not_yet_run: the verifier has no record of it"
    )
    checked_at: dt.date | None = Field(default=None, description="when the verifier ran")
    newest_verified: str | None = Field(default=None, description="the newest release the run covered")
    evidence: str | None = Field(default=None, description="wheel file and line of the newest passing probe")
    detail: str | None = None


@functools.cache
def load_verification(directory: str | None = None) -> Verification | None:
    """The verification record next to the knowledge files, or None when there is none yet."""
    root = Path(directory) if directory else Path(load_knowledge().directory)
    path = root / FILE
    if not path.is_file():
        return None
    try:
        # libyaml: the pure-Python parser took ~250 ms for this file, on the first answer of every process
        return Verification.model_validate(yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER))
    except (yaml.YAMLError, ValidationError) as exc:
        raise KnowledgeError(f"knowledge/{FILE}: {str(exc).splitlines()[0]}") from None


@functools.cache
def _by_id(directory: str | None) -> dict[str, FactVerification]:
    record = load_verification(directory)
    return {fact.id: fact for fact in record.facts} if record else {}


def verification_state(entry_id: str, directory: str | None = None, package: str = "vllm") -> VerificationState:
    """The verdict on one fact (by entry id), with the date and release of the run."""
    record = load_verification(directory)
    fact = _by_id(directory).get(entry_id)
    if record is None or fact is None:
        return VerificationState(status="not_yet_run")
    newest = record.lmcache if package == "lmcache" else record.vllm
    return VerificationState(
        status=fact.status,
        checked_at=record.checked_at,
        newest_verified=as_text(newest),
        evidence=fact.evidence,
        detail=fact.detail,
    )


def newest_verified(package: str = "vllm", directory: str | None = None) -> tuple[Version, dt.date] | None:
    """The newest release of ``package`` the knowledge was verified against, and when."""
    record = load_verification(directory)
    if record is None:
        return None
    newest = record.lmcache if package == "lmcache" else record.vllm
    return (newest, record.checked_at) if newest else None
