"""vLLM flags as written: `_`/`-` forms, `--no-` negations, values, and the switches (flags that take
no value) of a release."""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from ...knowledge import Knowledge
from ..common import readable_number
from .bounds import clip
from .model import FlagUse, Location, PerKnowledge, Workload
from .shell import REFERENCE


def normalize_flag(written: str) -> str:
    """``--max_model_len`` → ``--max-model-len``; vLLM accepts underscores for dashes."""
    name = written.split("=", 1)[0]
    if name.startswith("--"):
        base, dot, key = name[2:].partition(".")  # --kv-transfer-config.kv_connector: keys keep their spelling
        return "--" + base.replace("_", "-").lower() + dot + key
    return name


def _is_number(text: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", text) is not None


def _switches(knowledge: Knowledge) -> frozenset[str]:
    """Flags that take no value: from the CLI inventory, and boolean flags in the knowledge."""
    found = {f.flag for f in knowledge.cli_inventory.flags if not f.takes_value}
    for s in knowledge.settings:
        if s.kind == "cli_flag" and s.type is not None and s.type.split("|")[0].strip() == "bool":
            found.add(s.name)
    return frozenset(found)


SWITCHES = PerKnowledge(_switches)


# Every option `vllm serve` takes in some covered release (knowledge/cli_inventory.yaml).
VLLM_OPTION_NAMES = PerKnowledge(lambda knowledge: frozenset(f.flag for f in knowledge.cli_inventory.flags))


def read_args(
    workload: Workload,
    args: list[tuple[str, Location]],
    unresolved: Mapping[str, str] | None = None,
    emptied: AbstractSet[int] = frozenset(),
) -> None:
    """Flags and the positional model from vLLM arguments (switches are looked up when resolving).

    ``unresolved`` maps references left as written (``$MODEL``) to why their value is not known;
    ``emptied`` holds the ids of the Locations of words that an expansion to nothing followed."""
    known = unresolved or {}

    def why(text: str) -> str | None:
        if text in known:  # a word as written (a template's placeholder such as __MODEL_NAME__)
            return known[text]
        if not known or ("$" not in text and "`" not in text and "{{" not in text):
            return None
        return next((known[m.group()] for m in REFERENCE.finditer(text) if m.group() in known), None)

    positional_taken = workload.model is not None
    i = 0
    while i < len(args):
        text, loc = args[i]
        if text.startswith("-") and not _is_number(text) and len(text) > 1:
            name = normalize_flag(text)
            value: str | bool | None
            problem: str | None = None
            if text.startswith("-O") and len(text) > 2 and text[2] not in ".=":
                name, value = "-O", text[2:]  # -O3, -Odecode: vLLM's parser splits them so itself
            elif "=" in text:
                value = text.split("=", 1)[1]
            elif id(loc) in emptied:
                value = ""
                problem = (
                    f"its value expands to nothing, so vLLM's argument parser stops (argument {name}: expected one "
                    "argument) or takes the next option's words"
                )
            elif i + 1 < len(args) and (not args[i + 1][0].startswith("-") or _is_number(args[i + 1][0])):
                value = args[i + 1][0]
                i += 1
            else:
                value = True
            if value == "" and problem is None:
                problem = f"its value is empty, which vLLM's argument parser rejects for {name} unless it takes text"
            reason = why(value) if isinstance(value, str) else None
            if reason is not None:
                workload.unresolved.append(f"{loc}: {clip(text, 60)} {clip(str(value), 60)}: {reason}")
            workload.flags.append(
                FlagUse(name=name, written=text, value=value, location=loc, unresolved=reason, problem=problem)
            )
        elif text:
            reason = why(text)
            if reason is not None:
                what = "the model" if not positional_taken else "the words"
                workload.unresolved.append(f"{loc}: {what} {clip(text, 60)}: {reason}; not reviewed")
            elif not positional_taken:
                workload.model, workload.model_location = text, loc
            else:
                workload.stray_words.append((text, loc))
            positional_taken = True
        i += 1


def switches_fixed(workload: Workload, switches: frozenset[str]) -> Workload:
    """A copy of the workload in which each switch that took the next word as its value while reading
    gives the word back, as the model when none is named; the parsed deployment stays as written."""
    flags: list[FlagUse] = []
    model, model_location = workload.model, workload.model_location
    for flag in workload.flags:
        base = flag.name[5:] if flag.name.startswith("--no-") else flag.name[2:]
        if isinstance(flag.value, str) and "=" not in flag.written and ("--" + base) in switches:
            if model is None and flag.unresolved is None and flag.value:
                model, model_location = flag.value, flag.location
            flag = flag.model_copy(update={"value": True, "unresolved": None, "problem": None})
        flags.append(flag)
    return workload.model_copy(update={"flags": flags, "model": model, "model_location": model_location})


def flag_bool(flag: FlagUse | None) -> bool | None:
    """A switch's state: bare or true/1 → True; --no-X or false/0 → False; None when absent."""
    if flag is None:
        return None
    if isinstance(flag.value, bool):
        return flag.value
    text = str(flag.value).strip().lower()
    return text not in ("false", "0", "no", "off")


CLI_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([kmgKMG]?)\s*")


def parse_number(text: str | bool | None) -> float | None:
    """A number as vLLM's CLI reads it: plain, or with k/m/g (decimal) or K/M/G (binary) suffixes;
    None for other text and for numbers beyond ±2^63 (400 digits read as infinity)."""
    if text is None or isinstance(text, bool):
        return None
    m = CLI_NUMBER.fullmatch(str(text))
    if not m:
        return None
    factor = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
    return readable_number(float(m.group(1)) * factor)


def canonical_flag(name: str, accepted: AbstractSet[str]) -> str:
    """The option argparse reads ``name`` as: itself when known, else the one option it is an
    unambiguous prefix of (vLLM's FlexibleArgumentParser keeps argparse's default allow_abbrev=True:
    wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:156), else itself (unknown or ambiguous)."""
    if name in accepted or not name.startswith("--") or "." in name or len(name) < 4:
        return name
    matches = [option for option in accepted if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name
