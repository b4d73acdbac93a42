"""No file of the repository names a path that exists only on the machine it was written on.

A checkout, its user's home and the scratch space beside it are wherever someone put them: a
committed ``/work/scratch/src`` or ``/home/alice/...`` is true on one machine and wrong on every
other. Instructions name an option (``--src DIR``) or a variable (``$XDG_CACHE_HOME``) instead.

What counts as a machine's path: anything under ``/work/``, ``/home/<user>/``, ``/Users/<user>/``,
this checkout's own absolute path, this user's home, and pytest's or ``tempfile``'s scratch
directories under ``/tmp``. Paths inside a container or on a host the project configures are not
this machine's and stay allowed: ``/tmp/wheels`` in the Dockerfile, ``/dev/shm``, ``/mnt/nvme0/kv``,
``/opt/proxy`` in rendered manifests, ``/tmp/x`` as an injection payload in tests, and the Hugging
Face cache of a container that runs as root (``/root/.cache/huggingface``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

THIS_FILE = Path(__file__).resolve()
# Container paths under the home of a root user: the only place ``/root/...`` may appear.
ROOT_CONTAINER_PATHS = ("/root/.cache/huggingface",)
_START = r"(?<![\w.~-])"  # a path starts here, not inside a word or a relative path (framework/, a/work/)
MACHINE_PATH = re.compile(
    _START + r"(?:"
    r"/work/"
    r"|/home/[\w.-]+"
    r"|/Users/[\w.-]+"
    r"|/tmp/pytest-of-[\w.-]+"
    r"|/tmp/tmp[a-z0-9_]{8}\b"  # tempfile.mkdtemp()'s names
    r"|/tmp/vllm-caching-mcp-tests-"  # the suite's own cache directory (conftest)
    r")"
)


def _this_machine() -> re.Pattern[str]:
    """This checkout and this user's home, wherever they are (a home of ``/`` names nothing)."""
    places = {str(REPO)}
    home = Path.home()
    if home != Path("/"):
        places.add(str(home))
    alternatives = "|".join(re.escape(p) for p in sorted(places, key=len, reverse=True))
    return re.compile(_START + rf"(?:{alternatives})(?=/|\b)")


def repository_files() -> list[Path]:
    """Every file git tracks or would add (untracked but not ignored), as it is in the working tree."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist): the repository's files are not known")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [REPO / name for name in sorted(set(listed.split("\0"))) if name and (REPO / name).is_file()]


_PATH_REST = re.compile(r"[^\s'\"`)\]]*")


def machine_paths(text: str, this_machine: re.Pattern[str]) -> list[str]:
    """The machine paths ``text`` names, each whole as it is written."""
    starts = [m.start() for m in MACHINE_PATH.finditer(text)]
    starts += [m.start() for m in this_machine.finditer(text) if not text.startswith(ROOT_CONTAINER_PATHS, m.start())]
    return [_whole_path(text, start) for start in sorted(set(starts))]


def _whole_path(text: str, start: int) -> str:
    match = _PATH_REST.match(text, start)
    return match.group(0) if match else text[start:]


def test_no_repository_file_names_a_path_of_this_machine() -> None:
    this_machine = _this_machine()
    offending: list[str] = []
    for path in repository_files():
        if path == THIS_FILE:  # it spells the patterns out
            continue
        data = path.read_bytes()
        if b"\0" in data:  # binary
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            offending += [f"{path.relative_to(REPO)}:{number}: {hit}" for hit in machine_paths(line, this_machine)]
    assert not offending, "machine paths in the repository:\n" + "\n".join(offending)


@pytest.mark.parametrize(
    "text",
    [
        "extracted under /work/scratch/src",
        "see /home/alice/src/vllm",
        "cd /Users/bob/project",
        "written to /tmp/pytest-of-root/pytest-3/test0/knowledge",
        "left in /tmp/tmpab12cd_9/wheels",
    ],
)
def test_the_rule_catches_the_usual_machine_paths(text: str) -> None:
    assert machine_paths(text, _this_machine()), text


@pytest.mark.parametrize(
    "text",
    [
        "-v /root/.cache/huggingface:/root/.cache/huggingface",
        "--shm-size on /dev/shm",
        "COPY --from=build /dist/*.whl /tmp/wheels/",
        "disk: [/mnt/nvme0/kv]",
        'payload.format(canary="/tmp/x")',
        "the framework/ directory and a relative a/work/b path",
        "python scripts/verify_knowledge.py --src DIR",
    ],
)
def test_the_rule_leaves_container_and_example_paths_alone(text: str) -> None:
    assert not machine_paths(text, _this_machine()), text


def test_this_checkout_and_home_are_machine_paths_wherever_they_are() -> None:
    assert machine_paths(f"open {REPO}/knowledge/flags.yaml", _this_machine())
