"""Every command the documents show is run, and what it prints is compared with the output shown.

The documents are README.md, SKILL.md (its plugin copy is kept identical by test_integration_paths.py),
docs/ and integrations/. A command is a line of a ```bash / ```sh block (continued by a trailing
backslash, a heredoc body included), or a `$ ` line of a ```console block. A ```bash block followed
directly by a ```text block shows what the whole block prints; in a ```console block a command's
output is the lines up to the next `$ `. The shown output must match exactly, except where it says
`…`: inside a line that is any text, and a line of only `…` is any number of lines.

Each document runs in a fresh directory holding a copy of `examples/`, its blocks in order (a later
block reads the files an earlier one wrote). `vllm-caching` runs in this process through `cli.main`,
its stdout written to a `>` file or piped into the program after `|` (`python3`, `jq`); the few
other programs the documents use on local files (`cat`, `printf`, `sed`, `echo`) run in bash. A
command that needs the network, a wheel download or another program (Docker, kubectl, pip, Claude
Code) is in `NOT_RUN` with the reason and how it is checked instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, Ran, run_in_process
from vllm_caching_mcp import cli
from vllm_caching_mcp.tools import ToolInputError

EXAMPLES = REPO / "examples"

# Programs besides vllm-caching that shown commands may run here: all read or write files of the
# document's scratch directory only.
LOCAL_PROGRAMS = {"cat", "printf", "sed", "echo"}
PIPE_PROGRAMS = {"python3", "jq"}


@dataclasses.dataclass(frozen=True)
class NotRun:
    reason: str
    check: str  # "parse": a vllm-caching command, parsed and its arguments validated, not run;
    # "script": a repository script, whose --help must list every option shown;
    # otherwise the test file (or files) that checks it in its own way.


NOT_RUN: dict[str, NotRun] = {
    "python -m pip install .": NotRun("installs the package", "tests/test_install.py"),
    "python -m pip install -e '.[test]'": NotRun("installs the package and its test extra", "tests/test_install.py"),
    "python -m pytest -q -n auto": NotRun("the whole suite, this test among it", "tests/test_install.py"),
    "claude mcp add vllm-caching -- vllm-caching-mcp": NotRun("needs Claude Code", "tests/test_integration_paths.py"),
    "claude mcp add --scope project vllm-caching -- vllm-caching-mcp": NotRun(
        "needs Claude Code", "tests/test_integration_paths.py"
    ),
    "pipx install .": NotRun("needs pipx and the network", "tests/test_integration_paths.py"),
    "uv tool install .": NotRun("needs uv and the network", "tests/test_integration_paths.py"),
    "docker build -t vllm-caching-mcp .": NotRun("needs Docker", "tests/test_deploy_files.py"),
    'docker run --rm -p 8000:8000 -e MCP_TOKEN="$(openssl rand -hex 24)" vllm-caching-mcp '
    "--transport streamable-http --host 0.0.0.0 --allowed-host '*' --auth-token-env MCP_TOKEN": NotRun(
        "needs Docker", "tests/test_deploy_files.py"
    ),
    'kubectl create secret generic vllm-caching-mcp --from-literal=token="$(openssl rand -hex 24)"': NotRun(
        "needs a cluster", "tests/test_deploy_files.py"
    ),
    "kubectl apply -f deploy/kubernetes.yaml": NotRun("needs a cluster", "tests/test_deploy_files.py"),
    "python scripts/verify_knowledge.py --vllm 0.33.0 --lmcache 0.5.6 --report knowledge/VERIFICATION.md": NotRun(
        "downloads the vLLM and LMCache wheels", "script"
    ),
    "python scripts/engine_oracle/rebuild.py": NotRun(
        "installs each covered vLLM release into a scratch venv and runs its engine", "script"
    ),
    "vllm-caching check-bug-status --version 0.22.1 --bugs LMCache/LMCache#2942": NotRun("asks GitHub", "parse"),
    "vllm-caching check-advisories --version 0.22.1 --configured --api-key --connectors NixlConnector": NotRun(
        "asks the GitHub Advisory Database", "parse"
    ),
    "vllm-caching inspect-image --image v0.22.1": NotRun("asks the container registry", "parse"),
    "git diff --name-only --diff-filter=d main...HEAD -- '*.yaml' '*.yml' '*.sh' '*.env' ':!*/templates/*' "
    "| xargs -d '\\n' vllm-caching review --allow-empty --fail-on error --": NotRun(
        "needs a git branch with changes against main", "tests/test_action.py"
    ),
    "vllm-caching review --allow-empty --format sarif --fail-on error -- deploy/serve.sh > vllm-caching.sarif": NotRun(
        "names a file of the reader's repository", "tests/test_action.py"
    ),
    "vllm-caching review --fail-on error --allow-empty -- deploy/serve.sh": NotRun(
        "names a file of the reader's repository", "tests/test_pre_commit.py"
    ),
    "pre-commit run vllm-caching-review --all-files": NotRun(
        "builds the hook's environment from the package index", "tests/test_pre_commit.py"
    ),
}


def documents() -> list[Path]:
    found = [REPO / "README.md", REPO / "SKILL.md", *sorted((REPO / "docs").rglob("*.md"))]
    found += sorted(p for p in (REPO / "integrations").rglob("*.md") if p.name != "SKILL.md")
    return found


# -- reading the documents --------------------------------------------------------------------------


@dataclasses.dataclass
class Shown:
    """What a document shows in one place: commands, and the output they print (None: not shown)."""

    where: str
    commands: list[str]
    output: str | None


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*\n", re.M | re.S)
_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)")


def shell_commands(text: str) -> list[str]:
    """The commands of a shell block: continued lines joined (their newline kept), heredocs attached."""
    commands: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = line
        while command.endswith("\\"):
            command += "\n" + next(lines, "")
        heredoc = _HEREDOC.search(command)
        if heredoc:
            for body in lines:
                command += "\n" + body
                if body == heredoc.group(1):
                    break
        commands.append(command)
    return commands


def console_parts(text: str) -> Iterator[tuple[str, str]]:
    """Each `$ ` command of a console block and the output lines under it."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        i += 1
        while command.endswith("\\") and i < len(lines):
            command += "\n" + lines[i]
            i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        yield command, "\n".join(output).strip("\n")


def shown_in(path: Path) -> list[Shown]:
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(REPO).as_posix()
    blocks = list(_FENCE.finditer(text))
    found: list[Shown] = []
    for index, block in enumerate(blocks):
        kind, body = block.group(1), block.group(2)
        where = f"{name}:{text.count(chr(10), 0, block.start()) + 1}"
        if kind in ("bash", "sh"):
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            follows = after is not None and after.group(1) == "text" and not text[block.end() : after.start()].strip()
            output = after.group(2).rstrip("\n") if after is not None and follows else None
            found.append(Shown(where, shell_commands(body), output))
        elif kind == "console":
            found += [Shown(where, [command], output or None) for command, output in console_parts(body)]
    return found


def one_line(command: str) -> str:
    """A command with its continuations and spacing undone, as NOT_RUN names it."""
    uncommented = (re.sub(r"\s+# .*$", "", part) for part in command.split("\\\n"))
    return " ".join(" ".join(uncommented).split())


# -- running them -----------------------------------------------------------------------------------


class CommandFailed(Exception):
    """A shown command did not run as shown (an AssertionError inside the tool is a crash instead)."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise CommandFailed(message)


@dataclasses.dataclass
class Session:
    """A document's scratch directory and the exit status of its last command (for `echo $?`)."""

    cwd: Path
    status: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)


def run_cli(argv: list[str]) -> Ran:
    return run_in_process(cli.main, *argv)


def run_command(command: str, session: Session) -> str:
    """Run one shown command and return what it prints; CommandFailed when it does not run as shown."""
    line = one_line(command)
    if line in NOT_RUN:
        check_not_run(line, NOT_RUN[line])
        return ""
    parts = [part.strip() for part in line.split(" && ")] if " && " in line and "<<" not in command else [command]
    if len(parts) > 1:
        return "".join(run_command(part, session) for part in parts)
    program = command.split(None, 1)[0]
    if program == "vllm-caching":
        return run_vllm_caching(shlex.split(line), session)  # `#` starts a comment only after a space
    if program not in LOCAL_PROGRAMS:
        raise CommandFailed(f"{line}: this test does not run {program}; add it to NOT_RUN with the reason")
    done = subprocess.run(
        ["bash", "-c", f"(exit {session.status}); {command}"],
        cwd=session.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    expect(done.returncode == 0, f"{line} exited {done.returncode}: {done.stderr}")
    session.status = 0
    return done.stdout


def run_vllm_caching(words: list[str], session: Session) -> str:
    """``vllm-caching ARGS [> FILE] [| PROGRAM ARGS [> FILE]]``: the CLI in this process."""
    argv, stdout_to, pipe = split_redirects(words[1:])
    ran = run_cli(argv)
    shown = shlex.join(words)
    allowed = {0, 1} if argv[0] == "review" else {0}  # review exits 1 when a finding reaches --fail-on
    expect(ran.returncode in allowed, f"{shown} exited {ran.returncode}: {ran.stderr}")
    expect(ran.stderr == "", f"{shown} wrote to stderr: {ran.stderr}")
    session.status = ran.returncode
    printed = ran.stdout
    if pipe:
        program, pipe_to, _ = split_redirects(pipe)
        expect(program[0] in PIPE_PROGRAMS, f"{shown}: this test pipes only into {sorted(PIPE_PROGRAMS)}")
        if shutil.which(program[0]) is None:
            session.skipped.append(f"{shown} ({program[0]} is not installed)")
            return ""
        done = subprocess.run(program, input=printed, cwd=session.cwd, capture_output=True, text=True, timeout=60)
        expect(done.returncode == 0, f"{shown}: {program[0]} exited {done.returncode}: {done.stderr}")
        printed, stdout_to = done.stdout, pipe_to
    if stdout_to:
        (session.cwd / stdout_to).write_text(printed, encoding="utf-8")
        return ""
    return printed


def split_redirects(words: list[str]) -> tuple[list[str], str | None, list[str]]:
    """``ARGS [> FILE] [| REST]`` → ARGS, FILE, REST."""
    pipe = words.index("|") if "|" in words else len(words)
    head, rest = words[:pipe], words[pipe + 1 :]
    if ">" in head:
        at = head.index(">")
        return head[:at], head[at + 1], rest
    return head, None, rest


def check_not_run(line: str, why: NotRun) -> None:
    words = shlex.split(line)
    if why.check == "parse":
        try:
            _, arguments = cli.tool_arguments(words[1:])
        except (ToolInputError, SystemExit) as exc:
            raise CommandFailed(f"{line}: does not parse ({exc})") from None
        expect(arguments, f"{line}: gives no arguments")
        help_text = run_cli([words[1], "--help"]).stdout
        unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in help_text]
        expect(unknown == [], f"{line}: {words[1]} --help lists no {unknown}")
    elif why.check == "script":
        script = REPO / words[1]
        # A subprocess: the script imports the package next to it by its own name, as run from a shell.
        done = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
        expect(done.returncode == 0, f"{line}: {words[1]} --help exited {done.returncode}: {done.stderr}")
        help_text = done.stdout
        unknown = [w for w in words[2:] if w.startswith("--") and w not in help_text]
        expect(unknown == [], f"{line}: {words[1]} takes no option {unknown}")
    else:
        expect((REPO / why.check).is_file(), f"{line}: NOT_RUN names {why.check}, which does not exist")


# -- comparing --------------------------------------------------------------------------------------


def matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is ``shown``, where ``…`` in a line is any text and a `…` line any lines."""
    pattern = []
    for line in shown.splitlines():
        if line.strip() == "…":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.fullmatch("".join(pattern), printed.rstrip("\n") + "\n", re.S) is not None


def difference(shown: str, printed: str) -> str:
    return "\n".join(difflib.unified_diff(shown.splitlines(), printed.splitlines(), "shown", "printed", lineterm=""))


@contextlib.contextmanager
def scratch_directory(tmp_path: Path) -> Iterator[Path]:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(previous)


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_command_shown_runs_and_prints_what_is_shown(document: Path, tmp_path: Path) -> None:
    problems: list[str] = []
    with scratch_directory(tmp_path) as cwd:
        session = Session(cwd)
        for shown in shown_in(document):
            try:
                printed = "".join(run_command(command, session) for command in shown.commands)
            except CommandFailed as failed:
                problems.append(f"{shown.where}: {failed}")
                continue
            if shown.output is not None and not matches(shown.output, printed):
                problems.append(f"{shown.where}: prints other than shown:\n{difference(shown.output, printed)}")
    assert problems == [], "\n\n".join(problems)
    if session.skipped:
        pytest.skip("not run: " + "; ".join(session.skipped))


def test_every_command_not_run_is_still_shown() -> None:
    shown = {one_line(c) for path in documents() for s in shown_in(path) for c in s.commands}
    shown |= {part.strip() for line in shown for part in line.split(" && ")}
    stale = [line for line in NOT_RUN if line not in shown]
    assert stale == [], f"NOT_RUN lists commands no document shows any more: {stale}"


def test_the_documents_show_commands_and_outputs() -> None:
    # The reader found them: a change in fences or prompts must not make this test check nothing.
    everything = [s for path in documents() for s in shown_in(path)]
    assert sum(len(s.commands) for s in everything) >= 40
    assert sum(s.output is not None for s in everything) >= 20


def test_the_output_comparison_is_exact_except_where_elided() -> None:
    assert matches("a\nb", "a\nb\n")
    assert not matches("a\nb", "a\nb\nc")
    assert not matches("a\nb", "a\nB")
    assert matches("a …\n…\nz", "a b c\nx\ny\nz")
    assert matches("a\n…\nz", "a\nz")
    assert not matches("a …", "b a")


# -- @FILE --------------------------------------------------------------------------------------------


def test_a_documents_option_takes_files(tmp_path: Path) -> None:
    with scratch_directory(tmp_path):
        files = ["examples/serve.sh", "examples/deploy.yaml"]
        spec, arguments = cli.tool_arguments(
            ["diagnose", "--symptoms", "ttft_high", "--deployment", f"@{files[0]}", "--deployment", f"@{files[1]}"]
        )
        assert spec.name == "diagnose"
        assert arguments["deployment"] == [{"name": f, "text": Path(f).read_text(encoding="utf-8")} for f in files]
        # The generated review-deployment subcommand reads its documents the same way, and names them.
        out = run_cli(["review-deployment", "--documents", f"@{files[0]}", "--version", "0.33.0"])
    assert out.returncode == 0, out.stderr
    assert "pitfall.unknown-flag  examples/serve.sh:12" in out.stdout


def test_at_file_errors_name_the_option_and_the_file(tmp_path: Path) -> None:
    with scratch_directory(tmp_path):
        Path("big.txt").write_bytes(b"#" * (cli.MAX_FILE_BYTES + 1))
        Path("binary.txt").write_bytes(b"\xff\xfe metrics")
        cases = {
            "@missing.txt": "--metrics-before: cannot read 'missing.txt' (No such file or directory)",
            "@examples": "--metrics-before: cannot read 'examples' (Is a directory)",
            "@big.txt": f"--metrics-before: 'big.txt' is larger than {cli.MAX_FILE_BYTES:,} bytes",
            "@binary.txt": "--metrics-before: 'binary.txt' is not UTF-8 text",
        }
        for value, message in cases.items():
            out = run_cli(["diagnose", "--symptoms", "ttft_high", "--metrics-before", value])
            assert out.returncode == 2, (value, out.stdout)
            assert out.stderr.startswith(f"vllm-caching: error: {message}"), (value, out.stderr)
            assert out.stderr.count("\n") == 1, out.stderr
        out = run_cli(["render-config", "--backend", "native_cpu", "--model", "m", "--choice", "@examples/serve.sh"])
        assert out.returncode == 2
        assert "--choice: 'examples/serve.sh' is not valid JSON" in out.stderr


def test_at_file_reads_no_more_than_the_bound(tmp_path: Path) -> None:
    # /dev/zero never ends: the read must stop at the bound instead of filling the memory.
    out = run_cli(["diagnose", "--symptoms", "ttft_high", "--metrics-before", "@/dev/zero"])
    assert out.returncode == 2
    assert f"'/dev/zero' is larger than {cli.MAX_FILE_BYTES:,} bytes" in out.stderr


def test_at_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO((EXAMPLES / "metrics-after.txt").read_text(encoding="utf-8")))
    out = run_cli(["diagnose", "--symptoms", "preemptions", "--version", "0.33.0", "--metrics-before", "@-"])
    assert out.returncode == 0, out.stderr
    assert "gpu_kv_usage: 0.97" in out.stdout


def test_the_help_says_text_options_take_files() -> None:
    for argv in (["--help"], ["diagnose", "--help"]):
        assert "@FILE" in " ".join(run_cli(argv).stdout.split()), argv


if __name__ == "__main__":
    # python tests/test_docs_commands.py [--write] [DOCUMENT...]: each shown command and whether it
    # prints what is shown; --write puts what it prints now into a shown output with no `…` in it.
    # Read each change before keeping it: the shown output is what a reader trusts.
    import tempfile

    write = "--write" in sys.argv
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")]
    for document in documents():
        name = document.relative_to(REPO).as_posix()
        if chosen and name not in chosen:
            continue
        with scratch_directory(Path(tempfile.mkdtemp())) as cwd:
            session = Session(cwd)
            for shown in shown_in(document):
                try:
                    printed = "".join(run_command(command, session) for command in shown.commands)
                except CommandFailed as failed:
                    print(f"FAILS   {shown.where} {failed}")
                    continue
                same = shown.output is None or matches(shown.output, printed)
                print(f"{'ok     ' if same else 'DIFFERS'} {shown.where} {one_line(shown.commands[-1])[:90]}")
                if same or shown.output is None or "…" in shown.output or not write:
                    continue
                text = document.read_text(encoding="utf-8")
                block = f"```text\n{shown.output}\n```\n"
                at = text.index(block, text.index(shown.commands[-1].split("\n")[0]))
                document.write_text(text[:at] + f"```text\n{printed.rstrip()}\n```\n" + text[at + len(block) :])
