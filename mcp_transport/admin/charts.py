"""Line charts as inline SVG: no JavaScript, no files to serve, nothing fetched by the browser.

``line_chart(times, series)`` draws each series (a label, a colour and one value per time, None
for a gap) on shared axes that start at zero, with three grid lines and the times at the start,
the middle and the end of the axis under them.
"""
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

WIDTH, HEIGHT = 560, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 12, 26
#: Colours that stay apart for the colour-blind (Okabe-Ito).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9"]


@dataclass
class Series:
    label: str
    values: list
    color: str = ""


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^n at or above value (an axis top people can read)."""
    if value <= 0:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _number(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}" if value == int(value) else f"{value:.2g}"


def _at(coordinate: float) -> str:
    return f"{coordinate:.1f}"


def _clock(timestamp: float, span: float) -> str:
    """UTC time of day, with seconds when the chart spans less than ten minutes."""
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%H:%M:%S" if span < 600 else "%H:%M")


def _segments(points):
    """Runs of consecutive points without a gap."""
    run = []
    for point in points:
        if point is None:
            if run:
                yield run
            run = []
        else:
            run.append(point)
    if run:
        yield run


def line_chart(times: list, series: list, unit: str = "") -> str:
    """An SVG chart (safe HTML) of ``series`` (Series) over ``times`` (Unix seconds)."""
    for index, line in enumerate(series):
        line.color = line.color or PALETTE[index % len(PALETTE)]
    values = [value for line in series for value in line.values if value is not None]
    if len(times) < 2 or not values:
        return format_html('<div class="mcp-chart-empty">{}</div>',
                           "Not enough samples yet: one is taken every DASHBOARD_SAMPLE_SECONDS.")
    top = nice_ceiling(max(values))
    start, span = times[0], (times[-1] - times[0]) or 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t):
        return LEFT + (t - start) / span * plot_w

    def y(v):
        return TOP + plot_h - v / top * plot_h

    parts = []
    for fraction in (0, 0.5, 1):
        level = y(top * fraction)
        parts.append(format_html('<line x1="{}" x2="{}" y1="{}" y2="{}" class="grid"/>'
                                 '<text x="{}" y="{}" class="axis" text-anchor="end">{}{}</text>',
                                 LEFT, WIDTH - RIGHT, _at(level), _at(level), LEFT - 6, _at(level + 4),
                                 _number(top * fraction), unit))
    # The middle label names the middle of the time span, not the middle sample: samples bunched
    # at one end (an old one, then a few recent ones) put the middle sample under the last
    # label, and the two were drawn over each other.
    for t, anchor in ((start, "start"), (start + span / 2, "middle"), (times[-1], "end")):
        parts.append(format_html('<text x="{}" y="{}" class="axis time" text-anchor="{}">{}</text>',
                                 _at(x(t)), HEIGHT - 6, anchor, _clock(t, span)))
    for line in series:
        points = [None if v is None else (x(t), y(v)) for t, v in zip(times, line.values)]
        for run in _segments(points):
            if len(run) == 1:
                parts.append(format_html('<circle cx="{}" cy="{}" r="2.5" fill="{}"/>',
                                         _at(run[0][0]), _at(run[0][1]), line.color))
            else:
                coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in run)
                parts.append(format_html('<polyline points="{}" stroke="{}" class="line"/>', coords, line.color))
    legend = format_html_join("", '<span class="key"><i style="background:{}"></i>{}</span>',
                              ((line.color, line.label) for line in series))
    svg = format_html('<svg viewBox="0 0 {} {}" role="img" preserveAspectRatio="none">{}</svg>',
                      WIDTH, HEIGHT, mark_safe("".join(parts)))
    return format_html('<div class="mcp-chart">{}<div class="legend">{}</div></div>', svg, legend)
