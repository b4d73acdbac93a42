"""Any YAML that starts vLLM where no reader of its own shape knows it: Helm values of any chart, an
operator's custom resource (KubeAI's Model with `engine: VLLM`), a tool's own config. Every mapping is
looked at: one that holds an argument list (under `args`, `extraArgs`, `vllmArgs`, `engineArgs`, ...,
or any list whose words are `vllm serve` options) or a command that runs `vllm serve` is a vLLM
workload, with the env, image, GPUs and probes written beside it or above it. Shared by the generic
YAML reader and by the readers of files that carry YAML inside (Terraform's heredoc values)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TypeVar

from ..common import AdviceError
from .bounds import clip
from .containers import handler_ports, launch_from_argv, script_words, started_as_written, whole_number, words_from_list
from .flags import read_args
from .hygiene import liveness_issue
from .launch import (
    Launch,
    entrypoint_of,
    is_vllm_image,
    looks_like_vllm_args,
    vllm_args,
    vllm_option_share,
)
from .model import Document, EnvUse, Location, Workload
from .pods import pod_resources
from .readers.base import Reading, mappings
from .shell import Shell, split_commands_ended, starts_ray, tokenize_shell
from .yaml_nodes import Located, load_yaml, node_location, text_of

# Keys a chart or an operator gives the server's arguments under (extraArgs, extra_args, vllmArgs, serverArgs,
# engineArgs, extraCmdArgs, ...): every key that ends in "args", dashes and underscores aside.
_ARGS_KEY = re.compile(r"[a-z]*args|arguments|extraarguments")
# run: a GitHub Actions step, a CI job; commands: a dstack configuration
_COMMAND_KEYS = ("command", "commands", "cmd", "entrypoint", "script", "run")
# Keys an operator names the serving engine under (KubeAI's Model `engine: VLLM`): its arguments are vLLM's.
_ENGINE_KEYS = ("engine", "backend", "runtime", "server", "framework")
_ENV_KEYS = ("env", "extraEnv", "extra_env", "environment", "envVars", "env_vars")
# The pod specs of manifests: the manifest readers judged every container there already.
_CONTAINER_KEYS = {"containers", "initContainers", "ephemeralContainers", "mainContainer"}
# A template's value the files do not hold: `__MODEL_NAME__`, `${var.model_name}`, `{{ .Values.x }}`, `<MODEL>`.
# A `${…}` with a dot in it is Terraform's (`${var.x}`), never a shell parameter; `${NAME}` is left to the shell reader.
_PLACEHOLDER = re.compile(r"__[A-Za-z0-9_]+__|\$\{[^}]*\.[^}]*\}|\{\{[^}]*\}\}|<[A-Za-z_][\w-]*>")
_TEMPLATE = re.compile(r"\{\{[^}]*\}\}")
# A CI expression that reads a variable of the workflow's env (GitHub Actions, Gitea, Forgejo): the shell's $NAME.
_CI_ENV = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# KubeAI's Model: `resourceProfile: NAME:COUNT` gives COUNT of the profile's accelerator.
_PROFILE = re.compile(r"(?P<name>[\w.-]+):(?P<count>\d+)")


def _args_key(key: str) -> bool:
    return _ARGS_KEY.fullmatch(key.lower().replace("_", "").replace("-", "")) is not None


def _image(doc: Document, chain: list[Located]) -> tuple[str | None, Location | None, bool]:
    """The image of the nearest mapping on the way up that names one: a string, or `{registry, repository,
    tag}` as Helm charts write it; whether its name says vLLM. A repository without a tag is the chart's
    default tag, which these files do not hold: its release is not known (and no tag hygiene is judged)."""
    for node in reversed(chain):
        found = _image_of(doc, node)
        if found is not None:
            return found
    return None, None, False


def _image_of(doc: Document, node: Located) -> tuple[str | None, Location | None, bool] | None:
    item = node.get("image")
    if item is None:
        return None
    if isinstance(item.value, str):
        return item.value, node_location(doc, item), is_vllm_image(item.value)
    repository = item.get("repository")
    if repository is None:
        return None
    registry, tag = item.get("registry"), item.get("tag")
    name = "/".join(text_of(p) for p in (registry, repository) if p is not None and text_of(p))
    if tag is None or not text_of(tag):
        return None, node_location(doc, repository), is_vllm_image(name)
    return f"{name}:{text_of(tag)}", node_location(doc, tag), is_vllm_image(name)


T = TypeVar("T")
_DEPTH_BELOW = 6  # how deep under a values file's root its server's sections sit (inference.modelServer.image)


def _first_below(node: Located, pick: Callable[[Located], T | None], depth: int = 0) -> T | None:
    """The first value ``pick`` finds in ``node`` or the mappings under it, nearest first on each path."""
    if depth > _DEPTH_BELOW or not isinstance(node.value, dict):
        return None
    found = pick(node)
    for child in node.value.values() if found is None else ():
        if isinstance(child, Located) and (found := _first_below(child, pick, depth + 1)) is not None:
            break
    return found


def _vllm_image_below(doc: Document, node: Located) -> tuple[str | None, Location | None] | None:
    """The first vLLM image named in the mappings under ``node``: a chart's values that keep the server's
    options in one section (modelParameters) and its image in another (inference.modelServer.image)."""

    def vllm_image(item: Located) -> tuple[str | None, Location | None] | None:
        found = _image_of(doc, item)
        return (found[0], found[1]) if found is not None and found[2] else None

    return _first_below(node, vllm_image)


def _env(doc: Document, node: Located) -> list[EnvUse]:
    """The variables written beside the arguments: a list of name/value (valueFrom, a reference) or a mapping."""
    found: list[EnvUse] = []
    for key in _ENV_KEYS:
        item = node.get(key)
        if item is None:
            continue
        if isinstance(item.value, dict):
            for name, value in item.value.items():
                found.append(EnvUse(name=str(name), value=text_of(value), location=node_location(doc, value)))
        for entry in item.items():
            if isinstance(entry.value, str) and "=" in entry.value:  # compose's `- NAME=value`
                key, _, value_text = entry.value.partition("=")
                found.append(EnvUse(name=key, value=value_text, location=node_location(doc, entry)))
                continue
            name = entry.get("name")
            if name is None:
                continue
            value = entry.get("value")
            reference = None if value is not None else "valueFrom" if entry.get("valueFrom") is not None else None
            found.append(
                EnvUse(
                    name=text_of(name),
                    value=text_of(value) if value is not None or reference is None else None,
                    reference=reference,
                    location=node_location(doc, entry),
                )
            )
    return found


def _placeholders(words: list[tuple[str, Location]]) -> dict[str, str]:
    return {
        word: "a placeholder a template or Terraform fills in elsewhere"
        for word, _ in words
        if _PLACEHOLDER.search(word)
    }


class _Found:
    """One launch found in a mapping: its words, where they are, and how it was recognised."""

    def __init__(self, launch: Launch, item: Located, how: str) -> None:
        self.launch, self.item, self.how = launch, item, how


def _command(doc: Document, node: Located, image: str | None, inherited: list[EnvUse]) -> _Found | None:
    """A command (a string, a shell script, a list of script lines, or an argv list) that runs `vllm serve`;
    ``inherited``: the variables the mappings above set for it (a workflow's and a job's env)."""
    for key in _COMMAND_KEYS:
        item = node.get(key)
        if item is None:
            continue
        variables = Shell({u.name: u.value for u in [*inherited, *_env(doc, node)] if u.value is not None})
        if isinstance(item.value, str):
            launch = _script_launch(doc, item, image, item.value, variables)
        elif _script_lines(item):  # dstack's `commands:`, a CI job's `script:`: each item a line of shell
            launch = _script_launch(doc, item, image, _script_text(doc, item), variables)
        else:  # a container's form: `command: [vllm, serve]` with its `args` beside it
            args = _word_list(doc, "args", node.get("args")) or []
            launch = launch_from_argv(doc, words_from_list(doc, item.items(), "") + args, None, overridden=True)
        if launch is not None:
            return _Found(launch, item, f"its {key} runs vLLM")
    return None


def _script_lines(item: Located) -> bool:
    """A list of shell lines rather than one command's words: its items are text, one with a space in it."""
    items = item.items() if isinstance(item.value, list) else []
    return bool(items) and all(isinstance(i.value, str) for i in items) and any(" " in i.value for i in items)


def _script_text(doc: Document, item: Located) -> str:
    """A list of script lines as the one script they are run as, each line at its own line of the file (the
    installs and exports before the line that starts vLLM are part of it)."""
    line = node_location(doc, item).line or 1
    text = ""
    for entry in item.items():
        at = node_location(doc, entry).line or line
        text += "\n" * max(0, at - line) + str(entry.value) + "\n"
        line = max(line, at) + 1 + str(entry.value).count("\n")
    return text


def _script_launch(doc: Document, item: Located, image: str | None, script: str, variables: Shell) -> Launch | None:
    """The vLLM launch a shell script runs, if any (``variables``: what the mapping's env sets for it)."""
    if not re.search(r"\bvllm\b", script):
        return None
    # `${{ env.NAME }}` is the workflow's variable; `{{ .Values.x }}` one value the files do not hold, not three words
    text = _TEMPLATE.sub(lambda m: re.sub(r"\s+", "", m.group()), _CI_ENV.sub(r"${\1}", script))
    where = node_location(doc, item)
    inner, words = None, []
    for command, _ in split_commands_ended(tokenize_shell(text, where.line or 1)):
        # the words of the command that runs vLLM, not those of the lines after it (a wait loop's `[ -gt ]`)
        words = [(t.text, Location(file=where.file, line=t.line, path=where.path)) for t in command]
        inner = vllm_args(words)
        if inner is not None:
            break
    launch = launch_from_argv(doc, [("sh", where), ("-c", where), (text, where)], image, variables=variables)
    if inner is not None and (launch is None or len(launch.args) < len(inner)):
        # a template the shell cannot parse (`${var.x}`): its words as written
        launch = Launch(args=inner, entrypoint=entrypoint_of(words))
    if launch is not None:
        launch.ray_cluster = starts_ray(text)
    return launch


# Longer lists under keys that do not say they are arguments are data (hosts, labels, buckets).
_MAX_LIST_WORDS = 1_000


def _word_list(doc: Document, key: str, item: object) -> list[tuple[str, Location]] | None:
    """The words of a list of scalars, or of an args-like key's string; None for any other value."""
    if not isinstance(item, Located) or not isinstance(item.value, list | str):
        return None
    if isinstance(item.value, list) and not _args_key(key) and len(item.value) > _MAX_LIST_WORDS:
        return None  # a list of data, not of arguments: not read word by word
    if isinstance(item.value, list) and not all(isinstance(i.value, str | int | float) for i in item.items()):
        return None
    if isinstance(item.value, str):
        return script_words(doc, item) if _args_key(key) else None
    return words_from_list(doc, item.items(), "")


def _arguments(doc: Document, node: Located, vllm_image: bool, reading: Reading) -> _Found | None:
    """An argument list: under an args-like key of a mapping whose image (or engine) is vLLM's (the image's
    entrypoint is the server), or any list of words that are overwhelmingly `vllm serve` options. The other
    args-like lists of the mapping follow it (a chart passes `args` and `extraArgs` both)."""
    for key, item in node.value.items():
        words = _word_list(doc, str(key), item)
        if words is None:
            continue
        texts = [w for w, _ in words]
        first = texts[0] if texts else "-"
        named = _args_key(str(key)) and vllm_image and (first[:1] == "-" or "/" in first or first == "serve")
        if named or looks_like_vllm_args(texts, reading.vllm_options):
            args = words[1:] if texts[:1] == ["serve"] else words
            keys = [str(key)]
            for other, more in node.value.items():
                extra = _word_list(doc, str(other), more) if other != key and _args_key(str(other)) else None
                if extra is not None:
                    args, keys = args + extra, [*keys, str(other)]
            what = " and ".join(keys)
            how = f"its {what} are the arguments of a vLLM image" if named else f"its {what} are `vllm serve` options"
            return _Found(Launch(args=args), item, how)
    return None


# Keys of a chart's values that hold a setting of the chart, not of vLLM, although a `vllm serve` option has
# the same name (the chart's own image, replicas, resources and probes are read as such).
_CHART_OWN_KEYS = {"image", "resources", "replicas", "replicaCount", "name", "port", "host", "labels", "env"}


def _option_name(key: str) -> str:
    """`--max-model-len` for maxModelLen, max_model_len or max-model-len."""
    return "--" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", key).replace("_", "-").lower()


def _chart_option_words(doc: Document, node: Located, options: frozenset[str]) -> list[tuple[str, Location]]:
    """The scalar keys of ``node`` and of the mappings right under it that are named as `vllm serve` options,
    as the option and its value; a nested `name` of a `model` mapping is the model."""
    words: list[tuple[str, Location]] = []
    for key, item in node.value.items():
        if not isinstance(item, Located) or key in _CHART_OWN_KEYS:
            continue
        if isinstance(item.value, dict):
            if key == "model" and item.get("name") is not None and isinstance(item.get("name").value, str):
                words += [
                    ("--model", node_location(doc, item.get("name"))),
                    (text_of(item.get("name")), node_location(doc, item.get("name"))),
                ]
            words += _chart_option_words(doc, item, options) if key not in _CONTAINER_KEYS else []
            continue
        flag, value = _option_name(str(key)), item.value
        # An empty value is a chart's "not set": its template passes the option only `if` the value is given.
        unset = value is None or (isinstance(value, str) and not value.strip())
        if unset or isinstance(value, list) or (flag not in options and f"--no-{flag[2:]}" not in options):
            continue
        where = node_location(doc, item)
        if isinstance(value, bool):
            if value or f"--no-{flag[2:]}" in options:
                words.append((flag if value else f"--no-{flag[2:]}", where))
        else:
            words += [(flag, where), (str(value), where)]
    return words


def _chart_options(doc: Document, node: Located, vllm_image: bool, reading: Reading) -> _Found | None:
    """A chart's values section for a vLLM image whose keys are named as `vllm serve` options (maxModelLen,
    gpuMemoryUtilization): its templates, not in the files, pass them on; at least two of them, one an
    option no other common server takes. The section names the image, or is a values file's root with the
    image in a section of its own (_split_values)."""
    if not vllm_image or (node.get("image") is None and node.path):
        return None
    words = _chart_option_words(doc, node, reading.vllm_options)
    names = [w for w, _ in words if w.startswith("--") and w != "--model"]
    _, ours, own = vllm_option_share(names, reading.vllm_options)
    if ours < 2 or not own:
        return None
    keys = ", ".join(dict.fromkeys(n.removeprefix("--") for n in names))
    how = f"its keys are named as `vllm serve` options of its image ({clip(keys, 120)}), which its templates pass on"
    return _Found(Launch(args=_model_first(words)), node, how)


def _model_first(words: list[tuple[str, Location]]) -> list[tuple[str, Location]]:
    """A chart's `model` value as `vllm serve`'s positional model, which every release takes (`--model` is an
    option of `vllm serve` only from 0.11.1), however its templates spell it."""
    at = next((i for i, (w, _) in enumerate(words[:-1]) if w == "--model"), None)
    if at is None:
        return words
    return [words[at + 1], *words[:at], *words[at + 2 :]]


def option_words(root: Located) -> list[str]:
    """Each key of a mapping as the option it names (`max-model-len` as `--max-model-len`)."""
    return ["--" + str(key) for key in root.value]


def config_args(doc: Document, root: Located, options: frozenset[str]) -> list[tuple[str, Location]]:
    """The words `vllm serve --config` makes of a mapping of options (see readers/vllm_config.py)."""
    args: list[tuple[str, Location]] = []
    for key, item in root.value.items():
        if not isinstance(item, Located):
            continue
        flag, where = "--" + str(key), node_location(doc, item)
        value = item.plain()
        if isinstance(value, bool):
            negated = "--no-" + str(key).replace("_", "-")
            if value or negated in options:
                args.append((flag if value else negated, where))
        elif isinstance(value, list):
            if value:
                args += [(flag, where)] + [
                    (str(v), node_location(doc, i)) for v, i in zip(value, item.items(), strict=False)
                ]
        elif isinstance(value, dict):
            args += [(flag, where), (json.dumps(value), where)]
        else:
            args += [(flag, where), (str(value), where)]
    return args


def _option_mapping(doc: Document, node: Located, reading: Reading) -> _Found | None:
    """A mapping whose keys are overwhelmingly `vllm serve` options without their dashes (`max-model-len: 4096`),
    as a `vllm serve --config` file has them, wherever it sits (a ConfigMap's inference config)."""
    scalars = [k for k, v in node.value.items() if isinstance(v, Located) and not isinstance(v.value, dict)]
    total, ours, own = vllm_option_share(option_words(node), reading.vllm_options)
    # a few more of a file's keys may be options of releases before the covered ones (max-seq-len-to-capture)
    if len(scalars) < len(node.value) / 2 or not (own and ours >= 4 and ours >= 0.7 * total):
        return None
    return _Found(Launch(args=config_args(doc, node, reading.vllm_options)), node, "its keys are `vllm serve` options")


def _embedded_yaml(doc: Document, node: Located, chain: list[Located], reading: Reading) -> None:
    """The YAML files a mapping holds as text (a ConfigMap's `inference_config.yaml: |`), walked in place."""
    for key, item in node.value.items():
        if not (isinstance(item, Located) and isinstance(item.value, str) and str(key).endswith((".yaml", ".yml"))):
            continue
        try:
            roots = load_yaml(doc.name, item.value, reading.totals, item.text_line)
        except AdviceError:
            continue  # text that is no YAML: a template, a script
        for root in mappings(roots):
            _walk(doc, root, [*chain, item], reading)


def _gpus(doc: Document, chain: list[Located], workload: Workload, notes: list[str]) -> None:
    """GPUs from `resources` beside the arguments (as a container's), or KubeAI's `resourceProfile: NAME:COUNT`.

    A chart's values that give the server's `resources` (beside its arguments, or above them) and name no GPU
    anywhere say all it is given: its templates pass `resources` to the container (`toYaml .Values.resources`)."""
    node = chain[-1]
    if node.get("resources") is not None and isinstance(node.get("resources").value, dict):
        pod_resources(doc, workload, node, node, notes)
    holder = next((n for n in reversed(chain) if isinstance(_mapping_value(n.get("resources")), dict)), None)
    if holder is not None and workload.accelerator is None and not _names_gpu(chain[0]):
        workload.gpus_stated = True
        workload.gpu_location = node_location(doc, holder.get("resources"))
    profile = node.get("resourceProfile")
    match = _PROFILE.fullmatch(text_of(profile)) if profile is not None else None
    if profile is not None and match is not None and "gpu" in match["name"]:
        workload.gpu_count = int(match["count"])
        workload.gpu_location = node_location(doc, profile)
        workload.accelerator = "amd.com/gpu" if match["name"].startswith("amd") else "nvidia.com/gpu"


# Any key or value that may give the container GPUs some other way (gpu: 1, requestGPU, numGpus, nvidia.com/gpu);
# gpu-memory-utilization, a vLLM option, gives none.
_GPU_WORD = re.compile(r"gpu(?![-_ ]?memory)", re.I)


def _names_gpu(item: object, depth: int = 0) -> bool:
    """Whether a key or a scalar anywhere under ``item`` names a GPU (comments are not read)."""
    value = item.value if isinstance(item, Located) else item
    if depth > 64:
        return False
    if isinstance(value, dict):
        return any(_GPU_WORD.search(str(k)) or _names_gpu(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_names_gpu(v, depth + 1) for v in value)
    return isinstance(value, str) and _GPU_WORD.search(value) is not None


def _mapping_value(item: Located | None) -> object:
    return item.value if item is not None else None


def _probes(doc: Document, chain: list[Located], workload: Workload) -> None:
    """Probes and lifecycle hooks written beside the arguments or above them (an operator's resource, llmaz's
    BackendRuntime), as a Kubernetes container's: the liveness probe's timing and the ports they ask."""
    holder = next((n for n in reversed(chain) if n.get("livenessProbe") or n.get("startupProbe")), None)
    probe = liveness_issue(doc, holder) if holder is not None else None
    if probe is not None:
        workload.hygiene.append(probe)
    for node in reversed(chain):
        workload.probe_ports = handler_ports(doc, node)
        if workload.probe_ports:
            return


def _workload(doc: Document, chain: list[Located], found: _Found, reading: Reading) -> Workload:
    node, notes = chain[-1], reading.deployment.notes
    image, image_location, _ = _image(doc, chain)
    if image is None and found.launch.image is not None:  # a `docker run` in the command names it
        image, image_location = found.launch.image
    root = chain[0]
    kind = text_of(root.get("kind")) if root.get("kind") is not None else ""
    label = f"{kind} " if kind else ""
    workload = Workload(
        name=f"{label}{found.item.path or 'document'}",
        file=doc.name,
        source="kubernetes" if kind else "helm-values",
        image=image,
        image_location=image_location,
        # an operator's resource sets variables for all its workers above them (Kthena's spec.backend.env): the
        # outer ones first, so the ones beside the arguments win
        env=[use for holder in chain for use in _env(doc, holder)] + found.launch.env,
        location=node_location(doc, found.item),
        installs=list(found.launch.pins),  # a script's `pip install vllm==X` before it: the release it runs
        pod_elsewhere=True,  # a chart's template or an operator builds the pod: its /dev/shm is not in the files
        replicas=whole_number(doc, node.get("replicas"), "replicas", 0, 1_000_000, notes)
        if node.get("replicas") is not None
        else None,
    )
    _gpus(doc, chain, workload, notes)
    _probes(doc, chain, workload)
    url = node.get("url")
    if url is not None and text_of(url).startswith("hf://"):
        workload.model, workload.model_location = text_of(url).removeprefix("hf://"), node_location(doc, url)
    started_as_written(workload, found.launch, notes)
    unresolved = {**found.launch.unresolved, **_placeholders(found.launch.args)}
    read_args(workload, found.launch.args, unresolved, found.launch.emptied)
    notes.append(
        f"{workload.location}: read as a vLLM server because {found.how}; what its chart or operator adds around "
        "it (the rest of the command, the pod) is not in the files"
    )
    return workload


def _walk(doc: Document, node: Located, chain: list[Located], reading: Reading, runs_vllm: bool = False) -> None:
    """The launches in ``node`` and below; ``runs_vllm``: a mapping above gives a command that runs vLLM with no
    options of its own, so the argument lists below are its (llmaz's BackendRuntime recommendedConfigs)."""
    if isinstance(node.value, list):
        for item in node.items():
            _walk(doc, item, chain, reading, runs_vllm)
        return
    if not isinstance(node.value, dict):
        return
    chain = [*chain, node]
    _, _, vllm_image = _image(doc, chain)
    engines = [node.get(k).value for k in _ENGINE_KEYS if node.get(k) is not None]
    vllm_image = runs_vllm or vllm_image or any(isinstance(e, str) and is_vllm_image(e) for e in engines)
    command = _command(doc, node, None, [use for holder in chain[:-1] for use in _env(doc, holder)])
    if command is not None and not command.launch.args and _argument_lists_below(doc, node, chain, reading):
        return
    found = (
        command
        or _arguments(doc, node, vllm_image, reading)
        or _chart_options(doc, node, vllm_image, reading)
        or (_option_mapping(doc, node, reading) if chain[:-1] else None)  # a whole file of options: vllm_config's
    )
    if found is not None:
        reading.deployment.workloads.append(_workload(doc, chain, found, reading))
        reading.totals.check(reading.deployment)
        return
    _walk_children(doc, node, chain, reading, runs_vllm)
    _embedded_yaml(doc, node, chain, reading)


def _walk_children(doc: Document, node: Located, chain: list[Located], reading: Reading, runs_vllm: bool) -> None:
    for key, child in node.value.items():
        # a pod spec's container list was read by the manifest readers; a mapping of containers by name is a
        # chart's values (bjw-s app-template's controllers.<name>.containers.<name>)
        pod_spec = key in _CONTAINER_KEYS and (key == "mainContainer" or isinstance(child.value, list))
        if not pod_spec and isinstance(child, Located):
            _walk(doc, child, chain, reading, runs_vllm)


def _argument_lists_below(doc: Document, node: Located, chain: list[Located], reading: Reading) -> bool:
    """The workloads of the argument lists below a command that runs vLLM bare; whether there were any."""
    count = len(reading.deployment.workloads)
    _walk_children(doc, node, chain, reading, runs_vllm=True)
    return len(reading.deployment.workloads) > count


_INSTANCE_KEYS = ("instanceType", "instance_type", "instance-type", "node.kubernetes.io/instance-type")


def _instance_type(node: Located) -> str | None:
    """The cloud instance type a values file names for its server's nodes (inference charts' instanceType)."""
    item = next((node.get(key) for key in _INSTANCE_KEYS if node.get(key) is not None), None)
    return item.value.strip() if item is not None and isinstance(item.value, str) and item.value.strip() else None


def _split_values(doc: Document, root: Located, reading: Reading) -> None:
    """A values file with the server's options in one section and its vLLM image in another: one server, on the
    instance type it names, if any."""
    image = _vllm_image_below(doc, root)
    found = _chart_options(doc, root, True, reading) if image is not None else None
    if image is None or found is None:
        return
    workload = _workload(doc, [root], found, reading)
    workload.image, workload.image_location = image
    workload.gpu_label = workload.gpu_label or _first_below(root, _instance_type)
    reading.deployment.workloads.append(workload)
    reading.totals.check(reading.deployment)


def read_generic(doc: Document, roots: list[Located], reading: Reading) -> bool:
    """The workloads of every mapping of ``roots`` that starts vLLM; whether any was found."""
    before = len(reading.deployment.workloads)
    for root in mappings(roots):
        count = len(reading.deployment.workloads)
        _walk(doc, root, [], reading)
        if len(reading.deployment.workloads) == count:
            _split_values(doc, root, reading)
    return len(reading.deployment.workloads) > before
