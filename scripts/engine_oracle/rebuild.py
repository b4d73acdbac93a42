"""Rebuild the engine records under tests/data/engine/ from the released vLLM, in one command.

For each release: a scratch virtual environment outside the repository with ``vllm==X.Y.Z`` installed
(reused when it already has that release), then ``oracle.py`` run with that environment's python
(the golden file ``golden-X.Y.Z.json``), ``schema_check.py`` (what the release's config classes accept,
``schema-X.Y.Z.json``), and with ``--rules`` also ``rules.py`` (the error-rule records ``rules-X.Y.Z.json``).
LMCache, which both import for the LMCache backend, is unpacked beside the environments from its wheel, never
installed into them.

    python scripts/engine_oracle/rebuild.py                      # every release of the golden files
    python scripts/engine_oracle/rebuild.py --release 0.33.0 --rules

vLLM is never a dependency of this project, of its tests or of ``.ci/run``: only this script installs
it, and only into the scratch directory (``--scratch``, by default ``vllm-caching-oracle`` in the
temporary directory). It needs the network for the first install of each release (about 3 to 7
minutes and 9 GB each) and none afterwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# The releases the golden files cover: the newest, and one from each era of the hybrid KV cache
# manager with connectors (before 0.22, 0.22, 0.23 onward; knowledge/connectors.yaml `hma`), of the
# default block size (16 tokens through 0.33, 64 from 0.34; flag.block-size), of Model Runner V2's wide
# default and in-flight tokens (0.26.0-0.28.0; engine.max-in-flight-tokens), of hybrid prefix caching on by
# default (0.28.0; engine.hybrid-prefix-caching-default), of the null block without checkpoint layers
# (0.30.0) and of Mamba2's checkpoint block (0.32.0; engine.mamba2-prefill-checkpoint); 0.27.1 is the last
# release with Model Runner V2's wide default and hybrid prefix caching still off, 0.29.0 the first with the
# prefill checkpoint field (engine.mamba-align-mode), 0.31.0 the last before Mamba2's checkpoint block, 0.23.0
# the first whose lmcache shorthand selects LMCacheMPConnector, 0.25.1 the last before Model Runner V2's wide default.
RELEASES = (
    "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0",
    "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0",
)  # fmt: skip
# rules.py also has cases for a release outside the golden files (the native shorthand before 0.14).
RULE_RELEASES = (*RELEASES, "0.13.0")
LMCACHE = "0.5.6"  # the LMCache the rules' LMCache cases run against (knowledge/ENGINE.md)
LMCACHE_DEPS = ("sortedcontainers", "aiofile", "aiofiles", "caio", "redis", "cachetools")


def _run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def _installed_vllm(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def venv_for(release: str, scratch: Path) -> Path:
    """The python of a scratch venv holding ``vllm==release``, created and installed if needed."""
    venv = scratch / f"venv-{release}"
    python = venv / "bin" / "python"
    if _installed_vllm(python) == release:
        return python
    _run([sys.executable, "-m", "venv", str(venv)])
    # vLLM's compiled extensions need the CUDA build of torch its release pins; a local wheel directory
    # (find-links, from the environment or a pip configuration file) may hold a CPU build of the same
    # version, which pip would prefer. So the install reads the package index alone.
    index_only = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"} | {"PIP_CONFIG_FILE": os.devnull}
    _run([str(python), "-m", "pip", "install", "--quiet", f"vllm=={release}"], env=index_only)
    found = _installed_vllm(python)
    if found != release:
        raise SystemExit(f"venv {venv} has vllm {found}, not {release}")
    cuda = subprocess.run(
        [str(python), "-c", "import torch; print(torch.version.cuda or '')"], capture_output=True, text=True
    ).stdout.strip()
    if not cuda:
        raise SystemExit(f"venv {venv} has a CPU build of torch; vLLM's extensions need the CUDA build it pins")
    return python


# transformers 5.17 moved the rotary embedding Pixtral imports (knowledge pin.transformers-pixtral-rotary), and a
# release whose requirement has no upper bound installs the newest: the oracle then cannot import the model
# registry. The newest transformers before the move:
TRANSFORMERS_BEFORE_PIXTRAL_MOVE = "5.16.1"
# Files of a pinned dependency that evaluate an annotation only Python 3.12 can (``array.array[int]``) at import.
ANNOTATIONS_FOR_312 = ("flashinfer/comm/fd_exchange.py",)


def make_importable(python: Path) -> None:
    """What the scratch venv needs so that vLLM's own modules import on this machine's Python; the engine code
    the oracle runs is not touched."""
    probe = (
        "import importlib.metadata as m, sys, sysconfig\n"
        "req = [r for r in m.requires('vllm') or [] if r.startswith('transformers') and 'extra' not in r]\n"
        "print(sysconfig.get_paths()['purelib']); print(sys.version_info >= (3, 12))\n"
        "print(m.version('transformers')); print(req[0] if req else '')"
    )
    lines = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True).stdout.splitlines()
    site, new_python, installed = Path(lines[0]), lines[1] == "True", lines[2]
    requirement = lines[3] if len(lines) > 3 else ""
    moved = tuple(int(p) for p in installed.split(".")[:2] if p.isdigit()) >= (5, 17)
    if moved and "<" not in requirement:
        index_only = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"} | {"PIP_CONFIG_FILE": os.devnull}
        pin = f"transformers=={TRANSFORMERS_BEFORE_PIXTRAL_MOVE}"
        _run([str(python), "-m", "pip", "install", "--quiet", pin], env=index_only)
    for relative in () if new_python else ANNOTATIONS_FOR_312:
        path = site / relative
        if path.exists() and "from __future__ import annotations" not in path.read_text(encoding="utf-8"):
            path.write_text("from __future__ import annotations\n" + path.read_text(encoding="utf-8"), encoding="utf-8")


def lmcache_path(python: Path, scratch: Path) -> str:
    """LMCache's wheel unpacked and its few scheduler-side dependencies, for rules.py --lmcache-dir."""
    unpacked, deps = scratch / f"lmcache-{LMCACHE}", scratch / f"lmcache-{LMCACHE}-deps"
    if not unpacked.exists():
        wheels = scratch / "wheels"
        _run([str(python), "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), f"lmcache=={LMCACHE}"])
        wheel = next(wheels.glob(f"lmcache-{LMCACHE}-*.whl"))
        _run([str(python), "-m", "zipfile", "-e", str(wheel), str(unpacked)])
    if not deps.exists():
        _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(deps), *LMCACHE_DEPS])
    return f"{unpacked}:{deps}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--release", action="append", help=f"a release to rebuild (repeatable; default {RELEASES})")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=Path(tempfile.gettempdir()) / "vllm-caching-oracle",
        help="where the scratch venvs live (outside the repository)",
    )
    parser.add_argument("--rules", action="store_true", help="also rebuild the error-rule records (rules-X.Y.Z.json)")
    parser.add_argument("--jobs", type=int, default=None, help="cells run at once (default: CPUs)")
    args = parser.parse_args(argv)
    scratch = args.scratch.resolve()
    if scratch.is_relative_to(REPO):
        parser.error("--scratch must be outside the repository")
    releases = args.release or list(RELEASES)
    unknown = [r for r in releases if r not in RULE_RELEASES]
    if unknown:
        parser.error(f"--release {unknown[0]}: the engine records cover {', '.join(RULE_RELEASES)}")
    scratch.mkdir(parents=True, exist_ok=True)
    for release in releases:
        started = time.monotonic()
        python = venv_for(release, scratch)
        make_importable(python)
        lmcache = lmcache_path(python, scratch)
        if release in RELEASES:
            jobs = ["--jobs", str(args.jobs)] if args.jobs else []
            # The offload section resolves the LMCache backend's connector class, which imports lmcache.
            env = {**os.environ, "ENGINE_ORACLE_LMCACHE_PATH": lmcache}
            _run([str(python), str(HERE / "oracle.py"), *jobs], cwd=REPO, env=env)
        if args.rules:
            rules = [str(python), str(HERE / "rules.py"), "--project-python", sys.executable]
            _run([*rules, "--lmcache-dir", lmcache], cwd=REPO)
        # what the release's config classes accept, against the schema's readings (schema-X.Y.Z.json)
        _run([str(python), str(HERE / "schema_check.py")], cwd=REPO, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
        print(f"vLLM {release}: {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
