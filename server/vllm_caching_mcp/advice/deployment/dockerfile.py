"""A Dockerfile (or Containerfile) as the image it builds: the final stage's base image, the pip installs of
vLLM and LMCache its RUN lines make, its ENV, and the ENTRYPOINT and CMD it runs.

The instructions are split by dockerfile-parse (line continuations, comments, the escape directive);
a RUN or a shell-form CMD is shell text, read as the shell reader reads a script, so each word keeps
its own line. ARG and ENV values are expanded as Docker does (``${BASE:-vllm/vllm-openai:v0.11.0}``)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field

from ..common import AdviceError
from .bounds import clip
from .installs import pip_installs, python_selected
from .model import Document, EnvUse, Location, ReleaseClaim
from .shell import Shell, ShellRun, tokenize_shell

MAX_INSTRUCTIONS = 5_000

# Its first instruction (after comments, parser directives and blank lines) is FROM, or an ARG that a
# FROM uses; a shell script never starts so.
_FIRST_INSTRUCTION = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*(?:FROM|ARG)[ \t]+\S", re.I)
_DOCKERFILE_NAME = re.compile(r"(^|[/.])(Dockerfile|Containerfile)(\.[\w.-]+)?$|\.(dockerfile|containerfile)$", re.I)


_KEYWORDS = (
    "FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
    "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
)  # fmt: skip
_INSTRUCTION_LINE = re.compile(r"[ \t]*(" + "|".join(_KEYWORDS) + r")([ \t]|$)", re.I)
# Names that say another shape: a script or YAML is never read as a Dockerfile, whatever its first word.
_OTHER_SHAPES = (".sh", ".bash", ".yaml", ".yml", ".json", ".env", ".py", ".txt", ".md")


def is_dockerfile(doc: Document) -> bool:
    """A Dockerfile: named so (Dockerfile, Dockerfile.vllm, vllm.Dockerfile, Containerfile) with FROM or ARG its
    first instruction, or named otherwise (a pasted file) with every line a Dockerfile instruction, a comment or
    a continuation."""
    if not _FIRST_INSTRUCTION.match(doc.text):
        return False
    if _DOCKERFILE_NAME.search(doc.name):
        return True
    return not doc.name.lower().endswith(_OTHER_SHAPES) and _only_instructions(doc.text)


def _only_instructions(text: str) -> bool:
    continued = False
    for line in text.splitlines():
        stripped = line.strip()
        if not continued and stripped and not stripped.startswith("#") and not _INSTRUCTION_LINE.match(line):
            return False
        continued = stripped.endswith("\\") or (continued and (not stripped or stripped.startswith("#")))
    return True


@dataclass
class Stage:
    """One build stage as far as it is read: what the image it makes holds and runs."""

    name: str | None
    image: tuple[str, Location] | None  # the base image (a stage built on another keeps that one's)
    args: dict[str, str] = field(default_factory=dict)
    env: list[EnvUse] = field(default_factory=list)
    installs: list[ReleaseClaim] = field(default_factory=list)
    entrypoint: list[tuple[str, Location]] | None = None
    cmd: list[tuple[str, Location]] | None = None
    shell_entrypoint: bool = False  # ENTRYPOINT in shell form, which runs without CMD
    python: str | None = None  # the Python its installs go into: the python:3.X base image's, or a RUN's venv
    unresolved: dict[str, str] = field(default_factory=dict)
    _values: dict[str, str] | None = None  # args and env as one mapping, built when asked

    def values(self) -> dict[str, str]:
        """The variables its RUN lines and later ENV values see: its ARGs, then its ENV (which wins)."""
        if self._values is None:
            self._values = {**self.args, **{u.name: u.value for u in self.env if u.value is not None}}
        return self._values

    def changed(self) -> None:
        self._values = None

    def built_on(self, name: str | None) -> Stage:
        return Stage(
            name,
            self.image,
            args=dict(self.args),
            env=list(self.env),
            installs=list(self.installs),
            entrypoint=self.entrypoint,
            cmd=self.cmd,
            shell_entrypoint=self.shell_entrypoint,
            python=self.python,
        )


@dataclass
class DockerBuild:
    """What a Dockerfile's final stage makes: the image a compose ``build:`` or the file alone runs."""

    doc: Document
    stage: Stage
    notes: list[str] = field(default_factory=list)
    built_by: list[str] = field(default_factory=list)  # the compose services that build it (and run its CMD)

    def argv(self, command: list[tuple[str, Location]] | None = None) -> list[tuple[str, Location]]:
        """The words the container runs: ENTRYPOINT then ``command`` (a compose service's), else CMD; a
        shell-form ENTRYPOINT runs alone (Docker gives it no CMD)."""
        entrypoint = self.stage.entrypoint or []
        if self.stage.shell_entrypoint:
            return entrypoint
        return [*entrypoint, *(command if command is not None else self.stage.cmd or [])]


def _instructions(text: str) -> list[tuple[str, int, str]]:
    """Each instruction's keyword, first line (1-based) and text as written (the comment lines inside it too,
    which dockerfile-parse leaves out of its content), as dockerfile-parse splits the file."""
    from dockerfile_parse import DockerfileParser  # imported when a Dockerfile is read, not at start-up

    lines = text.split("\n")
    parser = DockerfileParser(fileobj=io.StringIO(text), env_replace=False)
    return [
        (i["instruction"].upper(), i["startline"] + 1, "\n".join(lines[i["startline"] : i["endline"] + 1]))
        for i in parser.structure
        if i["instruction"] != "COMMENT"
    ]


def _body(text: str, keyword: str) -> str:
    """An instruction's text after its keyword, its comment lines (which Docker drops) kept as continuations
    so that every word stays on its line."""
    lines = text.split("\n")
    lines = [lines[0], *("\\" if line.lstrip().startswith("#") else line for line in lines[1:])]
    joined = "\n".join(lines)
    return " " * len(keyword) + joined[joined.upper().index(keyword) + len(keyword) :]


def _exec_form(body: str, doc: Document, line: int) -> list[tuple[str, Location]] | None:
    """The words of a JSON-array instruction (`CMD ["vllm", "serve"]`), each at its own line; None for shell form."""
    joined = re.sub(r"\\\n", " ", body).strip()
    if not joined.startswith("["):
        return None
    try:
        words = json.loads(joined)
    except ValueError:
        return None  # Docker runs a malformed array as a shell command too
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return None
    placed, at = [], 0
    for word in words:
        found = body.find(json.dumps(word)[1:-1], at)
        at = found if found >= 0 else at
        placed.append((word, Location(file=doc.name, line=line + body.count("\n", 0, at))))
    return placed


def _shell_form(body: str, doc: Document, line: int) -> list[tuple[str, Location]]:
    """A shell-form CMD or ENTRYPOINT: Docker runs it as `/bin/sh -c BODY`."""
    where = Location(file=doc.name, line=line)
    script = re.sub(r"^\s+", lambda m: "\n" * m.group().count("\n"), body)
    return [("/bin/sh", where), ("-c", where), (script, where)]


def _assignments(
    stage: Stage, body: str, doc: Document, line: int, legacy: bool
) -> list[tuple[str, str | None, Location]]:
    """`ENV A=1 B="x y"` / `ARG A=1`, expanded with the stage's ARGs and ENV; the legacy `ENV A 1` form too."""
    shell = Shell()
    shell.values = stage.values()  # read, not copied: a file of many ENV lines stays linear
    tokens = [t for t in tokenize_shell(body.strip(), line) if not t.separator]
    if legacy and tokens and "=" not in tokens[0].text:
        value, _ = shell.string(body.strip()[len(tokens[0].text) :].strip())
        return [(tokens[0].text, value, Location(file=doc.name, line=tokens[0].line))]
    found: list[tuple[str, str | None, Location]] = []
    for token in tokens:
        name, eq, _ = token.text.partition("=")
        text = shell.word(token).text
        found.append((name, text.partition("=")[2] if eq else None, Location(file=doc.name, line=token.line)))
    return found


def _arg(stage: Stage | None, top_args: dict[str, str], body: str, doc: Document, line: int) -> None:
    """`ARG NAME=default` (before the first FROM: for FROM lines; in a stage: for its RUN lines), and `ARG NAME`
    in a stage, which takes the value of the ARG of that name before the first FROM."""
    scope = stage if stage is not None else Stage(None, None, top_args)
    for name, value, _ in _assignments(scope, body, doc, line, False):
        if value is None:
            value = top_args.get(name) if stage is not None else None
        if value is not None:
            scope.args[name] = value
    scope.changed()
    if stage is None:
        top_args.update(scope.args)


def _run(stage: Stage, doc: Document, body: str, line: int, notes: list[str]) -> None:
    """The pip installs of one RUN (exec or shell form; its --mount and --network options left out)."""
    words = _exec_form(body, doc, line)
    if words is not None:
        stage.installs += pip_installs(words, stage.python)
        stage.python = python_selected([w for w, _ in words]) or stage.python
        return
    # BuildKit's options (--mount=..., --network=...), each line of them continued with a backslash
    script = re.sub(r"^((?:\s|\\\n)*--[\w-]+(=\S*)?)+", lambda m: re.sub(r"[^\n]", " ", m.group()), body)
    shell = Shell(stage.values())  # a copy: what a RUN script assigns ends with it
    run = ShellRun(Document(name=doc.name, text=script), None, shell)
    run.pins = stage.installs
    run.python = stage.python
    for _ in run.launches(line):
        pass  # a server a RUN starts stops with the build; only what it installs stays in the image
    stage.python = run.python
    notes += run.notes


# The official Python images (python:3.10-slim, docker.io/library/python:3.9): the Python their pip installs into.
_PYTHON_IMAGE = re.compile(r"^(?:(?:docker\.io/)?library/)?python:(?P<version>3\.\d{1,2})(?:[.-]|$)")


def _image_python(image: str) -> str | None:
    m = _PYTHON_IMAGE.match(image)
    return m["version"] if m else None


def _from(
    stages: list[Stage], top_args: dict[str, str], body: str, doc: Document, line: int, notes: list[str]
) -> Stage:
    """A new stage: on an image (its name expanded with the ARGs before the first FROM) or on an earlier stage."""
    words = [w for w in body.split() if not w.startswith("--")]
    name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
    base, why = Shell(top_args).string(words[0]) if words else ("", None)
    earlier = next((s for s in reversed(stages) if s.name is not None and s.name.lower() == base.lower()), None)
    if earlier is not None:
        return earlier.built_on(name)
    stage = Stage(name, (base, Location(file=doc.name, line=line)), python=_image_python(base))
    if why is not None:
        stage.unresolved[base] = why
        notes.append(f"{doc.name}:{line}: the base image {clip(base, 80)} is not known: {why}")
    return stage


def read_dockerfile(doc: Document) -> DockerBuild:
    """The final stage of the Dockerfile ``doc``: its base image, installs, ENV, ENTRYPOINT and CMD."""
    stages: list[Stage] = []
    top_args: dict[str, str] = {}
    notes: list[str] = []
    instructions = _instructions(doc.text)
    if len(instructions) > MAX_INSTRUCTIONS:
        raise AdviceError(
            "text", f"{doc.name}: more than {MAX_INSTRUCTIONS:,} instructions; no Dockerfile has that many"
        )
    for keyword, line, content in instructions:
        body = _body(content, keyword)
        if keyword == "FROM":
            stages.append(_from(stages, top_args, body, doc, line, notes))
        elif keyword == "ARG":
            _arg(stages[-1] if stages else None, top_args, body, doc, line)
        elif not stages:
            continue  # only ARG and comments come before the first FROM
        elif keyword == "ENV":
            stage = stages[-1]
            assigned = _assignments(stage, body, doc, line, True)
            stage.env += [EnvUse(name=n, value=v, location=at) for n, v, at in assigned if v is not None]
            stage.changed()
        elif keyword == "RUN":
            _run(stages[-1], doc, body, line, notes)
        elif keyword in ("COPY", "ADD") and re.match(r"\s*--from=", body):
            # files from another stage or image, which may be a whole environment with vLLM in it
            where = Location(file=doc.name, line=line)
            copied = body.split()[0]
            stages[-1].installs.append(
                ReleaseClaim(package="unknown", version=None, requirement=copied, location=where)
            )
        elif keyword in ("CMD", "ENTRYPOINT"):
            exec_words = _exec_form(body, doc, line)
            words = exec_words if exec_words is not None else _shell_form(body, doc, line)
            if keyword == "ENTRYPOINT":  # a new ENTRYPOINT resets the CMD of the stage it is built on
                stages[-1].entrypoint, stages[-1].cmd = words, None
                stages[-1].shell_entrypoint = exec_words is None
            else:
                stages[-1].cmd = words
    final = stages[-1] if stages else Stage(None, None)
    return DockerBuild(doc, final, notes)
