"""`--dot`: a picture of what the dedup passes folded, as a Graphviz graph.

One cluster per computation with folds: the traced parameter, the kept instruction
(green) and every duplicate folded onto it (red, dashed arrow "folded into"); hazardous
folds are outlined in orange with their reasons, and folds refused in strict mode are
shown as orange nodes with a dotted "refused" arrow. A batch run draws every module of
every file it wrote, each cluster titled with its file. Render with `dot -Tsvg folds.dot`;
`render_image` does that through Graphviz's `dot` for a picture file (`--dot folds.svg`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

from ..passes import FoldRecord, Hazard
from .model import RunReport
from .units import human_bytes

_KEPT = "#c8e6c9"
_REMOVED = "#ffcdd2"
_REFUSED = "#ffe0b2"


#: Picture formats `--dot` renders through Graphviz's `dot`, by the file's extension; any
#: other name gets the DOT text.
IMAGE_FORMATS: tuple[str, ...] = ("svg", "png", "pdf")
GRAPHVIZ = "dot"
_RENDER_SECONDS = 300


class GraphvizError(RuntimeError):
    """Graphviz's `dot` is missing or failed; the message is one line."""


def image_format_for(path: str) -> str | None:
    """The picture format `path` asks for (`svg`, `png`, `pdf`), or None for DOT text."""
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    return extension if extension in IMAGE_FORMATS else None


def graphviz_missing(path: str) -> str | None:
    """Why `path` cannot be rendered (Graphviz is not installed), or None if it can."""
    if shutil.which(GRAPHVIZ) is not None:
        return None
    return (f"--dot {path} renders the picture with Graphviz's `{GRAPHVIZ}` command, which is not "
            f"installed (install graphviz, e.g. apt-get install graphviz, or give a .dot file)")


def render_image(dot_text: str, format: str) -> bytes:
    """`dot_text` drawn by Graphviz as `format` (one of IMAGE_FORMATS)."""
    command = shutil.which(GRAPHVIZ)
    if command is None:
        raise GraphvizError(f"Graphviz's `{GRAPHVIZ}` command is not installed")
    try:
        done = subprocess.run([command, f"-T{format}"], input=dot_text.encode(), capture_output=True,
                              timeout=_RENDER_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GraphvizError(f"Graphviz's `{GRAPHVIZ}` could not render the picture: {exc}") from None
    if done.returncode != 0 or not done.stdout:
        why = next((line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()),
                   f"exit status {done.returncode}")
        raise GraphvizError(f"Graphviz's `{GRAPHVIZ}` could not render the picture: {why}")
    return done.stdout


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
