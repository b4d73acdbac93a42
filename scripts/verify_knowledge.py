"""Verify the knowledge's checkable claims against the released vLLM and LMCache wheels.

    python scripts/verify_knowledge.py --vllm 0.33.0 [--lmcache 0.5.6] [--src DIR]
                                       [--no-download] [--update] [--report FILE] [--only ID]
                                       [--reproduce]

Each fact gets probes: written next to it in the YAML (``probes:`` on an entry or on one of its
ranged values) or implied by its kind (a connector is registered in KVConnectorFactory, a CLI
flag is an ``add_argument`` option, a metric name is a string in the code, a vLLM environment
variable is read in envs.py, an LMCache one is a config key, an extra_config key is read by the
files the entry cites; defaults, ``Literal`` values and ``SupportsHMA`` follow from ``config_path``,
``defaults``, ``accepted_values`` and ``hma``). A probe runs on the first and last release of every
stretch in which its expectation is the same (so on both sides of each boundary, and on the
newest), reading the source with ``ast``: nothing is imported, no GPU is needed.

An advisory range whose end was read in the wheels (``fix_basis: derived``, ``unfixed_through``)
carries ``probes`` on the vulnerable code the fix removes: they must hold in the last release the
range covers and in ``unfixed_through``, and fail in ``fixed_in`` and the newest release. Such an
advisory is reported like a fact, under its GHSA or CVE id (``not_checkable`` while it has no probe);
``--update`` records its verdict but leaves advisories.yaml as written.

Wheels come from ``--src DIR`` (repeatable; ``--wheel-dir`` is the older spelling; default
``$XDG_CACHE_HOME/vllm-caching-mcp/wheels``), as ``vllm-0.33.0-*.whl`` files read in place or as
extracted trees ``vllm-0.33.0/vllm/...``; a missing one is fetched into the last ``--src`` with
``pip download --no-deps`` unless ``--no-download`` is given. A release published without a wheel
(``wheel: false`` in releases.yaml, LMCache 0.3.0) is read from its extracted source distribution,
``lmcache-0.3.0-sdist/lmcache/...`` as scripts/check_sources.py extracts it, fetched the same way. A
directory inside the repository is refused.

Each fact is reported verified, contradicted or not checkable, with file and line. ``--update``
rewrites ``verified_at`` (and the newest source pointer) of verified facts in place, keeping the
YAML's comments and layout, and writes ``knowledge/verification.yaml``. ``--report FILE`` writes
the Markdown report; text above the marker line in an existing report is kept. ``--only ID``
(repeatable, ``fnmatch`` patterns such as ``'CVE-*'``) checks only those facts, fetching only
their wheels; with ``--update`` their verdicts replace theirs in the existing verification.yaml
and the rest of it (dates and releases included) is kept. Exit status 1 when any fact is
contradicted, 2 on bad arguments or missing wheels.

``--reproduce`` also re-runs the failure reproductions the pitfalls record (``failure: reproduced``,
scripts under ``scripts/reproductions/``) on this machine and prints REPRODUCED, DIFFERS or NOT RUN
(the script cannot run here) for each; one that differs makes the exit status 1.

The work is done by the ``verifier`` package next to this file: source (a release read in place),
download, readers and env_readers (facts out of the ast), probes, plan (which releases each probe
runs on), run (checks and verdicts), report (VERIFICATION.md, verification.yaml), rewrite (--update),
reproduce (--reproduce) and cli.
"""

from __future__ import annotations

import sys

# Run as a script, Python puts this file's directory first on the import path: the package next to
# it imports by its own name, and vllm_caching_mcp comes from the installed project.
from verifier.cli import main

if __name__ == "__main__":
    sys.exit(main())
