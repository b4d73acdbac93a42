"""pip installs of vLLM or LMCache in a command's words (`pip install vllm==0.11.0`, `uv pip install
"vllm[audio]==0.11.0"`, `python -m pip install -U lmcache==0.3.9`): what each says about the release
that then runs."""

from __future__ import annotations

import re
from typing import Literal

from .bounds import clip
from .model import Location, ReleaseClaim

# pip's (and uv pip's) install options that take the next word as their value, so that value is no
# requirement (`-r requirements.txt`, `--extra-index-url URL`).
_VALUED = {
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--python", "-p", "--platform",
    "--python-version", "--implementation", "--abi", "--trusted-host", "--cache-dir", "--src",
    "--upgrade-strategy", "--progress-bar", "--log", "--proxy", "--retries", "--timeout", "--exists-action",
    "--cert", "--client-cert", "--index-strategy", "--torch-backend", "--config-settings", "-C",
    "--global-option", "--no-binary", "--only-binary", "--extra", "--index", "--default-index",
}  # fmt: skip

_UPGRADE = {"-U", "--upgrade", "--force-reinstall", "--reinstall", "-I", "--ignore-installed"}

# vLLM and LMCache, and the packages a deployment pins beside vLLM whose range vLLM's own Requires-Dist sets.
_PACKAGES: tuple[Literal["vllm", "lmcache", "torch", "transformers"], ...] = (
    "vllm",
    "lmcache",
    "torch",
    "transformers",
)

# A requirement: the distribution name (PEP 503 normalised below), extras, then the version specifiers.
_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(?P<spec>[=<>!~].*)?$")
_EXACT = re.compile(r"^===?\s*v?(?P<version>\d+\.\d+\.\d+(\.post\d+)?)\s*(;.*)?$")
# A wheel named by its file or URL: vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl (a local build tag, +cu128, kept out).
_WHEEL = re.compile(r"(^|/)(?P<name>vllm|lmcache)-(?P<version>\d+\.\d+\.\d+(\.post\d+)?)(\+[\w.]+)?-[^/]*\.whl$", re.I)


def _install_start(texts: list[str]) -> int | None:
    """The index of the first word after `pip install` (pip, pip3, python -m pip, uv pip), or None."""
    for i, word in enumerate(texts[:-1]):
        base = word.rsplit("/", 1)[-1]
        if texts[i + 1] != "install":
            continue
        if re.fullmatch(r"pip(3(\.\d+)?)?", base) or (base == "pip" and i > 0 and texts[i - 1] in ("uv", "-m")):
            return i + 2
    return None


# Python named by a version: 3.9, 3.10.4, python3.11, cpython-3.12 (as conda, uv, pyenv and virtualenv take it).
_PYTHON_VERSION = re.compile(r"^(?:c?python-?)?(?P<version>3\.\d{1,2})(\.\d+)?$")
_PYTHON_EXECUTABLE = re.compile(r"^(?:.*/)?(?:python|pip)(?P<version>3\.\d{1,2})$")
_CONDA_PYTHON = re.compile(r"^python(?:==?|=)(?P<version>3\.\d{1,2})(?:[.*]|$)")


def _python_version(word: str) -> str | None:
    m = _PYTHON_VERSION.match(word) or _PYTHON_EXECUTABLE.match(word)
    return m["version"] if m else None


def python_selected(texts: list[str]) -> str | None:
    """The Python a command makes the one later commands run (`conda create -n x python=3.9`, `uv venv --python
    3.10`, `python3.11 -m venv .venv`, `virtualenv -p python3.9 x`, `pyenv global 3.10.4`, `uv python pin 3.12`)."""
    if not texts:
        return None
    tool = texts[0].rsplit("/", 1)[-1]
    if tool in ("conda", "mamba", "micromamba") and len(texts) > 1 and texts[1] in ("create", "install"):
        return next((m["version"] for w in texts[2:] if (m := _CONDA_PYTHON.match(w))), None)
    if tool == "pyenv" and len(texts) > 2 and texts[1] in ("global", "local", "shell"):
        return _python_version(texts[2])
    if tool == "uv" and texts[1:3] == ["python", "pin"] and len(texts) > 3:
        return _python_version(texts[3])
    if (tool == "uv" and texts[1:2] == ["venv"]) or tool == "virtualenv":
        return _python_option(texts)
    if len(texts) > 2 and texts[1:3] == ["-m", "venv"]:
        return _python_version(tool)
    return None


def _python_option(texts: list[str]) -> str | None:
    """The Python a command's --python / -p option names (`--python 3.10`, `--python=python3.10`, `-p 3.10`)."""
    for i, word in enumerate(texts):
        if word in ("--python", "-p") and i + 1 < len(texts):
            return _python_version(texts[i + 1])
        if word.startswith("--python="):
            return _python_version(word.partition("=")[2])
    return None


def install_python(texts: list[str], selected: str | None) -> str | None:
    """The Python a `pip install` command installs into: its own (`python3.9 -m pip`, `pip3.10`, `uv pip install
    --python 3.11`), else ``selected``, the one the commands before it chose."""
    start = _install_start(texts)
    if start is None:
        return selected
    pip_at = start - 2
    own = _python_version(texts[pip_at])
    if texts[pip_at] == "pip" and pip_at >= 2 and texts[pip_at - 1] == "-m":
        own = _python_version(texts[pip_at - 2])
    elif pip_at >= 1 and texts[pip_at - 1] == "uv":
        own = _python_option(texts[start:])
    return own or selected


def requirement_claim(word: str, where: Location, upgrade: bool = False) -> ReleaseClaim | None:
    """What one requirement says of vLLM or LMCache (a word of `pip install`, an item of a pip list such as Ray's
    runtime_env or a requirements file); None when it names neither."""
    wheel = _WHEEL.search(word)
    if wheel is not None:
        package = wheel["name"].lower()
        version: str | None = wheel["version"]
    else:
        m = _REQUIREMENT.match(word.strip())
        if m is None:
            return None
        package = re.sub(r"[-_.]+", "-", m["name"]).lower()
        exact = _EXACT.match(m["spec"].strip()) if m["spec"] else None
        version = exact["version"] if exact else None
    for known in _PACKAGES:
        if package == known:
            return ReleaseClaim(
                package=known, version=version, requirement=clip(word, 120), upgrade=upgrade, location=where
            )
    return None


def pip_installs(words: list[tuple[str, Location]], python: str | None = None) -> list[ReleaseClaim]:
    """The vLLM and LMCache requirements a `pip install` command names, in order; none for another command.
    ``python``: the Python the commands before it chose, where the files say it."""
    texts = [w for w, _ in words]
    start = _install_start(texts)
    if start is None:
        return []
    python = install_python(texts, python)
    upgrade = any(w in _UPGRADE for w in texts[start:])
    found: list[ReleaseClaim] = []
    skip = False
    rest = words[start:]
    for i, (word, where) in enumerate(rest):
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _VALUED
            if word in _FROM_ELSEWHERE and i + 1 < len(rest):
                found.append(_unknown(f"{word} {rest[i + 1][0]}", where))
        elif (claim := requirement_claim(word, where, upgrade)) is not None:
            found.append(claim.model_copy(update={"python": python}) if python else claim)
        elif _SOURCE.search(word):
            found.append(_unknown(word, where))
    return found


# Installs whose packages the files do not name: a requirements file, a source tree, a URL or a local archive.
_FROM_ELSEWHERE = {"-r", "--requirement", "-e", "--editable"}
_SOURCE = re.compile(r"^(\.|/|~)|://|^git\+|\.(whl|tar\.gz|zip)$")


def _unknown(requirement: str, where: Location) -> ReleaseClaim:
    return ReleaseClaim(package="unknown", version=None, requirement=clip(requirement, 120), location=where)


def requirement_specifier(requirement: str) -> str:
    """The version specifiers of a requirement as written (`>=0.10.0` of `vllm[audio]>=0.10.0`), else ''."""
    m = _REQUIREMENT.match(requirement.strip())
    return (m["spec"] or "").split(";", 1)[0].strip() if m else ""
