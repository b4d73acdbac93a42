"""The dispatcher: each document is read by the first reader in READERS that claims it, after
kustomize has built it; what no reader reads is said (notes, unread launches)."""

from __future__ import annotations

import re

from ...knowledge import Knowledge, ServerListener
from ..common import AdviceError
from .bounds import Totals, clip, reading_document
from .chart_template import is_chart_template, rendered_shape
from .dockerfile import DockerBuild, is_dockerfile, read_dockerfile
from .flags import VLLM_OPTION_NAMES, read_args
from .hygiene import duplicate_key_issues, finish
from .images import image_notes
from .kustomize import Overlay, Patch, Patcher, read_builds, what_it_sets
from .launch import WRAPPERS
from .lmcache_config import LMCACHE_KEYS
from .model import Deployment, Document, Location, ProxyLaunch, ProxyUse, UnreadLaunch, Workload
from .readers import (
    compose,
    dockerfile,
    generic,
    helm,
    kaito,
    kserve,
    kubernetes,
    lmcache,
    modelservice,
    python_launcher,
    ray_serve,
    skypilot,
    terraform,
    truss,
    vllm_config,
    vllm_runtime,
)
from .readers import shell as shell_text
from .readers.base import Reader, Reading, mappings
from .readers.compose import read_dotenv
from .shell import ASSIGNMENT, conditional_lines, parse_shell, split_commands, tokenize_shell
from .yaml_nodes import DuplicateKey, Located, load_yaml, text_of

# The input shapes, asked in this order: the first that claims a document reads it, so a document that
# has two shapes is read as the earlier. The shell reader, last, claims what no YAML reader does.
READERS: tuple[Reader, ...] = (
    ray_serve.READER,  # partial: a RayService's Services and ConfigMaps go on to the manifest reader
    kserve.READER,  # partial, likewise
    vllm_runtime.READER,  # partial, likewise
    kaito.READER,  # partial, likewise
    kubernetes.READER,
    skypilot.READER,
    truss.READER,
    compose.READER,
    helm.READER,
    modelservice.READER,
    lmcache.READER,
    dockerfile.READER,
    vllm_config.READER,  # a `vllm serve --config` file: option names as keys
    generic.READER,  # the last of the YAML readers: any mapping that starts vLLM, whatever holds it
    terraform.READER,  # the YAML a Terraform resource carries in heredocs
    python_launcher.READER,  # Python source that starts vLLM (Modal, BentoML, launch scripts)
    shell_text.READER,
)


def _read_document(
    doc: Document,
    deployment: Deployment,
    totals: Totals,
    proxy_scripts: list[str],
    lmcache_keys: frozenset[str],
    dotenv: dict[str, str] | None = None,
    build: list[Overlay] | None = None,
    documents: tuple[Document, ...] = (),
    servers: tuple[ServerListener, ...] = (),
    dockerfiles: dict[str, DockerBuild] | None = None,
    vllm_options: frozenset[str] = frozenset(),
) -> None:
    """Add the workloads of one document, as the kustomize ``build`` (overlays innermost first) patches it
    when it is a resource of one; AdviceError("text", ...) when its text cannot be read."""
    uses = _proxy_uses(doc, proxy_scripts)
    deployment.proxies += uses
    # Everything is tried as YAML first: shell text reads as one plain scalar (or, for a `{ …; }`
    # group, as a flow mapping no reader claims).
    yaml_named = doc.name.lower().endswith((".yaml", ".yml"))
    duplicates: list[DuplicateKey] = []
    try:
        roots = load_yaml(doc.name, doc.text, totals, duplicates=duplicates)
    except AdviceError:
        if is_chart_template(doc.text):
            doc, roots = _chart_template(doc, totals, deployment)
        elif yaml_named:
            raise
        else:
            roots = []
    found = mappings(roots)
    if found and build:
        Patcher(totals, deployment.notes).apply(doc, found, build)
    reading = Reading(
        deployment,
        totals,
        lmcache_keys,
        dotenv or {},
        documents=documents,
        servers=servers,
        dockerfiles=dockerfiles or {},
        proxy_scripts=tuple(proxy_scripts),
        vllm_options=vllm_options,
    )
    reading.read_yaml = lambda inner, documents: _read_with_readers(inner, documents, reading, yaml_only=True)
    before = len(deployment.workloads) + len(deployment.cache_servers)
    reader = _read_with_readers(doc, roots, reading)
    if reader is None or reader.yaml:
        deployment.hygiene += duplicate_key_issues(doc.name, duplicates)
    if "+" in doc.text and (passed := conditional_lines(doc.text)):
        deployment.conditional_lines[doc.name] = {**passed, **deployment.conditional_lines.get(doc.name, {})}
    if reader is not None and not reader.yaml:
        deployment.proxy_launches += _shell_proxy_launches(doc, uses)
    if reader is None:  # only a YAML-named file: the shell reader claims every other
        deployment.notes.append(
            f"{doc.name}: a YAML file that is no manifest, compose file, Helm values or LMCache config"
        )
    read_nothing = len(deployment.workloads) + len(deployment.cache_servers) == before
    if (reader is None or reader.yaml) and read_nothing and not deployment.lmcache_configs:
        deployment.notes.append(f"{doc.name}: no vLLM server found in it")


def _chart_template(doc: Document, totals: Totals, deployment: Deployment) -> tuple[Document, list[Located]]:
    """A chart's template as the YAML it renders to, its actions set aside (chart_template), with the lines that
    depend on the chart's values kept for the review to judge findings there by."""
    shape = rendered_shape(doc.text)
    shaped = doc.model_copy(update={"text": shape.text})
    roots = load_yaml(doc.name, shaped.text, totals)
    deployment.conditional_lines[doc.name] = shape.conditional
    deployment.template_filled[doc.name] = shape.filled
    deployment.notes.append(
        f"{doc.name}: read as a Helm chart template, its actions set aside: a `| default` value is taken as the "
        "value, a line inside an if/with/range is judged as rendered only where the chart's values ask for it, and "
        "a key whose content an include or toYaml writes is not judged; `helm template` renders it for an exact review"
    )
    return shaped, roots


def _read_with_readers(doc: Document, roots: list[Located], reading: Reading, yaml_only: bool = False) -> Reader | None:
    """The first reader that claims and reads the document; after a partial one, the readers after it are
    asked for the YAML documents it did not take (the Services and ConfigMaps beside a custom resource).
    ``yaml_only``: YAML documents found inside another text (a Terraform heredoc), for the YAML readers."""
    first: Reader | None = None
    before = len(reading.deployment.workloads) + len(reading.deployment.cache_servers)
    all_roots = roots
    for reader in READERS:
        if yaml_only and not reader.yaml:
            continue
        if not (reader.claims(doc, roots, reading) and reader.read(doc, roots, reading)):
            continue
        first = first or reader
        if not reader.partial:
            break
        roots = [root for root in roots if id(root) not in reading.taken]
        if not mappings(roots):
            break
    read_nothing = len(reading.deployment.workloads) + len(reading.deployment.cache_servers) == before
    if first is not None and first.yaml and first is not generic.READER and read_nothing:
        # a shape claimed it and found no vLLM server (a custom resource with no pod spec): any mapping may start one
        generic.READER.read(doc, all_roots, reading)
    return first


# `vllm serve` (quoted, escaped or split by a line continuation as the shell allows), a vLLM entry point
# or Dynamo's vLLM worker.
_LAUNCH_MARKER = re.compile(r"""\bvllm['",\\\s$]{1,8}serve\b|\bvllm\.entrypoints\.|\bdynamo\.vllm\b""")


# Commands that find, stop, print or log a process by its command line: `pkill -f "vllm serve"` in a
# stop script names the launch, it does not start it.
_NAMES_WITHOUT_RUNNING = {
    "pkill", "pgrep", "killall", "pidof", "ps", "grep", "egrep", "fgrep", "rg", "echo", "printf", "logger", "tail",
}  # fmt: skip


def _starts_a_launch(line: str) -> bool:
    """Whether ``line`` names a vLLM launch in a command that may run it (not only a stop, a search or a print)."""
    for command in split_commands(tokenize_shell(line)):
        words = [t.text for t in command]
        while words and (words[0] in WRAPPERS or words[0] in ("sudo", "!") or ASSIGNMENT.match(words[0])):
            words = words[1:]
        if any(_LAUNCH_MARKER.search(w) for w in words) and not (words and words[0] in _NAMES_WITHOUT_RUNNING):
            return True
    return False


def _unread_launch(doc: Document) -> UnreadLaunch | None:
    """The first line outside comments that names a vLLM launch, for a document that gave no workload."""
    for number, line in enumerate(doc.text.splitlines(), 1):
        if not line.lstrip().startswith("#") and _LAUNCH_MARKER.search(line) and _starts_a_launch(line):
            return UnreadLaunch(location=Location(file=doc.name, line=number), text=clip(line.strip(), 120))
    return None


def _built_by_compose(deployment: Deployment, dockerfiles: dict[str, DockerBuild]) -> None:
    """A Dockerfile a compose service builds runs as that service: its own workload would count it twice.
    One that no service builds and whose image starts no server is said to give nothing to review."""
    for workload in list(deployment.workloads):
        build = dockerfiles.get(workload.file) if workload.source == "dockerfile" else None
        if build is not None and build.built_by:
            deployment.workloads.remove(workload)
            deployment.notes.append(
                f"{workload.file}: the server its image starts is reviewed as {', '.join(build.built_by)}, which "
                "builds it"
            )
    started = {w.file for w in deployment.workloads if w.source == "dockerfile"}
    for name, build in dockerfiles.items():
        if not build.built_by and name not in started:
            base = f" on {clip(build.stage.image[0], 80)}" if build.stage.image else ""
            deployment.notes.append(
                f"{name}: builds an image{base} whose ENTRYPOINT and CMD start no vLLM server, and no compose service "
                "among the documents builds it (build:): nothing in it is reviewed"
            )


class NothingToReview(AdviceError):
    """The documents hold no vLLM server, LMCache config or unread launch (a review with
    ``allow_empty`` answers that as a clean review)."""


# A variable a script, a command or a Kubernetes field expands: $NAME, ${NAME...}, $(NAME).
# $VAR, ${VAR}, $(VAR) and a CI expression's ${{ env.VAR }} (GitHub Actions, Gitea, Forgejo)
_REFERENCE = re.compile(r"\$(?:\{\{\s*env\.|[{(])?([A-Za-z_][A-Za-z0-9_]*)")


def parse_documents(documents: list[Document], knowledge: Knowledge) -> Deployment:
    """Every vLLM workload (and LMCache configuration) in the documents."""
    if not documents:
        raise AdviceError("documents", "give at least one document: a command line, compose file or manifest")
    deployment = Deployment(workloads=[])
    proxy_scripts = sorted({p.script for p in knowledge.recipes.pd_proxies})
    totals = Totals()
    # A compose file's `.env` among the documents: compose reads it for ${VAR} in the file beside it.
    dotenv: dict[str, str] = {}
    for doc in documents:
        if doc.name.rsplit("/", 1)[-1] == ".env":
            dotenv |= read_dotenv(doc.text)
    builds, deployment.notes = read_builds(documents, totals)
    # The Dockerfiles, read first: a compose service's `build:` takes its image, installs and CMD from one.
    dockerfiles: dict[str, DockerBuild] = {}
    for index, doc in enumerate(documents):
        if is_dockerfile(doc):
            with reading_document(index):
                dockerfiles[doc.name] = read_dockerfile(doc)
    for index, doc in enumerate(documents):
        if doc.name.rsplit("/", 1)[-1] == ".env" or doc.name in builds.consumed:
            continue
        chains: list[list[Overlay] | None] = [*builds.chains.get(doc.name, [])] or [None]
        read_before = len(deployment.workloads)
        for chain in chains:
            before = len(deployment.workloads)
            with reading_document(index):
                keys = LMCACHE_KEYS(knowledge)
                _read_document(
                    doc,
                    deployment,
                    totals,
                    proxy_scripts,
                    keys,
                    dotenv,
                    chain,
                    tuple(documents),
                    knowledge.servers,
                    dockerfiles,
                    VLLM_OPTION_NAMES(knowledge),
                )
            if chain and len(chains) > 1:  # one base, built by several overlays
                for workload in deployment.workloads[before:]:
                    workload.name += f" ({chain[-1].name})"
            totals.check(deployment)
        if len(deployment.workloads) == read_before and (unread := _unread_launch(doc)) is not None:
            deployment.unread.append(unread)
    reading = Reading(
        deployment,
        totals,
        LMCACHE_KEYS(knowledge),
        dotenv,
        documents=tuple(documents),
        vllm_options=VLLM_OPTION_NAMES(knowledge),
    )
    alone = builds.alone()
    read_alone: set[str] = set()
    for overlay in builds.overlays:
        before = len(deployment.workloads)
        for patch in overlay.patches:
            # a patch file two kustomizations name is read on its own once
            if not patch.applied and (patch.document == overlay.name or patch.document not in read_alone):
                _read_patch_alone(patch, documents, reading)
                read_alone.add(patch.document)
        if overlay in alone:
            deployment.notes += what_it_sets(overlay, len(deployment.workloads) > before)
    deployment.notes += builds.unapplied()
    deployment.referenced_env |= {m[1] for doc in documents for m in _REFERENCE.finditer(doc.text)}
    _built_by_compose(deployment, dockerfiles)
    finish(deployment)
    # once each: a KServe runtime's template value is not known in it nor in each model it serves
    deployment.notes += dict.fromkeys(f"value not known: {u}" for w in deployment.workloads for u in w.unresolved)
    deployment.notes += image_notes(deployment.workloads)
    deployment.notes += [
        f"{s.location}: {s.name} is an LMCache server; it is checked against its pod (ports, memory), not as vLLM"
        for s in deployment.cache_servers
    ]
    if not (
        deployment.workloads or deployment.cache_servers or deployment.lmcache_configs or deployment.unread or alone
    ):
        raise NothingToReview(
            "documents",
            "no vLLM server found: give a `vllm serve` or `python -m vllm.entrypoints.openai.api_server` line, a "
            "`docker run` of a vLLM image, a docker-compose file, Kubernetes manifests (a RayService, KServe, "
            "production-stack's VLLMRuntime too), a kustomization, Helm values, a SkyPilot task, a Ray Serve config, "
            "a Truss config, Python that starts it (a Modal app, a BentoML service), a systemd unit, an LMCache config "
            "YAML, a `vllm serve --config` file, or any YAML (values of any chart, a custom resource, a Terraform "
            "heredoc) that holds `vllm serve` options or a command that runs it",
        )
    if not deployment.workloads and deployment.lmcache_configs:
        deployment.workloads.append(
            Workload(
                name="LMCache configuration",
                file=documents[0].name,
                source="lmcache-config",
                location=Location(file=documents[0].name, line=1),
            )
        )
    return deployment


def _read_patch_alone(patch: Patch, documents: list[Document], reading: Reading) -> None:
    """A kustomize patch whose target is not among the documents, read on its own: the objects of a
    strategic merge as the readers read any, and a JSON 6902 value that is a command line starting vLLM
    (`exec vllm serve …` replacing a container's argument) as a script."""
    doc = next((d for d in documents if d.name == patch.document), Document(name=patch.document, text=" "))
    before = len(reading.deployment.workloads)
    if patch.objects:
        _read_with_readers(doc, patch.objects, reading)
    for operation in patch.operations:
        value = operation.get("value")
        if value is None or not isinstance(value.value, str) or not _LAUNCH_MARKER.search(value.value):
            continue
        script = Document(name=patch.document, text=value.value)
        first = value.text_line
        for launch in parse_shell(script, first, value.path, reading.deployment.notes):
            what = f"{patch.target.get('kind', '?')}/{patch.target.get('name', '?')}" if patch.target else "?"
            workload = Workload(
                name=f"{what} ({text_of(operation.get('op'))} {clip(text_of(operation.get('path')), 80)})",
                file=patch.document,
                source="kubernetes",
                env=launch.env,
                location=launch.location or Location(file=patch.document, line=first),
                pod_elsewhere=True,  # the pod is the patched object's, which the files do not hold
            )
            workload.hygiene += launch.hygiene
            read_args(workload, launch.args, launch.unresolved, launch.emptied)
            reading.deployment.workloads.append(workload)
            reading.totals.check(reading.deployment)
    if len(reading.deployment.workloads) > before:
        reading.deployment.notes.append(
            f"{patch.source}: read on its own (its target is not among the files): what the object it patches "
            "sets besides (image, resources, command) is not known"
        )


def _shell_proxy_launches(doc: Document, uses: list[ProxyUse]) -> list[ProxyLaunch]:
    """A script's proxies with their arguments: the words after the script's name up to the end of its command
    (continuation lines joined), on the host the script runs on."""
    lines = doc.text.splitlines()
    launches = []
    for use in uses[:MAX_PROXY_LAUNCHES]:
        line = use.location.line or 1
        # the command's words end at its separator; a proxy line is at most a few continuation lines
        tokens = tokenize_shell("\n".join(lines[line - 1 : line + 40]), line)
        started, words = False, []
        for token in tokens:
            if token.separator and started:
                break
            if not started:
                started = token.text.rsplit("/", 1)[-1] == use.script
                continue
            words.append((token.text, Location(file=doc.name, line=token.line)))
        if started:
            launches.append(ProxyLaunch(script=use.script, words=words, host_network=True, location=use.location))
    return launches


# A script names a proxy a few times at most; this many are followed.
MAX_PROXY_LAUNCHES = 20


def _proxy_uses(doc: Document, scripts: list[str]) -> list[ProxyUse]:
    """Where a known P/D proxy script is named, as a word or a path's last part, outside comment lines."""
    # A name that starts a word or follows a '/' (the last part of a path) and ends the word. Written
    # without a pattern for the path before it: `(?:[\w.-]*/)*` there re-reads every segment of a line
    # from each position, quadratic in them (a 40 KB line of `a/a/…` took 10 s).
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, scripts)) + r")(?![\w.-])")
    return [
        ProxyUse(script=m.group(1), location=Location(file=doc.name, line=number))
        for number, line in enumerate(doc.text.splitlines(), 1)
        if not line.lstrip().startswith("#")
        for m in pattern.finditer(line)
    ]
