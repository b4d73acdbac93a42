"""A vLLM launch from a command's words: `vllm serve`, `python -m vllm.entrypoints…`, `docker run`
of a vLLM image."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..common import docker_run_options
from .bounds import clip
from .model import EnvUse, HygieneIssue, Location, ReleaseClaim

_SERVE_MODULE = "vllm.entrypoints.openai.api_server"


# Dynamo's vLLM worker (`python3 -m dynamo.vllm`, components/backends/vllm of ai-dynamo/dynamo) parses
# vLLM's engine arguments (AsyncEngineArgs.add_cli_args) beside these options of its own, which vLLM
# never sees: they are left out of the vLLM arguments. The value each takes: 1 one word, 0 none, -1
# the words up to the next option (`--connector nixl lmcache`).
_DYNAMO_OPTIONS = {
    "--is-prefill-worker": 0, "--is-decode-worker": 0, "--migration-limit": 1, "--connector": -1,
    "--custom-jinja-template": 1, "--multimodal-processor": 0, "--multimodal-encode-worker": 0,
    "--multimodal-worker": 0, "--multimodal-decode-worker": 0, "--multimodal-encode-prefill-worker": 0,
    "--enable-multimodal": 0, "--mm-prompt-template": 1, "--store-kv": 1, "--request-plane": 1,
    "--use-vllm-tokenizer": 0, "--dump-config-to": 1, "--disaggregation-mode": 1, "--endpoint": 1,
}  # fmt: skip


# Options only vLLM's server takes: arguments that start with one (after at most a model) are vLLM's
# even where no `vllm serve` is written (a kustomize patch that sets only a container's args).
VLLM_OPTIONS = {
    "--model", "--kv-transfer-config", "--tensor-parallel-size", "--pipeline-parallel-size",
    "--data-parallel-size", "--gpu-memory-utilization", "--max-model-len", "--served-model-name",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--kv-cache-dtype", "--max-num-seqs",
    "--max-num-batched-tokens", "--enforce-eager", "--block-size", "--kv-offloading-size",
    "--kv-offloading-backend", "--enable-expert-parallel", "--distributed-executor-backend",
    "--swap-space", "--cpu-offload-gb", "--kv-events-config",
}  # fmt: skip


def starts_with_vllm_options(texts: list[str]) -> bool:
    """Whether these arguments start (after at most one model) with an option only vLLM takes."""
    for word in texts[:2]:
        if word.startswith("-"):
            return word.split("=", 1)[0].replace("_", "-") in VLLM_OPTIONS
    return False


# Options `vllm serve` shares with other OpenAI-compatible servers: SGLang's ServerArgs
# (wheel:sglang==0.5.2:sglang/srt/server_args.py takes every one of these but --seed, --config, --tokenizer
# and --device), and the generic names Hugging Face TGI's launcher and llama.cpp's server take too. An
# argument list of these alone is not told apart from those servers' by its words.
SHARED_SERVER_OPTIONS = frozenset({
    "--api-key", "--attention-backend", "--chat-template", "--cpu-offload-gb", "--data-parallel-size",
    "--disable-custom-all-reduce", "--download-dir", "--dtype", "--enable-eplb", "--enable-lora", "--host",
    "--kv-cache-dtype", "--kv-events-config", "--load-format", "--log-level", "--lora-target-modules",
    "--max-lora-rank", "--model", "--model-impl", "--model-loader-extra-config", "--nnodes", "--node-rank",
    "--offload-group-size", "--offload-num-in-group", "--offload-prefetch-step", "--pipeline-parallel-size",
    "--port", "--quantization", "--reasoning-parser", "--revision", "--served-model-name", "--skip-tokenizer-init",
    "--stream-interval", "--tensor-parallel-size", "--tokenizer-mode", "--tool-call-parser", "--tool-server",
    "--trust-remote-code", "--seed", "--config", "--tokenizer", "--device",
})  # fmt: skip


# How many options (a positional model counted) and what share of them `vllm serve` must accept for a list
# of arguments to be read as vLLM's where no `vllm serve` and no vLLM image says so: three options of which
# four in five are vLLM's leave room for a removed option or a fork's own (`--device hpu`) and none for
# another server's list, whose own options (SGLang's --tp-size, --mem-fraction-static, --context-length,
# TGI's --model-id, --num-shard, --max-input-length, llama.cpp's --ctx-size, --n-gpu-layers) vLLM does not take.
MIN_OPTIONS, MIN_VLLM_SHARE = 3, 0.8


def _option_name(word: str) -> str | None:
    """The option a word names (``--max_model_len=8k`` → ``--max-model-len``), None for a value."""
    if not word.startswith("-") or len(word) < 2 or word[1:2].isdigit() or word[1:2] == ".":
        return None
    name = word.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-").lower() if name.startswith("--") else name


def _accepted(name: str, accepted: frozenset[str]) -> bool:
    """Whether vLLM's parser takes the option: its own name, or the one option it is a prefix of (argparse's
    allow_abbrev, which FlexibleArgumentParser keeps: wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:156)."""
    if name in accepted:
        return True
    return name.startswith("--") and len(name) > 4 and sum(1 for a in accepted if a.startswith(name)) == 1


def vllm_option_share(texts: list[str], accepted: frozenset[str]) -> tuple[int, int, bool]:
    """(options, of which vLLM's, whether one of those is vLLM's alone): the positional model first counts
    as one of vLLM's."""
    names = [n for n in map(_option_name, texts) if n is not None]
    model = bool(texts) and _option_name(texts[0]) is None and bool(texts[0])
    ours = [n for n in names if _accepted(n, accepted)]
    own = any(n not in SHARED_SERVER_OPTIONS and n.startswith("--") for n in ours)
    return len(names) + model, len(ours) + model, own


def looks_like_vllm_args(texts: list[str], accepted: frozenset[str]) -> bool:
    """Whether arguments are `vllm serve` options by their words alone, whatever runs them (``accepted``:
    every option a covered release takes): at least MIN_OPTIONS, MIN_VLLM_SHARE of them vLLM's, one of
    those an option no other common server takes."""
    if not accepted:
        return False
    total, ours, own = vllm_option_share(texts, accepted)
    return total >= MIN_OPTIONS and ours >= MIN_VLLM_SHARE * total and own


# Commands whose `--model …` options are no server's: they print text, fetch a URL, or measure a server.
_NOT_LAUNCHERS = {"echo", "printf", "curl", "wget", "cat", "grep", "sed"}
_MEASURES = re.compile(r"bench|eval|guidellm|locust", re.IGNORECASE)


def _names_model(texts: list[str]) -> bool:
    return any(t == "--model" or t.startswith("--model=") for t in texts)


def wrapped_vllm_args(
    words: list[tuple[str, Location]], accepted: frozenset[str]
) -> tuple[int, list[tuple[str, Location]]] | None:
    """Where the `vllm serve` options begin that a launcher of its own passes on, and those options as `vllm
    serve` takes them (the model positional) (`srun start-cluster.py
    singularity IMAGE --slurm --model M --max-model-len …`): the longest tail of the words that starts at an
    option vLLM takes, names the model with --model, and that looks_like_vllm_args reads as vLLM's. None
    for a command that prints, fetches or benchmarks, and for any other."""
    texts = [w for w, _ in words]
    if not accepted or not texts or not _names_model(texts) or texts[0].rsplit("/", 1)[-1] in _NOT_LAUNCHERS:
        return None
    for i, text in enumerate(texts):
        if _MEASURES.search(text):
            return None
        name = _option_name(text)
        if name is None or not _accepted(name, accepted):
            continue
        tail = texts[i:]
        if _names_model(tail) and looks_like_vllm_args(tail, accepted):
            return i, _model_as_positional(words[i:])
    return _passed_to_named_vllm(words)


def _passed_to_named_vllm(words: list[tuple[str, Location]]) -> tuple[int, list[tuple[str, Location]]] | None:
    """The options from --model on, when the launcher's own words name vLLM (`start-cluster.py singularity
    vllm_latest.sif --slurm --model M --max-model-length …`) and at least one more option follows: what it
    passes on is then vLLM's to accept or refuse, however few of those options vLLM knows."""
    texts = [w for w, _ in words]
    first = next((i for i, t in enumerate(texts) if t == "--model" or t.startswith("--model=")), None)
    if first is None or not any("vllm" in t.lower() for t in texts[:first]):
        return None
    if sum(_option_name(t) is not None for t in texts[first:]) < 2:
        return None
    return first, _model_as_positional(words[first:])


def _without_dynamo_options(words: list[tuple[str, Location]]) -> list[tuple[str, Location]]:
    kept: list[tuple[str, Location]] = []
    skip = 0
    for word, where in words:
        if skip == -1 and not word.startswith("-"):
            continue
        if skip > 0:
            skip -= 1
            continue
        name, eq, _ = word.partition("=")
        if name.startswith("--dyn-") or name in _DYNAMO_OPTIONS:
            skip = 0 if eq else _DYNAMO_OPTIONS.get(name, 1)
            continue
        skip = 0
        kept.append((word, where))
    return kept


SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env"}


_SHELL_NAMES = {"sh", "bash", "dash", "ash", "ksh", "zsh"}


def script_index(texts: list[str]) -> int | None:
    """Where the script of a `sh -c SCRIPT` command is among its words: after the shell's options, one
    cluster of which holds `c` (`-c`, `-lc`, `-exc`, `-e -c`, `-o pipefail -c`); `env bash -c` too.
    None for any other command, or a shell that runs a file or reads its input."""
    start = 1 if texts and texts[0].rsplit("/", 1)[-1] == "env" else 0
    if len(texts) <= start or texts[start].rsplit("/", 1)[-1] not in _SHELL_NAMES:
        return None
    i, command = start + 1, False
    while i < len(texts) and texts[i][:1] in "-+" and len(texts[i]) > 1 and texts[i] != "--":
        cluster = texts[i]
        if not cluster.startswith("--"):
            command = command or "c" in cluster
            if "o" in cluster or "O" in cluster:
                i += 1  # `-o pipefail`: the option's value is the next word
        i += 1
    if i < len(texts) and texts[i] == "--":
        i += 1
    return i if command and i < len(texts) else None


WRAPPERS = {"exec", "nohup", "env", "time", "stdbuf"}


# HPC container runners that start a command in an image: `apptainer exec --nv docker://IMAGE vllm serve …`
# (Singularity and Apptainer), and Slurm's pyxis `srun --container-image=IMAGE vllm serve …`.
_RUNNERS = {"singularity", "apptainer"}
_RUNNER_VERBS = {"exec", "run"}
_RUNNER_VALUED = {
    "-B", "--bind", "--env", "--env-file", "-H", "--home", "-o", "--overlay", "--pwd", "-W", "--workdir",
    "--mount", "--security", "--network", "--hostname", "--app",
}  # fmt: skip


def runner_image(words: list[tuple[str, Location]]) -> tuple[str, Location] | None:
    """The image a container runner before vLLM's words starts the command in, where the files name it as a
    registry image (docker://vllm/vllm-openai:v0.20.0); None for a local .sif file, or with no runner."""
    found = _vllm_start([w for w, _ in words])
    texts = [w for w, _ in words[: found[0] if found else 0]]
    for i, word in enumerate(texts):
        if word.startswith("--container-image"):  # pyxis: --container-image=IMAGE or --container-image IMAGE
            value = word.partition("=")[2] or (texts[i + 1] if i + 1 < len(texts) else "")
            image = value.replace("#", "/", 1) if "#" in value else value  # enroot's registry#image form
            return (image, words[i][1]) if image else None
        if word.rsplit("/", 1)[-1] in _RUNNERS and i + 1 < len(texts) and texts[i + 1] in _RUNNER_VERBS:
            j = i + 2
            while j < len(texts) and texts[j].startswith("-"):
                j += 2 if texts[j] in _RUNNER_VALUED else 1
            if j < len(texts) and texts[j].startswith("docker://"):
                return texts[j].removeprefix("docker://"), words[j][1]
            return None
    return None


# docker/podman run options that take no value; every other option is followed by one.
DOCKER_SWITCHES = _DOCKER_SWITCHES = {
    "-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it", "-ti", "--rm", "--privileged", "--init",
    "-P", "--publish-all", "--read-only", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
}  # fmt: skip


@dataclass
class Launch:
    """What a command line starts: vLLM arguments (after `serve` or the module), image, env."""

    args: list[tuple[str, Location]] = field(default_factory=list)
    env: list[EnvUse] = field(default_factory=list)
    image: tuple[str, Location] | None = None
    source: Literal["command-line", "docker-run"] = "command-line"
    location: Location | None = None
    unresolved: dict[str, str] = field(default_factory=dict)  # a reference as written → why its value is not known
    emptied: set[int] = field(default_factory=set)  # ids of the Locations of words an empty expansion followed
    options: dict[str, str | None] = field(default_factory=dict)  # docker/podman run options, by name
    problem: str | None = None  # why the command as written does not start the server it names
    hygiene: list[HygieneIssue] = field(default_factory=list)  # what the script does wrong before it starts vLLM
    pins: list[ReleaseClaim] = field(default_factory=list)  # pip installs of vLLM or LMCache run before it
    background: bool = False  # started with `&`: the script goes on while it runs
    entrypoint: str | None = None  # the module a `python -m` launch runs (see entrypoint_of)
    ray_cluster: bool = False  # the script starts or joins a Ray cluster before it (see RAY_CLUSTER)
    options_unknown: str | None = None  # why the vLLM options are not known: see Workload.options_unknown


# A script that starts or joins a Ray cluster before vLLM (`ray start`, vLLM's multi-node-serving.sh and
# scripts like it): Ray places the engine's workers on the cluster's nodes, other pods or hosts among them.
RAY_CLUSTER = re.compile(r"\bray\s+start\b|multi-node-serving\.sh|ray_init\.sh|--ray_cluster_size")


def _vllm_start(texts: list[str]) -> tuple[int, str | None] | None:
    """Where the words of a command that starts vLLM begin its arguments, and the module `python -m` runs
    (None for `vllm serve`); None when the command starts no vLLM."""
    for i, w in enumerate(texts):
        base = w.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return i + 2, None
        if base.startswith("python") and i + 2 < len(texts) and texts[i + 1] == "-m":
            module = texts[i + 2]
            if module == _SERVE_MODULE or module.startswith("vllm.entrypoints.") or module == "dynamo.vllm":
                return i + 3, module
    return None


def entrypoint_of(words: list[tuple[str, Location]]) -> str | None:
    """The module a command that starts vLLM runs with `python -m` (vllm.entrypoints.openai.api_server,
    vllm.entrypoints.api_server, dynamo.vllm); None for `vllm serve` or a command that starts no vLLM."""
    start = _vllm_start([w for w, _ in words])
    return start[1] if start is not None else None


def vllm_args(words: list[tuple[str, Location]]) -> list[tuple[str, Location]] | None:
    """The vLLM arguments in a command, or None when it does not start vLLM."""
    start = _vllm_start([w for w, _ in words])
    if start is None:
        return None
    at, module = start
    if module is None:
        return words[at:]
    if module == "dynamo.vllm":
        return _without_dynamo_options(words[at:])
    return _model_as_positional(words[at:])


def _model_as_positional(args: list[tuple[str, Location]]) -> list[tuple[str, Location]]:
    """The API server module's arguments as `vllm serve` takes them: its `--model X` (which every release's module
    accepts, while `vllm serve` in 0.11.0 refuses it) is serve's positional model."""
    texts = [w for w, _ in args]
    if "--model" in texts[:-1] and not (texts and not texts[0].startswith("-")):
        at = texts.index("--model")
        return [args[at + 1], *args[:at], *args[at + 2 :]]
    return args


def docker_run(
    words: list[tuple[str, Location]],
    env: list[EnvUse],
    exported: dict[str, str],
) -> Launch | None:
    """The launch of a `docker run` / `podman run` of a vLLM image; None for another command or image. A vLLM
    image whose overridden entrypoint runs what the files do not show is a launch whose options are not known."""
    texts = [w for w, _ in words]
    start = next(
        (
            i + 2
            for i, w in enumerate(texts[:-1])
            if w.rsplit("/", 1)[-1] in ("docker", "podman") and texts[i + 1] == "run"
        ),
        None,
    )
    if start is None:
        return None
    options, image_at = docker_run_options(texts[start:], _DOCKER_SWITCHES)
    entrypoint: tuple[str, Location] | None = None
    seen: dict[str, str | None] = {}
    given: dict[str, EnvUse] = {}  # the -e NAME=VALUE options, by name
    hygiene: list[HygieneIssue] = []
    for name, value, at in options:
        loc = words[start + at][1]
        seen[name] = value
        if name == "--entrypoint" and value is not None:
            entrypoint = (value, loc)
        if name in ("-e", "--env") and value is not None:
            key, eq, val = value.partition("=")
            if eq:
                if key in given:
                    hygiene.append(_env_given_twice(key, given[key], val, loc))
                given[key] = EnvUse(name=key, value=val, location=loc)
                env.append(given[key])
            elif key in exported:  # -e NAME passes the value the script exported
                env.append(EnvUse(name=key, value=exported[key], location=loc))
            else:
                env.append(EnvUse(name=key, value=None, reference="the host environment of docker run", location=loc))
    i = start + image_at
    if i >= len(words):
        return None
    image = words[i]
    rest = words[i + 1 :]
    if entrypoint is not None:
        # An overridden entrypoint runs something else (an LMCache server, a proxy) unless it starts vLLM.
        inner = vllm_args([entrypoint, *rest])
        if inner is None:
            if not is_vllm_image(image[0]):
                return None
            ran = " ".join(w for w, _ in [entrypoint, *rest])
            unknown = (
                f"docker run of the vLLM image {clip(image[0], 80)} runs `{clip(ran, 100)}`, which the files do not "
                "show starting vLLM: its options are not known"
            )
            return Launch(
                env=env, image=image, source="docker-run", options=seen, options_unknown=unknown, hygiene=hygiene
            )
        module = entrypoint_of([entrypoint, *rest])
        return Launch(
            args=inner, env=env, image=image, source="docker-run", options=seen, entrypoint=module, hygiene=hygiene
        )
    inner = vllm_args(rest)
    if inner is None and not is_vllm_image(image[0]):
        return None
    if inner is None and rest and rest[0][0] == "serve":
        inner = rest[1:]  # images whose entrypoint is `vllm` (lmcache/vllm-openai) take `serve MODEL ...`
    return Launch(
        args=inner if inner is not None else rest,
        env=env,
        image=image,
        source="docker-run",
        options=seen,
        entrypoint=entrypoint_of(rest) if inner is not None else None,
        hygiene=hygiene,
    )


def _env_given_twice(name: str, first: EnvUse, value: str, location: Location) -> HygieneIssue:
    return HygieneIssue(
        check="duplicate-key",
        text=f"-e {name} is given twice to docker run (first at line {first.location.line}, "
        f"{clip(first.value or '', 40)!r}): the container gets the later value, {clip(value, 40)!r}",
        location=location,
    )


def is_vllm_image(image: str) -> bool:
    """An image whose name says it runs vLLM (not a simulator or mock of its API)."""
    return "vllm" in image.lower() and not is_simulator(image)


# Images that answer the vLLM API (and take its options) without running vLLM: llm-d's inference simulator,
# Dynamo's mocker, and mock or fake engines of that kind, by their names.
SIMULATOR = re.compile(r"inference-sim|(^|[/_-])(mock|mocker|fake|dummy|simulator)([/_:-]|$)|-mock(er)?-|mocker")


def is_simulator(image: str | None) -> bool:
    return image is not None and SIMULATOR.search(image.lower()) is not None


def may_start_vllm(texts: list[str]) -> bool:
    """Whether `docker_run` or `vllm_args` could find a launch in these words: a cheap test, so
    that the words of other commands (echo, curl, ...) get no Location objects."""
    joined = " ".join(texts)
    if not any(program in joined for program in ("vllm", "docker", "podman", "python")):
        return False
    bases = (w.rsplit("/", 1)[-1] for w in texts)
    return any(base in ("vllm", "docker", "podman") or base.startswith("python") for base in bases)


def split_script(argv: list[tuple[str, Location]]) -> Launch | None:
    """`bash -c vllm serve m …` as separate words: the shell runs only `vllm` (which prints its help and
    exits), and the other words are the script's $0, $1, …; the launch the words spell, with that problem."""
    at = script_index([w for w, _ in argv])
    inner = vllm_args(argv[at:]) if at is not None else None
    if at is None or inner is None:
        return None
    shell = " ".join(w for w, _ in argv[:at])
    script = argv[at][0]
    alone = " (vllm alone prints its help and exits)" if script.rsplit("/", 1)[-1] == "vllm" else ""
    problem = (
        f"{argv[at][1]}: `{shell}` runs only the word after it, {script!r}, as its script{alone}; the "
        f"{len(argv) - at - 1} words after that become the script's $0, $1, …, so vLLM never starts with these "
        "arguments; give the whole line as one word"
    )
    return Launch(args=inner, problem=problem)
