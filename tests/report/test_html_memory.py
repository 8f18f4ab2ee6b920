"""The page's live-bytes chart: per changed computation, its live bytes over the schedule
before and after the folds, both peaks where they are, each fold's extension; bounded in
size whatever the computation's, capped in number, and rendered in a real browser."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import ACROSS_PEAK, scheduled_module
from test_html import HAZARDS, LAYERS, report_of, write_page

from hlo_dedup.analysis.live_profile import COLUMNS, Extension, LiveProfile, Peak, column_max, column_of
from hlo_dedup.report import html, render_html, render_summary
from hlo_dedup.report.html_memory import LEFT, MAX_BARS, PLOT_W, chosen, live_chart
from hlo_dedup.report.json import report_json


def svg_of(figure: str) -> ET.Element:
    return ET.fromstring(re.search(r"<svg.*</svg>", figure, re.S).group(0))  # type: ignore[union-attr]


def highest_step(path: str) -> tuple[int, int]:
    """(column, y) of the highest step of a chart's step path: 'M0 y0H1Vy1H2...'."""
    best, column, y = (10**9, -1), 0, 0
    for op, value in re.findall(r"([MHV])(?:0 )?(\d+)", path):
        if op == "H":
            if y < best[0]:
                best = (y, column)
            column = int(value)
        else:
            y = int(value)
    return best[1], best[0]


def test_a_remat_like_fold_is_drawn_with_both_peaks_and_its_extension(tmp_path: Path) -> None:
    # Live bytes before [520, 520, 584, 648, 1608, 1672, 712, 776, 712]; g2 folded into g1,
    # g1 lives on 4..7 past a (3): after, +64 there, a peak of 1736 at s (5).
    source = tmp_path / "remat.hlo"
    source.write_text(scheduled_module(ACROSS_PEAK))
    page = render_html(report_of([source]), "")
    figures = re.findall(r'<figure class="live">.*?</figure>', page)
    assert len(figures) == 1
    svg = svg_of(figures[0])
    # Nine points, nine columns of 96 pixels: point 5 (s) is centred at 80 + 5.5 * 96.
    peaks = {c.get("class"): c for c in svg.iter("circle")}
    assert float(peaks["peak after"].get("cx")) == float(peaks["peak before"].get("cx")) == LEFT + 5.5 * PLOT_W / 9
    # The gridlines run 0..2 KiB by 0.5 KiB over 170 pixels from y=192: 1736 at 48, 1672 at 53.
    assert (peaks["peak after"].get("cy"), peaks["peak before"].get("cy")) == ("48", "53")
    assert [t.text for t in svg.iter("text") if t.get("class") == "tick"][:5] == [
        "0 B", "0.5 KiB", "1 KiB", "1.5 KiB", "2 KiB"]
    paths = {p.get("class"): p.get("d") for p in svg.iter("path")}
    assert highest_step(paths["after"]) == (5, 48) and highest_step(paths["before"]) == (5, 53)
    # g1's extension: points 4..7 past its old last reader a (3), one bar and one shaded band.
    rects = {r.get("class"): r for r in svg.iter("rect")}
    assert (rects["span"].get("x"), rects["span"].get("width")) == ("4", "4")
    assert (rects["band"].get("x"), rects["band"].get("width")) == ("4", "4")
    assert "g1 kept live on points 4-7 (4 points) for the readers of g2" in figures[0]
    assert [t.text for t in svg.iter("text") if "peak" in (t.get("class") or "")] == [
        "peak before: 1.6 KiB", "peak after: 1.7 KiB"]
    caption = re.search(r"<figcaption>(.*)</figcaption>", figures[0]).group(1)  # type: ignore[union-attr]
    assert "9 program points of the module&#x27;s schedule" in caption
    assert "<b>Peak before</b> 1.6 KiB at point 5 (<code>s</code>)" in caption
    assert "<b>after</b> 1.7 KiB (+64 B) at point 5 (<code>s</code>)" in caption
    assert "(program points 4&ndash;7)" in page  # the fold's card names the same span


def synthetic(points: int, folds: int, seed: int = 0) -> LiveProfile:
    """A profile of `points` points with one sharp peak and `folds` nested extensions."""
    rng = random.Random(seed)
    before = [rng.randrange(1 << 30, 2 << 30) for _ in range(points)]
    after = [v + (1 << 29) for v in before]
    at = rng.randrange(points)
    after[at] = 5 << 30
    extensions = tuple(Extension(f"k{i}", f"r{i}", i * points // (3 * folds), points - 1 - i) for i in range(folds))
    return LiveProfile("body", "memory-minimizing schedule", points, tuple(column_max(before)), tuple(column_max(after)),
                       Peak(max(before), before.index(max(before)), "x"), Peak(5 << 30, at, "peak"), folds, extensions)


@pytest.mark.parametrize("folds", [3, 500])
def test_a_million_points_make_a_chart_of_a_few_kilobytes_with_the_peak_in_its_column(folds: int) -> None:
    profile = synthetic(1_000_000, folds, seed=folds)
    figure = live_chart(profile)
    assert len(figure) < 8_000
    svg = svg_of(figure)
    after = next(p.get("d") for p in svg.iter("path") if p.get("class") == "after")
    column, top = highest_step(after)
    assert column == column_of(profile.peak_after.point, profile.points, COLUMNS)
    circle = next(c for c in svg.iter("circle") if c.get("class") == "peak after")
    assert int(circle.get("cy")) == top  # type: ignore[arg-type]
    assert float(circle.get("cx")) == pytest.approx(LEFT + (column + 0.5) * PLOT_W / COLUMNS, abs=1e-3)  # type: ignore[arg-type]
    bars = [r for r in svg.iter("rect") if r.get("class") == "span"]
    counts = [p for p in svg.iter("path") if p.get("class") == "count"]
    # A bar per fold for a few; for many, one strip that counts them.
    assert (len(bars), len(counts)) == ((folds, 0) if folds <= MAX_BARS else (0, 1))


def test_the_page_draws_the_charts_of_the_computations_with_the_most_folds(monkeypatch: pytest.MonkeyPatch) -> None:
    few, many, most = synthetic(50, 1), synthetic(50, 4), synthetic(50, 9)
    assert chosen([few, many, most], 2) == {id(many), id(most)}
    report = report_of([LAYERS, LAYERS])
    monkeypatch.setattr(html, "MAX_CHARTS", 1)
    page = render_html(report, "")
    assert page.count('<figure class="live">') == 1
    assert "Live-bytes charts for the 1 computation with the most folds; 1 more changed computation without one." in page
    assert "No live-bytes chart: the page draws 1, for the computations with the most folds." in page


def test_a_computation_whose_rescheduled_peak_falls_says_so_as_the_summary_does() -> None:
    # Folding the second of two equal gathers frees its buffer and the folded program
    # schedules lower: the row said "peak unchanged" while the summary gave the drop.
    report = report_of([HAZARDS / "channel_mode.hlo"])
    change = re.search(r"; peak (-[\d.]+ \w?B) \(est\., memory-minimizing schedule", render_summary(report))
    assert change, render_summary(report)
    facts = re.findall(r'<span class="facts">([^<]*)', render_html(report, ""))
    assert any(f.endswith(f"peak {change.group(1)}") for f in facts), facts


def test_the_json_report_stays_as_it_was() -> None:
    data = report_json(report_of([LAYERS]))
    folds = [f for m in data["modules"] for p in m["passes"] for f in p["folds"]]
    assert folds and all("extended_from" not in f["memory"] for f in folds)
    assert all("profiles" not in p for m in data["modules"] for p in m["passes"])


def test_the_chart_renders_at_1400_pixels(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_page(tmp_path, report_of([LAYERS]))
    with browser.open(path, width=1400) as page:
        box = page.evaluate("""(() => { const s = document.querySelector('svg.live');
            const r = s.getBoundingClientRect(), p = s.parentElement.getBoundingClientRect();
            return [r.width, r.height, p.width, s.querySelectorAll('path.after, circle.peak').length]; })()""")
        width, height, room, marks = box
        assert 900 <= width <= room and height > 200 and marks == 3
        assert page.visible_texts("figure.live figcaption")[0].startswith("Live bytes at each of the")
        page.evaluate("document.getElementById('toolbar').remove()")
        top = page.evaluate("document.querySelector('figure.live').getBoundingClientRect().bottom + scrollY")
        shot = page.screenshot(tmp_path / "chart.png", clip_height=int(top) + 10)
        assert shot.startswith(b"\x89PNG") and int.from_bytes(shot[16:20], "big") == 1400
