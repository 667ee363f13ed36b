"""The compactions chart (CTX-41): tokens before and after each compaction, with the trigger
threshold and the target, as inline SVG made on the server — no script, no library.

Plain Python: points in, SVG markup out (every text escaped here). Compactions are placed
at even steps in the order they happened, so a burst in one run and a compaction days
later are both readable; each point's time is in its tooltip and under the axis.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 760, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 46


@dataclass(frozen=True)
class ChartPoint:
    label: str  # "#3" — the compaction's place in the list below the chart
    when: str  # already formatted for people
    trigger: str
    before: int | None
    after: int | None
    threshold: int | None
    target: int | None


# (key, legend, line style): before and after are measured lines with markers; the
# threshold and the target are policy levels, drawn as dashed steps.
SERIES = (
    ("before", "tokens before", "measured"),
    ("after", "tokens after", "measured"),
    ("threshold", "trigger threshold", "level"),
    ("target", "target", "level"),
)


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1, 2 or 5 × 10^k step giving about ``ticks`` intervals over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def tokens_label(value: float) -> str:
    """12k, 1.5M, 2B — axis labels that stay short."""
    if value >= 1_000_000_000:
        return f"{value / 1_000_000_000:.1f}".rstrip("0").rstrip(".") + "B"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}".rstrip("0").rstrip(".") + "M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}".rstrip("0").rstrip(".") + "k"
    return f"{value:.0f}"


def token_ticks(top_value: float) -> list[int]:
    """The y axis ticks of a tokens chart: 0, then whole-number steps of 1, 2 or 5 × 10^k
    up to the first at or above ``top_value`` — tokens are whole, so the step is never
    below 1 (a chart of three tokens reads 0 1 2 3, not 0 0 0 1 1 1)."""
    top = max(float(top_value or 0), 1.0)
    step = max(1, round(nice_step(top)))
    return [step * n for n in range(math.ceil(top / step) + 1)]


def token_scale(top_value: float) -> tuple[Callable[[float], float], list[str]]:
    """The y scale of a tokens chart of this size, from 0 to a round value above
    ``top_value``: the y of a value, and the grid, its labels and the baseline as markup."""
    ticks = token_ticks(top_value)
    y_max = ticks[-1]
    plot_h = HEIGHT - TOP - BOTTOM

    def y_at(value: float) -> float:
        return TOP + plot_h - (value / y_max) * plot_h

    marks = []
    for tick in ticks:
        y = y_at(tick)
        marks.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        marks.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{tokens_label(tick)}</text>')
    marks.append(f'<line class="baseline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>')
    return y_at, marks


def _runs(points: Sequence[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Split a series at missing values, so a gap is never drawn as a straight line."""
    runs: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(point)
    return [run for run in runs if run]


def _polyline(points: list[tuple[float, float]], css: str) -> str:
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline class="series series-{css}" fill="none" points="{coords}"/>'


def compaction_chart(points: Sequence[ChartPoint], *, title: str = "Tokens at each compaction") -> str:
    """The chart's SVG markup; an empty string when there is nothing to draw."""
    if not points:
        return ""
    values = [v for p in points for v in (p.before, p.after, p.threshold, p.target) if v is not None]
    y_at, axis = token_scale(max(values, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(points)

    def x_at(index: int) -> float:
        return LEFT + slot * (index + 0.5)

    out = [
        f'<svg class="compaction-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="xMidYMid meet">',
        f'<title id="chart-title">{escape(title)}</title>',
        f'<desc id="chart-desc">{len(points)} compaction{"s" if len(points) != 1 else ""}; tokens before and '
        f'after each, with the trigger threshold and the target. The table below has every figure.</desc>',
    ]
    # Grid and y axis.
    out.append('<g class="axis">')
    out.extend(axis)
    # X labels: every point when few, else about ten, always the first and the last.
    every = max(1, math.ceil(len(points) / 10))
    for index, point in enumerate(points):
        if index % every and index != len(points) - 1:
            continue
        x = x_at(index)
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{escape(point.label)}</text>')
        if index in (0, len(points) - 1) or len(points) <= 4:
            out.append(f'<text class="when" x="{x:.1f}" y="{TOP + plot_h + 32}" '
                       f'text-anchor="middle">{escape(point.when)}</text>')
    out.append("</g>")

    # The drop of each compaction, before → after.
    out.append('<g class="drops">')
    for index, point in enumerate(points):
        if point.before is not None and point.after is not None:
            x = x_at(index)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_at(point.before):.1f}" y2="{y_at(point.after):.1f}"/>')
    out.append("</g>")

    for key, legend, style in SERIES:
        out.append(f'<g class="series-group" data-series="{key}"><title>{escape(legend)}</title>')
        if style == "level":
            # A step per compaction: the level that applied to it, across its slot.
            steps: list[tuple[float, float] | None] = []
            for index, point in enumerate(points):
                value = getattr(point, key)
                if value is None:
                    steps.append(None)
                    continue
                y = y_at(value)
                steps.extend([(LEFT + slot * index, y), (LEFT + slot * (index + 1), y)])
            for run in _runs(steps):
                out.append(_polyline(run, key))
        else:
            line = [None if getattr(p, key) is None else (x_at(i), y_at(getattr(p, key))) for i, p in enumerate(points)]
            for run in _runs(line):
                out.append(_polyline(run, key))
            for index, point in enumerate(points):
                value = getattr(point, key)
                if value is None:
                    continue
                tip = (f"{point.label} · {point.when} · {legend} {value:,} · trigger {point.trigger}")
                out.append(f'<circle class="marker marker-{key}" cx="{x_at(index):.1f}" cy="{y_at(value):.1f}" r="4">'
                           f'<title>{escape(tip)}</title></circle>')
        out.append("</g>")

    # Legend along the top.
    out.append('<g class="legend">')
    x = LEFT
    for key, legend, _style in SERIES:
        out.append(f'<line class="series series-{key}" x1="{x}" x2="{x + 22}" y1="14" y2="14"/>')
        out.append(f'<text x="{x + 28}" y="18">{escape(legend)}</text>')
        x += 28 + 8 * len(legend) + 18
    out.append("</g></svg>")
    return "\n".join(out)
