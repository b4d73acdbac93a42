"""render_config: a ready configuration for a chosen backend, validated before it is returned.

Caller text is held to what every format it reaches can carry before anything is planned: the
request model's field types refuse control characters, a leading '-' where a program would read an
option, and anything that is not an image reference, host name or absolute path where one is
expected; `_check_paths_fit_format` and `lmcache_list` refuse what one format cannot carry.

Then three steps. `_plan` turns the request and the knowledge into components (each vLLM instance,
proxy, LMCache controller or server): argv, environment, ports, mounts, the kv-transfer-config
and LMCache config as Python values, and where every value came from. The Jinja2 templates in
`knowledge/templates/` lay the components out for one format, in a sandbox with StrictUndefined;
values only reach the text through a filter that encodes them for the context — `shq`
(shlex.quote) in shell, `tojson` in JSON, `yq` (a double-quoted YAML scalar) in YAML, `k8s`
(also doubling `$`, which Kubernetes would otherwise expand in args and env) and `envfile` (a
value bare, as Docker's --env-file reads no quotes). Finally `_validate` reads every output back
the way its reader does — sh words, docker run's options, Docker's env-file rules, python-dotenv,
json, yaml, LMCache's quote stripping and lists — and checks it gives the plan back word by word,
that no caller value stands where it would be read as an option, that every vLLM flag exists in
the release and is not one the release made harmful, the Kubernetes object shapes, and the units
(GiB vs bytes vs per-rank GiB).

This module renders and validates; the plan is beside it, split by what it decides: render_models
(the request, the result, what a component is), render_plan (what every backend's plan needs) and
one mixin a backend family (render_native, render_lmcache, render_pd), which `_Planner` joins.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
import shlex
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from ..knowledge import (
    SAFE_DUMPER,
    SAFE_LOADER,
    Backend,
    Knowledge,
)
from ..versions import Version
from .common import (
    AdviceError,
    Citation,
    ToolSpec,
    backend_facts,
    docker_run_options,
    readable_number,
    resolve_version,
    security_check,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    from jinja2.sandbox import SandboxedEnvironment
from .render_lmcache import LMCachePlans
from .render_models import (
    BARE_VALUE,
    GIB,
    PROXY_DIR,
    TEMPLATES,
    UNPRINTABLE,
    Component,
    Parallelism,
    RenderConfigRequest,
    RenderConfigResult,
    RenderedFile,
    children_key,
    default_name,
)
from .render_native import NativePlans
from .render_pd import PdPlans


class _Planner(NativePlans, LMCachePlans, PdPlans):
    """Plans one rendering: ``build()`` runs the method of the request's backend, ``_<backend>``, which the
    mixins hold by what they plan (render_native, render_lmcache, render_pd; the shared part in
    render_plan), then provisions every component."""


def _check_paths_fit_format(request: RenderConfigRequest) -> None:
    """Paths the chosen format cannot write as given. docker run -v splits SOURCE:TARGET[:OPTIONS] at
    every ':'; an env file's values stand bare on their line, as Docker's --env-file reads no quotes."""
    for kind in ("disk", "gds"):
        for i, path in enumerate(getattr(request.paths, kind)):
            where = f"paths.{kind}.{i}"
            if request.format == "docker_run" and ":" in path:
                raise AdviceError(
                    where,
                    "docker run -v splits SOURCE:TARGET at ':', so a mounted path cannot contain ':'; "
                    "the kubernetes format carries it",
                )
            if request.format == "env_file" and not BARE_VALUE.fullmatch(path):
                raise AdviceError(
                    where,
                    "the env_file format writes each value bare (docker run --env-file does no quote processing), "
                    "so a path there takes only letters, digits and _@%+=:,./-; vllm_serve, docker_run and "
                    "kubernetes quote it",
                )


_NO_WRAP = 1 << 30  # the emitter's line width: never fold a value


def _yaml_scalar(value: Any) -> str:
    try:
        return _cached_yaml_scalar(value)
    except TypeError:  # unhashable: never cached
        return _dump_yaml_scalar(value)


# typed: True, 1 and 1.0 are equal keys to a plain cache, but dump as three different scalars.
@functools.lru_cache(maxsize=4096, typed=True)
def _cached_yaml_scalar(value: Any) -> str:
    return _dump_yaml_scalar(value)


def _dump_yaml_scalar(value: Any) -> str:
    if isinstance(value, bool | int | float) and not isinstance(value, str):
        return yaml.dump(value, Dumper=SAFE_DUMPER, width=_NO_WRAP).split("\n", 1)[0]
    return yaml.dump(str(value), Dumper=SAFE_DUMPER, default_style='"', width=_NO_WRAP, allow_unicode=False).strip()


def _env_file_value(value: Any) -> str:
    """A value written bare in an env file. Caller text that needs quoting is refused before planning
    (`_check_paths_fit_format`); anything else that does is refused here rather than mangled."""
    text = str(value)
    if not BARE_VALUE.fullmatch(text):
        raise RenderCheckError("format", f"{text!r} cannot be written bare in an env file; pick another format")
    return text


def _comment(value: Any) -> str:
    return re.sub(r"[\r\n\x00-\x1f]+", " ", str(value))


@functools.cache
def _environment(directory: str) -> SandboxedEnvironment:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["shq"] = lambda v: shlex.quote(str(v))
    env.filters["shwords"] = lambda words: " ".join(shlex.quote(str(w)) for w in words)
    env.filters["tojson"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    env.filters["yq"] = _yaml_scalar
    env.filters["comment"] = _comment
    env.filters["envfile"] = _env_file_value
    env.filters["k8s"] = jinja2.pass_context(_k8s)
    env.filters["gib_ceil"] = lambda gib: math.ceil(gib)
    return env


def _k8s(context: Any, value: Any) -> str:
    """A value for a Kubernetes manifest: Kubernetes expands $(VAR) in args and env, and $$ is a literal $;
    the planner's placeholder addresses become the downward-API variables. Registered with the template's
    context as first argument (jinja2.pass_context, in `_environment`)."""
    text = str(value).replace("$", "$$")
    text = text.replace(context["pod_ip"], "$(POD_IP)").replace(context["host_ip"], "$(HOST_IP)")
    return _yaml_scalar(text)


def _render(planner: _Planner, directory: str) -> list[RenderedFile]:
    r, plan = planner.r, planner.plan
    # One environment per directory, so each template is compiled once per process.
    template = _environment(directory).get_template(TEMPLATES[r.format])
    common = {
        "title": planner.recipes.recipe(planner.backend).title,
        "version": str(planner.version),
        "model_cache_mount": planner.facts.model_cache.mount_path,
        "rdma": planner.facts.rdma,
    }
    if r.format == "kubernetes":
        for c in plan.components:
            c.pod_ip = c.pod_ip or any(planner.pod_ip in a for a in c.argv)
        facts = planner.facts
        text = template.render(
            components=plan.components,
            base=r.name,
            namespace=r.namespace,
            notes=plan.notes,
            pod_ip=planner.pod_ip,
            host_ip=planner.host_ip,
            model_cache_pvc=r.model_cache == "pvc",
            model_cache_gib=facts.model_cache.volume_gib,
            shared_tier=any(c.shared_mounts for c in plan.components),
            shared_tier_gib=planner.shared_tier_gib(),
            health_path=facts.vllm_startup.path,
            probe_period=facts.vllm_startup.period_seconds,
            rdma_resource=r.rdma_resource,
            rdma_capability=facts.rdma.capability,
            proxy_dir=PROXY_DIR,
            **common,
        )
        return [RenderedFile(name=f"{r.name}.yaml", format=r.format, content=text)]
    chosen = plan.components
    if r.format == "kv_transfer_config":
        chosen = [c for c in plan.components if c.kv_transfer_config is not None]
        if not chosen:
            raise AdviceError("format", f"backend {planner.backend} uses no --kv-transfer-config; pick vllm_serve")
    elif r.format == "lmcache_yaml":
        chosen = [c for c in plan.components if c.lmcache_config is not None]
        if not chosen:
            raise AdviceError("format", "lmcache_yaml applies to the lmcache and lmcache_p2p backends")
    elif r.format == "env_file":
        chosen = [c for c in plan.components if c.env]
        if not chosen:
            raise AdviceError("format", f"backend {planner.backend} needs no environment variables here")
    suffix = {
        "vllm_serve": "sh",
        "docker_run": "sh",
        "kv_transfer_config": "json",
        "lmcache_yaml": "yaml",
        "env_file": "env",
    }
    return [
        RenderedFile(
            name=f"{c.name}.{suffix[r.format]}", format=r.format, content=template.render(component=c, **common)
        )
        for c in chosen
    ]


class RenderCheckError(AdviceError):
    """The rendered text failed a check; the message says which."""


def shell_words(text: str) -> list[str]:
    """Split a rendered script as sh would: comments dropped, backslash-newline joins lines."""
    out, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif not quote and ch == "#" and (i == 0 or text[i - 1] in " \t\n"):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n":
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        elif ch in "'\"":
            quote = "" if quote == ch else (quote or ch)
        out.append(ch)
        i += 1
    return shlex.split("".join(out), comments=True, posix=True)


def _accepted_flags(planner: _Planner) -> tuple[frozenset[str] | set[str], str]:
    inventory = planner.k.cli_inventory
    if inventory.flags:
        return inventory.accepted(planner.version), "cli_inventory.yaml"
    names: set[str] = set()
    for s in planner.k.settings:
        if (
            s.kind == "cli_flag"
            and s.component == "vllm"
            and s.status_at(planner.version) in ("available", "deprecated")
        ):
            names |= {n for n in (s.name, *s.aliases) if n.startswith("-")}
    return names, "flags.yaml"


def _check_vllm_argv(planner: _Planner, argv: list[str], where: str) -> None:
    accepted, source = _accepted_flags(planner)
    for token in argv[3:]:
        flag = token.split("=", 1)[0]
        if token.startswith("-") and flag not in accepted:
            raise RenderCheckError("version", f"{where}: vLLM {planner.version} has no flag {flag} ({source})")
    # From the pitfall's first release vLLM decides HMA per connector; forcing it off only costs memory.
    harmful = planner.pitfall_applies("pitfall.hma-flag-with-hma-connector")
    if "--disable-hybrid-kv-cache-manager" in argv and harmful:
        raise RenderCheckError("version", f"{where}: --disable-hybrid-kv-cache-manager is harmful on {planner.version}")


def _check_units(planner: _Planner, argv: list[str], env: dict[str, str], where: str) -> None:
    plan = planner.plan
    if plan.offloading_gib is not None and "--kv-offloading-size" in argv:
        value = float(argv[argv.index("--kv-offloading-size") + 1])
        if not math.isclose(value, plan.offloading_gib, rel_tol=1e-6):
            raise RenderCheckError("sizes", f"{where}: --kv-offloading-size {value} GiB ≠ {plan.offloading_gib}")
    if "--kv-transfer-config" in argv:
        config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        _check_ktc(planner, config, where)
    if plan.lmcache_per_rank_gib is not None and "LMCACHE_MAX_LOCAL_CPU_SIZE" in env:
        value = float(env["LMCACHE_MAX_LOCAL_CPU_SIZE"])
        if not math.isclose(value, plan.lmcache_per_rank_gib, rel_tol=1e-5):
            raise RenderCheckError(
                "sizes", f"{where}: LMCACHE_MAX_LOCAL_CPU_SIZE {value} GiB ≠ per-rank {plan.lmcache_per_rank_gib}"
            )


def _check_ktc(planner: _Planner, config: dict[str, Any], where: str) -> None:
    keys = planner.recipes.facts.kv_transfer_config_keys
    if not set(config) <= set(keys.names) or keys.connector not in config:
        raise RenderCheckError(
            "backend", f"{where}: kv-transfer-config keys {sorted(config)} are not {list(keys.names)}"
        )
    extra = config.get(keys.extra_config, {})
    children = extra.get(children_key(planner.k), []) if isinstance(extra, dict) else []
    for child in [config, *children]:
        inner = child.get(keys.extra_config, {})
        if "cpu_bytes_to_use" in inner:
            value = inner["cpu_bytes_to_use"]
            if not isinstance(value, int) or value != planner.plan.cpu_bytes:
                raise RenderCheckError("sizes", f"{where}: cpu_bytes_to_use must be an integer byte count")


# -- readers: each file read the way the program that takes it reads it --------------------------

_DOCKER_VALUE_OPTIONS = frozenset(
    {"--name", "--gpus", "--ipc", "--network", "--entrypoint", "--cap-add", "--device", "-p", "-e", "-v"}
)


_DOCKER_SWITCHES = frozenset({"--rm"})


def docker_run_words(words: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The words after `docker run` as Docker reads them (`docker_run_options`): the options with their
    values, and the positional words (the image, then what goes to the entrypoint as it is). An
    option this project never writes, or one left without its value, is an error."""
    options, image_at = docker_run_options(words, _DOCKER_SWITCHES)
    for name, value, at in options:
        known = name in _DOCKER_SWITCHES if value is None else name in _DOCKER_VALUE_OPTIONS
        if not known:
            raise RenderCheckError("format", f"docker run would read {words[at]!r} as an option this plan never writes")
    return [(name, value) for name, value, _ in options], words[image_at:]


def read_docker_env_file(text: str) -> list[tuple[str, str | None]]:
    """An env file as `docker run --env-file` reads it (docker/cli opts/file.go): line by line, leading
    whitespace trimmed, empty and '#' lines skipped, NAME=VALUE split at the first '=' with the value
    taken verbatim: no quote removal, no escapes, no expansion. A line without '=' would take its value
    from the host's environment; it comes back as (line, None)."""
    pairs: list[tuple[str, str | None]] = []
    for line in text.split("\n"):
        line = line.removesuffix("\r").lstrip()
        if line and not line.startswith("#"):
            name, eq, value = line.partition("=")
            pairs.append((name, value) if eq and not any(c.isspace() for c in name) else (line, None))
    return pairs


def _read_dotenv(text: str) -> list[tuple[str, str | None]] | None:
    """The env file as python-dotenv reads it (with its default interpolation); None if it is not installed."""
    try:
        from dotenv import dotenv_values
    except ImportError:
        return None
    return list(dotenv_values(stream=io.StringIO(text)).items())


def _read_sh_env(text: str) -> list[tuple[str, str | None]]:
    """The env file as `set -a; . ./FILE` assigns it: each word NAME=value."""
    return [(name, value if eq else None) for name, eq, value in (w.partition("=") for w in shell_words(text))]


def _lmcache_entries(value: str) -> list[str]:
    """local_disk / gds_path as LMCache 0.4.4+ splits them: at ',', each entry stripped, file:// dropped."""
    return [p.strip().removeprefix("file://") for p in value.split(",") if p.strip()]


def _lmcache_reads_verbatim(value: str) -> bool:
    """Whether LMCache takes an LMCACHE_* environment value as written: it strips surrounding whitespace
    and one pair of matching outer quotes first (config_base._parse_quoted_string)."""
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    return value == value.strip() and not quoted


# -- checks -------------------------------------------------------------------------------------


def _check_option_slots(planner: _Planner, c: Component) -> None:
    """No caller text stands as a whole word where a program would take it for an option: the image
    (docker run's positional), the model (vllm serve's), a host after a proxy option."""
    r = planner.r
    given = {"model": r.model, "image": r.image, "lmcache_image": r.lmcache_image}
    given |= {f"hosts.{k}": v for k, v in r.hosts.model_dump().items()}
    field_of = {value: name for name, value in given.items() if value}
    for word in [c.image, *c.argv]:
        if word.startswith("-") and word in field_of:
            raise RenderCheckError(field_of[word], f"{c.name}: {word!r} would be read as an option, not as a value")


def _check_plain_text(f: RenderedFile) -> None:
    """sh drops a NUL from a word, and other control characters reach the reader changed or not at all."""
    for char in f.content:
        if char != "\n" and unicodedata.category(char) in UNPRINTABLE:
            raise RenderCheckError("format", f"{f.name}: carries the control character U+{ord(char):04X}")


def _check_lmcache_reads(planner: _Planner, settings: dict[str, str], where: str, from_env: bool) -> None:
    """What LMCache makes of its settings: from the environment each value after its quote stripping,
    and local_disk / gds_path as its lists, which must give back exactly the paths the caller gave."""
    if from_env:
        settings = {k.removeprefix("LMCACHE_").lower(): v for k, v in settings.items() if k.startswith("LMCACHE_")}
        for name, value in settings.items():
            if not _lmcache_reads_verbatim(value):
                raise RenderCheckError("format", f"{where}: LMCache would strip quotes or spaces from {name}")
    for name, given in (("local_disk", planner.r.paths.disk), ("gds_path", planner.r.paths.gds)):
        if name in settings and _lmcache_entries(settings[name]) != given:
            raise RenderCheckError("format", f"{where}: LMCache would read {name} as other paths than were given")


def _check_command(planner: _Planner, c: Component, argv: list[str], env: list[tuple[str, str]], where: str) -> None:
    """A command read back from a file: the planned words and environment, then what vLLM and LMCache make of them."""
    if argv != c.argv or env != [(e.name, e.value) for e in c.env if e.written]:
        raise RenderCheckError("format", f"{where}: the rendered command does not read back as planned")
    _check_lmcache_reads(planner, dict(env), where, from_env=True)
    if c.kind == "vllm":
        _check_vllm_argv(planner, argv, where)
        _check_units(planner, argv, dict(env), where)


def _validate_serve(planner: _Planner, c: Component, f: RenderedFile) -> None:
    words = shell_words(f.content)
    env: list[tuple[str, str]] = []
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    _check_command(planner, c, words, env, f.name)


def _planned_docker_options(planner: _Planner, c: Component) -> list[tuple[str, str | None]]:
    options: list[tuple[str, str | None]] = [("--rm", None), ("--name", c.name)]
    if c.gpus:
        options.append(("--gpus", c.docker_gpus))
    if c.gpus or c.shm:
        options.append(("--ipc", "host"))
    if c.rdma:
        options += [("--cap-add", planner.facts.rdma.capability), ("--device", planner.facts.rdma.docker_device)]
    if c.host_network or c.service == "headless":
        options.append(("--network", "host"))
    else:
        options += [("-p", f"{p.port}:{p.port}") for p in c.ports]
    options += [("-e", f"{e.name}={e.value}" if e.written else e.name) for e in c.env]
    options += [("-v", f"{m}:{m}") for m in c.mounts]
    if c.model_cache:
        options.append(("-v", f"{c.model_cache}:{planner.facts.model_cache.mount_path}"))
    return [*options, ("--entrypoint", c.argv[0])]


def _validate_docker(planner: _Planner, c: Component, f: RenderedFile) -> None:
    words = shell_words(f.content)
    if c.fetch_argv:  # the download of its script, stopping the script when it fails
        fetch = [*c.fetch_argv, "||", "exit", "1"]
        if words[: len(fetch)] != fetch:
            raise RenderCheckError("format", f"{f.name}: the download of its script does not read back as planned")
        words = words[len(fetch) :]
    options, positional = docker_run_words(words[2:])
    # Docker splits a -v value at every ':' and an -e value at its first '='.
    mounts = [tuple(v.split(":")) for k, v in options if k == "-v" and v is not None]
    planned_mounts = [(m, m) for m in c.mounts]
    if c.model_cache:
        planned_mounts.append((c.model_cache, planner.facts.model_cache.mount_path))
    if (
        words[:2] != ["docker", "run"]
        or options != _planned_docker_options(planner, c)
        or mounts != planned_mounts
        or positional[:1] != [c.image]
    ):
        raise RenderCheckError("format", f"{f.name}: the docker run options and image do not read back as planned")
    # `-e NAME` alone passes the caller's own variable (the token); only NAME=value is written here.
    env = [(k, v) for k, eq, v in (value.partition("=") for name, value in options if name == "-e" and value) if eq]
    _check_command(planner, c, [c.argv[0], *positional[1:]], env, f.name)


def _validate_env_file(planner: _Planner, c: Component, f: RenderedFile) -> list[str]:
    """Read as each program that loads env files reads them; returns the readers used."""
    planned: list[tuple[str, str | None]] = [(e.name, e.value) for e in c.env if e.written]
    readers = {"Docker's --env-file": read_docker_env_file(f.content), "sh": _read_sh_env(f.content)}
    dotenv = _read_dotenv(f.content)
    if dotenv is not None:
        readers["python-dotenv"] = dotenv
    for reader, pairs in readers.items():
        if pairs != planned:
            raise RenderCheckError("format", f"{f.name}: {reader} does not read the env file as planned")
    env = {e.name: e.value for e in c.env}
    _check_lmcache_reads(planner, env, f.name, from_env=True)
    _check_units(planner, [], env, f.name)
    return list(readers)


def _validate(planner: _Planner, files: list[RenderedFile]) -> list[str]:
    fmt, comps = planner.r.format, planner.plan.components
    by_name = {c.name: c for c in comps}
    for component in comps:
        _check_option_slots(planner, component)
    env_readers: list[str] = []
    for f in files:
        _check_plain_text(f)
        c = by_name.get(f.name.rsplit(".", 1)[0])
        if fmt == "kubernetes":
            _validate_kubernetes(planner, f.content)
            continue
        assert c is not None
        if fmt == "vllm_serve":
            _validate_serve(planner, c, f)
        elif fmt == "docker_run":
            _validate_docker(planner, c, f)
        elif fmt == "env_file":
            env_readers = _validate_env_file(planner, c, f)
        elif fmt == "kv_transfer_config":
            config = json.loads(f.content)
            if config != c.kv_transfer_config:
                raise RenderCheckError("format", f"{f.name}: the JSON does not read back as planned")
            _check_ktc(planner, config, f.name)
        else:
            assert c.lmcache_config is not None
            config = yaml.load(f.content, Loader=SAFE_LOADER)
            if config != c.lmcache_config:
                raise RenderCheckError("format", f"{f.name}: the LMCache YAML does not read back as planned")
            _check_lmcache_reads(planner, {k: v for k, v in config.items() if isinstance(v, str)}, f.name, False)
    return _checks_made(planner, env_readers)


def _checks_made(planner: _Planner, env_readers: list[str]) -> list[str]:
    fmt = planner.r.format
    readers = ", ".join(env_readers[:-1]) + " and " + env_readers[-1] if len(env_readers) > 1 else "".join(env_readers)
    checks = [
        {
            "vllm_serve": "re-split as sh splits it and compared with the plan word by word",
            "docker_run": "re-split as sh splits it, read as docker run reads its options, image and command, "
            "and compared with the plan word by word",
            "kv_transfer_config": "re-parsed as JSON and compared with the plan value by value",
            "lmcache_yaml": "re-parsed as YAML and compared with the plan value by value",
            "env_file": f"read the way {readers} read env files, each compared with the plan value by value",
            "kubernetes": "re-parsed as YAML and compared with the plan value by value",
        }[fmt],
        "no caller value stands where a program would read it as an option; no file carries a control character",
    ]
    if any(c.lmcache_config for c in planner.plan.components):
        checks.append("LMCache reads every LMCACHE_* value as written and its disk/GDS lists as the paths given")
    if fmt in ("vllm_serve", "docker_run", "kubernetes"):
        checks.append(
            f"every vLLM flag exists in {planner.version} ({_accepted_flags(planner)[1]}) and none is harmful there"
        )
        checks.append(
            "units: --kv-offloading-size GiB total, cpu_bytes_to_use integer bytes, "
            "LMCACHE_MAX_LOCAL_CPU_SIZE GiB per rank"
        )
    if fmt == "kubernetes":
        checks.append("Kubernetes objects have apiVersion, kind, metadata.name and containers with name and image")
    return checks


def _unk8s(planner: _Planner, value: str) -> str:
    text = value.replace("$(POD_IP)", planner.pod_ip).replace("$(HOST_IP)", planner.host_ip)
    return text.replace("$$", "$")


def _validate_kubernetes(planner: _Planner, text: str) -> None:
    docs = [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    by_name = {f"{planner.r.name}-{c.name}": c for c in planner.plan.components}
    seen = set()
    for doc in docs:
        if (
            not isinstance(doc, dict)
            or not {"apiVersion", "kind", "metadata"} <= set(doc)
            or "name" not in doc["metadata"]
        ):
            raise RenderCheckError("format", "a Kubernetes object lacks apiVersion, kind or metadata.name")
        if doc["kind"] in ("Deployment", "DaemonSet"):
            c = by_name[doc["metadata"]["name"]]
            pod = doc["spec"]["template"]["spec"]
            containers = pod["containers"]
            if not containers or not all({"name", "image"} <= set(x) for x in containers):
                raise RenderCheckError("format", "a container lacks name or image")
            if containers[0]["image"] != c.image:
                raise RenderCheckError("format", f"{c.name}: the container image does not read back as planned")
            argv = [_unk8s(planner, a) for a in [*containers[0]["command"], *containers[0]["args"]]]
            env = [(e["name"], _unk8s(planner, e["value"])) for e in containers[0].get("env", []) if "value" in e]
            _check_command(planner, c, argv, env, c.name)
            fetches = [[_unk8s(planner, a) for a in x["command"]] for x in pod.get("initContainers", [])]
            if fetches != ([c.fetch_argv] if c.fetch_argv else []):
                raise RenderCheckError("format", f"{c.name}: the init container does not read back as planned")
            seen.add(c.name)
        elif doc["kind"] == "Service":
            c = by_name[doc["metadata"]["name"]]
            headless = doc["spec"].get("clusterIP") == "None" and doc["spec"].get("publishNotReadyAddresses") is True
            if (c.service == "headless") != headless:
                raise RenderCheckError(
                    "format", f"{c.name}: Service headlessness does not match what the backend needs"
                )
    if seen != {c.name for c in planner.plan.components}:
        raise RenderCheckError("format", "not every component became a workload")


def _with_size_offload(request: RenderConfigRequest) -> RenderConfigRequest:
    """The request with the sizes of a size_offload result filled in (and the parallelism they were
    sized for), refusing numbers that disagree with each other. The request given stays as it is."""
    data = request.size_offload
    if not data:
        return request
    parallelism = request.parallelism
    if isinstance(data.get("offload"), dict):
        # A whole size_offload result, as the tool returns it: the tier values sit under `offload`,
        # and the parallelism they were sized for at the top.
        parallelism = _adopted_parallelism(request, data)
        data = data["offload"]
    filled: dict[str, int | float] = {}
    for key in ("kv_offloading_size_gib", "cpu_bytes_to_use", "lmcache_max_local_cpu_size_gib"):
        value = data.get(key)
        if value is None:
            continue
        if readable_number(value) is None or value <= 0:
            raise AdviceError(f"size_offload.{key}", f"must be a positive number below 2^63; got {value!r}")
        if getattr(request.sizes, key) is None:
            filled[key] = int(value) if key == "cpu_bytes_to_use" else float(value)
    sizes = request.sizes.model_copy(update=filled)
    ranks = parallelism.tensor_parallel_size * parallelism.pipeline_parallel_size
    gib, raw, lm = sizes.kv_offloading_size_gib, sizes.cpu_bytes_to_use, sizes.lmcache_max_local_cpu_size_gib
    if gib is not None and raw is not None and abs(raw - gib * GIB) > GIB / 1024:
        raise AdviceError("size_offload.cpu_bytes_to_use", f"{raw} bytes is not {gib} GiB × 2^30 = {round(gib * GIB)}")
    if gib is not None and lm is not None and not math.isclose(lm * ranks, gib, rel_tol=1e-3):
        raise AdviceError(
            "size_offload.lmcache_max_local_cpu_size_gib",
            f"{lm} GiB per worker × {ranks} ranks ≠ {gib} GiB total; LMCache sizes per worker (total ÷ TP × PP)",
        )
    return request.model_copy(update={"sizes": sizes, "parallelism": parallelism})


def _adopted_parallelism(request: RenderConfigRequest, result: dict[str, Any]) -> Parallelism:
    """TP and PP from the size_offload result unless given; a mismatch is refused, since the
    per-worker sizes (LMCache, native's split of the total) depend on them."""
    sized = {k: result[k] for k in ("tensor_parallel_size", "pipeline_parallel_size") if result.get(k) is not None}
    if "parallelism" in request.model_fields_set:
        for key, value in sized.items():
            given = getattr(request.parallelism, key)
            if given != value:
                raise AdviceError(
                    f"parallelism.{key}",
                    f"is {given}, but the size_offload result was sized for {value!r}; give the same or leave it out",
                )
        return request.parallelism
    try:
        return Parallelism.model_validate({**request.parallelism.model_dump(), **sized}, strict=True)
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]
        raise AdviceError(f"size_offload.{problem['loc'][0]}", problem["msg"].lower()) from None


def _with_choice(request: RenderConfigRequest, knowledge: Knowledge) -> tuple[Backend | None, RenderConfigRequest]:
    """The backend, and the request with what a choose_backend result fills in where the caller gave
    nothing: its release, and for native_tiering its tiers. The request given stays as it is."""
    recipes, backend, choice = knowledge.recipes, request.backend, request.choice
    if choice is None:
        return backend, request
    rec = choice.get("recommendation")
    chosen = rec.get("backend") if isinstance(rec, dict) else None
    backends = [r.backend for r in recipes.recipes]
    if not isinstance(chosen, str) or chosen not in backends:
        raise AdviceError(
            "choice",
            f"expected a choose_backend result with recommendation.backend one of {', '.join(backends)}",
        )
    if backend is not None and backend != chosen:
        raise AdviceError("backend", f"{backend} disagrees with the choice's {chosen}; give one of them")
    update: dict[str, Any] = {}
    context = choice.get("version_context")
    if request.version is None and isinstance(context, dict) and isinstance(context.get("version"), str):
        update["version"] = context["version"]
    version = update.get("version", request.version)
    tiers = rec.get("tiers", []) if isinstance(rec, dict) else []
    if not isinstance(tiers, list) or not all(isinstance(t, str) for t in tiers):
        raise AdviceError("choice", "recommendation.tiers: expected a list of tier names, as choose_backend gives")
    if request.tiers is None and chosen == "native_tiering":
        # resolve_version: a version such as 'latest' is a one-line error naming the field, not InvalidVersion
        tier_version = resolve_version(knowledge, version)[0] if version else Version("0")
        names = {recipes.tier_type(t.kind, tier_version): t.kind for t in recipes.tier_types}
        update["tiers"] = [names[t] for t in tiers if t in names and t != "cpu"]
    return chosen, request.model_copy(update=update)


def render_config(request: RenderConfigRequest, knowledge: Knowledge) -> RenderConfigResult:
    recipes = knowledge.recipes
    backend, request = _with_choice(request, knowledge)
    if backend is None:
        raise AdviceError("backend", f"give a backend ({', '.join(r.backend for r in recipes.recipes)}) or a choice")
    request = _with_size_offload(request)
    if request.name is None:
        request = request.model_copy(update={"name": default_name(request.model, backend)})
    _check_paths_fit_format(request)
    planner = _Planner(request, knowledge, recipes, backend)
    planner.build()
    directory = str(Path(knowledge.directory) / "templates")
    files = _render(planner, directory)
    checks = _validate(planner, files)
    recipe = recipes.recipe(backend)
    citations = [*planner.plan.cited.values()]
    citations.append(
        Citation(id=recipe.id, sources=list(recipe.sources), verified_at=recipe.verified_at, evidence=recipe.evidence)
    )
    facts = backend_facts(knowledge, backend, request.tiers)
    security = security_check(knowledge, "vllm", planner.version, facts)
    lm_security = None
    if planner.lm_version is not None:
        lm_security = security_check(knowledge, "lmcache", planner.lm_version, facts)
    for check, ctx in ((security, planner.context), (lm_security, planner.lm_context)):
        warning = check.floor_warning() if check is not None else None
        if warning is not None and ctx is not None:
            ctx.warnings.append(warning)
    return RenderConfigResult(
        version_context=planner.context,
        lmcache_context=planner.lm_context,
        security=security.for_detail("summary"),
        lmcache_security=lm_security.for_detail("summary") if lm_security is not None else None,
        backend=backend,
        format=request.format,
        files=files,
        values=planner.plan.values,
        checks=checks,
        notes=planner.plan.notes,
        citations=citations,
        memory=planner.plan.memory,
    )


SPEC = ToolSpec(
    name="render_config",
    title="Render a validated vLLM KV caching config",
    description=(
        "A ready configuration for a backend or a choose_backend result (vllm serve, docker run, Kubernetes,"
        " --kv-transfer-config, LMCache YAML, env file), checked against the release's flags and units."
    ),
    request=RenderConfigRequest,
    result=RenderConfigResult,
    run=render_config,
)
