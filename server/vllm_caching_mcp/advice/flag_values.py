"""Whether vLLM's argument parser takes each option's value as written, by release.

Two refusals argparse makes before vLLM reads any setting, so the server never starts:

- a switch given a value. vLLM builds a switch from a bool config field with
  ``argparse.BooleanOptionalAction`` (wheel:vllm==0.33.0:vllm/engine/arg_utils.py:384-386;
  wheel:vllm==0.11.0:vllm/engine/arg_utils.py:207-208) or with ``action="store_true"``; both take no
  argument (nargs=0), so ``--enable-prefix-caching=false`` stops with "argument --enable-prefix-caching:
  ignored explicit argument 'false'". Written as two words the switch takes none and ``false`` is left
  over: `vllm serve` has one positional (the model, wheel:vllm==0.33.0:vllm/entrypoints/cli/serve.py:56),
  so with the model named "unrecognized arguments: false".
- a value outside the choices. For a config field typed ``Literal[...]`` (without ``str``) vLLM's
  ``get_kwargs`` gives argparse ``choices`` (wheel:vllm==0.33.0:vllm/engine/arg_utils.py:220-235,387-388;
  wheel:vllm==0.11.0:vllm/engine/arg_utils.py:116-130,209-210), so ``--prefix-caching-hash-algo builtin``
  stops with "argument --prefix-caching-hash-algo: invalid choice: 'builtin'". A ``Literal | str`` field
  gets a metavar instead and takes any text; an optional one takes "None" too.

The fields and their types per release come from knowledge/engine_schema.yaml (the config classes
it reads); an option whose value the files leave to a variable is not judged.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from ..knowledge import Knowledge, SchemaEntry
from ..versions import Version
from .deployment.flags import SWITCHES, canonical_flag
from .deployment.model import FlagUse

# The config classes of the schema whose fields EngineArgs.add_cli_args turns into options with
# get_kwargs(<class>) and `--<field with dashes>`, except these, read from add_cli_args' calls
# (`add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])`) in every release covered;
# scripts/check_option_fields.py checks both tables against each release's add_cli_args:
RENAMED = {
    "--kv-cache-dtype": ("CacheConfig", "cache_dtype"),  # wheel:vllm==0.33.0:vllm/engine/arg_utils.py:1397
    "--scheduling-policy": ("SchedulerConfig", "policy"),  # wheel:vllm==0.33.0:vllm/engine/arg_utils.py:1781-1782
    "--device-memory-utilization": (
        "CacheConfig",
        "gpu_memory_utilization",
    ),  # an alias of --gpu-memory-utilization, ibid. :1387-1389
}
CLASSES = ("CacheConfig", "SchedulerConfig", "ParallelConfig")
# Options whose name is also a field of those classes but that another class builds
# (ModelConfig's --max-model-len; UVAOffloadConfig's --cpu-offload-* in 0.17.x): not judged from the schema.
OTHER_CLASS = frozenset({"--max-model-len", "--cpu-offload-gb", "--cpu-offload-params"})
BOOL_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})
UNREAD = ("$", "{{", "`")  # a reference the reader left as written


@dataclass(frozen=True)
class Bound:
    """A float field's range, from the release that first checks it so (until the next entry)."""

    since: Version
    above: float | None  # exclusive lower bound; None: none checked
    at_most: float
    refuses: str  # where and how vLLM refuses a number outside
    source: str

    @property
    def accepted(self) -> str:
        low = f"above {self.above:g} and " if self.above is not None else ""
        return f"a number {low}at most {self.at_most:g} (a fraction of the GPU's memory, not a percentage)"


# Refused when EngineArgs builds CacheConfig, before the engine starts: 0.11.0's __post_init__ raises
# for more than 1.0; from 0.11.1 the field is Field(gt=0, le=1) and pydantic refuses the value.
BOUNDS: dict[str, tuple[Bound, ...]] = {
    "gpu_memory_utilization": (
        Bound(
            Version("0.11.0"),
            None,
            1.0,
            "CacheConfig raises 'GPU memory utilization must be less than 1.0'",
            "wheel:vllm==0.11.0:vllm/config/cache.py:168-171",
        ),
        Bound(
            Version("0.11.1"),
            0.0,
            1.0,
            "CacheConfig's field is Field(gt=0, le=1), so pydantic refuses it",
            "wheel:vllm==0.33.0:vllm/config/cache.py:215",
        ),
    )
}


@dataclass(frozen=True)
class Refusal:
    """One option whose value the release's parser refuses, with what it accepts."""

    flag: FlagUse
    option: str
    value: str
    error: str  # argparse's words, or the config check's
    accepted: str
    stage: str = "'s argument parser stops"  # where vLLM refuses it, after "vLLM 0.33.0"


def refused_values(
    flags: Sequence[FlagUse], version: Version, knowledge: Knowledge, model_named: bool, parsed: bool = True
) -> list[Refusal]:
    """Each option of ``flags`` (as written) whose value ``version`` refuses before the server starts.

    ``model_named``: the model is given (positionally or with --model), so a word a switch leaves over
    is one positional too many. ``parsed``: argparse reads the words; keyword arguments to EngineArgs
    (Ray Serve's engine_kwargs) skip it, so only the config classes' own checks apply to them."""
    accepted = knowledge.cli_inventory.accepted(version)
    found = []
    for flag in flags:
        value = flag.value
        if not isinstance(value, str) or flag.unresolved or flag.problem or any(m in value for m in UNREAD):
            continue
        if parsed and (dotted := _dotted_optimization_level(flag, value, version)) is not None:
            found.append(dotted)
            continue
        option = _option(flag.name, accepted)
        if option is None:
            continue
        refusal = (
            parsed
            and (
                _switch_value(flag, option, value, version, knowledge, model_named)
                or _choice(flag, option, value, version, knowledge)
            )
        ) or _out_of_bounds(flag, option, value, version)
        if refusal is not None:
            found.append(refusal)
    return found


# From 0.13.0 vLLM's parser reads any -O word but -O itself as --optimization-level and its rest
# (wheel:vllm==0.13.0:vllm/utils/argparse_utils.py:247-251), so -O.KEY=V, the compilation-config
# shorthand of 0.11 (and a deprecated one in 0.12), becomes a level ".KEY=V", which OptimizationLevel
# (0 to 3, wheel:vllm==0.34.0:vllm/config/vllm.py:161-175) refuses when create_engine_config builds
# VllmConfig (recorded by scripts/engine_oracle/rules.py on 0.33.0: case dotted-o/trips).
DOTTED_O_REFUSED_FROM = Version("0.13.0")


def _dotted_optimization_level(flag: FlagUse, value: str, version: Version) -> Refusal | None:
    if not flag.name.startswith("-O.") or version < DOTTED_O_REFUSED_FROM:
        return None
    level = f"{flag.name[2:]}={value}" if "=" in flag.written or value else flag.name[2:]
    return Refusal(
        flag,
        "-O",
        level,
        f"-O.KEY is read as --optimization-level {level}; pydantic: 'Input should be 0, 1, 2 or 3'",
        f"an optimization level 0 to 3 (-O3); a compilation setting is -cc.{flag.name[3:]} or a key of "
        "--compilation-config",
        stage=" refuses it when it builds its configuration",
    )


def _option(name: str, accepted: frozenset[str]) -> str | None:
    """The option argparse reads ``name`` as (its --no- form stands for the switch); None when unknown."""
    if "." in name or not name.startswith("--"):
        return None
    option = canonical_flag(name, accepted)
    if option in accepted:
        return option
    if name.startswith("--no-") and "--" + name[5:] in accepted:
        return "--" + name[5:]
    return None


def _switch_value(
    flag: FlagUse, option: str, value: str, version: Version, knowledge: Knowledge, model_named: bool
) -> Refusal | None:
    if option not in SWITCHES(knowledge) or any(f.takes_value for f in knowledge.cli_inventory.entries(option)):
        return None
    accepted = knowledge.cli_inventory.accepted(version)
    positive = "--" + option[5:] if option.startswith("--no-") and "--" + option[5:] in accepted else option
    field = _field(positive, version, knowledge)
    negated = field is not None and _is_bool(field.at("type", version))
    how = f"{positive} or --no-{positive[2:]}, with no value" if negated else f"{option} alone, or leave it out"
    if "=" in flag.written:
        error = f"argument {option}: ignored explicit argument {value!r}"
    elif model_named and value.strip().lower() in BOOL_WORDS:
        error = f"unrecognized arguments: {value}"  # the switch takes no word; this one is a second positional
    else:
        return None
    return Refusal(flag, option, value, error, how)


def _choice(flag: FlagUse, option: str, value: str, version: Version, knowledge: Knowledge) -> Refusal | None:
    if option in OTHER_CLASS:
        return None
    field = _field(option, version, knowledge)
    choices = _choices(field.at("type", version) if field else None)
    if choices is None:
        return None
    options, optional = choices
    if optional and value in ("", "None"):
        return None
    listed = ", ".join(repr(c) for c in sorted(options))  # one type: _choices
    if all(isinstance(c, int) for c in options):
        try:
            number = int(value)
        except ValueError:
            return Refusal(flag, option, value, f"argument {option}: invalid int value: {value!r}", listed)
        if number in options:
            return None
        return Refusal(flag, option, value, f"argument {option}: invalid choice: {number}", listed)
    if value in options:
        return None
    return Refusal(flag, option, value, f"argument {option}: invalid choice: {value!r}", listed)


def _field(option: str, version: Version, knowledge: Knowledge) -> SchemaEntry | None:
    config, name = RENAMED.get(option) or (None, option[2:].replace("-", "_"))
    classes = (config,) if config else CLASSES
    return next(
        (
            e
            for e in knowledge.engine_schema.config_fields
            if e.config in classes and e.name == name and e.holds_at(version)
        ),
        None,
    )


def _out_of_bounds(flag: FlagUse, option: str, value: str, version: Version) -> Refusal | None:
    """A number argparse reads (type=float) that the config class then refuses when vLLM builds it."""
    name = (RENAMED.get(option) or (None, option[2:].replace("-", "_")))[1]
    runs = [b for b in BOUNDS.get(name, ()) if b.since <= version]
    if not runs:
        return None
    bound = runs[-1]
    try:
        number = float(value)
    except ValueError:
        return Refusal(flag, option, value, f"argument {option}: invalid float value: {value!r}", bound.accepted)
    low_ok = bound.above is None or number > bound.above
    if low_ok and number <= bound.at_most:
        return None
    stage = " stops when it builds its configuration, before the engine starts"
    return Refusal(flag, option, value, f"{bound.refuses}; {bound.source}", bound.accepted, stage)


def _is_bool(type_text: str | None) -> bool:
    """A field get_kwargs makes a BooleanOptionalAction (--X and --no-X): bool among its types, str not."""
    try:
        names = {_name(m) for m in _members(ast.parse(type_text or "", mode="eval").body)}
    except SyntaxError:
        return False
    return "bool" in names and "str" not in names


def _choices(type_text: str | None) -> tuple[list[str | int], bool] | None:
    """The choices argparse gets from a field's type as the schema writes it, and whether None is
    one; None when the type gives none (no Literal, or Literal with str, bool or a class beside it)."""
    if not type_text or "Literal" not in type_text:
        return None
    try:
        tree = ast.parse(type_text, mode="eval").body
    except SyntaxError:
        return None
    members = _members(tree)
    literals = [m for m in members if isinstance(m, ast.Subscript) and _name(m.value) == "Literal"]
    others = {_name(m) for m in members if m not in literals}
    if len(literals) != 1 or others - {"None"}:
        return None  # str beside the Literal gives a metavar; bool, a class or a second Literal: not judged
    items = literals[0].slice.elts if isinstance(literals[0].slice, ast.Tuple) else [literals[0].slice]
    values: list[str | int] = []
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, (str, int)) and not isinstance(item.value, bool):
            values.append(item.value)
    if len(values) != len(items) or len({type(v) for v in values}) != 1:
        return None  # argparse's type is the first value's: mixed Literals are refused by vLLM itself
    return values, "None" in others


def _members(node: ast.expr) -> list[ast.expr]:
    """The members of a union (``A | B``, ``Optional[A]``), with SkipValidation[...] and Annotated[...] unwrapped."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _members(node.left) + _members(node.right)
    if isinstance(node, ast.Subscript) and _name(node.value) == "Union" and isinstance(node.slice, ast.Tuple):
        return [m for e in node.slice.elts for m in _members(e)]
    if isinstance(node, ast.Subscript) and _name(node.value) in ("SkipValidation", "Annotated", "Optional"):
        inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
        return _members(inner) + ([ast.Constant(None)] if _name(node.value) == "Optional" else [])
    return [node]


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ast.dump(node)
