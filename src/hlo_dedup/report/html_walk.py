"""The picture of one fold on the HTML page: the walk each all-gather took to its parameter.

Both walks are drawn root first, left to right: the parameter (or where a walk stopped),
the get-tuple-element / tuple / opt-barrier / ... instructions the two walks share on the
middle row, then each walk's own instructions on its own row — the kept gather's above,
the removed (or refused) one's below — ending at the two gathers, joined by a "folded into"
(or "refused") arrow. Inline SVG, styled by the page's classes (arrowheads included), so it
follows the colour scheme; every name is escaped.
"""

from __future__ import annotations

from .markup import escape
from .memo import Memo

Step = tuple[str, str]  # (opcode, name)

_H = 34          # node height
_ROW = 48        # distance between rows
_GAP = 30        # horizontal gap between columns
_PAD = 4
_CHAR = 6.95     # width of a character of the names' monospace font
_MIN_W, _MAX_W = 86, 210
_MAX_CHARS = int((_MAX_W - 14) / _CHAR)

#: The arrowhead every walk picture uses, defined once per page.
ARROW_DEFS = ('<svg class="defs" width="0" height="0" aria-hidden="true"><defs>'
              '<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
              'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z"/></marker></defs></svg>')


def _short(name: str) -> str:
    if len(name) <= _MAX_CHARS:
        return name
    head = (_MAX_CHARS - 1) // 2
    return name[:head] + "\u2026" + name[len(name) - (_MAX_CHARS - 1 - head):]


def _root_kind(opcode: str) -> str:
    return "param" if opcode == "parameter" else "stop"


def fold_svg(kept: Step, kept_walk: tuple[Step, ...], removed: Step, removed_walk: tuple[Step, ...],
             *, refused: bool = False) -> str:
    """The SVG of a fold of `removed` onto `kept` (gathers as (opcode, name)); the walks go
    from each gather's operand up to where they ended, as `InstructionFate.walk` gives them."""
    k, r = kept_walk[::-1], removed_walk[::-1]
    shared = 0
    while shared < min(len(k), len(r)) and k[shared] == r[shared]:
        shared += 1
    # The boxes in drawing order: the kept walk (its first `shared` steps are the removed
    # walk's too), the kept gather, the removed walk's own steps, the removed gather. What
    # the picture looks like depends on their opcodes and the lengths of their names alone.
    steps = [*k, kept, *r[shared:], removed]
    names = [step[1] for step in steps]
    shown = list(map(_short, names))
    head, paths, boxes_open, tail = _DRAWINGS[
        (shared, len(k), tuple([step[0] for step in steps]), tuple(map(len, shown)), refused)]
    parts = [head, escape(_describe(kept, removed, refused)), paths]
    for opened, name, short in zip(boxes_open, names, shown):
        title = f"<title>{escape(name)}</title>" if short != name else ""
        parts.append(f"{opened[0]}{title}{opened[1]}{escape(short)}</text></g>")
    parts.append(tail)
    return "".join(parts)


def _drawing(shared: int, kept_steps: int, opcodes: tuple[str, ...], name_lengths: tuple[int, ...],
             refused: bool) -> tuple[str, str, list[tuple[str, str]], str]:
    """Everything of a picture but its names: the text before the aria label, the edges
    after it, each box's text before and after its title up to its name, and the end.
    The boxes are `fold_svg`'s steps: `kept_steps` of the kept walk, the first `shared` of
    them shared, then the kept gather, the removed walk's own steps and the removed gather."""
    removed_steps = len(opcodes) - kept_steps - 2 + shared
    last = max(kept_steps, removed_steps)
    removed_kind = "refused" if refused else "removed"
    # Each box: (CSS class: param, stop, kept, removed, refused or "" for a step, label,
    # column, row: 0 kept, 1 shared, 2 removed).
    boxes = [(_root_kind(op) if col == 0 else "", op, col, 1 if col < shared else 0)
             for col, op in enumerate(opcodes[:kept_steps])]
    boxes.append(("kept", f"{opcodes[kept_steps]} \u00b7 kept", last, 0))
    boxes += [(_root_kind(op) if col == 0 else "", op, col, 2)
              for col, op in enumerate(opcodes[kept_steps + 1:-1], start=shared)]
    boxes.append((removed_kind, f"{opcodes[-1]} \u00b7 {removed_kind}", last, 2))
    widths = [_MIN_W] * (last + 1)
    for (_, label, col, _), length in zip(boxes, name_lengths):
        need = int(max(length, len(label) * 0.82) * _CHAR + 14)
        if need > widths[col]:
            widths[col] = min(_MAX_W, need)
    xs = [_PAD]
    for w in widths:
        xs.append(xs[-1] + w + _GAP)
    width = xs[-1] - _GAP + _PAD + 24  # room for the fold arrow's label
    height = 2 * _ROW + _H + 2 * _PAD
    head = (f'<svg class="walk" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            'role="img" aria-label="')
    shared_boxes = boxes[:shared]
    edges = list(zip(shared_boxes, shared_boxes[1:]))
    for chain in (boxes[shared:kept_steps + 1], boxes[kept_steps + 1:]):
        start = shared_boxes[-1:] + chain
        edges += zip(start, start[1:])
    paths = []
    for a, b in edges:
        ax, aw, bx = xs[a[2]], widths[a[2]], xs[b[2]]
        y1, y2 = _PAD + a[3] * _ROW + _H // 2, _PAD + b[3] * _ROW + _H // 2
        if y1 == y2:
            paths.append(f'<path d="M{ax + aw},{y1}H{bx - 1}"/>')
        else:
            mid = (ax + aw + bx) // 2
            paths.append(f'<path d="M{ax + aw},{y1}C{mid},{y1} {mid},{y2} {bx - 1},{y2}"/>')
    boxes_open = []
    for kind, label, col, row in boxes:
        x, y, w = xs[col], _PAD + row * _ROW, widths[col]
        cls = f' class="{kind}"' if kind else ""
        boxes_open.append((f"<g{cls}>",
                           f'<rect x="{x}" y="{y}" width="{w}" height="{_H}" rx="6"/>'
                           f'<text class="op" x="{x + 7}" y="{y + 12}">{escape(label)}</text>'
                           f'<text x="{x + 7}" y="{y + 27}">'))
    cx = xs[last] + widths[last] // 2
    top, bottom = _PAD + _H, _PAD + 2 * _ROW
    edge = "refuse" if refused else "fold"
    label = "refused" if refused else "folded into"
    tail = (f'<path class="{edge}" d="M{cx},{bottom}V{top + 2}"/>'
            f'<text class="edge {edge}" x="{cx + 6}" y="{_PAD + _ROW + _H // 2 + 4}">{label}</text></svg>')
    return head, '">' + "".join(paths), boxes_open, tail


#: Drawings by layout: the folds of a layer stack share a few (the same walk, names of the
#: same length), and a drawing is most of the cost of a fold's card.
_DRAWINGS: Memo[tuple, tuple[str, str, list[tuple[str, str]], str]] = Memo(lambda key: _drawing(*key), limit=1024)


def _describe(kept: Step, removed: Step, refused: bool) -> str:
    verb = "refused onto" if refused else "folded into"
    return f"{removed[1]} {verb} {kept[1]}"
