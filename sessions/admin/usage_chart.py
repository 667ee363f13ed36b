"""The usage chart of an agent version: tokens per period as stacked bars — uncached input,
cache read, cache written, output — as inline SVG made on the server (no script, no
library), like the compactions chart.

Plain Python: bars in, SVG markup out (every text escaped here). Periods are placed at
even steps in time order; each bar's figures and its runs are in its tooltip, and the
table under the chart has every number. A bar made (or partly made) of our estimates —
the provider reported no usage — is drawn hatched, says so in its tooltip, and the
legend explains the hatching.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from sessions.admin.chart import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH, token_scale

# (figure, legend) from the bottom of a bar up.
LAYERS = (
    ("input_uncached", "uncached input"),
    ("cache_read", "cache read"),
    ("cache_written", "cache written"),
    ("output", "output"),
)


@dataclass(frozen=True)
class UsageBar:
    label: str  # the period, already formatted for people
    runs: int
    completed: int
    input_uncached: int
    cache_read: int
    cache_written: int
    output: int
    source: str = "provider"  # provider, estimated, mixed or none (sessions.selectors.usage.tokens_source)

    @property
    def estimated(self) -> bool:
        return self.source in ("estimated", "mixed")

    @property
    def total(self) -> int:
        return self.input_uncached + self.cache_read + self.cache_written + self.output


def usage_chart(bars: Sequence[UsageBar], *, title: str = "Tokens per period") -> str:
    """The chart's SVG markup; an empty string when there is nothing to draw."""
    if not bars:
        return ""
    y_at, axis = token_scale(max(bar.total for bar in bars))
    any_estimated = any(bar.estimated for bar in bars)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(bars)
    width = max(2.0, min(48.0, slot * 0.7))

    out = [
        f'<svg class="usage-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="usage-chart-title usage-chart-desc" preserveAspectRatio="xMidYMid meet">',
        f'<title id="usage-chart-title">{escape(title)}</title>',
        f'<desc id="usage-chart-desc">{len(bars)} period{"s" if len(bars) != 1 else ""}; the tokens of the runs '
        f'asked in each, stacked: uncached input, cache read, cache written, output. The table below has every '
        f'figure.{" Hatched bars are our estimates: the provider reported no usage." if any_estimated else ""}'
        f'</desc>',
        *(['<defs><pattern id="usage-estimated" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="3" height="6" class="hatch"/></pattern></defs>']
          if any_estimated else []),
        '<g class="axis">',
        *axis,
    ]
    every = max(1, math.ceil(len(bars) / 8))
    for index, bar in enumerate(bars):
        if index % every == 0 or index == len(bars) - 1:
            x = LEFT + slot * (index + 0.5)
            out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{escape(bar.label)}</text>')
    out.append("</g>")

    for index, bar in enumerate(bars):
        x = LEFT + slot * (index + 0.5) - width / 2
        tip = (f"{bar.label} · {bar.runs} run{'s' if bar.runs != 1 else ''}, {bar.completed} completed · "
               + " · ".join(f"{legend} {getattr(bar, key):,}" for key, legend in LAYERS)
               + {"estimated": " · estimated", "mixed": " · partly estimated"}.get(bar.source, ""))
        marked = f' estimated" data-source="{escape(bar.source)}' if bar.estimated else ""
        out.append(f'<g class="bar{marked}"><title>{escape(tip)}</title>')
        base = 0
        for key, _legend in LAYERS:
            value = getattr(bar, key)
            if value <= 0:
                continue
            y_top, y_bottom = y_at(base + value), y_at(base)
            out.append(f'<rect class="layer layer-{key}" x="{x:.1f}" y="{y_top:.1f}" width="{width:.1f}" '
                       f'height="{max(y_bottom - y_top, 0.5):.1f}"/>')
            base += value
        if bar.estimated and base > 0:  # the hatching over the whole bar
            out.append(f'<rect class="estimated-hatch" fill="url(#usage-estimated)" x="{x:.1f}" '
                       f'y="{y_at(base):.1f}" width="{width:.1f}" height="{max(y_at(0) - y_at(base), 0.5):.1f}"/>')
        out.append("</g>")

    out.append('<g class="legend">')
    x = LEFT
    for key, legend in LAYERS:
        out.append(f'<rect class="layer layer-{key}" x="{x}" y="8" width="12" height="12"/>')
        out.append(f'<text x="{x + 18}" y="18">{escape(legend)}</text>')
        x += 18 + 7 * len(legend) + 22
    if any_estimated:
        out.append(f'<rect class="estimated-hatch" fill="url(#usage-estimated)" x="{x}" y="8" width="12" height="12"/>')
        out.append(f'<text x="{x + 18}" y="18">estimated</text>')
    out.append("</g></svg>")
    return "\n".join(out)
