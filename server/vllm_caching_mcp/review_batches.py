"""Review any number of files in CI: batches of what one review takes, one SARIF log and one summary.

One review takes at most MAX_REVIEW_DOCUMENTS files and MAX_DOCUMENTS_TEXT characters, so that an
answer stays bounded; a pull request that touches more (a chart's whole values tree, a generated
directory of manifests) is reviewed in batches. Files of one directory go into the same batch where
they fit, since the checks across objects (ports against a Service, the LMCache server beside the
vLLM pods) only see the files of one review. The batches' SARIF logs become one log with one run,
as code scanning takes one run per tool and category; the job summary has every batch's tables.

    python -m vllm_caching_mcp.review_batches FILE_LIST SARIF_OUT SUMMARY_OUT -- REVIEW_OPTIONS...

FILE_LIST holds the paths NUL-separated (as `git diff -z` writes them); SUMMARY_OUT may be empty for
no summary. The exit status is the review's: 0, 1 at --fail-on, 2 when a batch could not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import groupby
from typing import Any

from .advice.deployment.bounds import MAX_DOCUMENTS_TEXT
from .advice.review_models import MAX_REVIEW_DOCUMENTS


def batches(
    paths: list[str], sizes: dict[str, int], most_files: int = MAX_REVIEW_DOCUMENTS, most_text: int = MAX_DOCUMENTS_TEXT
) -> list[list[str]]:
    """``paths`` in review-sized batches, in directory order, a directory kept whole where it fits.
    ``sizes`` are bytes, which bound the characters a file decodes to from above."""
    ordered = sorted(paths, key=lambda p: (os.path.dirname(p), p))
    done: list[list[str]] = []
    batch: list[str] = []
    text = 0
    for _, grouped in groupby(ordered, key=os.path.dirname):
        group = list(grouped)
        group_text = sum(sizes[p] for p in group)
        fits_empty = len(group) <= most_files and group_text <= most_text
        if batch and fits_empty and (len(batch) + len(group) > most_files or text + group_text > most_text):
            done.append(batch)  # start the directory in a batch of its own rather than split it
            batch, text = [], 0
        for path in group:  # a directory too big for one batch is split where the limits fall
            if batch and (len(batch) == most_files or text + sizes[path] > most_text):
                done.append(batch)
                batch, text = [], 0
            batch.append(path)
            text += sizes[path]
    if batch:
        done.append(batch)
    return done


def merge_sarif(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """One log with one run: every batch's results; the rules are the same table in every batch."""
    merged: dict[str, Any] = json.loads(json.dumps(logs[0]))  # a copy: the first log stays as it was
    run = merged["runs"][0]
    versions = set(run["properties"]["vllmVersions"])
    for log in logs[1:]:
        (other,) = log["runs"]
        if other["tool"] != run["tool"]:  # ruleIndex points into the rules: they must agree
            raise ValueError("the batches were reviewed with different rule tables")
        run["results"] += other["results"]
        run["properties"]["notChecked"] += other["properties"]["notChecked"]
        versions |= set(other["properties"]["vllmVersions"])
    run["properties"]["vllmVersions"] = sorted(versions)
    return merged


def _review(files: list[str], options: list[str], fmt: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "vllm_caching_mcp.cli", "review", *options, "--format", fmt, "--", *files]
    # stderr passes through: the review's own message for a batch that cannot run is the job's log.
    return subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)


def _headline(sarif: dict[str, Any], status: int, files: int, count: int) -> str:
    levels = [r["level"] for r in sarif["runs"][0]["results"]]
    icon = "❌" if status else "✅"
    counts = f"{levels.count('error')} errors, {levels.count('warning')} warnings, {levels.count('note')} info"
    return f"{icon} **vllm-caching review of {files} files in {count} batches: {counts}**\n\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[3] != "--":
        print(__doc__.split("\n\n")[2].strip(), file=sys.stderr)
        return 2
    file_list, sarif_out, summary_out, options = args[0], args[1], args[2], args[4:]
    with open(file_list, "rb") as listed:
        paths = [os.fsdecode(name) for name in listed.read().split(b"\0") if name]
    groups = batches(paths, {p: os.path.getsize(p) for p in paths}) or [[]]  # none: one empty review
    logs, summaries, status = [], [], 0
    for number, group in enumerate(groups, 1):
        if len(groups) > 1:
            print(f"Batch {number} of {len(groups)}: {len(group)} files", file=sys.stderr)
        done = _review(group, options, "sarif")
        if done.returncode >= 2:
            return done.returncode
        status = max(status, done.returncode)
        logs.append(json.loads(done.stdout))
        if summary_out:
            table = _review(group, options, "markdown").stdout
            summaries.append(table if len(groups) == 1 else f"### Batch {number} of {len(groups)}\n\n{table}")
    merged = merge_sarif(logs)
    with open(sarif_out, "w", encoding="utf-8") as out:
        json.dump(merged, out, indent=2)
    if summary_out:
        with open(summary_out, "a", encoding="utf-8") as summary:
            if len(groups) > 1:
                summary.write(_headline(merged, status, len(paths), len(groups)))
            summary.write("\n".join(summaries))
    return status


if __name__ == "__main__":
    sys.exit(main())
