"""size_offload's pictures, looked at as a person looks at them: rendered by headless Chromium.

Each picture is drawn from a real sizing and laid out by the browser; the tests read back where
every label landed and check what a reader would notice: a figure that is not the answer's, a label
cut off at the edge, two labels on top of each other, a label over the plot, text too faint to read
in light or dark mode. A few screenshots are kept as golden PNGs (tests/data/pictures) and compared
with a tolerance, for what boxes cannot say (a bar in the wrong colour, a curve gone).

    python tests/test_pictures.py --write     # after a deliberate change: new goldens, then look at them
"""

from __future__ import annotations

import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import browser
from conftest import REPO
from vllm_caching_mcp.advice.sizing import SizeOffloadResult
from vllm_caching_mcp.reports.sizing_pictures import capacity_svg, gib, memory_svg, plot_svg
from vllm_caching_mcp.tools import run_tool

GOLDEN = REPO / "tests" / "data" / "pictures"
SVG = "{http://www.w3.org/2000/svg}"

# The sizings the pictures are drawn from: a CPU tier sized from the host's RAM (p99 marked), an MLA model
# with a given tier and no host figure, weights that leave no KV pool, a tier larger than the node's RAM,
# a sliding-window model whose curve flattens, and a 10M-token context.
CASES: dict[str, tuple[dict[str, Any], int | None]] = {
    "llama-host": (
        {"model": "llama-3.1-70b", "gpu": "H200", "tensor_parallel_size": 8, "host_ram_gib": 2048, "version": "0.33.0"},
        32_768,
    ),
    "deepseek-tier": (
        {"model": "deepseek-v3", "gpu": "B200", "tensor_parallel_size": 8, "kv_offloading_size_gib": 512,
         "version": "0.33.0"},
        None,
    ),
    "no-pool": ({"model": "llama-3.1-70b", "gpu": "H100", "version": "0.33.0", "host_ram_gib": 512}, 100_000),
    "tier-too-big": (
        {"model": "llama-3.1-8b", "gpu": "L40S", "kv_offloading_size_gib": 900, "host_ram_gib": 256,
         "version": "0.33.0"},
        200_000,
    ),
    "sliding": (
        {"model": "gpt-oss-120b", "gpu": "H100", "tensor_parallel_size": 2, "host_ram_gib": 1024, "version": "0.33.0"},
        16_000,
    ),
    "ten-million": (
        {"model": "llama-4-scout", "gpu": "H200", "tensor_parallel_size": 8, "host_ram_gib": 2048, "version": "0.33.0"},
        None,
    ),
}  # fmt: skip


def sizing(case: str) -> SizeOffloadResult:
    result = run_tool("size_offload", CASES[case][0])
    assert isinstance(result, SizeOffloadResult)
    return result


def _pictures() -> list[tuple[str, str]]:
    return [(case, kind) for case in CASES for kind in ("memory", "capacity")]


def draw(case: str, kind: str) -> str:
    result = sizing(case)
    return memory_svg(result) if kind == "memory" else capacity_svg(result, CASES[case][1])


# ------------------------------------------------------------------------------------------ the file itself


@pytest.mark.parametrize(("case", "kind"), _pictures())
def test_a_picture_is_standalone_svg_with_a_text_alternative(case: str, kind: str) -> None:
    svg = draw(case, kind)
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg" and root.get("role") == "img"
    title, desc = root.find(SVG + "title"), root.find(SVG + "desc")
    assert title is not None and title.text and desc is not None and desc.text and len(desc.text) > 80
    assert root.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"
    # Nothing runs and nothing is fetched: no script, no image, no link, no font or URL in the CSS.
    tags = {el.tag.removeprefix(SVG) for el in root.iter()}
    assert not tags & {"script", "image", "a", "foreignObject", "use", "iframe"}, tags
    attributes = [v for el in root.iter() for k, v in el.attrib.items() if k != "xmlns"]
    assert not [v for v in attributes if "http" in v or v.startswith(("data:", "javascript:"))]
    style = "".join(el.text or "" for el in root.iter(SVG + "style"))
    assert "url(" not in style and "@import" not in style and "@font-face" not in style
    assert "prefers-color-scheme: dark" in style
    assert int(root.get("width", "0")) == 800


def test_the_figures_drawn_are_the_answers() -> None:
    """The labels are the answer's figures, read from its fields, not worked out again differently."""
    result = sizing("llama-host")
    texts = " | ".join(t.text for t in laid_out("llama-host", "memory").texts)
    pool = result.num_gpu_blocks * result.gpu_block_bytes_per_rank / 2**30
    assert result.offload is not None and result.host_ram_left_gib is not None
    tier_on_node = 2048 - result.host_ram_left_gib
    for shown in (
        f"weights {gib(result.weights_gib_per_gpu)} GiB",
        f"KV pool {gib(pool)} GiB",
        f"pinned CPU tier (native) {gib(tier_on_node)} GiB",
        "Per host node: 2,048 GiB RAM",
    ):
        assert shown in texts, shown
    capacity = laid_out("llama-host", "capacity")
    typical = next(t.text for t in capacity.texts if t.data.get("marker") == "typical")
    assert typical == (
        f"typical {result.typical_context_tokens:,}: GPU {result.whole_sessions_at_typical_context:,} · "
        f"CPU tier {result.offload.warm_sessions_held:,}"
    )
    p99 = next(t.text for t in capacity.texts if t.data.get("marker") == "p99")
    assert p99.startswith("p99 32,768: GPU ")
    desc = ET.fromstring(capacity_svg(result)).find(SVG + "desc")
    assert desc is not None and desc.text is not None
    assert f"At {result.max_model_len:,} tokens: {result.whole_sessions_at_max_model_len:,} on the GPU" in desc.text


def test_the_capacity_curve_passes_through_the_answers_figures() -> None:
    """The function drawn gives, at the answer's own context lengths, the answer's own session counts."""
    for case in CASES:
        result = sizing(case)
        assert result.figures is not None
        capacity = result.figures.capacity
        assert capacity.gpu_sessions(result.typical_context_tokens) == result.whole_sessions_at_typical_context
        assert capacity.gpu_sessions(result.max_model_len) == result.whole_sessions_at_max_model_len
        if result.offload is not None:
            assert capacity.tier_sessions(result.typical_context_tokens) == result.offload.warm_sessions_held


# ------------------------------------------------------------------------------------------ as the browser lays it out

_LAID_OUT: dict[bool, dict[tuple[str, str], browser.Layout]] = {}


def laid_out(case: str, kind: str, dark: bool = False) -> browser.Layout:
    """The browser's layout of a picture; every picture of a mode in one browser start (it is the slow part)."""
    if dark not in _LAID_OUT:
        pictures = _pictures()
        _LAID_OUT[dark] = dict(zip(pictures, browser.layouts([draw(c, k) for c, k in pictures], dark), strict=True))
    return _LAID_OUT[dark][case, kind]


def _background(layout: browser.Layout, text: browser.Text) -> str:
    """The colour behind ``text``: its bar segment for a figure written on a bar, else the page."""
    on = text.data.get("on")
    if on:
        return str(layout.shape(segment=on)["fill"])
    return str(next(s for s in layout.shapes if s["cls"] == "bg")["fill"])


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize(("case", "kind"), _pictures())
def test_every_label_is_whole_apart_and_readable(case: str, kind: str, dark: bool) -> None:
    layout = laid_out(case, kind, dark)
    texts = [t for t in layout.texts if t.text.strip()]
    assert texts
    for t in texts:
        assert browser.inside(t.box, layout.svg), f"cut off: {t.text!r} at {t.box}"
        floor = 4.5  # WCAG AA for body text, on the page and on a bar
        assert browser.contrast(t.fill, _background(layout, t)) >= floor, (t.text, t.fill, dark)
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            assert not browser.overlaps(a.box, b.box), f"{a.text!r} overlaps {b.text!r}"


@pytest.mark.parametrize("case", list(CASES))
def test_memory_figures_sit_on_their_bars_and_nothing_else_does(case: str) -> None:
    layout = laid_out(case, "memory")
    segments = [s for s in layout.shapes if "segment" in s["data"]]
    for t in layout.texts:
        if "on" in t.data:
            assert browser.inside(t.box, layout.shape(segment=t.data["on"])["box"]), t.text
        else:
            assert not any(browser.overlaps(t.box, s["box"]) for s in segments), f"{t.text!r} is over a bar"


@pytest.mark.parametrize("case", list(CASES))
def test_nothing_is_written_over_the_plot_and_the_curves_stay_in_it(case: str) -> None:
    layout = laid_out(case, "capacity")
    plot = layout.shape(plot="area")["box"]
    for t in layout.texts:
        assert not browser.overlaps(t.box, plot), f"{t.text!r} is over the plot area"
    curves = [s for s in layout.shapes if "series" in s["data"]]
    assert curves
    for curve in curves:
        assert browser.inside(curve["box"], plot), curve["data"]
    ticks = [t for t in layout.texts if t.data.get("tick") == "x"]
    assert ticks[0].text == "1k" and (ticks[0].box[0] + ticks[0].box[2]) / 2 == pytest.approx(plot[0], abs=1)
    assert plot[2] - (ticks[-1].box[0] + ticks[-1].box[2]) / 2 <= 40, "the axis ends unlabelled"


def test_dark_mode_changes_the_colours_not_the_layout() -> None:
    light, dark = laid_out("llama-host", "capacity"), laid_out("llama-host", "capacity", dark=True)
    assert [t.box for t in light.texts] == [t.box for t in dark.texts]
    assert browser.luminance(light.texts[0].fill) < 0.1 < browser.luminance(dark.texts[0].fill)


# ------------------------------------------------------------------------------------------ golden screenshots

# Share of pixels that may differ (by more than a faint anti-aliasing shade) from the golden: a font
# hinting change moves a few edges; a missing bar, curve or label moves far more.
TOLERANCE = 0.015
SHADE = 48
GOLDENS = {
    "memory-llama-host": ("llama-host", "memory", False),
    "memory-llama-host-dark": ("llama-host", "memory", True),
    "memory-tier-too-big": ("tier-too-big", "memory", False),
    "capacity-llama-host": ("llama-host", "capacity", False),
    "capacity-llama-host-dark": ("llama-host", "capacity", True),
    "capacity-sliding": ("sliding", "capacity", False),
}


def _height(svg: str) -> int:
    found = re.search(r'height="(\d+)"', svg)
    assert found is not None
    return int(found.group(1))


def shoot(name: str, out: Path) -> Path:
    case, kind, dark = GOLDENS[name]
    svg = draw(case, kind)
    return browser.screenshot(svg, ".svg", out, 800, _height(svg), dark=dark)


def differing_share(a: Path, b: Path) -> float:
    from PIL import Image, ImageChops

    with Image.open(a) as first, Image.open(b) as second:
        assert first.size == second.size, (first.size, second.size)
        diff = ImageChops.difference(first.convert("RGB"), second.convert("RGB")).convert("L")
        changed = sum(diff.point(lambda v: 255 if v > SHADE else 0).histogram()[255:])
        return changed / (first.size[0] * first.size[1])


@pytest.mark.parametrize("name", list(GOLDENS))
def test_the_screenshot_matches_its_golden(name: str, tmp_path: Path) -> None:
    pytest.importorskip("PIL", reason="Pillow is in the test extra")
    shot = shoot(name, tmp_path / f"{name}.png")
    share = differing_share(shot, GOLDEN / f"{name}.png")
    assert share <= TOLERANCE, f"{name}: {share:.1%} of the pixels differ; look at {shot}"


def test_the_stacked_picture_holds_both() -> None:
    svg = plot_svg(sizing("llama-host"), "both", 32_768)
    root = ET.fromstring(svg)
    inner = root.findall(SVG + "svg")
    assert len(inner) == 2 and int(inner[1].get("y", "0")) == int(inner[0].get("height", "-1"))
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert len(ids) == len(set(ids))


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__)
        return 2
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name in GOLDENS:
            shot = shoot(name, Path(scratch) / f"{name}.png")
            (GOLDEN / f"{name}.png").write_bytes(shot.read_bytes())
            print(f"wrote tests/data/pictures/{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
