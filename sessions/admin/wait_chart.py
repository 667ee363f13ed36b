"""The wait at each compaction (CTX-45): how long the person waited for it, as bars drawn
under the tokens chart with the same width and slots, so each compaction's wait stands
under its drop in tokens. Inline SVG made on the server, like ``chart``: points in,
markup out, every text escaped here.

A bar is green when the committed summary was prepared in the background, orange when it
was made while the person waited; a compaction that recorded no wait (saved before
CTX-45) has no bar, only "–".
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from sessions.admin.chart import LEFT, RIGHT, WIDTH, nice_step
from sessions.admin.waits import MISSING, WaitFigures

HEIGHT = 150
TOP, BOTTOM = 30, 24

# (css class, legend) of a bar, by ``prepared``.
KINDS = {True: ("prepared", "prepared in the background"), False: ("inline", "made while the person waited"),
         None: ("unknown", "not recorded how")}


@dataclass(frozen=True)
class WaitPoint:
    label: str  # "#3" — the compaction's place in the table
    when: str  # already formatted for people
    figures: WaitFigures


def _seconds_label(value: float) -> str:
    return f"{value:g} s"


def wait_chart(points: Sequence[WaitPoint], *, title: str = "Wait at each compaction") -> str:
    """The chart's SVG markup; an empty string when no compaction recorded its wait."""
    waits = [p.figures.stall_ms for p in points if p.figures.stall_ms is not None]
    if not waits:
        return ""
    top_seconds = max(waits) / 1_000
    step = nice_step(top_seconds or 1.0, ticks=3)
    y_max = math.ceil((top_seconds or 1.0) / step) * step
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(points)
    width = max(2.0, min(36.0, slot * 0.5))

    def y_at(seconds: float) -> float:
        return TOP + plot_h - (seconds / y_max) * plot_h

    out = [
        f'<svg class="wait-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="wait-chart-title wait-chart-desc" preserveAspectRatio="xMidYMid meet">',
        f'<title id="wait-chart-title">{escape(title)}</title>',
        f'<desc id="wait-chart-desc">How long the person waited for each of the {len(points)} '
        f'compaction{"s" if len(points) != 1 else ""}, in seconds: green when the summary was prepared in the '
        f'background, orange when it was made while they waited. The table below has every figure.</desc>',
        '<g class="axis">',
    ]
    tick = 0.0
    while tick <= y_max + step / 2:
        y = y_at(tick)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{_seconds_label(round(tick, 6))}</text>')
        tick += step
    baseline = TOP + plot_h
    out.append(f'<line class="baseline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{baseline}" y2="{baseline}"/>')
    every = max(1, math.ceil(len(points) / 10))
    for index, point in enumerate(points):
        if index % every == 0 or index == len(points) - 1:
            x = LEFT + slot * (index + 0.5)
            out.append(f'<text x="{x:.1f}" y="{baseline + 16}" text-anchor="middle">{escape(point.label)}</text>')
    out.append("</g>")

    out.append('<g class="waits">')
    for index, point in enumerate(points):
        figures = point.figures
        x = LEFT + slot * (index + 0.5)
        if figures.stall_ms is None:
            out.append(f'<text class="wait-missing" x="{x:.1f}" y="{baseline - 4}" text-anchor="middle">'
                       f'{MISSING}<title>{escape(f"{point.label} · {point.when} · wait not recorded")}</title></text>')
            continue
        kind, legend = KINDS[figures.prepared]
        tip = f"{point.label} · {point.when} · waited {figures.stall_text} · {legend}"
        if figures.prepared_age_ms is not None:
            tip += f", summary {figures.age_text} old"
        if figures.discarded_text:
            tip += f" · {figures.discarded_text}"
        y_top = min(y_at(figures.stall_ms / 1_000), baseline - 1.5)  # a wait of nothing is still a visible sliver
        out.append(f'<rect class="wait wait-{kind}" x="{x - width / 2:.1f}" y="{y_top:.1f}" width="{width:.1f}" '
                   f'height="{baseline - y_top:.1f}"><title>{escape(tip)}</title></rect>')
    out.append("</g>")

    out.append('<g class="legend">')
    x = LEFT
    for kind, legend in (KINDS[True], KINDS[False]):
        out.append(f'<rect class="wait wait-{kind}" x="{x}" y="8" width="12" height="12"/>')
        out.append(f'<text x="{x + 18}" y="18">{escape(legend)}</text>')
        x += 18 + 7 * len(legend) + 22
    out.append("</g></svg>")
    return "\n".join(out)
