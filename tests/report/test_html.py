"""`--html`: the page is checked as text (escaping, the content policy, the command line,
batch mode, the walk picture) and, rendered in headless Chromium, as a reader meets it:
every gather named, hazards and refusals shown, the search box and sorting working, nothing
fetched from the network, readable with scripting off, in dark mode and in print."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support import JAX_DATA, REPO

from hlo_dedup.cli import main
from hlo_dedup.report import BatchInfo, RunReport, human_bytes, render_html
from hlo_dedup.report.html_walk import fold_svg
from hlo_dedup.run import RunOptions, run_input

HAZARDS = REPO / "tests" / "data" / "hazards"
LAYERS = REPO / "tests" / "analysis" / "data" / "fsdp_remat_layers.hlo"
REMAT = JAX_DATA / "fsdp_remat_grad.hlo"
#: What a hostile module could put in a name, an op_name, a source path or a line.
EVIL = '"><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


def report_of(paths: list[Path], options: RunOptions = RunOptions(), batch: bool = False) -> RunReport:
    results = [run_input(str(p), None, options.replaced(report_only=True)) for p in paths]
    assert all(r.ok for r in results), [r.error for r in results]
    return RunReport(str(paths[0]), "-", "hlo", "hlo", options.passes, strict=options.strict, inputs=results,
                     max_peak_increase=options.max_peak_increase,
                     batch=BatchInfo(tuple(map(str, paths)), "out", 1, 0.0) if batch else None)


def write_page(tmp_path: Path, report: RunReport, name: str = "page.html", command_line: str = "") -> Path:
    page = tmp_path / name
    page.write_text(render_html(report, command_line), encoding="utf-8")
    return page


def gathers(report: RunReport) -> list[Any]:
    return [g for m in report.modules for g in m.all_gathers]


# ------------------------------------------------------------------------------------------
# The page as text


def test_the_content_policy_allows_exactly_the_inline_style_and_script() -> None:
    page = render_html(report_of([REMAT]), "hlo-dedup x.hlo")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)

    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    # The digests are constants of html.py: after an edit of html.css or html.js, set them
    # to what this computes.
    assert f"style-src '{digest(style)}'" in policy, f"STYLE_DIGEST should be {digest(style)!r}"
    assert f"script-src '{digest(script)}'" in policy, f"SCRIPT_DIGEST should be {digest(script)!r}"
    assert "default-src 'none'" in policy
    assert page.count("<script") == 1 and page.count("<style") == 1
    assert style.isascii() and script.isascii()  # the page's references would not be read there
    assert not re.search(r'(?:src|href)="(?!#)', page), "every reference stays inside the page"


def hostile(report: RunReport, suffix: str = EVIL) -> RunReport:
    """`report` with `suffix` appended to every instruction and computation name, module name,
    input path, op_name, source (set where there was none), reason and instruction line."""
    names: set[str] = set()
    for m in report.modules:
        for p in m.passes:
            for i in p.instructions:
                names.update({i.name, i.computation, *(n for _, n in i.walk)})
                names.update(filter(None, [i.folded_into, i.refused_onto, (i.key or {}).get("parameter")]))
            for f in p.folds:
                names.update({f.kept, f.removed, f.computation})
            for n in p.near_misses:
                names.update(n.instructions)
            names.update(c for c, _, _ in p.deleted)
            names.update(n for _, n, _ in p.deleted)
    free_text = {"op_name", "source", "reason", "reasons", "removed_text", "input", "name", "arguments",
                 "peak_instruction"}

    def poison(value: Any, field: str = "") -> Any:
        if value is None and field in ("op_name", "source"):
            return f"{field}{suffix}"
        if isinstance(value, str):
            if value in names:
                return value + suffix
            return value + suffix if value and (field in free_text or " = " in value) else value
        if isinstance(value, (list, tuple)):
            return type(value)(poison(v, field) for v in value)
        if isinstance(value, dict):
            return {k: poison(v, k) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.replace(value, **{f.name: poison(getattr(value, f.name), f.name)
                                                for f in dataclasses.fields(value) if f.init})
        if type(value).__module__.startswith("hlo_dedup.") and getattr(value, "__slots__", ()):
            copy = object.__new__(type(value))  # a record: every field poisoned, set past its immutability
            for name in value.__slots__:
                object.__setattr__(copy, name, poison(getattr(value, name), name))
            return copy
        return value

    return poison(report)


def hostile_report() -> RunReport:
    return hostile(report_of([REMAT, HAZARDS / "channel_mode.hlo"], RunOptions(max_peak_increase=0), batch=True))


class _Tags(HTMLParser):
    """The tag and attribute names of a page, as an HTML parser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]


def test_names_and_lines_from_the_module_are_escaped() -> None:
    report = hostile_report()
    assert EVIL in gathers(report)[0].name  # the poisoning reached the records
    page = render_html(report, "hlo-dedup " + EVIL)
    assert EVIL not in page and "<img" not in page
    # What a parser finds: no tag or event handler of the module's (in element content its
    # quotes may stay quotes, which are text there).
    found = _Tags()
    found.feed(page)
    assert "img" not in found.tags and found.tags.count("script") == 1
    assert not [a for a in found.attributes if a.startswith("on")]
    assert page.count("<script") == 1
    assert page.count("&lt;script&gt;window.pwned=1&lt;/script&gt;") > 20


#: Text past ASCII a module may carry (op_names and paths from anyone's source).
UNICODE = "\u00e9\u00b7\u2192\u6f22\U0001f600"


def test_the_page_is_ascii_and_spells_the_rest_as_references() -> None:
    """Module text and the page's own marks (the middle dot, arrows, plus-minus) are
    character references: the page is one-byte text whatever the module holds."""
    report = hostile(report_of([REMAT, HAZARDS / "channel_mode.hlo"], RunOptions(max_peak_increase=0), batch=True),
                     UNICODE)
    page = render_html(report, "hlo-dedup " + UNICODE)
    assert page.isascii()
    text = unescape(page)
    assert text.count(UNICODE) > 20
    for mark in ("\u00b7", "\u2192", "\u2193", "\u00b1", "\u00d7", "\u2212"):
        assert mark in text, mark


def test_the_walk_picture_draws_both_walks_from_their_shared_parameter() -> None:
    param = ("parameter", "p.1")
    kept_walk = (param,)
    removed_walk = (("get-tuple-element", "gte.3"), ("opt-barrier", "ob.2"), ("tuple", "t.1"), param)
    svg = ET.fromstring(fold_svg(("all-gather", "ag.1"), kept_walk, ("all-gather", "ag.2"), removed_walk))
    groups = [g for g in svg if g.tag == "g"]
    boxes = {g.findall("text")[1].text: (g.get("class"), float(g.find("rect").get("y"))) for g in groups}
    assert set(boxes) == {"p.1", "t.1", "ob.2", "gte.3", "ag.1", "ag.2"}  # each instruction once
    assert boxes["p.1"][0] == "param" and boxes["ag.1"][0] == "kept" and boxes["ag.2"][0] == "removed"
    assert boxes["ag.1"][1] < boxes["p.1"][1] < boxes["ag.2"][1]  # kept above, removed below the shared root
    assert {boxes[n][1] for n in ("t.1", "ob.2", "gte.3")} == {boxes["ag.2"][1]}  # the removed walk's own row
    paths = [p for p in svg if p.tag == "path"]
    assert len(paths) == 5 + 1  # param->ag.1, param->t.1->ob.2->gte.3->ag.2, and the fold
    assert paths[-1].get("class") == "fold" and svg[-1].text == "folded into"
    refused = ET.fromstring(fold_svg(("all-gather", "a"), (param,), ("all-gather", "b"), (param,), refused=True))
    assert [g.get("class") for g in refused if g.tag == "g"] == ["param", "kept", "refused"]


def test_a_long_name_is_shortened_in_the_picture_and_kept_whole_in_its_title() -> None:
    long = "get-tuple-element." + "7" * 60
    svg = ET.fromstring(fold_svg(("all-gather", "a"), (("parameter", "p"),), ("all-gather", "b"),
                                 ((("get-tuple-element", long)), ("parameter", "p"))))
    node = next(g for g in svg if g.tag == "g" and g.find("title") is not None)
    assert node.find("title").text == long and "\u2026" in node.findall("text")[1].text


def test_folds_of_one_layout_share_a_drawing_but_each_shows_its_own_names() -> None:
    def picture(n: int, refused: bool = False) -> str:  # same lengths: the same layout
        return fold_svg(("all-gather", f"ag.{n}1"), (("parameter", f"p.{n}"),), ("all-gather", f"ag.{n}2"),
                        (("tuple", f"t.{n}"), ("parameter", f"p.{n}")), refused=refused)

    first, second = picture(1), picture(2)
    assert first.replace("1", "2") == second.replace("1", "2")  # one layout
    names = {t.text for t in ET.fromstring(second).iter("text")}
    assert {"p.2", "t.2", "ag.21", "ag.22"} <= names and not {"p.1", "t.1"} & names
    assert ET.fromstring(second).get("aria-label") == "ag.22 folded into ag.21"
    assert "refused" in picture(3, refused=True) and "refused" not in picture(4)


def run_cli(args: list[str]) -> tuple[int, str]:
    stderr = io.StringIO()
    status = main(args, stdin=io.StringIO(), stdout=io.StringIO(), stderr=stderr)
    return status, stderr.getvalue()


def test_cli_writes_the_page_with_its_command_line_and_leaves_the_report_alone(tmp_path: Path) -> None:
    base = [str(REMAT), "-o", str(tmp_path / "out.hlo"), "--max-peak-increase", "0"]
    status, _ = run_cli(base + ["--report", str(tmp_path / "plain.json")])
    assert status == 0
    status, _ = run_cli(base + ["--report", str(tmp_path / "with.json"), "--html", str(tmp_path / "my page.html")])
    assert status == 0
    page = (tmp_path / "my page.html").read_text()
    assert f"<title>hlo-dedup report: {REMAT}</title>" in page
    assert f"hlo-dedup {REMAT} -o {tmp_path / 'out.hlo'} --max-peak-increase 0" in page
    assert escape(f"--html '{tmp_path / 'my page.html'}'") in page  # shell-quoted, as typed

    def without_timings(path: Path) -> dict:
        data = json.loads(path.read_text())
        for m in data["modules"]:
            m.pop("seconds")
            for p in m["passes"]:
                del p["seconds"], p["price_seconds"]
        data.pop("timings")
        return data

    assert without_timings(tmp_path / "plain.json") == without_timings(tmp_path / "with.json")


def test_cli_refuses_two_outputs_on_standard_output(tmp_path: Path) -> None:
    status, err = run_cli([str(REMAT), "--html", "-"])
    assert status == 2 and "--html -" in err and "add -o FILE" in err
    status, err = run_cli([str(REMAT), str(LAYERS), "--output-dir", str(tmp_path), "--html", "-", "--report", "-"])
    assert status == 2 and "both write to standard output" in err


def test_batch_page_lists_modules_quiet_ones_and_failed_files(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for source in (REMAT, JAX_DATA / "conv.hlo"):
        (tmp_path / "in" / source.name).write_bytes(source.read_bytes())
    (tmp_path / "in" / "broken.hlo").write_text("HloModule broken\n\nENTRY e {\n  ROOT p = f32[] nonsense()\n}\n")
    status, _ = run_cli([str(tmp_path / "in"), "--output-dir", str(tmp_path / "out"), "--html", str(tmp_path / "b.html")])
    assert status == 2  # the broken file
    page = (tmp_path / "b.html").read_text()
    assert f"<title>hlo-dedup report: {tmp_path / 'in'} (3 files)</title>" in page
    assert f"Paths relative to <code>{tmp_path / 'in'}</code>" in page
    assert f"<span>3 files &#8594; {tmp_path / 'out'}</span>" in page  # where they went, not the -o default
    status, _ = run_cli([str(tmp_path / "in"), "--report-only", "--html", str(tmp_path / "r.html")])
    assert "<span>3 files, nothing written (--report-only)</span>" in (tmp_path / "r.html").read_text()

    def rows(table: str) -> list[tuple[str, str]]:
        body = re.search(rf'<table class="{table}">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
        return [(path, re.sub("<[^>]+>", "", second).strip())
                for path, second in re.findall(r'<td class="src path" title="[^"]*">([^<]*)</td><td[^>]*>(.*?)</td>', body)]

    assert rows("modules") == [("fsdp_remat_grad.hlo", "jit_loss changed")]  # with a section of its own
    assert rows("modules quiet") == [("conv.hlo", "jit_f")]  # no all-gather: listed, collapsed
    assert [path for path, _ in rows("failed")] == ["broken.hlo"]
    assert "broken.hlo:4:" in page  # its one-line error, as the command printed it
    assert page.count('<section class="module">') == 1


# ------------------------------------------------------------------------------------------
# The page in a browser


VISIBLE_ROWS = "tr.item td.name"


def test_every_gather_is_named_and_every_fold_has_its_card(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = report_of([LAYERS, REMAT], RunOptions(max_peak_increase=0), batch=True)
    with browser.open(write_page(tmp_path, report)) as page:
        assert sorted(page.visible_texts(VISIBLE_ROWS)) == sorted(g.name for g in gathers(report))
        cards = page.visible_texts(".card h4")
        folds = [f for m in report.modules for f in m.folds]
        refused = [g for g in gathers(report) if g.fate == "refused"]
        # The budget of 0 refuses the folds that raise a peak: every one but a layer's last
        # (its forward and backward uses are adjacent), as XLA:CPU's own peak says.
        assert len(folds) == 1 and len(refused) == 7
        assert sorted(cards) == sorted([f"{f.removed} folded into {f.kept}" for f in folds]
                                       + [f"{g.name} refused onto {g.refused_onto} refused" for g in refused])
        for fold in folds:
            assert f"{fold.removed} folded into {fold.kept}" in cards
            card_svg = page.evaluate(f"""Array.from(document.querySelectorAll('.card'))
                .find(c => c.querySelector('h4').innerText.startsWith({json.dumps(fold.removed + ' ')}))
                .querySelector('svg').textContent""")
            assert fold.kept in card_svg and fold.removed in card_svg and fold.key["parameter"] in card_svg
        tiles = page.visible_texts(".tile")
        totals = report.totals()
        assert any(t.startswith(f"SAVED PER DEVICE\n{human_bytes(totals['bytes_per_device'])}\n") for t in tiles)
        assert any(t.startswith("EST. PEAK MEMORY\nunchanged\n") for t in tiles)
        assert totals["peak_increase_bytes"] == 0  # every fold that raised a peak was refused


def test_hazards_and_refused_folds_are_shown_with_their_reasons(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (HAZARDS / "channel_mode.hlo", RunOptions(), ".card.hazardous", "hazard: folded anyway"),
        (HAZARDS / "tunnelled_inner_operands.hlo", RunOptions(strict=True), ".card.refused", "refused"),
        (REMAT, RunOptions(max_peak_increase=0), ".card.refused", "refused"),
    ]
    for path, options, selector, badge in cases:
        report = report_of([path], options)
        expected = [h for m in report.modules for h in m.hazards] or \
                   [g for g in gathers(report) if g.fate == "refused"]
        assert expected
        with browser.open(write_page(tmp_path, report, f"{path.stem}.html")) as page:
            cards = page.visible_texts(selector)
            assert len(cards) == len(expected), (path, cards)
            for card, record in zip(cards, expected):
                assert badge in card
                reasons = getattr(record, "reasons", None) or [record.reason.split(": ", 1)[1]]
                assert all(r in card for r in reasons), (card, reasons)


def test_the_search_box_filters_rows_as_one_types(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = report_of(sorted(JAX_DATA.glob("*.hlo")), batch=True)
    everything = gathers(report)
    with browser.open(write_page(tmp_path, report)) as page:
        page.click("#expand")  # computations without folds start collapsed
        total = len(page.visible_texts(VISIBLE_ROWS))
        assert total == len(everything) >= 40
        page.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "/", "text": "/"})  # the shortcut
        assert page.evaluate("document.activeElement.id") == "search"
        for query in ("gather.1", "generate.py", "DOT_GENERAL"):
            page.evaluate("document.getElementById('search').value = ''")
            page.type(query)
            wanted = sorted(g.name for g in everything
                            if any(query.lower() in (s or "").lower() for s in (g.name, g.op_name, g.source)))
            assert 0 < len(wanted) < total
            assert sorted(page.visible_texts(VISIBLE_ROWS)) == wanted, query
            assert page.evaluate("document.getElementById('count').textContent") == \
                f"{len(wanted)} of {total} instructions"
        page.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Escape"})
        assert len(page.visible_texts(VISIBLE_ROWS)) == total


def test_a_click_on_a_header_sorts_its_table(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = report_of([JAX_DATA / "bf16_cast.hlo"])
    column = "Array.from(document.querySelectorAll('table.gathers tbody tr')).map(r => r.cells[{}]{})"
    names, sizes = column.format(0, ".innerText"), column.format(5, ".dataset.v")
    with browser.open(write_page(tmp_path, report)) as page:
        before = page.evaluate(names)
        page.click("table.gathers th:nth-child(6)")  # Bytes
        ascending = [int(v) for v in page.evaluate(sizes)]
        assert ascending == sorted(ascending) and page.evaluate(names) != before
        page.click("table.gathers th:nth-child(6)")
        assert [int(v) for v in page.evaluate(sizes)] == sorted(ascending, reverse=True)
        page.click("table.gathers th:nth-child(1)")  # All-gather: all_gather.9 before all_gather.10
        natural = sorted(before, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])
        assert page.evaluate(names) == natural != sorted(before)
        assert page.evaluate("document.querySelector('table.gathers th:nth-child(1)').getAttribute('aria-sort')") \
            == "ascending"


def test_nothing_is_fetched_from_the_network(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    control = tmp_path / "control.html"  # the recorder sees a page's fetches: an external image is one
    control.write_text('<!DOCTYPE html><img src="http://127.0.0.1:9/x.png"><p>control</p>')
    with browser.open(control) as page:
        assert "http://127.0.0.1:9/x.png" in page.requests
    report = report_of([LAYERS, REMAT, HAZARDS / "channel_mode.hlo"], RunOptions(max_peak_increase=0), batch=True)
    with browser.open(write_page(tmp_path, report)) as page:
        page.click("#expand")
        page.evaluate("document.getElementById('search').focus()")
        page.type("gather")
        time.sleep(0.2)
        assert page.requests == [page.url]
        assert [e for e in page.log_entries if e["level"] in ("error", "warning")] == []
        assert page.evaluate("document.documentElement.classList.contains('js')")  # the script was allowed


def test_the_page_reads_the_same_without_javascript(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = report_of([LAYERS, REMAT], RunOptions(max_peak_increase=0), batch=True)
    path = write_page(tmp_path, report)
    with browser.open(path, javascript=False) as page:
        assert not page.evaluate("document.documentElement.classList.contains('js')")
        assert page.visible_texts("#toolbar") == []  # the search box needs the script: not shown
        assert sorted(page.visible_texts(VISIBLE_ROWS)) == sorted(g.name for g in gathers(report))
        refused = [g for g in gathers(report) if g.fate == "refused"]
        folds = [f for m in report.modules for f in m.folds]
        assert len(page.visible_texts(".card")) == len(folds) + len(refused)
        closed = "document.querySelector('details.sub:not([open])')"
        if page.evaluate(f"{closed} !== null"):  # native <details> still opens on a click
            page.evaluate(f"{closed}.id = 'closed'")
            page.click("#closed > summary")
            assert page.evaluate("document.getElementById('closed').open")


def test_a_hostile_module_renders_inert(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = hostile_report()
    with browser.open(write_page(tmp_path, report, command_line="hlo-dedup " + EVIL)) as page:
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.scripts.length") == 1 and page.evaluate("document.images.length") == 0
        assert page.evaluate("""Array.from(document.querySelectorAll('*')).flatMap(e => Array.from(e.attributes))
                                .filter(a => a.name.startsWith('on')).length""") == 0
        shown = page.visible_texts(VISIBLE_ROWS)
        assert sorted(shown) == sorted(g.name for g in gathers(report)) and all(EVIL in n for n in shown)
        assert page.evaluate("document.title").endswith(EVIL + " and 1 more (2 files)")


def test_text_past_ascii_reads_as_written(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The page is ASCII (its marks and the module's text as references); the reader sees
    the characters."""
    report = hostile(report_of([REMAT]), UNICODE)
    with browser.open(write_page(tmp_path, report)) as page:
        shown = page.visible_texts(VISIBLE_ROWS)
        assert sorted(shown) == sorted(g.name for g in gathers(report)) and all(UNICODE in n for n in shown)
        card = page.visible_texts(".card dl")[0]
        assert " output \u00b7 " in card and " \u2192 " in card, card
        assert page.visible_texts(".card a.more")[0] == "what changed \u2193"
        between = page.evaluate("getComputedStyle(document.querySelector('header.page .sub span + span'), "
                                "'::before').content")
        assert between == '" \u00b7 "'  # the style's escaped dot, with a space either side


def test_script_in_a_modules_metadata_renders_inert(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    metadata = (', metadata={op_name="<script>window.pwned=3</script>" '
                'source_file="\\"><img src=x onerror=\\"window.pwned=4\\">" source_line=7}')
    text = re.sub(r"(= f32\[16,16\]\{1,0\} all-gather\(.*)$", lambda m: m.group(1) + metadata,
                  REMAT.read_text(), flags=re.M)
    module = tmp_path / "hostile.hlo"
    module.write_text(text)
    status, err = run_cli([str(module), "-o", str(tmp_path / "out.hlo"), "--html", str(tmp_path / "page.html")])
    assert status == 0, err
    with browser.open(tmp_path / "page.html") as page:
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.scripts.length") == 1 and page.evaluate("document.images.length") == 0
        assert set(page.visible_texts("tr.item td.op")) == {"<script>window.pwned=3</script>"}
        assert set(page.visible_texts("tr.item td.src")) == {'"><img src=x onerror="window.pwned=4">:7'}
        changed = "\n".join(page.visible_texts(".diff pre"))
        assert 'op_name="<script>window.pwned=3</script>"' in changed  # the removed line, as text


def luminance(css_colour: str) -> float:
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", css_colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_dark_scheme_print_and_screenshot(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_page(tmp_path, report_of([LAYERS]), command_line=f"hlo-dedup {LAYERS.name} --html page.html")
    background = "getComputedStyle(document.documentElement).backgroundColor"
    with browser.open(path) as page:
        assert luminance(page.evaluate(background)) > 0.9
        shot = page.screenshot(tmp_path / "light.png")
        assert shot.startswith(b"\x89PNG") and int.from_bytes(shot[16:20], "big") == 1280 and len(shot) > 50_000
        page.send("Emulation.setEmulatedMedia", {"media": "print"})
        assert page.visible_texts("#toolbar") == []
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
        assert len(page.visible_texts(VISIBLE_ROWS)) == 12  # printed, collapsed sections show their content
        pdf = base64.b64decode(page.send("Page.printToPDF", {"printBackground": True})["data"])
        assert pdf.startswith(b"%PDF")
    with browser.open(path, dark=True) as page:
        assert luminance(page.evaluate(background)) < 0.15
        assert luminance(page.evaluate("getComputedStyle(document.body).color")) > 0.8
        page.screenshot(tmp_path / "dark.png")


# ------------------------------------------------------------------------------------------
# A real model with hundreds of folds


@pytest.fixture(scope="session")
def transformer_48(xla_client, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A 48-layer FSDP transformer training step lowered by JAX (tests/report/transformer_fsdp.py)."""
    out = tmp_path_factory.mktemp("transformer") / "transformer_fsdp.hlo"
    subprocess.run([sys.executable, str(Path(__file__).with_name("transformer_fsdp.py")), str(out)],
                   check=True, timeout=600)
    return out


MAX_PAGE_BYTES = 4 << 20
#: Guards against a page that hangs the browser, not targets (benchmarks/html_report.py
#: measures load and filter times): both are about 2 s here on a loaded 2-core machine.
HANG_SECONDS = 60


def test_a_48_layer_model_with_hundreds_of_folds(transformer_48: Path, browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page_path = tmp_path / "transformer.html"
    status, _ = run_cli([str(transformer_48), "-o", str(tmp_path / "out.hlo"), "--html", str(page_path)])
    assert status == 0
    report = report_of([transformer_48])
    folds = [f for m in report.modules for f in m.folds]
    assert len(folds) >= 500 and all(g.source and g.op_name for g in gathers(report))
    size = page_path.stat().st_size
    assert size < MAX_PAGE_BYTES, f"{size} bytes"
    with browser.open(page_path) as page:
        assert page.load_seconds < HANG_SECONDS
        assert len(page.visible_texts(VISIBLE_ROWS)) == len(gathers(report)) == 2 * len(folds)
        assert page.evaluate("document.querySelectorAll('.card').length") == len(folds)
        assert page.visible_texts(".card") == []  # 500 cards start collapsed
        started = time.monotonic()
        page.evaluate("document.getElementById('search').focus()")
        page.type(folds[0].removed)
        assert page.visible_texts(VISIBLE_ROWS)[0] == folds[0].removed
        assert any(t.startswith(f"{folds[0].removed} folded into {folds[0].kept}") for t in page.visible_texts(".card"))
        assert time.monotonic() - started < HANG_SECONDS
        page.screenshot(tmp_path / "transformer.png", full=False)


def test_the_page_names_each_gather_s_weight_and_the_idioms_that_stopped_its_walk() -> None:
    named = unescape(render_html(report_of([JAX_DATA / "pytree_weights.hlo"]), ""))
    assert "<th data-sort title=\"the user's name of the gathered weight" in named
    assert named.count("p['embed']</td>") == 2  # the tied embedding's kept and folded gathers
    assert "<dt>Weight</dt><dd><code class=\"q\">p['embed']</code></dd>" in named  # on the fold's card
    fsdp = unescape(render_html(report_of([REPO / "tests" / "data" / "torch_xla" / "fsdp_bf16.hlo"]), ""))
    assert "Notes (2)" in fsdp and "(mixed precision)" in fsdp
    assert "The same weight, each gather of its own reshaped (flattened) view (4)" in fsdp


def test_at_1400_pixels_no_column_hides_and_no_name_breaks(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Long op_names and source paths wrap at their `/`, never inside a name, and take no more
    # width than their longest part, so the all-gather table fits a 1400-pixel window.
    report = report_of([JAX_DATA / "mesh2d_gspmd_after_spmd.hlo", REMAT])
    with browser.open(write_page(tmp_path, report), width=1400) as page:
        overflowing = page.evaluate(
            "Array.from(document.querySelectorAll('.scroll')).filter(s => s.scrollWidth > s.clientWidth + 1).length")
        assert overflowing == 0
        # Each op_name / source cell's lines start at a part boundary: no line begins mid-name.
        broken = page.evaluate("""Array.from(document.querySelectorAll('td.op, td.src')).filter(td => {
            const range = document.createRange(); range.selectNodeContents(td);
            const rects = Array.from(range.getClientRects()); return rects.length > 1 &&
              !td.innerHTML.includes('<wbr>'); }).length""")
        assert broken == 0
        assert "dot_general" in page.visible_texts("td.op")
