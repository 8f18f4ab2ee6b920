"""`--html`: the run as one self-contained page to open, search and share.

The page holds every fact as HTML — an overview of the run, per module a section per
computation with a table of every all-gather (and preprocess kernel), a card per fold with
a picture of the two walks, its bytes and its memory price, hazards and refused folds with
their reasons, what changed in the module's text, and why the other gathers did not fold.
Its style and script are inline (`html.css`, `html.js` beside this file, read at render
time): no network, no external font; a Content-Security-Policy allows only those two, by
hash, so nothing a module's names could smuggle in runs. Without scripting the page reads
the same; the script only sorts tables, filters by a search box and expands sections.
Everything that comes from a module (names, op_names, source lines, reasons) is escaped.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Sequence

from ..passes import FoldRecord, InstructionFate
from ..plain import FrozenRecord, init_frozen
from .html_sections import (Computation, Ids, changes_section, computations, fold_cards, why_not_section,
                            xla_price_section)
from .html_memory import MAX_CHARTS, chosen, live_chart
from .html_walk import ARROW_DEFS
from .markup import breakable, escape
from .memo import Memo
from .model import InputResult, ModuleRun, RunReport, module_totals, peak_changes, peak_rises, rescheduled_peaks
from .units import bytes_change, human_bytes, plural

GATHER_FATES = ("kept", "folded", "refused", "unique", "not_traced", "not_candidate")
#: On load, the first OPEN_COMPUTATIONS computations with folds, hazards or refusals are
#: open (the rest of a long page starts collapsed), and their fold cards and "what changed"
#: up to these counts.
OPEN_COMPUTATIONS, OPEN_CARDS, OPEN_CHANGES = 8, 12, 6


def render_html(report: RunReport, command_line: str = "") -> str:
    """The page for `report`; `command_line` is the command that produced it, as typed."""
    from .. import __version__

    css, js = _asset("html.css"), _asset("html.js")
    title = f"hlo-dedup report: {_run_name(report)}"
    modules = [(r, m) for r in report.inputs for m in r.modules]
    anchors = {id(m): f"m{i}" for i, (_, m) in enumerate(modules)}
    body = [
        _header(report, title, command_line, __version__),
        _toolbar(),
        _overview(report, modules, anchors),
    ]
    budget = [OPEN_COMPUTATIONS]
    charts = chosen([c for _, m in modules for c in m.profiles], MAX_CHARTS)
    body += [_module_section(r, m, anchors[id(m)], len(modules) > 1, budget, charts)
             for r, m in modules if _has_content(m)]
    body.append(f'<footer>Written by hlo-dedup {escape(__version__)}. Memory figures are estimates: '
                "live bytes under the schedule each one names. Bytes saved per device: a removed "
                "all-gather's output &times; (group size &minus; 1) / group size.</footer>")
    policy = (f"default-src 'none'; style-src '{STYLE_DIGEST}'; script-src '{SCRIPT_DIGEST}'; "
              "base-uri 'none'; form-action 'none'")
    return "".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f'<meta name="generator" content="hlo-dedup {escape(__version__)}">\n',
        f"<title>{escape(title)}</title>\n<style>{css}</style>\n</head>\n<body>\n",
        ARROW_DEFS, "\n", "\n".join(body),
        f"\n<script>{js}</script>\n</body>\n</html>\n",
    ])


def _run_name(report: RunReport) -> str:
    """The input as the title names it: a batch run's first argument and how many files."""
    if report.batch is None:
        return "standard input" if report.input == "-" else report.input
    arguments = report.batch.arguments
    first = arguments[0] if arguments else report.output
    more = f" and {len(arguments) - 1} more" if len(arguments) > 1 else ""
    return f"{first}{more} ({plural(len(report.inputs), 'file')})"


#: The Content-Security-Policy hashes of `html.css` and `html.js`, the page's only style and
#: script (a test keeps them those files'): hashing them on every run would import hashlib,
#: which loads OpenSSL.
STYLE_DIGEST = "sha256-CRmQdD9ZQIvCr0XxTivRtRmiA7PachLDOEv8E6v+iBw="
SCRIPT_DIGEST = "sha256-tDSnT6c9k1eoOtVgcA3xmSYeZuHmYTvmcP3lx5JKI5c="


def _asset(name: str) -> str:
    """A file beside this module, read through its loader (`importlib.resources` imports
    tempfile, zipfile and more: with hashlib, nearly all that importing the page cost)."""
    return __loader__.get_data(os.path.join(os.path.dirname(__file__), name)).decode("utf-8")  # type: ignore[name-defined]


def _has_content(m: ModuleRun) -> bool:
    return bool(m.all_gathers or m.kernels or m.folds or m.hazards)


# ------------------------------------------------------------------------------------------
# Header, toolbar, overview


def _header(report: RunReport, title: str, command_line: str, version: str) -> str:
    mode = "strict (hazardous folds refused)" if report.strict else "faithful"
    facts = [f"hlo-dedup {version}", "pipeline: " + (" \u2192 ".join(report.pipeline) or "none"), mode]
    if report.max_peak_increase is not None:
        facts.append(f"peak budget {human_bytes(report.max_peak_increase)}")
    if report.price == "none":
        facts.append("memory not priced")
    elif report.price_backend != "native":
        facts.append(f"memory priced for {report.price_backend}")
    facts.append("SPMD" if report.spmd else "not SPMD")
    if report.batch is not None:
        where = report.batch.output_dir
        facts.append(f"{plural(len(report.inputs), 'file')} \u2192 {where}" if where else
                     f"{plural(len(report.inputs), 'file')}, nothing written (--report-only)")
    elif report.output:
        facts.append(f"output {'standard output' if report.output == '-' else report.output}")
    sub = "".join(f"<span>{escape(f)}</span>" for f in facts)
    cmd = f'<pre class="cmd" aria-label="command line">{escape(command_line)}</pre>' if command_line else ""
    return f'<header class="page"><h1>{escape(title)}</h1><div class="sub">{sub}</div>{cmd}</header>'


def _toolbar() -> str:
    return ('<div class="toolbar" id="toolbar" hidden>'
            '<input id="search" type="search" placeholder="Filter by name, op_name or source  ( / )" '
            'aria-label="filter instructions by name, op_name or source" autocomplete="off">'
            '<span class="count" id="count" aria-live="polite"></span>'
            '<button type="button" id="expand">Expand all</button>'
            '<button type="button" id="collapse">Collapse all</button></div>')


class _Facts(FrozenRecord):
    """What the overview says about a set of modules."""

    __slots__ = ("gathers", "kernels", "gather_folds", "kernel_folds", "totals")

    def __init__(self, gathers: list[InstructionFate], kernels: list[InstructionFate],
                 gather_folds: list[FoldRecord], kernel_folds: list[FoldRecord], totals: dict[str, int]) -> None:
        init_frozen(self, gathers, kernels, gather_folds, kernel_folds, totals)

    @classmethod
    def of(cls, report: RunReport) -> _Facts:
        mods = report.modules
        folds = [f for m in mods for f in m.folds]
        return cls([g for m in mods for g in m.all_gathers], [k for m in mods for k in m.kernels],
                   [f for f in folds if f.replacement is None], [f for f in folds if f.replacement is not None],
                   report.totals())


def _overview(report: RunReport, modules: Sequence[tuple[InputResult, ModuleRun]], anchors: dict[int, str]) -> str:
    facts = _Facts.of(report)
    totals = facts.totals
    priced = report.price != "none"
    out = ['<section id="overview"><p class="verdict">' + _verdict(facts, priced) + "</p>"]
    kept = sum(g.fate == "kept" for g in facts.gathers)
    fold_detail = [f"onto {plural(kept, 'kept gather')}"] if kept else []
    if facts.kernel_folds:
        fold_detail.append(plural(len(facts.kernel_folds), "kernel rewrite"))
    rise = totals["peak_increase_bytes"]
    saved_output = sum(f.bytes_output for f in facts.gather_folds)
    tiles = [
        ("Folds", str(totals["folds"]), ", ".join(fold_detail), ""),
        ("Saved per device", human_bytes(totals["bytes_per_device"]),
         f"{human_bytes(saved_output)} of gathered output", "good" if totals["bytes_per_device"] else ""),
        ("Est. peak memory", f"+{human_bytes(rise)}" if rise else "unchanged",
         "largest rise in one computation" if rise else "no computation's peak rises", "bad" if rise else "")
        if priced else ("Est. peak memory", "not priced", "--price=none", ""),
        ("Hazards", str(totals["hazards"]), f"{totals['hazards_refused']} refused" if totals["hazards"] else "",
         "bad" if totals["hazards"] else ""),
        ("All-gathers", str(len(facts.gathers)), f"in {plural(totals['modules'], 'module')}"
         + (f", {plural(len(facts.kernels), 'kernel')}" if facts.kernels else ""), ""),
    ]
    out.append('<div class="tiles">' + "".join(
        f'<div class="tile {cls}"><div class="l">{label}</div><div class="v">{escape(value)}</div>'
        f'<div class="d">{escape(detail)}</div></div>' for label, value, detail, cls in tiles) + "</div>")
    if facts.gathers:
        out.append(_fate_bar(Counter(g.fate for g in facts.gathers)))
    omitted = sum(len(m.profiles) for _, m in modules) - MAX_CHARTS
    if omitted > 0:
        out.append(f'<p class="muted">Live-bytes charts for the {plural(MAX_CHARTS, "computation")} with the most '
                   f"folds; {plural(omitted, 'more changed computation')} without one.</p>")
    failed = [r for r in report.inputs if not r.ok]
    if report.batch is not None or len(modules) > 1 or failed:
        out.append(_modules_table(report, anchors))
    out.append("</section>")
    return "".join(out)


def _verdict(facts: _Facts, priced: bool) -> str:
    """The page's first sentence: did the passes help, and at what price (`priced`: False
    with --price=none)."""
    gathers, totals = facts.gathers, facts.totals
    if not gathers and not facts.kernels:
        return "No all-gathers and no AwsNeuronCustomNativeKernel custom-calls: nothing for the passes to fold."
    parts = []
    fates = Counter(g.fate for g in gathers)
    if facts.gather_folds:
        n = len(facts.gather_folds)
        parts.append(f"{plural(n, 'all-gather fold')} {'removes' if n == 1 else 'remove'} "
                     f"{human_bytes(sum(f.bytes_output for f in facts.gather_folds))} of gathered output: "
                     f"<b>{human_bytes(totals['bytes_per_device'])} less traffic per device</b>.")
        rise = totals["peak_increase_bytes"]
        if not priced:
            parts.append("Their price in peak memory was not estimated (--price=none).")
        else:
            parts.append(f'<span class="warn">The estimated peak memory rises by {human_bytes(rise)}</span> '
                         "(kept gathers stay live longer)." if rise else "No computation's estimated peak memory rises.")
    elif fates["refused"]:
        parts.append("No all-gather folded:")
    elif gathers and not fates["unique"]:
        parts.append(f"No all-gather folded: none of the {plural(len(gathers), 'all-gather')} was traced to a "
                     "parameter (see why below).")
    elif gathers:
        parts.append("No all-gather folded: no two traced all-gathers share a key (see why below).")
    if facts.kernel_folds:
        parts.append(f"{plural(len(facts.kernel_folds), 'duplicate preprocess kernel')} rewritten onto clones "
                     "of the first.")
    if fates["refused"]:
        parts.append(f'<span class="warn">{plural(fates["refused"], "fold")} refused</span> (the orange cards).')
    unrefused = totals["hazards"] - totals["hazards_refused"]
    if unrefused:
        parts.append(f'<span class="warn">{plural(unrefused, "hazardous fold")} made anyway: the values may '
                     "differ</span> (--strict refuses them).")
    return " ".join(parts)


def _fate_bar(fates: Counter) -> str:
    total = sum(fates.values())
    rects, x = [], 0.0
    for fate in GATHER_FATES:
        if fates[fate]:
            w = 1000 * fates[fate] / total
            rects.append(f'<rect class="fill-{fate}" x="{x:.2f}" width="{w:.2f}" height="14"/>')
            x += w
    legend = "".join(f'<li class="{f}"><b>{fates[f]}</b> {f.replace("_", " ")}</li>' for f in GATHER_FATES if fates[f])
    return ('<svg class="bar" viewBox="0 0 1000 14" preserveAspectRatio="none" role="img" '
            f'aria-label="all-gathers by fate">{"".join(rects)}</svg><ul class="legend">{legend}</ul>')


def _modules_table(report: RunReport, anchors: dict[int, str]) -> str:
    """A row per module with something to show, then — collapsed — the modules without an
    all-gather or kernel, and the files that failed with their one-line errors. Paths are
    shown relative to the inputs' common directory."""
    base = _common_directory([r.input for r in report.inputs]) if report.batch is not None else ""

    def path(r: InputResult) -> str:
        shown = r.input[len(base):].lstrip("/\\") if base else r.input
        return f'<td class="src path" title="{escape(r.input)}">{escape(shown)}</td>'

    head = ("<tr><th data-sort>Input</th><th data-sort>Module</th>"
            '<th data-sort="num" class="num">All-gathers</th><th data-sort="num" class="num">Folds</th>'
            '<th data-sort="num" class="num">Hazards</th><th data-sort="num" class="num">Refused</th>'
            '<th data-sort="num" class="num">Saved / device</th><th data-sort="num" class="num">Peak change</th></tr>')
    shown, quiet = [], []
    for r in report.inputs:
        for m in r.modules if r.ok else ():
            t = module_totals([m])
            rise = m.peak_increase
            name = f'<a href="#{anchors[id(m)]}">{escape(m.name)}</a>' if _has_content(m) else escape(m.name)
            changed = ' <span class="badge">changed</span>' if m.changed else ""
            (shown if _has_content(m) else quiet).append(
                f'<tr>{path(r)}<td class="name">{name}{changed}</td>{_num(t["all_gathers"])}{_num(t["folds"])}'
                f'{_num(t["hazards"])}{_num(t["folds_refused"])}'
                f'{_num(t["bytes_per_device"], human_bytes(t["bytes_per_device"]))}'
                f'{_num(rise, "+" + human_bytes(rise) if rise else "")}</tr>')
    failed = [f'<tr>{path(r)}<td>{_badge(r.status)}</td><td class="error">{escape(r.error or "")}</td></tr>'
              for r in report.inputs if not r.ok]
    out = [f'<h3>{"Files and modules" if report.batch is not None else "Modules"}</h3>']
    if base:
        out.append(f'<p class="muted">Paths relative to <code>{escape(base)}</code>.</p>')
    if shown:
        out.append(_table("modules", head, shown))
    if quiet:
        out.append(f'<details class="sub"><summary>{len(quiet)} more without an all-gather or kernel</summary>'
                   f'{_table("modules quiet", head, quiet)}</details>')
    if failed:
        out.append(f'<details class="sub"{" open" if len(failed) <= 10 else ""}><summary>'
                   f'{plural(len(failed), "file")} failed</summary>'
                   + _table("failed", "<tr><th data-sort>Input</th><th data-sort>Status</th><th>Error</th></tr>", failed)
                   + "</details>")
    return "".join(out)


def _common_directory(paths: Sequence[str]) -> str:
    """The directory every path lies in ('' when that is none, or only the root)."""
    directories = [os.path.dirname(p) for p in paths]
    if not directories or "" in directories:
        return ""
    try:
        common = os.path.commonpath(directories)
    except ValueError:  # absolute and relative, or different drives
        return ""
    return "" if common in (os.sep, os.curdir) or common == os.path.splitdrive(common)[0] + os.sep else common


def _num(value: int, text: str | None = None) -> str:
    return f'<td class="num" data-v="{value}">{escape(str(value) if text is None else text)}</td>'


# ------------------------------------------------------------------------------------------
# A module and its computations


def _module_section(r: InputResult, m: ModuleRun, anchor: str, several: bool, budget: list[int],
                    charts: set[int]) -> str:
    """A module's passes and computations; `budget[0]`: how many more computations may open;
    `charts`: the ids of the profiles the page draws."""
    comps = computations(m)
    ids = Ids(anchor)
    where = escape(r.input if m.input == "-" or not m.input else m.input)
    head = f'<h2 id="{anchor}">Module <code>{escape(m.name)}</code> <span class="muted">{where}'
    head += (f" #{m.index + 1}" if several and len(r.modules) > 1 else "") + "</span></h2>"
    passes = "".join(
        f"<li><code>{escape(p.pass_name)}</code>: {'changed' if p.changed else 'unchanged'}"
        + (f", {plural(len(p.folds), 'fold')}" if p.folds else "")
        + (f", {plural(len(p.hazards), 'hazard')}" if p.hazards else "") + "</li>" for p in m.passes)
    out = [f'<section class="module">{head}<ul class="muted">{passes}</ul>{xla_price_section(m)}']
    for comp in comps:
        open_ = budget[0] > 0 and (comp.notable or len(comps) == 1 and not several)
        budget[0] -= open_
        out.append(_computation_section(comp, ids, open_, charts))
    why = why_not_section(m, ids)
    if why:
        out.append(why)
    out.append("</section>")
    return "".join(out)


def _computation_section(comp: Computation, ids: Ids, open_: bool, charts: set[int]) -> str:
    facts = []
    if comp.gathers:
        facts.append(plural(len(comp.gathers), "all-gather"))
    if comp.kernels:
        facts.append(plural(len(comp.kernels), "kernel"))
    badges = []
    if comp.folds:
        badges.append(f'<span class="badge folded">{plural(len(comp.folds), "fold")}</span>')
        saved = sum(f.bytes_per_device for f in comp.folds)
        if saved:
            facts.append(f"saves {human_bytes(saved)} / device")
        changes = peak_changes(comp.folds)
        if comp.name in changes:
            rise = peak_rises(changes, rescheduled_peaks([comp.profile] if comp.profile else []))[comp.name]
            facts.append(f"peak {bytes_change(rise)}")
    if comp.hazards:
        badges.append(f'<span class="badge hazard">{plural(len(comp.hazards), "hazard")}</span>')
    if comp.refused:
        badges.append(f'<span class="badge refused">{len(comp.refused)} refused</span>')
    summary = (f'<summary><span class="title">{escape(comp.name)}</span><span class="facts">'
               f'{escape(" · ".join(facts))}{"".join(badges)}</span></summary>')
    body = []
    if comp.profile is not None:
        body.append(live_chart(comp.profile) if id(comp.profile) in charts else
                    f'<p class="muted">No live-bytes chart: the page draws {MAX_CHARTS}, for the computations '
                    "with the most folds.</p>")
    if comp.gathers:
        body.append(_gather_table(comp, ids))
    if comp.kernels:
        body.append(_kernel_table(comp, ids))
    cards = fold_cards(comp, ids)
    if cards:
        count, text = cards
        body.append(f'<details class="sub"{" open" if count <= OPEN_CARDS else ""}><summary>Folds and refusals '
                    f'<span class="facts">{escape(plural(count, "card"))}</span></summary>{text}</details>')
    changes = changes_section(comp, ids, open_=len(comp.folds) <= OPEN_CHANGES)
    if changes:
        body.append(changes)
    return (f'<details class="section computation"{" open" if open_ else ""}>{summary}'
            f'<div class="body">{"".join(body)}</div></details>')


def _gather_table(comp: Computation, ids: Ids) -> str:
    folds = {f.removed: f for f in comp.folds}
    hazard = ' <span class="badge hazard">hazard</span>'
    removed_by: dict[str, list[str]] = {}
    for g in comp.gathers:
        if g.folded_into:
            removed_by.setdefault(g.folded_into, []).append(g.name)
    head = ("<tr><th data-sort>All-gather</th><th data-sort>Fate</th><th data-sort>Fold</th>"
            "<th data-sort>Traced to</th><th data-sort title=\"the user's name of the gathered weight, where the module "
            "carries one\">Weight</th><th data-sort=\"num\" class=\"num\">Bytes</th>"
            '<th data-sort="num" class="num" title="what each device no longer receives">Saved / device</th>'
            '<th data-sort="num" class="num" title="how much the fold raises the computation\'s estimated peak">'
            'Peak change</th><th data-sort>op_name</th><th data-sort>Source</th></tr>')
    rows = []
    for g in comp.gathers:
        fold = folds.get(g.name)
        rows.append(
            f'<tr class="item" id="{ids(g.name)}"><td class="name q">{escape(g.name)}</td>'
            f'<td>{_badge(g.fate)}{hazard if fold is not None and fold.hazardous else ""}</td>'
            f'<td>{_relation(g, removed_by, ids)}</td><td>{_traced(g)}</td><td class="q">{escape(g.tensor or "")}</td>'
            f'{_num(g.bytes_output, human_bytes(g.bytes_output))}'
            + (_num(fold.bytes_per_device, human_bytes(fold.bytes_per_device)) if fold else "<td></td>")
            + _price_cell(fold)
            + f'<td class="op q">{breakable(g.op_name or "")}</td><td class="src q">{breakable(g.source or "")}</td></tr>')
    return _table("gathers", head, rows)


def _kernel_table(comp: Computation, ids: Ids) -> str:
    head = ("<tr><th data-sort>AwsNeuronCustomNativeKernel</th><th data-sort>Fate</th><th data-sort>Why</th>"
            '<th data-sort="num" class="num">Bytes</th><th data-sort>op_name</th><th data-sort>Source</th></tr>')
    rows = [
        f'<tr class="item" id="{ids(k.name)}"><td class="name q">{escape(k.name)}</td><td>{_badge(k.fate)}</td>'
        f'<td>{escape(k.reason or "")}</td>{_num(k.bytes_output, human_bytes(k.bytes_output))}'
        f'<td class="op q">{breakable(k.op_name or "")}</td><td class="src q">{breakable(k.source or "")}</td></tr>'
        for k in comp.kernels]
    return _table("kernels", head, rows)


def _table(cls: str, head: str, rows: Iterable[str]) -> str:
    return (f'<div class="scroll"><table class="{cls}"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _badge(fate: str) -> str:
    return _BADGES[fate]


#: A fate's badge (a few fates, thousands of rows).
_BADGES: Memo[str, str] = Memo(lambda fate: f'<span class="badge {escape(fate)}">{escape(fate.replace("_", " "))}</span>')


def _relation(g: InstructionFate, removed_by: dict[str, list[str]], ids: Ids) -> str:
    """What became of the gather, in a few words; a refusal links to its card for the reason."""
    if g.fate == "folded" and g.folded_into:
        return "into " + ids.link(g.folded_into)
    if g.fate == "kept":
        names = removed_by.get(g.name, [])
        return "keeps " + ", ".join(ids.link(n) for n in names)
    if g.fate == "refused":
        why = f'<a class="why" href="#c-{ids(g.name)}" title="{escape(g.reason or "")}">why</a>'
        return (f"onto {ids.link(g.refused_onto)} &middot; {why}" if g.refused_onto else
                f'<span class="muted">{escape(g.reason or "")}</span>')
    if g.fate == "not_candidate":
        return f'<span class="muted">{escape(g.reason or "")}</span>'
    return ""


def _traced(g: InstructionFate) -> str:
    if g.stop is not None:
        return f'<span class="muted">stopped at</span> <code>{escape(g.stop[0])} {escape(g.stop[1])}</code>'
    if g.key and g.key.get("parameter"):
        path = g.key.get("index_path") or []
        index = f' <span class="muted">{{{",".join(map(str, path))}}}</span>' if path else ""
        return f'<code>{escape(str(g.key["parameter"]))}</code>{index}'
    return ""


def _price_cell(fold: FoldRecord | None) -> str:
    if fold is None or fold.memory is None:
        return "<td></td>"
    rise = fold.memory["peak_bytes_after"] - fold.memory["peak_bytes_before"]
    text = f"+{human_bytes(rise)}" if rise > 0 else "\u00b10"
    return f'<td class="num" data-v="{rise}">{escape(text)}</td>'
