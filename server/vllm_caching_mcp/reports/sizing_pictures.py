"""size_offload as two standalone SVG pictures: where each GiB goes, and how many sessions fit.

    memory_svg(result)                  per GPU: weights, activation reserve, KV pool, what is left;
                                        per host node: the pinned CPU tier, the rest of the RAM, the headroom
    capacity_svg(result, p99_tokens)    whole sessions on the GPU pool and in the CPU tier against context
                                        length, 1k tokens to max_model_len (log axes), typical and p99 marked

Every figure is the answer's: the fields of `SizeOffloadResult` and the budget and capacity function
it carries (`SizeOffloadResult.figures`), which are the arithmetic its own figures come from. The
pictures hold no script and no external font or URL; a `prefers-color-scheme` rule inside each
switches them to dark colours, and a <title> and <desc> say in words what they show.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ..advice.sizing import Capacity, SizeOffloadResult, SizingFigures

WIDTH = 800
MARGIN = 24
_FONT = 13
_env = Environment(
    loader=PackageLoader("vllm_caching_mcp.reports", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


class PictureError(ValueError):
    """The answer cannot be drawn (a result read back from JSON carries no figures)."""


def text_width(text: str, size: float = _FONT, bold: bool = False) -> float:
    """A generous estimate of the width a sans-serif font gives ``text``: the layout leaves this much room,
    and the browser tests check that what is drawn stays inside it."""
    return len(text) * size * (0.64 if bold else 0.6)


def gib(value: float) -> str:
    """GiB as people write them on a slide: 16.4, 1,638, 0.5."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def tokens_label(tokens: int) -> str:
    """1k, 128k, 1M for the axis; 10,000 stays exact."""
    if tokens >= 1 << 20 and tokens % (1 << 20) == 0:
        return f"{tokens >> 20}M"
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{tokens >> 10}k"
    return f"{tokens:,}"


def _figures(result: SizeOffloadResult) -> SizingFigures:
    if result.figures is None:
        raise PictureError("this size_offload result carries no figures to draw: run the sizing again")
    return result.figures


def _heading(result: SizeOffloadResult) -> str:
    v = result.version_context
    return f"{result.model} on {result.world_size}× {result.gpu}, vLLM {v.version}" + (
        " (assumed)" if v.assumed else ""
    )


def _estimates(result: SizeOffloadResult) -> list[str]:
    """The figures drawn that rest on an estimate or an assumption, by name, as the answer's caveats list them."""
    names = [line.removeprefix("caveat: ").split(":", 1)[0] for line in result.caveat_lines()]
    return [n for n in names if not n.startswith("load ") and n != "SGLang"]


# ------------------------------------------------------------------------------------------ memory


@dataclass
class Segment:
    key: str  # the CSS class of its colour
    name: str
    gib: float
    x: float = 0.0
    width: float = 0.0
    label: str | None = None  # the figure written on the bar, when it fits


@dataclass
class LegendItem:
    key: str
    text: str
    x: float
    y: float


@dataclass
class Bar:
    title: str
    y: float
    height: float
    segments: list[Segment]
    legend: list[LegendItem]
    marker_x: float | None = None  # the gpu_memory_utilization line
    marker_label: str | None = None
    marker_anchor: str = "end"
    marker_label_x: float = 0.0
    notes: list[str] = field(default_factory=list)


def _lay_out_bar(title: str, y: float, segments: list[Segment], scale_gib: float, total: float) -> Bar:
    """Segments side by side over the full width, each figure on it when it fits; a legend under it with
    every figure (a narrow segment's too)."""
    left, right = MARGIN, WIDTH - MARGIN
    span = right - left
    x = float(left)
    bar_y = y + 12
    height = 40.0
    for s in segments:
        s.x = x
        s.width = max(0.0, s.gib) / scale_gib * span if scale_gib > 0 else 0.0
        figure = f"{gib(s.gib)} GiB"
        named = f"{s.name} {figure}"
        s.label = next((t for t in (named, figure) if text_width(t, bold=True) + 12 <= s.width), None)
        x += s.width
    legend: list[LegendItem] = []
    lx, ly = float(left), bar_y + height + 22
    for s in segments:
        share = f" ({s.gib / total:.0%})" if total > 0 else ""
        text = f"{s.name} {gib(s.gib)} GiB{share}"
        need = 18 + text_width(text) + 16
        if lx + need > right and lx > left:
            lx, ly = float(left), ly + 20
        legend.append(LegendItem(key=s.key, text=text, x=lx, y=ly))
        lx += need
    return Bar(title=title, y=y, height=height, segments=segments, legend=legend)


def _label_marker(bar: Bar, label: str) -> None:
    """Write ``label`` on the heading's line beside the bar's marker: left of it when it clears the heading,
    else right of it when it fits there, else not at all (the heading says it)."""
    assert bar.marker_x is not None
    width = text_width(label)
    heading_end = MARGIN + text_width(bar.title, bold=True) + 12
    if bar.marker_x - 4 - width >= heading_end:
        bar.marker_label, bar.marker_anchor, bar.marker_label_x = label, "end", bar.marker_x - 4
    elif bar.marker_x + 4 >= heading_end and bar.marker_x + 4 + width <= WIDTH - MARGIN:
        bar.marker_label, bar.marker_anchor, bar.marker_label_x = label, "start", bar.marker_x + 4


def _gpu_bar(f: SizingFigures, y: float) -> Bar:
    pool = f.kv_pool_gib
    used = f.weights_gib + f.activation_reserve_gib + pool
    left = f.gpu_memory_gib - used
    usable = f.gpu_memory_gib * f.gpu_memory_utilization
    segments = [
        Segment("weights", "weights", f.weights_gib),
        Segment("reserve", "activation reserve", f.activation_reserve_gib),
        Segment("pool", "KV pool", pool),
        Segment("left", "left", max(0.0, left)),
    ]
    scale = max(f.gpu_memory_gib, used)
    title = f"Per GPU: {gib(f.gpu_memory_gib)} GiB, vLLM may use {f.gpu_memory_utilization:.0%} ({gib(usable)} GiB)"
    bar = _lay_out_bar(title, y, segments, scale, f.gpu_memory_gib)
    bar.marker_x = MARGIN + min(usable, scale) / scale * (WIDTH - 2 * MARGIN)
    _label_marker(bar, f"limit {f.gpu_memory_utilization:.0%}")
    if f.kv_budget_gib <= 0:
        bar.notes.append(
            f"The weights and the reserve take {gib(f.weights_gib + f.activation_reserve_gib)} GiB of the "
            f"{gib(usable)} GiB vLLM may use: no KV pool."
        )
    return bar


def _host_bar(result: SizeOffloadResult, f: SizingFigures, y: float) -> Bar | None:
    if f.host_ram_gib is None or f.tier_per_node_gib is None or result.host_ram_left_gib is None:
        return None
    ram, tier, left = f.host_ram_gib, f.tier_per_node_gib, result.host_ram_left_gib
    reserve = f.host_reserved_gib or 0.0
    headroom = min(reserve, max(0.0, left))
    rest = max(0.0, left - reserve)
    backend = result.offload.backend if result.offload else "native"
    segments = [
        Segment("tier", f"pinned CPU tier ({backend})", tier),
        Segment("rest", "rest of RAM", rest),
        Segment("headroom", "headroom", headroom),
    ]
    bar = _lay_out_bar(f"Per host node: {gib(ram)} GiB RAM", y, segments, max(ram, tier), ram)
    if tier > ram:  # where the RAM ends on a bar drawn to the tier's length
        bar.marker_x = MARGIN + ram / tier * (WIDTH - 2 * MARGIN)
        _label_marker(bar, f"the node's RAM ends here ({gib(ram)} GiB)")
    if left < 0:
        bar.notes.append(f"The CPU tier exceeds the node's RAM by {gib(-left)} GiB: it does not fit.")
    elif left < reserve:
        bar.notes.append(
            f"The CPU tier leaves {gib(left)} GiB, less than the {gib(reserve)} GiB headroom kept for the rest of "
            "the node: shrink it."
        )
    return bar


def memory_svg(result: SizeOffloadResult) -> str:
    """The memory budget per GPU and per host node, as an SVG document."""
    f = _figures(result)
    bars = [_gpu_bar(f, 106.0)]
    host = _host_bar(result, f, _bar_bottom(bars[0]) + 30)
    lines: list[str] = []
    if host is not None:
        bars.append(host)
    elif result.offload is not None:
        lines.append(
            f"CPU tier: {result.offload.kv_offloading_size_gib:g} GiB per engine; give host_ram_gib to see it "
            "against the node's RAM."
        )
    else:
        lines.append("No CPU tier sized: give kv_offloading_size_gib, warm_sessions or host_ram_gib.")
    notes = [n for bar in bars for n in bar.notes] + lines
    estimates = _estimates(result)
    if estimates:
        notes.append("Estimates: " + "; ".join(estimates) + " (see the answer's caveats).")
    y = _bar_bottom(bars[-1]) + 8
    note_lines = []
    for note in notes:
        for line in _wrap(note, WIDTH - 2 * MARGIN, 12):
            y += 18
            note_lines.append((y, line))
    height = math.ceil(y + 20)
    desc = _memory_desc(result, f, bars)
    return _env.get_template("memory.svg.j2").render(
        kind="memory",
        width=WIDTH,
        height=height,
        margin=MARGIN,
        title="Memory budget per GPU and per host node",
        heading=_heading(result),
        subtitle="GiB; one GPU is one rank of the engine; from vllm-caching size-offload",
        desc=desc,
        bars=bars,
        notes=note_lines,
    )


def _bar_bottom(bar: Bar) -> float:
    return max(item.y for item in bar.legend) + 6


def _memory_desc(result: SizeOffloadResult, f: SizingFigures, bars: list[Bar]) -> str:
    parts = [f"Memory budget of {_heading(result)}."]
    for bar in bars:
        parts.append(bar.title + ": " + ", ".join(f"{s.name} {gib(s.gib)} GiB" for s in bar.segments) + ".")
    parts += [n for bar in bars for n in bar.notes]
    return " ".join(parts)


def _wrap(text: str, width: float, size: float) -> list[str]:
    """``text`` in lines no wider than ``width`` at font ``size`` (by `text_width`)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if current and text_width(candidate, size) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


# ------------------------------------------------------------------------------------------ capacity


@dataclass
class Tick:
    pos: float
    label: str


@dataclass
class Marker:
    key: str  # typical / p99
    x: float
    label: str
    label_x: float
    label_y: float
    anchor: str
    dots: list[tuple[float, float, str]]  # (x, y, series key)


@dataclass
class Series:
    key: str
    name: str
    points: str  # an SVG polyline's points


_Position = Callable[[int, int], tuple[float, float]]


@dataclass
class Plot:
    x0: float
    x1: float
    y0: float  # top
    y1: float  # bottom


def _log_position(value: float, low: float, high: float, start: float, end: float) -> float:
    if high <= low:
        return start
    return start + (math.log(value) - math.log(low)) / (math.log(high) - math.log(low)) * (end - start)


def _contexts(low: int, high: int, extra: list[int]) -> list[int]:
    """Context lengths to evaluate: 16 per doubling from ``low`` to ``high``, and the marked ones."""
    points = {low, high, *(e for e in extra if low <= e <= high)}
    if high > low:
        steps = math.ceil(16 * math.log2(high / low))
        points |= {round(low * (high / low) ** (i / steps)) for i in range(steps + 1)}
    return sorted(points)


def _x_ticks(low: int, high: int, plot: Plot) -> list[Tick]:
    values = []
    power = 1 << max(0, math.ceil(math.log2(low)))
    while power <= high:
        values.append(power)
        power <<= 1
    if len(values) > 12:  # a million-token context: every other doubling
        values = values[::2]
    ticks = [Tick(_log_position(v, low, high, plot.x0, plot.x1), tokens_label(v)) for v in values]
    if not values or (high != values[-1] and plot.x1 - ticks[-1].pos > 40):
        ticks.append(Tick(plot.x1, tokens_label(high)))
    return ticks


def _nice(value: float, up: bool) -> int:
    """The 1, 2 or 5 × 10^k next above (or below) ``value``: the ends of a log axis."""
    steps: list[int] = sorted(m * 10**d for d in range(0, 12) for m in (1, 2, 5))
    if up:
        return next((v for v in steps if v >= value), steps[-1])
    return max((v for v in steps if v <= value), default=1)


def _y_ticks(bottom: int, top: int, plot: Plot) -> list[Tick]:
    first, last = math.floor(math.log10(bottom)), math.ceil(math.log10(top))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    values = [m * 10**d for d in range(first, last + 1) for m in steps if bottom <= m * 10**d <= top]
    return [Tick(_log_position(v, bottom, top, plot.y1, plot.y0), f"{v:,}") for v in values]


def capacity_svg(result: SizeOffloadResult, p99_context_tokens: int | None = None) -> str:
    """Whole sessions resident on the GPU pool and in the CPU tier, 1k tokens to max_model_len."""
    f = _figures(result)
    capacity = f.capacity
    high = result.max_model_len
    low = min(1024, high)
    marks = [result.typical_context_tokens] + ([p99_context_tokens] if p99_context_tokens else [])
    contexts = _contexts(low, high, marks)
    gpu = {c: capacity.gpu_sessions(c) for c in contexts}
    tier = {c: capacity.tier_sessions(c) for c in contexts}
    has_tier = result.offload is not None and result.offload.vllm_refuses is None and capacity.has_tier
    counts = [n for n in (*gpu.values(), *(tier.values() if has_tier else ())) if n]
    top = _nice(max(counts, default=1) * 1.05, up=True)
    bottom = min(_nice(min(counts, default=1), up=False), top // 10)
    plot = Plot(x0=86, x1=WIDTH - MARGIN - 8, y0=146, y1=420)

    def pos(c: int, n: int) -> tuple[float, float]:
        return _log_position(c, low, high, plot.x0, plot.x1), _log_position(n, bottom, top, plot.y1, plot.y0)

    series = [Series("gpu", "on the GPU (KV pool)", _polyline(contexts, gpu, pos))]
    if has_tier:
        series.append(Series("tier", "in the CPU tier", _polyline(contexts, tier, pos)))
    markers = _markers(result, p99_context_tokens, capacity, has_tier, pos, plot, low, high)
    notes = _capacity_notes(result, f, has_tier, contexts, gpu)
    y = plot.y1 + 62
    legend = []
    lx = float(plot.x0)
    for s in series:
        legend.append((s.key, s.name, lx, y))
        lx += 30 + text_width(s.name) + 28
    note_lines = []
    for note in notes:
        for line in _wrap(note, WIDTH - 2 * MARGIN, 12):
            y += 18
            note_lines.append((y, line))
    return _env.get_template("capacity.svg.j2").render(
        kind="capacity",
        width=WIDTH,
        height=math.ceil(y + 20),
        margin=MARGIN,
        title="Sessions that fit, by context length",
        heading=_heading(result),
        subtitle=f"whole sessions resident per engine (TP×PP {result.world_size} GPUs); both axes log scale",
        desc=_capacity_desc(result, capacity, has_tier, marks),
        plot=plot,
        x_ticks=_x_ticks(low, high, plot),
        y_ticks=_y_ticks(bottom, top, plot),
        series=series,
        markers=markers,
        legend=legend,
        notes=note_lines,
    )


def _polyline(contexts: list[int], values: Mapping[int, int | None], pos: _Position) -> str:
    """The curve while at least one whole session fits (a log axis has no 0)."""
    points = []
    for c in contexts:
        n = values[c]
        if not n:
            break
        x, y = pos(c, n)
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)


def _markers(
    result: SizeOffloadResult,
    p99: int | None,
    capacity: Capacity,
    has_tier: bool,
    pos: _Position,
    plot: Plot,
    low: int,
    high: int,
) -> list[Marker]:
    """The typical context and the p99 as vertical lines, each labelled above the plot area with what fits there;
    a label that would run into the one before goes a row higher."""
    wanted = [("typical", "typical", result.typical_context_tokens)]
    if p99 is not None:
        wanted.append(("p99", "p99", min(p99, high)))
    markers: list[Marker] = []
    taken: list[tuple[float, float, float]] = []  # (row y, left, right) of the labels so far
    for key, name, tokens in sorted(wanted, key=lambda w: w[2]):
        tokens = max(tokens, low)
        n_gpu = capacity.gpu_sessions(tokens)
        n_tier = capacity.tier_sessions(tokens) if has_tier else None
        label = f"{name} {tokens:,}: GPU {n_gpu:,}" + (f" · CPU tier {n_tier:,}" if n_tier is not None else "")
        if p99 is not None and key == "p99" and p99 > high:
            label = f"p99 {p99:,} > max_model_len: GPU {n_gpu:,}" + (
                f" · CPU tier {n_tier:,}" if n_tier is not None else ""
            )
        x = _log_position(tokens, low, high, plot.x0, plot.x1)
        width = text_width(label)
        anchor, lx = "middle", x
        left = x - width / 2
        if left < MARGIN:
            anchor, lx, left = "start", float(MARGIN), float(MARGIN)
        elif x + width / 2 > WIDTH - MARGIN:
            anchor, lx, left = "end", float(WIDTH - MARGIN), WIDTH - MARGIN - width
        row = plot.y0 - 10
        while any(r == row and not (left + width + 8 < a or left > b + 8) for r, a, b in taken):
            row -= 18
        taken.append((row, left, left + width))
        dots = []
        for series_key, n in (("gpu", n_gpu), ("tier", n_tier)):
            if n:
                dots.append((*pos(tokens, n), series_key))
        markers.append(Marker(key, x, label, lx, row, anchor, dots))
    return markers


def _capacity_notes(
    result: SizeOffloadResult, f: SizingFigures, has_tier: bool, contexts: list[int], gpu: dict[int, int]
) -> list[str]:
    notes = []
    none_fit = [c for c in contexts if gpu[c] == 0]
    if none_fit:
        notes.append(f"No whole session fits on the GPU from {none_fit[0]:,} tokens on (the line ends there).")
    if result.offload is None:
        notes.append("No CPU tier sized: give kv_offloading_size_gib, warm_sessions or host_ram_gib.")
    elif result.offload.vllm_refuses is not None:
        notes.append(f"CPU tier not drawn: {result.offload.vllm_refuses}.")
    elif has_tier:
        notes.append(
            f"CPU tier: {gib(result.offload.kv_offloading_size_gib)} GiB per engine ({result.offload.backend}); "
            f"GPU pool: {result.num_gpu_blocks:,} blocks of {result.block_size} tokens per rank."
        )
    estimates = _estimates(result)
    if estimates:
        notes.append("Estimates: " + "; ".join(estimates) + " (see the answer's caveats).")
    return notes


def _capacity_desc(result: SizeOffloadResult, capacity: Capacity, has_tier: bool, marks: list[int]) -> str:
    parts = [f"Whole sessions that fit per engine for {_heading(result)}, by context length."]
    for tokens in sorted({*marks, result.max_model_len}):
        tokens = min(tokens, result.max_model_len)
        tier = capacity.tier_sessions(tokens) if has_tier else None
        parts.append(
            f"At {tokens:,} tokens: {capacity.gpu_sessions(tokens):,} on the GPU"
            + (f", {tier:,} in the CPU tier." if tier is not None else ".")
        )
    return " ".join(parts)


# ------------------------------------------------------------------------------------------ both, for --plot


def plot_svg(result: SizeOffloadResult, kind: str = "both", p99_context_tokens: int | None = None) -> str:
    """The picture ``kind`` names; "both" stacks the memory budget over the capacity in one SVG document."""
    if kind == "memory":
        return memory_svg(result)
    if kind == "capacity":
        return capacity_svg(result, p99_context_tokens)
    if kind != "both":
        raise PictureError(f"kind: {kind!r} is not one of both, memory, capacity")
    parts = [memory_svg(result), capacity_svg(result, p99_context_tokens)]
    heights = [_height(p) for p in parts]
    return _env.get_template("stacked.svg.j2").render(
        width=WIDTH,
        height=sum(heights),
        title=f"Memory budget and sessions that fit: {_heading(result)}",
        parts=[(Markup(_placed(p, y)), y) for p, y in zip(parts, (0, heights[0]), strict=True)],
    )


def _placed(svg: str, y: int) -> str:
    """One of our own pictures (rendered and escaped above) as a nested <svg> at ``y``."""
    return svg.replace("<svg ", f'<svg y="{y}" ', 1)


def _height(svg: str) -> int:
    found = re.search(r'height="(\d+)"', svg)
    assert found is not None
    return int(found.group(1))


def picture_page(result: SizeOffloadResult, p99_context_tokens: int | None = None) -> str:
    """Both pictures on one HTML page (an MCP Apps view): the SVG inline, no script."""
    svg = Markup(plot_svg(result, "both", p99_context_tokens))  # our own SVG, every value in it escaped
    return _env.get_template("picture_page.html.j2").render(title=f"Sizing: {result.model}", svg=svg)
