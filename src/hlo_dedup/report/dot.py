"""`--dot`: a picture of what the dedup passes folded, as a Graphviz graph.

One cluster per computation with folds: the traced parameter, the kept instruction
(green) and every duplicate folded onto it (red, dashed arrow "folded into"); hazardous
folds are outlined in orange with their reasons, and folds refused in strict mode are
shown as orange nodes with a dotted "refused" arrow. A batch run draws every module of
every file it wrote, each cluster titled with its file. Render with `dot -Tsvg folds.dot`.
"""

from __future__ import annotations

import textwrap

from ..passes import FoldRecord, Hazard
from .model import RunReport
from .units import human_bytes

_KEPT = "#c8e6c9"
_REMOVED = "#ffcdd2"
_REFUSED = "#ffe0b2"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _reasons(hazard: Hazard) -> str:
    return "\n".join(textwrap.fill(reason, 64) for reason in hazard.reasons)


def render_dot(report: RunReport) -> str:
    """The Graphviz `digraph` of every fold and hazard of the inputs `report` wrote."""
    lines = [
        "digraph folds {",
        "  rankdir=LR;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=9];',
    ]
    cluster = 0
    by_file = report.batch is not None  # modules of different files may share a name
    for run in (m for r in report.inputs if r.ok for m in r.modules):
        groups: dict[str, tuple[list[FoldRecord], list[Hazard]]] = {}
        for result in run.passes:
            for fold in result.folds:
                groups.setdefault(fold.computation, ([], []))[0].append(fold)
            for hazard in result.hazards:
                groups.setdefault(hazard.computation, ([], []))[1].append(hazard)
        for computation, (folds, hazards) in groups.items():
            title = f"{run.name} / {computation}"
            if by_file:
                title = f"{run.input}: {title}"
            lines.extend(_cluster(cluster, title, folds, hazards))
            cluster += 1
    if cluster == 0:
        lines.append('  empty [shape=plaintext, label="no folds"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _cluster(index: int, title: str, folds: list[FoldRecord], hazards: list[Hazard]) -> list[str]:
    def node(name: str) -> str:
        return _quote(f"c{index}:{name}")

    out = [f"  subgraph cluster_{index} {{", f"    label={_quote(title)};"]
    reasons = {(h.kept, h.removed): h for h in hazards}
    kept_done: set[str] = set()
    for fold in folds:
        if fold.kept not in kept_done:
            kept_done.add(fold.kept)
            label = fold.kept + ("\n" + fold.key["shape"] if "shape" in fold.key else "") + "\nkept"
            out.append(f"    {node(fold.kept)} [style=filled, fillcolor={_quote(_KEPT)}, label={_quote(label)}];")
            param = fold.key.get("parameter")
            if param:
                path = fold.key.get("index_path") or []
                out.append(f"    {node('param:' + param)} [shape=ellipse, label={_quote(param)}];")
                edge = " index " + ",".join(map(str, path)) if path else ""
                out.append(f"    {node('param:' + param)} -> {node(fold.kept)} [label={_quote(edge.strip())}];")
        label = f"{fold.removed}\nremoved, {human_bytes(fold.bytes_output)}"
        if fold.replacement:
            label += f"\nreplaced by {fold.replacement}"
        hazard = reasons.get((fold.kept, fold.removed))
        border = ", color=orange, penwidth=2" if hazard else ""
        if hazard:
            label += "\nhazard:\n" + _reasons(hazard)
        out.append(f"    {node(fold.removed)} [style=\"filled,dashed\", fillcolor={_quote(_REMOVED)}{border}, label={_quote(label)}];")
        out.append(f"    {node(fold.removed)} -> {node(fold.kept)} [label=\"folded into\", style=dashed, color=red];")
    for hazard in hazards:
        if not hazard.refused:
            continue
        if hazard.kept not in kept_done:
            kept_done.add(hazard.kept)
            out.append(f"    {node(hazard.kept)} [style=filled, fillcolor={_quote(_KEPT)}, label={_quote(hazard.kept + chr(10) + 'kept')}];")
        label = f"{hazard.removed}\nrefused (strict)\n" + _reasons(hazard)
        out.append(f"    {node(hazard.removed)} [style=filled, fillcolor={_quote(_REFUSED)}, label={_quote(label)}];")
        out.append(f"    {node(hazard.removed)} -> {node(hazard.kept)} [label=\"refused\", style=dotted, color=orange];")
    out.append("  }")
    return out
