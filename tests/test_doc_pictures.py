"""The pictures the documents show are what their documented commands make now.

docs/tools/size_offload.md shows the SVGs in docs/pictures/ and the commands that write them (each
with `--plot NAME`); docs/tools/review_deployment.md shows the Markdown report of a documented
`review … --format markdown > review-report.md` inline, as a job summary shows it. Each command is
run here in a scratch copy of examples/, as tests/test_docs_commands.py runs it, and what it wrote
must equal what the document ships. After a deliberate change:

    python tests/test_doc_pictures.py --write
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from conftest import REPO
from test_docs_commands import Session, run_command, scratch_directory, shown_in

PICTURES = REPO / "docs" / "pictures"
SIZING_DOC = REPO / "docs" / "tools" / "size_offload.md"
REVIEW_DOC = REPO / "docs" / "tools" / "review_deployment.md"
_PLOT = re.compile(r"--plot (\S+\.svg)")
_INLINE = re.compile(r"(<!-- review-report\.md -->\n)(.*?)(<!-- end of review-report\.md -->)", re.S)


def _made(doc: Path, scratch: Path) -> dict[str, str]:
    """Every file the document's shown commands write, by name, after running them all in ``scratch``."""
    with scratch_directory(scratch) as cwd:
        session = Session(cwd)
        for shown in shown_in(doc):
            for command in shown.commands:
                run_command(command, session)
        return {p.name: p.read_text(encoding="utf-8") for p in cwd.iterdir() if p.is_file()}


def plot_names() -> list[str]:
    return [m.group(1) for s in shown_in(SIZING_DOC) for c in s.commands for m in _PLOT.finditer(c)]


def test_the_sizing_pictures_shown_are_the_commands_output(tmp_path: Path) -> None:
    names = plot_names()
    assert len(names) == 2, names  # the memory budget and the capacity
    text = SIZING_DOC.read_text(encoding="utf-8")
    made = _made(SIZING_DOC, tmp_path)
    for name in names:
        assert f"](../pictures/{name})" in text, f"the document does not show {name}"
        assert (PICTURES / name).read_text(encoding="utf-8") == made[name], (
            f"docs/pictures/{name} is stale: python tests/test_doc_pictures.py --write"
        )


def _quoted(markdown: str) -> str:
    return "".join(f"> {line}".rstrip() + "\n" for line in markdown.splitlines())


def test_the_review_report_shown_is_the_commands_output(tmp_path: Path) -> None:
    found = _INLINE.search(REVIEW_DOC.read_text(encoding="utf-8"))
    assert found is not None, "review_deployment.md no longer shows the report"
    made = _made(REVIEW_DOC, tmp_path)
    assert made["review-report.html"].startswith("<!DOCTYPE html>")
    assert found.group(2) == _quoted(made["review-report.md"]), "stale: python tests/test_doc_pictures.py --write"


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        made = _made(SIZING_DOC, Path(scratch) / "sizing")
        for name in plot_names():
            (PICTURES / name).write_text(made[name], encoding="utf-8")
            print(f"wrote docs/pictures/{name}")
        report = _made(REVIEW_DOC, Path(scratch) / "review")["review-report.md"]
    text = REVIEW_DOC.read_text(encoding="utf-8")
    REVIEW_DOC.write_text(_INLINE.sub(lambda m: m.group(1) + _quoted(report) + m.group(3), text), encoding="utf-8")
    print(f"wrote the report into {REVIEW_DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        print(__doc__)
        sys.exit(2)
    sys.exit(main())
