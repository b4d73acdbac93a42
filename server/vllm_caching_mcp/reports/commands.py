"""The command line's pictures and reports: `size-offload --plot FILE.svg` and `review --format markdown|html`.

cli.py adds these options and calls these functions; what is drawn and how is in sizing_pictures
and review_report.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..tools import ToolInputError

if TYPE_CHECKING:  # the tools' modules load when a command runs, not when the parser is built
    from ..advice.common import Result
    from ..advice.review_models import FailOn, ReviewResult

REVIEW_FORMATS = ("markdown", "html")
PLOT_KINDS = ("both", "memory", "capacity")  # sizing_pictures.plot_svg draws each


def add_plot_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plot",
        metavar="FILE.svg",
        help="also write the sizing as an SVG picture: the memory budget per GPU and per host node, and the "
        "sessions that fit by context length (--plot-kind picks one)",
    )
    parser.add_argument("--plot-kind", choices=PLOT_KINDS, default="both", help="which picture --plot writes")
    parser.add_argument(
        "--p99-context-tokens", type=int, metavar="N", help="mark this context (your requests' p99) on the --plot"
    )


def write_plot(args: argparse.Namespace, result: Result) -> None:
    """Write the picture --plot asks for (standard output stays the answer, as without it)."""
    path: str | None = getattr(args, "plot", None)
    if path is None:
        return
    from ..advice.sizing import SizeOffloadResult
    from .sizing_pictures import plot_svg

    assert isinstance(result, SizeOffloadResult)

    p99: int | None = args.p99_context_tokens
    if p99 is not None and p99 < 1:
        raise ToolInputError("--p99-context-tokens: must be a positive number of tokens")
    svg = plot_svg(result, args.plot_kind, p99)
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(svg)
    except OSError as exc:
        raise ToolInputError(f"--plot: cannot write {path!r} ({exc.strerror or type(exc).__name__})") from None


def review_report(result: ReviewResult, fmt: str, fail_on: FailOn, ignore_unfixed: bool = False) -> str:
    from .review_report import to_html, to_markdown

    if fmt == "markdown":
        return to_markdown(result, fail_on, ignore_unfixed)
    return to_html(result, fail_on, ignore_unfixed)
