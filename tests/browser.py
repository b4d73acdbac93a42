"""Headless Chromium for the picture tests: a screenshot as a person sees it, and where each label landed.

Debian's `chromium` package (.ci/run installs it when missing). Without it the tests skip, saying
so, except under CI (CI or VLLM_CACHING_MCP_REQUIRE_CHROMIUM set; .ci/run sets the latter), where a
missing browser is a failure: CI must look.

`layout` loads the picture inline in a small page whose script, once the page has laid out, writes
every <text>'s box, words and colours (and the boxes of the bars, the plot area and the curves) as
JSON into the page; `--dump-dom` prints the page after that, so the boxes are the browser's own,
fonts and all, not this code's estimate.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--run-all-compositor-stages-before-draw",
]


# The page's script runs, then the DOM it left is printed.
_DUMP = ["--virtual-time-budget=5000", "--dump-dom"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI") or os.environ.get("VLLM_CACHING_MCP_REQUIRE_CHROMIUM"):
            pytest.fail(message + ": CI must render the pictures")
        pytest.skip(message)
    return found


def _run(args: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    command = [chromium(), *_FLAGS, f"--user-data-dir={workdir / 'profile'}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def screenshot(document: str, suffix: str, out: Path, width: int, height: int, dark: bool = False) -> Path:
    """``document`` (an SVG or HTML text) rendered at ``width`` × ``height`` CSS pixels into the PNG ``out``."""
    with tempfile.TemporaryDirectory(prefix="vllm-caching-shot-") as scratch:
        workdir = Path(scratch)
        page = workdir / f"page{suffix}"
        page.write_text(document, encoding="utf-8")
        mode = ["--force-dark-mode"] if dark else []
        _run([*mode, f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri()], workdir)
    assert out.exists(), "chromium wrote no screenshot"
    return out


_HARNESS = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body {{ margin: 0; }} .picture {{ position: relative; }}</style></head>
<body>{pictures}<pre id="out"></pre>
<script>
function boxes(svg) {{
  const o = svg.getBoundingClientRect();
  const box = el => {{ const r = el.getBoundingClientRect(); return [r.left - o.left, r.top - o.top, r.right - o.left,
                                                                    r.bottom - o.top]; }};
  const data = el => Object.assign({{}}, el.dataset);
  return {{
    svg: box(svg),
    texts: [...svg.querySelectorAll('text')].map(t => ({{
      text: t.textContent, box: box(t), data: data(t), fill: getComputedStyle(t).fill,
      weight: getComputedStyle(t).fontWeight, size: getComputedStyle(t).fontSize }})),
    shapes: [...svg.querySelectorAll('[data-segment], [data-plot], [data-series], rect.bg')].map(s => ({{
      tag: s.tagName, box: box(s), data: data(s), fill: getComputedStyle(s).fill, cls: s.getAttribute('class') }})),
  }};
}}
const found = [...document.querySelectorAll('.picture > svg')].map(boxes);
document.getElementById('out').textContent = JSON.stringify(found);
document.querySelectorAll('.picture').forEach(p => p.remove());
</script></body></html>
"""


@dataclass(frozen=True)
class Text:
    text: str
    box: tuple[float, float, float, float]
    data: dict[str, str]
    fill: str
    weight: int
    size: float


@dataclass(frozen=True)
class Layout:
    svg: tuple[float, float, float, float]
    texts: list[Text]
    shapes: list[dict[str, Any]]

    def shape(self, **data: str) -> dict[str, Any]:
        found = [s for s in self.shapes if all(s["data"].get(k) == v for k, v in data.items())]
        assert len(found) == 1, (data, len(found))
        return found[0]


def layouts(svgs: list[str], dark: bool = False) -> list[Layout]:
    """Where Chromium put each text of each of ``svgs`` (inline, one under another, in a page 1000 px wide), in
    CSS pixels from each picture's top left corner; one browser start for all of them."""
    pictures = "".join(f'<div class="picture">{svg}</div>' for svg in svgs)
    with tempfile.TemporaryDirectory(prefix="vllm-caching-layout-") as scratch:
        workdir = Path(scratch)
        page = workdir / "harness.html"
        page.write_text(_HARNESS.format(pictures=pictures), encoding="utf-8")
        mode = ["--force-dark-mode"] if dark else []
        done = _run([*mode, "--window-size=1000,2000", *_DUMP, page.as_uri()], workdir)
    start = done.stdout.index('<pre id="out">') + len('<pre id="out">')
    found = json.loads(html.unescape(done.stdout[start : done.stdout.index("</pre>", start)]))
    assert len(found) == len(svgs)
    return [
        Layout(
            svg=tuple(one["svg"]),
            texts=[
                Text(t["text"], tuple(t["box"]), t["data"], t["fill"], int(t["weight"]), float(t["size"].rstrip("px")))
                for t in one["texts"]
            ],
            shapes=one["shapes"],
        )
        for one in found
    ]


def layout(svg: str, dark: bool = False) -> Layout:
    return layouts([svg], dark)[0]


def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float], slack: float = 0.5) -> bool:
    return a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack


def inside(inner: tuple[float, float, float, float], outer: tuple[float, float, float, float]) -> bool:
    return (
        inner[0] >= outer[0] - 0.5
        and inner[1] >= outer[1] - 0.5
        and inner[2] <= outer[2] + 0.5
        and (inner[3] <= outer[3] + 0.5)
    )


def _channel(value: float) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb: str) -> float:
    """The relative luminance of a computed colour, ``rgb(r, g, b)`` (WCAG 2)."""
    r, g, b = (float(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


_PAGE_PROBE = """<script>
const cells = [...document.querySelectorAll('th, td, h1, h2, p, li')];
document.getElementById('probe-out').textContent = JSON.stringify({
  width: document.documentElement.scrollWidth, viewport: window.innerWidth,
  clipped: cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60)),
  tables: [...document.querySelectorAll('table')].map(t => [...t.rows].map(r => r.cells.length)),
  elements: [...new Set([...document.body.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))],
  text: document.body.innerText,
  colours: [...document.querySelectorAll('td, th, h1, h2')].map(c => [getComputedStyle(c).color,
    getComputedStyle(c).backgroundColor === 'rgba(0, 0, 0, 0)' ? getComputedStyle(document.body).backgroundColor
      : getComputedStyle(c).backgroundColor]),
});
</script>"""


def page_facts(page: str, width: int = 800, dark: bool = False) -> dict[str, Any]:
    """What a reader of the HTML ``page`` at ``width`` px gets: the page's width (wider than the window: a
    sideways scroll), the cells whose text is cut off, each table's cells per row, the element names, the
    visible text and each cell's text and background colour. A probe script is added to a copy of the page."""
    probed = page.replace("</body>", '<pre id="probe-out"></pre>' + _PAGE_PROBE + "</body>", 1)
    with tempfile.TemporaryDirectory(prefix="vllm-caching-page-") as scratch:
        workdir = Path(scratch)
        path = workdir / "page.html"
        path.write_text(probed, encoding="utf-8")
        mode = ["--force-dark-mode"] if dark else []
        done = _run([*mode, f"--window-size={width},900", *_DUMP, path.as_uri()], workdir)
    start = done.stdout.index('<pre id="probe-out">') + len('<pre id="probe-out">')
    facts: dict[str, Any] = json.loads(html.unescape(done.stdout[start : done.stdout.index("</pre>", start)]))
    facts["elements"] = sorted(set(facts["elements"]) - {"pre", "script"})  # the probe's own
    return facts
