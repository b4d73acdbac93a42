"""The command line of scripts/verify_knowledge.py: arguments, the run, what it prints and writes."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from vllm_caching_mcp.knowledge import Knowledge, load_knowledge
from vllm_caching_mcp.knowledge_files import KnowledgeError
from vllm_caching_mcp.versions import Version, parse_version

from .download import default_src, locate
from .plan import AdvisoryFact
from .report import counts, merge_status, render_report, status_yaml, write_report
from .reproduce import rerun
from .rewrite import apply_updates
from .run import Verdict, verify
from .schema_sample import sample
from .source import SourceTree

REPO = Path(__file__).resolve().parents[2]
DESCRIPTION = "Verify the knowledge's checkable claims against the released vLLM and LMCache wheels."


def _release(text: str) -> Version:
    """A ``--vllm``/``--lmcache`` value, parsed as the knowledge parses release versions."""
    try:
        return parse_version(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a release version (MAJOR.MINOR.PATCH, e.g. 0.33.0)"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument(
        "--vllm", type=_release, required=True, help="the newest vLLM release to verify against, e.g. 0.33.0"
    )
    parser.add_argument("--lmcache", type=_release, help="the newest LMCache release to verify against, e.g. 0.5.6")
    parser.add_argument(
        "--src",
        "--wheel-dir",
        dest="src",
        type=Path,
        action="append",
        metavar="DIR",
        help="wheels or extracted trees, outside the repository (repeatable; missing wheels are downloaded into "
        "the last one; default $XDG_CACHE_HOME/vllm-caching-mcp/wheels)",
    )
    parser.add_argument("--knowledge", type=Path, default=REPO / "knowledge")
    parser.add_argument("--no-download", action="store_true", help="use only the wheels already present")
    parser.add_argument("--update", action="store_true", help="refresh verified facts and write verification.yaml")
    parser.add_argument("--report", type=Path, help="write the Markdown report here")
    parser.add_argument("--date", type=dt.date.fromisoformat, default=dt.date.today(), help=argparse.SUPPRESS)
    parser.add_argument("--verbose", action="store_true", help="print every probe run")
    parser.add_argument(
        "--only", action="append", metavar="ID", help="check only facts whose id matches (fnmatch; repeatable)"
    )
    parser.add_argument(
        "--schema-sample",
        type=int,
        default=0,
        metavar="N",
        help="also probe N random entries of engine_schema.yaml at their boundaries (wheels already present only)",
    )
    parser.add_argument("--seed", type=int, help="the sample's seed (default: the date), to repeat a run")
    parser.add_argument(
        "--reproduce",
        action="store_true",
        help="also re-run the failure reproductions pitfalls record (scripts/reproductions/) on this machine",
    )
    return parser


def _source_dirs(parser: argparse.ArgumentParser, given: list[Path] | None) -> list[Path]:
    """The ``--src`` directories (the cache when none is given); none may be inside the repository."""
    for directory in given or []:
        if directory.resolve().is_relative_to(REPO):
            parser.error(f"--src: {directory} is inside the repository; give a directory outside it for the wheels")
    return given or [default_src()]


def _newest(parser: argparse.ArgumentParser, args: argparse.Namespace, knowledge: Knowledge) -> dict[str, Version]:
    """The newest release of each package to verify against, each one a release the knowledge lists."""
    newest: dict[str, Version] = {}
    for package, version in (("vllm", args.vllm), ("lmcache", args.lmcache)):
        if version is None:
            continue
        if version not in knowledge.release_versions(package):
            parser.error(f"--{package}: {version} is not a {package} release in knowledge/releases.yaml")
        newest[package] = version
    return newest


def _print_results(verdicts: list[Verdict], missing: dict[str, list[str]], verbose: bool) -> None:
    for verdict in verdicts:
        if verbose:
            for c in verdict.checks:
                where = (c.observed.where or "") if c.observed else ""
                print(f"  {c.status:7} {verdict.entry.id}: {c.describe()} {where} {c.reason}".rstrip())
        if verdict.status == "contradicted":
            print(f"CONTRADICTED {verdict.entry.id} ({verdict.file}): {verdict.detail()}")
    tally = counts(verdicts)
    print(
        f"{len(verdicts)} facts: {tally['verified']} verified, {tally['contradicted']} contradicted, "
        f"{tally['not_checkable']} not checkable"
    )
    for package, versions in missing.items():
        print(f"missing {package} wheels (their checks are not checkable): {', '.join(versions)}")


def _update(
    args: argparse.Namespace, knowledge: Knowledge, verdicts: list[Verdict], newest: dict[str, Version]
) -> None:
    """Rewrite the verified facts' files and verification.yaml (merged into the existing one for ``--only``)."""
    status_file = args.knowledge / "verification.yaml"
    changed = apply_updates(args.knowledge, verdicts, args.date, knowledge)
    if args.only:
        status = merge_status(status_file.read_text(encoding="utf-8"), verdicts)
    else:
        status = status_yaml(knowledge, verdicts, newest, args.date)
    status_file.write_text(status, encoding="utf-8")
    print(f"updated {changed} knowledge files and verification.yaml")


def _schema_sample(args: argparse.Namespace, knowledge: Knowledge, directories: list[Path]) -> int:
    """Probe the sample; print each contradiction and the tally. Returns the number contradicted."""

    def tree(package: str, version: str) -> SourceTree | None:
        found = locate(package, version, directories)
        if found is None:  # a release published without a wheel: its source distribution, as the generator reads
            found = next(
                (
                    d / f"{package}-{version}-sdist"
                    for d in directories
                    if (d / f"{package}-{version}-sdist" / package).is_dir()
                ),
                None,
            )
        return SourceTree(package, version, found) if found is not None else None

    seed = args.seed if args.seed is not None else args.date.toordinal()
    checks = sample(knowledge.engine_schema, tree, args.schema_sample, seed)
    for check in checks:
        if args.verbose or check.status == "fail":
            print(("CONTRADICTED" if check.status == "fail" else "") + check.line())
    tally = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "fail", "unknown")}
    print(
        f"engine schema sample (seed {seed}): {len(checks)} probes, {tally['pass']} hold, "
        f"{tally['fail']} contradicted, {tally['unknown']} not checkable"
    )
    return tally["fail"]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.only and args.update and not (args.knowledge / "verification.yaml").is_file():
        parser.error("--only with --update merges into knowledge/verification.yaml, which does not exist")
    directories = _source_dirs(parser, args.src)
    try:
        knowledge = load_knowledge(str(args.knowledge.resolve()))
    except KnowledgeError as exc:  # a broken file: the loader's one line names the file, entry and field
        print(f"verify_knowledge: {exc}", file=sys.stderr)
        return 2
    newest = _newest(parser, args, knowledge)
    verdicts, missing = verify(knowledge, newest, directories, fetch=not args.no_download, only=args.only)
    _print_results(verdicts, missing, args.verbose)
    if args.report:
        others = len(knowledge.by_id) - sum(1 for v in verdicts if not isinstance(v.entry, AdvisoryFact))
        write_report(args.report, render_report(verdicts, newest, args.date, others))
    if args.update:
        _update(args, knowledge, verdicts, newest)
    schema_failures = _schema_sample(args, knowledge, directories) if args.schema_sample else 0
    differs = False
    if args.reproduce:
        for result in rerun(knowledge, REPO):
            print(result.line())
            differs = differs or result.status == "differs"
    if missing and counts(verdicts)["verified"] == 0:
        return 2
    return 1 if counts(verdicts)["contradicted"] or schema_failures or differs else 0
