"""The parts of the HTML page about one computation or module: its records grouped by
computation, the fold cards, what changed in its text, and why the other gathers did not
fold. Every name and line from the module is escaped here, as in `html.py`."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Sequence

from ..passes import FoldRecord, Hazard, InstructionFate
from ..plain import Record
from .html_walk import fold_svg
from .markup import breakable, escape
from .model import ModuleRun
from .units import human_bytes, plural

if TYPE_CHECKING:
    from ..analysis.live_profile import LiveProfile

NEAR_MISS_TITLES = {
    "key_field": "The same parameter, gathered with different keys",
    "same_operand": "Walks that stopped at the same value",
    "cross_computation": "The same value, gathered in different computations",
    "collective_token": "The same weight, each gather behind torch-xla's collective token",
    "flattened_view": "The same weight, each gather of its own reshaped (flattened) view",
    "mixed_precision": "The same weight, each gather behind its own dtype-changing convert",
    "transposed_weight": "The same weight, gathered plain and transposed",
    "same_tensor": "The same weight, behind different idioms",
    "pin_layout": "The same weight, gathered by pin_layout all-reduces",
}
_MAX_GROUPS_CHARS = 48


class Computation(Record):
    """What a module's passes recorded about one computation (`deleted`: (name, line);
    `profile`: its live bytes before and after its priced folds)."""

    __slots__ = ("name", "gathers", "kernels", "folds", "hazards", "deleted", "profile")

    def __init__(self, name: str) -> None:
        self.name = name
        self.gathers: list[InstructionFate] = []
        self.kernels: list[InstructionFate] = []
        self.folds: list[FoldRecord] = []
        self.hazards: list[Hazard] = []
        self.deleted: list[tuple[str, str]] = []
        self.profile: LiveProfile | None = None

    @property
    def refused(self) -> list[InstructionFate]:
        return [g for g in self.gathers if g.fate == "refused"]

    @property
    def notable(self) -> bool:
        return bool(self.folds or self.hazards or self.refused)


def computations(m: ModuleRun) -> list[Computation]:
    """The module's records grouped by computation, in the order the passes met them."""
    groups: dict[str, Computation] = {}

    def at(name: str) -> Computation:
        found = groups.get(name)
        if found is None:
            found = groups[name] = Computation(name)
        return found

    for p in m.passes:
        for i in p.instructions:
            (at(i.computation).gathers if i.opcode.startswith("all-gather") else at(i.computation).kernels).append(i)
        for f in p.folds:
            at(f.computation).folds.append(f)
        for h in p.hazards:
            at(h.computation).hazards.append(h)
        for comp, name, line in p.deleted:
            at(comp).deleted.append((name, line))
        for profile in p.profiles:
            at(profile.computation).profile = profile
    return list(groups.values())




class Ids:
    """Page-unique ids of a module's instructions (names are module-unique in HLO)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._ids: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        found = self._ids.get(name)
        if found is None:
            found = self._ids[name] = f"{self.prefix}-{len(self._ids)}"
        return found

    def link(self, name: str) -> str:
        return f'<a href="#{self(name)}">{escape(name)}</a>'


# ------------------------------------------------------------------------------------------
# Fold cards


def fold_cards(comp: Computation, ids: Ids) -> tuple[int, str] | None:
    """A card per all-gather fold and per refused gather — refused and hazardous first —
    as (count, HTML); None when the computation has neither."""
    fates = {g.name: g for g in comp.gathers}
    hazards: dict[str, list[Hazard]] = defaultdict(list)
    for h in comp.hazards:
        hazards[h.removed].append(h)
    cards: list[tuple[int, str]] = []
    for fold in comp.folds:
        removed, kept = fates.get(fold.removed), fates.get(fold.kept)
        if removed is None or kept is None:
            continue  # a kernel rewrite: its table and "what changed" show it
        own = [h for h in hazards[fold.removed] if h.kept == fold.kept]
        others = [h for h in hazards[fold.removed] if h.kept != fold.kept]
        cards.append((1 if own else 2, _card(kept, removed, ids, fold=fold, hazards=own, elsewhere=others)))
    for g in comp.refused:
        onto = fates.get(g.refused_onto or "")
        if onto is None:
            continue
        own = [h for h in hazards[g.name] if h.kept == onto.name and h.refused]
        cards.append((0, _card(onto, g, ids, hazards=own)))
    if not cards:
        return None
    cards.sort(key=lambda c: c[0])
    return len(cards), '<div class="cards">' + "".join(c for _, c in cards) + "</div>"


def _card(kept: InstructionFate, removed: InstructionFate, ids: Ids, *, fold: FoldRecord | None = None,
          hazards: Sequence[Hazard] = (), elsewhere: Sequence[Hazard] = ()) -> str:
    refused = fold is None
    cls = "refused" if refused else ("hazardous" if hazards else "")
    verb = "refused onto" if refused else "folded into"
    badge = ""
    if refused:
        badge = ' <span class="badge refused">refused</span>'
    elif hazards:
        badge = ' <span class="badge hazard">hazard: folded anyway</span>'
    removed_id = ids(removed.name)
    head = (f'<h4><a class="q" href="#{removed_id}">{escape(removed.name)}</a> <span class="arrow">{verb}</span> '
            f'<a class="q" href="#{ids(kept.name)}">{escape(kept.name)}</a>{badge}</h4>')
    svg = fold_svg((kept.opcode, kept.name), kept.walk, (removed.opcode, removed.name), removed.walk,
                   refused=refused)
    facts: list[tuple[str, str]] = []
    if fold is not None:
        facts.append(("Saves", f"<b>{human_bytes(fold.bytes_output)}</b> output &middot; "
                               f"<b>{human_bytes(fold.bytes_per_device)}</b> per device"))
        facts += _price_facts(fold.memory)
    elif removed.bytes_output:
        facts.append(("Would save", f"<b>{human_bytes(removed.bytes_output)}</b> output"))
    if removed.tensor:
        facts.append(("Weight", f'<code class="q">{escape(removed.tensor)}</code>'))
    if removed.key:
        facts.append(("Key", _key_text(removed.key)))
    reasons = [r for h in hazards for r in h.reasons]
    if refused and not reasons and removed.reason:
        reasons = [_strip_onto(removed)]
    listed = "".join(f"<li>{escape(r)}</li>" for r in reasons)
    listed += "".join(f"<li>refused onto {ids.link(h.kept)}: {escape('; '.join(h.reasons))}; folded onto "
                      f"{escape(kept.name)} instead, which matches it in all of them</li>" for h in elsewhere)
    more = ""
    if fold is not None:
        more = f'<a class="more" href="#w-{removed_id}">what changed &darr;</a>'
    return (f'<article class="card item {cls}" id="c-{removed_id}">{head}{svg}<dl>'
            + "".join(f"<dt>{term}</dt><dd>{text}</dd>" for term, text in facts) + "</dl>"
            + (f'<ul class="reasons">{listed}</ul>' if listed else "") + more + "</article>")


def _price_facts(memory: dict | None) -> list[tuple[str, str]]:
    if memory is None:
        return []
    before, after = memory["peak_bytes_before"], memory["peak_bytes_after"]
    rise = after - before
    change = f'<b class="up">+{human_bytes(rise)}</b>' if rise > 0 else "<b>&plusmn;0</b>"
    live = f"<b>{memory['live_range_extension']}</b> program points longer"
    start = memory.get("extended_from", -1)
    if start >= 0 and memory["live_range_extension"] > 0:  # as the computation's chart marks it
        live += f" (program points {start}&ndash;{start + memory['live_range_extension'] - 1})"
    if memory.get("crosses_peak"):
        live += f", through the peak at <code>{escape(str(memory.get('peak_instruction', '')))}</code>"
    schedule = f" <small>({escape(str(memory['schedule']))})</small>" if memory.get("schedule") else ""
    return [("Peak (est.)", f"{change} &ensp;{human_bytes(before)} &rarr; {human_bytes(after)}{schedule}"),
            ("Kept live", live)]


def _key_text(key: dict) -> str:
    path = key.get("index_path") or []
    spelled = key.get("replica_groups") or []
    groups = spelled if isinstance(spelled, str) else "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in spelled) + "}"
    if len(groups) > _MAX_GROUPS_CHARS:
        groups = groups[:_MAX_GROUPS_CHARS - 1] + "\u2026"
    where = escape(str(key.get("parameter", "")))
    if path:
        where += " {" + ",".join(map(str, path)) + "}"
    return f"<code>{where}</code> &middot; <code>{escape(str(key.get('shape', '')))}</code> &middot; <code>{escape(groups)}</code>"


def _strip_onto(g: InstructionFate) -> str:
    prefix = f"not folded onto {g.refused_onto}: "
    reason = g.reason or ""
    return reason[len(prefix):] if reason.startswith(prefix) else reason


# ------------------------------------------------------------------------------------------
# What changed


def changes_section(comp: Computation, ids: Ids, open_: bool) -> str:
    """Per fold, the lines of the rewritten region: the users re-pointed to the kept
    instruction (before/after), the removed instruction and its dead operands that DCE
    deleted; then whatever else DCE deleted in the computation."""
    if not comp.folds and not comp.deleted:
        return ""
    deleted = dict(comp.deleted)
    walks = {g.name: g.walk for g in comp.gathers}
    shown: set[str] = set()
    hunks = []
    users = 0
    for fold in comp.folds:
        head = f'<div class="h" id="w-{ids(fold.removed)}"><code>{escape(fold.removed)}</code> '
        if fold.replacement:
            hunks.append(head + f"replaced by <code>{escape(fold.replacement)}</code>, a clone of "
                         f"<code>{escape(fold.kept)}</code></div>")
            continue
        lines = []
        for _, name in reversed(walks.get(fold.removed, ())):
            if name in deleted and name not in shown:
                shown.add(name)
                lines.append(_line("del", deleted[name]))
        if fold.removed in deleted:
            shown.add(fold.removed)
            lines.append(_line("del", deleted[fold.removed]))
        elif fold.removed_text:
            lines.append(_line("ctx", fold.removed_text + "   (left in place: not deleted)"))
        for _, before, after in fold.rewired:
            users += 1
            lines += _pair(before, after)
        hunks.append(head + f"folded into <code>{escape(fold.kept)}</code></div><pre>{''.join(lines)}</pre>")
    rest = [line for name, line in comp.deleted if name not in shown]
    if rest:
        hunks.append('<div class="h">also deleted by DCE</div><pre>'
                     + "".join(_line("del", line) for line in rest) + "</pre>")
    facts = [plural(users, "user") + " rewired"] if users else []
    facts.append(plural(len(comp.deleted), "instruction") + " deleted")
    return (f'<details class="sub"{" open" if open_ else ""}><summary>What changed <span class="facts">'
            f'{escape(" · ".join(facts))}</span></summary><div class="diff">{"".join(hunks)}</div></details>')


_SIGNS = {"del": "-", "add": "+", "ctx": " "}


def _line(kind: str, text: str) -> str:
    """A line of "what changed" (element content: its quotes stay as written)."""
    return f'<span class="{kind}">{_SIGNS[kind]} {escape(text, quote=False)}</span>'


def _marked_line(kind: str, head: str, marked: str, tail: str) -> str:
    """A line whose middle is marked; `head` and `tail` are escaped already."""
    return f'<span class="{kind}">{_SIGNS[kind]} {head}<mark>{escape(marked, quote=False)}</mark>{tail}</span>'


def _pair(before: str, after: str) -> list[str]:
    """A rewired user's line before and after, with the names that differ marked."""
    start = _common_prefix(before, after)
    backward = before[::-1]
    end = min(_common_prefix(backward, after[::-1]), min(len(before), len(after)) - start)
    # Whole names, not their last digits: the common prefix stops before the name it ends
    # in, the common suffix after the name it starts in.
    start -= _NAME_RUN.match(backward, len(before) - start).end() - (len(before) - start)
    end -= _NAME_RUN.match(before, len(before) - end).end() - (len(before) - end)
    # The two lines share what is around the marks: escaped once for both.
    head, tail = escape(before[:start], quote=False), escape(before[len(before) - end:], quote=False)
    return [_marked_line("del", head, before[start:len(before) - end], tail),
            _marked_line("add", head, after[start:len(after) - end], tail)]


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving: a few slice comparisons instead
    of a step per character of two long lines."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


#: Characters of a name: `\w` is what `str.isalnum` accepts, and the underscore.
_NAME_RUN = re.compile(r"[\w.\-]*")


# ------------------------------------------------------------------------------------------
# Why the others did not fold


def xla_price_section(m: ModuleRun) -> str:
    """--price=xla: XLA:CPU's own peak of the module before and after, per compiled
    computation whose peak changed, and the folds a budget dropped ('' without it)."""
    price = m.xla_price
    if price is None:
        return ""
    rows = [("module", price["peak_bytes_before"], price["peak_bytes_after"])]
    rows += [(c["computation"], c["peak_bytes_before"], c["peak_bytes_after"]) for c in price["computations"]]
    cells = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td class=\"num\">{human_bytes(before)}</td>"
        f"<td class=\"num\">{human_bytes(after)}</td><td class=\"num\">"
        f"{'+' if after > before else ''}{human_bytes(after - before)}</td></tr>"
        for name, before, after in rows)
    notes = [plural(price["compiles"], "compile"),
             f"allocated {human_bytes(price['allocated_bytes_before'])} → {human_bytes(price['allocated_bytes_after'])}"]
    if price["folds_dropped"]:
        notes.append(f"{plural(len(price['folds_dropped']), 'fold')} dropped for --max-peak-increase")
    if price["within_budget"] is False:
        notes.append("still over the budget")
    return ('<div class="xla-price"><h3>XLA:CPU peak memory</h3><table class="xla-price"><tr><th></th>'
            '<th class="num">before</th><th class="num">after</th><th class="num">change</th></tr>'
            f'{cells}</table><p class="muted">{escape(" · ".join(notes))}</p></div>')


def why_not_section(m: ModuleRun, ids: Ids) -> str:
    """Near misses by kind, untraced walks by where they stopped, non-candidates and
    unmatched kernels by reason: what a module with few or no folds needs to explain itself."""
    groups: list[tuple[str, str]] = []
    notes = [note for p in m.passes for note in p.notes]
    if notes:  # the framework idioms met, and why a module has nothing to fold
        groups.append((f"Notes ({len(notes)})", "".join(f"<p>{escape(note)}</p>" for note in notes)))
    by_kind: dict[str, list] = defaultdict(list)
    for n in m.near_misses:
        by_kind[n.kind].append(n)
    for kind, misses in by_kind.items():
        items = "".join(f'<div class="group"><p>{escape(n.reason)}</p><div class="chips">'
                        + "".join(f"<code>{ids.link(i)}</code>" for i in n.instructions) + "</div></div>"
                        for n in misses)
        groups.append((f"{NEAR_MISS_TITLES.get(kind, kind)} ({len(misses)})", items))
    untraced: dict[str, list[InstructionFate]] = defaultdict(list)
    for g in m.all_gathers:
        if g.fate == "not_traced":
            untraced[g.stop[0] if g.stop is not None else ""].append(g)
    for opcode, gathers in untraced.items():
        title = f"Walks stopped at {opcode}" if opcode else "Walks with nothing to follow"
        rows = "".join(f"<tr><td class=\"name\">{ids.link(g.name)}</td><td class=\"walktext\">{_walk_text(g)}</td>"
                       f"<td>{escape(g.tensor or '')}</td>"
                       f"<td class=\"op\">{breakable(g.op_name or '')}</td><td class=\"src\">{breakable(g.source or '')}</td></tr>"
                       for g in sorted(gathers, key=lambda g: g.tensor or ""))  # grouped by weight
        groups.append((f"{title}: {plural(len(gathers), 'all-gather')} not traced to a parameter",
                       '<div class="scroll"><table><thead><tr><th>All-gather</th><th>Walk (from the gather up)</th>'
                       f"<th>Weight</th><th>op_name</th><th>Source</th></tr></thead><tbody>{rows}</tbody></table></div>"))
    for label, fate, pool in (("not candidates", "not_candidate", m.all_gathers),
                              ("kernels not matched", "not_matched", m.kernels)):
        by_reason: dict[str, list[str]] = defaultdict(list)
        for i in pool:
            if i.fate == fate:
                by_reason[i.reason or ""].append(i.name)
        for reason, names in by_reason.items():
            groups.append((f"{plural(len(names), 'instruction')} {label}: {reason}",
                           '<div class="chips">' + "".join(f"<code>{ids.link(n)}</code>" for n in names) + "</div>"))
    if not groups:
        return ""
    open_ = not m.folds or len(groups) <= 3
    body = "".join(f"<h3>{escape(title)}</h3>{content}" for title, content in groups)
    misses = len(m.near_misses)
    facts = f"{misses} near miss{'' if misses == 1 else 'es'} &middot; {plural(sum(map(len, untraced.values())), 'untraced walk')}"
    return (f'<details class="section why"{" open" if open_ else ""}><summary><span class="heading">'
            f'Why the others did not fold</span><span class="facts">{facts}</span></summary>'
            f'<div class="body">{body}</div></details>')


def _walk_text(g: InstructionFate) -> str:
    parts = [escape(g.name)]
    for opcode, name in g.walk:
        cls = ' class="stopnode"' if g.stop is not None and name == g.stop[1] else ""
        parts.append(f"<span{cls}>{escape(opcode)} {escape(name)}</span>")
    return " &larr; ".join(parts)
