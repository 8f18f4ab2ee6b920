"""The page's picture of a computation's memory: its live bytes over the schedule before
and after its folds, both peaks, and where each fold keeps a gather live past its old
last reader (where it undid a rematerialization).

An inline SVG drawn from a `LiveProfile` (a few hundred columns, each the highest live
bytes among its program points): the columns are integers on x under a scale transform and
whole pixels on y, so a chart is a few kilobytes whatever the computation's size; a page
draws at most `MAX_CHARTS`, for the computations with the most folds.
"""

from __future__ import annotations

from itertools import accumulate
from math import ceil, floor, log10
from typing import TYPE_CHECKING, Sequence

from ..analysis.live_profile import column_of
from .markup import escape
from .units import bytes_change, human_bytes, plural

if TYPE_CHECKING:
    from ..analysis.live_profile import Extension, LiveProfile

#: Charts a page draws at most (a computation's is a few kilobytes).
MAX_CHARTS = 12
#: Up to this many folds, each fold's extension is a bar of its own (its title names the
#: fold); past it, one strip counts the folds whose gather is kept live at each column.
MAX_BARS = 12

# Geometry, in CSS pixels at full width: plot [LEFT, LEFT + PLOT_W] x [TOP, TOP + PLOT_H],
# then the extensions (bars in lanes, or the count strip), then the x labels.
WIDTH, LEFT, TOP, PLOT_W, PLOT_H = 960, 80, 22, 864, 170
LANE_H, LANE_GAP, STRIP_H = 5, 2, 30


def chosen(profiles: Sequence[LiveProfile], limit: int = MAX_CHARTS) -> set[int]:
    """The ids of the profiles the page draws: the `limit` with the most folds (first
    met on a tie)."""
    ranked = sorted(range(len(profiles)), key=lambda i: -profiles[i].folds)
    return {id(profiles[i]) for i in ranked[:limit]}


def live_chart(profile: LiveProfile) -> str:
    """The figure of one profile: the SVG and a caption that says how to read it."""
    if not profile.points:
        return ""
    low, high, labels, ticks = _scale(profile)
    points, columns = profile.points, len(profile.before)

    def y(value: float) -> int:
        return round(TOP + PLOT_H - (value - low) * PLOT_H / (high - low))

    extensions = profile.extensions
    spans = [_columns(e, points, columns) for e in extensions]
    bottom = TOP + PLOT_H
    below, marks = _extension_marks(extensions, spans, columns, bottom + 8)
    axis = bottom + 8 + below + 14
    height = axis + 20
    out = [f'<svg class="live" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
           f'aria-label="live bytes of {escape(profile.computation)} over its schedule, before and after its folds">',
           '<text class="axis" x="4" y="12">live bytes</text>']
    for label, t in zip(labels, ticks):
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y(t)}" y2="{y(t)}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{y(t) + 4}" text-anchor="end">{label}</text>')
    scale = PLOT_W / columns
    # Integer columns on x (scaled), whole pixels on y: the two series are most of a chart's bytes.
    out.append(f'<g transform="translate({LEFT} 0) scale({_n(scale)} 1)">')
    for first, last in _merged(spans):
        out.append(f'<rect class="band" x="{first}" y="{TOP}" width="{last - first}" height="{PLOT_H}"/>')
    out.append(f'<path class="before" d="{_steps(profile.before, y)}V{bottom}H0Z"/>')
    out.append(f'<path class="after" d="{_steps(profile.after, y)}"/>')
    out += marks
    out.append("</g>")
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{bottom}" y2="{bottom}"/>')
    if extensions:
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{bottom + 8 + min(below, 12)}" text-anchor="end">'
                   "kept live</text>")
    out += _peak_marks(profile, y, scale)
    out += _point_ticks(points, axis)
    out.append("</svg>")
    return f'<figure class="live">{"".join(out)}<figcaption>{_caption(profile)}</figcaption></figure>'


def _extension_marks(extensions: Sequence[Extension], spans: Sequence[tuple[int, int]], columns: int,
                     top: int) -> tuple[int, list[str]]:
    """(height, marks) of the extensions under the plot, in column units on x: a bar per
    fold in the first lane where it overlaps no other, or for many folds a strip of how
    many are kept live at each column."""
    if not extensions:
        return LANE_H, []
    if len(extensions) <= MAX_BARS:
        ends: list[int] = []
        out = []
        for e, (first, last) in zip(extensions, spans):
            lane = next((i for i, end in enumerate(ends) if end <= first), len(ends))
            ends[lane:lane + 1] = [last]
            out.append(f'<rect class="span" x="{first}" y="{top + lane * (LANE_H + LANE_GAP)}" '
                       f'width="{last - first}" height="{LANE_H}"><title>{escape(_span_text(e))}</title></rect>')
        return len(ends) * (LANE_H + LANE_GAP), out
    steps = [0] * (columns + 1)
    for first, last in spans:
        steps[first] += 1
        steps[last] -= 1
    counts = list(accumulate(steps[:columns]))
    most = max(counts)

    def y(count: int) -> int:
        return round(top + STRIP_H - count * STRIP_H / most)

    title = f"how many of the {len(extensions)} folds keep a gather live past its old last reader (at most {most})"
    return STRIP_H, [f'<path class="count" d="{_steps(counts, y)}V{top + STRIP_H}H0Z"><title>{escape(title)}'
                     "</title></path>"]


def _scale(profile: LiveProfile) -> tuple[float, float, list[str], list[float]]:
    """The y range and its gridlines (labels, values): from 0 (or, when every value is high
    above 0, from just below the lowest) to a round value at or above the peak, in steps of
    1, 2, 2.5 or 5 times a power of ten of the binary unit of the peak."""
    top = max(profile.peak_before.bytes, profile.peak_after.bytes, 1)
    bottom = min(min(profile.before, default=0), min(profile.after, default=0))
    unit = 0
    while unit < len(_UNITS) - 1 and 1024 ** (unit + 1) <= top:
        unit += 1
    size = 1024 ** unit
    low = bottom if bottom > 0.6 * top else 0
    raw = max(top - low, 1) / 4 / size
    power = 10.0 ** floor(log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    step = max(step, 1) if unit == 0 else step  # no fractions of a byte
    first, last = floor(low / size / step), max(ceil(top / size / step), floor(low / size / step) + 1)
    values = [i * step for i in range(first, last + 1)]
    return (values[0] * size, values[-1] * size, [f"{round(v, 6):g} {_UNITS[unit] if v else 'B'}" for v in values],
            [v * size for v in values])


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _n(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")


def _steps(values: Sequence[int], y) -> str:  # type: ignore[no-untyped-def]
    """A step line through the columns: column i at its value from x=i to x=i+1 (a run of
    columns at one height is one segment)."""
    last = y(values[0])
    parts = [f"M0 {last}"]
    for i, v in enumerate(values[1:], 1):
        at = y(v)
        if at != last:
            parts.append(f"H{i}V{at}")
            last = at
    parts.append(f"H{len(values)}")
    return "".join(parts)


def _columns(e: Extension, points: int, columns: int) -> tuple[int, int]:
    """The columns an extension covers, as [first, last + 1)."""
    return column_of(e.first, points, columns), column_of(e.last, points, columns) + 1


def _merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of column runs, as disjoint [first, last + 1) runs."""
    runs: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if runs and first <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], last))
        else:
            runs.append((first, last))
    return runs


def _span_text(e: Extension) -> str:
    return (f"{e.kept} kept live on points {e.first}-{e.last} ({plural(e.last - e.first + 1, 'point')}) "
            f"for the readers of {e.removed}")


def _peak_marks(profile: LiveProfile, y, scale: float) -> list[str]:  # type: ignore[no-untyped-def]
    """A dot at each peak and a dashed line at its level, labelled at the right; when the
    two levels are close, the lower one's label goes under its line."""
    columns = len(profile.before)
    marks = [("before", profile.peak_before), ("after", profile.peak_after)]
    levels = {name: y(p.bytes) for name, p in marks}
    close = abs(levels["before"] - levels["after"]) < 14
    lower = "before" if profile.peak_before.bytes <= profile.peak_after.bytes else "after"
    out = []
    for name, p in marks:
        x = LEFT + (column_of(p.point, profile.points, columns) + 0.5) * scale
        at = levels[name]
        label_y = at + 13 if close and name == lower else at - 5
        title = f"peak {name} the folds: {human_bytes(p.bytes)} at point {p.point} ({p.instruction})"
        out.append(f'<line class="level {name}" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{at}" y2="{at}"/>'
                   f'<circle class="peak {name}" cx="{_n(x)}" cy="{at}" r="4"><title>{escape(title)}</title></circle>'
                   f'<text class="peak {name}" x="{LEFT + PLOT_W - 4}" y="{label_y}" text-anchor="end">'
                   f'peak {name}: {escape(human_bytes(p.bytes))}</text>')
    return out


def _point_ticks(points: int, axis: int) -> list[str]:
    """At most 9 round program points under the axis, and the last one."""
    step = next(m * 10 ** k for k in range(19) for m in (1, 2, 5) if points <= 8 * m * 10 ** k)
    shown = list(range(0, points, step))
    if points - 1 - shown[-1] > step / 2:
        shown.append(points - 1)
    else:
        shown[-1] = points - 1
    out = []
    for p in shown:
        x = LEFT + (p + 0.5) * PLOT_W / points
        out.append(f'<text class="tick" x="{_n(x)}" y="{axis}" text-anchor="middle">{p}</text>')
    out.append(f'<text class="axis" x="{LEFT + PLOT_W // 2}" y="{axis + 16}" text-anchor="middle">program point</text>')
    return out


def _caption(profile: LiveProfile) -> str:
    before, after = profile.peak_before, profile.peak_after
    rise = after.bytes - before.bytes
    change = bytes_change(rise)
    columns = len(profile.before)
    per = "" if columns == profile.points else (
        f" Each column is the highest of the about {round(profile.points / columns)} points it covers, "
        "so no peak is flattened.")
    n = len(profile.extensions)
    spans = (" No fold keeps a gather live longer." if not n else
             ' <span class="key span"></span>Where a fold keeps a gather live past its old last reader (shaded '
             + ("in the plot; a bar per fold)." if n <= MAX_BARS else
                f"in the plot; below, how many of the {n} folds do at each point)."))
    return (f"Live bytes at each of the {profile.points} program points of the {escape(profile.schedule)} "
            f'(estimated): <span class="key before"></span>before and <span class="key after"></span>after the '
            f"{'fold' if profile.folds == 1 else f'{profile.folds} folds'}.{spans}{per} "
            f"<b>Peak before</b> {human_bytes(before.bytes)} at point {before.point} "
            f"(<code>{escape(before.instruction)}</code>); <b>after</b> {human_bytes(after.bytes)} ({change}) at "
            f"point {after.point} (<code>{escape(after.instruction)}</code>), priced fold by fold on the schedule "
            f"made before them{_rescheduled(profile)}.")


def _rescheduled(profile: LiveProfile) -> str:
    if profile.rescheduled is None:
        return ""
    rise = profile.rescheduled - profile.peak_before.bytes
    change = bytes_change(rise)
    return (f"; with the folded program scheduled anew, as a compiler would, <b>{human_bytes(profile.rescheduled)}"
            f"</b> ({change})")
