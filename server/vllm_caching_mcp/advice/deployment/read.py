"""The dispatcher: each document is read by the first reader in READERS that claims it, after
kustomize has built it; what no reader reads is said (notes, unread launches)."""

from __future__ import annotations

import re

from ...knowledge import Knowledge
from ..common import AdviceError
from .bounds import Totals, clip, reading_document
from .dockerfile import DockerBuild, is_dockerfile, read_dockerfile
from .images import image_notes
from .kustomize import Overlay, Patcher, read_builds
from .launch import WRAPPERS
from .lmcache_config import LMCACHE_KEYS
from .model import Deployment, Document, Location, ProxyUse, UnreadLaunch, Workload
from .readers import compose, dockerfile, helm, kubernetes, lmcache, modelservice
from .readers import shell as shell_text
from .readers.base import Reader, Reading, mappings
from .readers.compose import read_dotenv
from .shell import ASSIGNMENT, split_commands, tokenize_shell
from .yaml_nodes import load_yaml

# The input shapes, asked in this order: the first that claims a document reads it, so a document that
# has two shapes is read as the earlier. The shell reader, last, claims what no YAML reader does.
READERS: tuple[Reader, ...] = (
    kubernetes.READER,
    compose.READER,
    helm.READER,
    modelservice.READER,
    lmcache.READER,
    dockerfile.READER,
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
    dockerfiles: dict[str, DockerBuild] | None = None,
) -> None:
    """Add the workloads of one document, as the kustomize ``build`` (overlays innermost first) patches it
    when it is a resource of one; AdviceError("text", ...) when its text cannot be read."""
    deployment.proxies += _proxy_uses(doc, proxy_scripts)
    # Everything is tried as YAML first: shell text reads as one plain scalar (or, for a `{ …; }`
    # group, as a flow mapping no reader claims).
    yaml_named = doc.name.lower().endswith((".yaml", ".yml"))
    try:
        roots = load_yaml(doc.name, doc.text, totals)
    except AdviceError:
        if yaml_named:
            raise
        roots = []
    found = mappings(roots)
    if found and build:
        Patcher(totals, deployment.notes).apply(doc, found, build)
    reading = Reading(deployment, totals, lmcache_keys, dotenv or {}, dockerfiles or {})
    before = len(deployment.workloads)
    reader = next((r for r in READERS if r.claims(doc, roots, reading) and r.read(doc, roots, reading)), None)
    if reader is None:  # only a YAML-named file: the shell reader claims every other
        deployment.notes.append(
            f"{doc.name}: a YAML file that is no manifest, compose file, Helm values or LMCache config"
        )
    if (reader is None or reader.yaml) and len(deployment.workloads) == before and not deployment.lmcache_configs:
        deployment.notes.append(f"{doc.name}: no vLLM server found in it")


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
                _read_document(
                    doc, deployment, totals, proxy_scripts, LMCACHE_KEYS(knowledge), dotenv, chain, dockerfiles
                )
            if chain and len(chains) > 1:  # one base, built by several overlays
                for workload in deployment.workloads[before:]:
                    workload.name += f" ({chain[-1].name})"
            totals.check(deployment)
        if len(deployment.workloads) == read_before and (unread := _unread_launch(doc)) is not None:
            deployment.unread.append(unread)
    deployment.notes += builds.unapplied()
    _built_by_compose(deployment, dockerfiles)
    deployment.notes += [f"value not known: {u}" for w in deployment.workloads for u in w.unresolved]
    deployment.notes += image_notes(deployment.workloads)
    if not deployment.workloads and not deployment.lmcache_configs and not deployment.unread:
        raise NothingToReview(
            "documents",
            "no vLLM server found: give a `vllm serve` or `python -m vllm.entrypoints.openai.api_server` line, a "
            "`docker run` of a vLLM image, a docker-compose file, Kubernetes manifests, Helm values or an LMCache "
            "config YAML",
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
