"""The IR prints itself as HLO text (XLA's model: the printer is part of the IR).

Unchanged instructions, computation headers and the module header are re-emitted from
their source text (`ir.source`). Anything a pass created or edited is printed in XLA's
own format (hlo-text-format §5.1, §10), so XLA's parser reads it back.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from ..syntax.lexer import ScanError, skip_trivia
from .shape import Shape
from .source import SPAN_END, SPAN_LEAD, SPAN_START

if TYPE_CHECKING:
    from .computation import HloComputation
    from .instruction import HloInstruction
    from .module import HloModule


def operand_reference(inst: HloInstruction, pct: str, shapes: bool) -> str:
    """How a user spelled `%name` (`pct`), with old-style operand shapes (`shapes`) or
    not, names its operand `inst`: `%x`, compact `%t#0`, or old `f32[2]{0} %x`."""
    span = inst._span
    # A span still in its reader's fields has no compact base (made a SourceSpan otherwise).
    if type(span) is not tuple and span.compact_gte_base is not None and not inst.is_root:
        # Walk the live operand chain (not the parse-time base): RAUW may have re-pointed it.
        indices: list[int] = []
        node = inst
        while node.span.compact_gte_base is not None and not node.is_root and node.operands:
            indices.append(node.tuple_index)
            node = node.operands[0]
        ref = pct + node.name + "".join(f"#{i}" for i in reversed(indices))
    else:
        ref = pct + inst.name
    if shapes and inst.shape_text is not None:
        return f"{inst.shape_text} {ref}"
    return ref


def format_operands(inst: HloInstruction) -> str:
    """The operand list with XLA's `/*index=N*/` comment before every 5th operand."""
    if inst.payload is not None:
        return inst.payload
    span = inst.span
    pct = "%" if span.percent else ""
    shapes = span.operand_shapes
    parts = []
    for i, op in enumerate(inst.operands):
        ref = operand_reference(op, pct, shapes)
        if i and i % 5 == 0:
            ref = f"/*index={i}*/" + ref
        parts.append(ref)
    return ", ".join(parts)


_CONTROL = "control-predecessors"
# Attributes XLA prints after control-predecessors (hlo-text-format §10.4).
_AFTER_CONTROL = frozenset({"statistics", "result_accuracy", "origin", "original_value", "metadata", "backend_config"})
_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")


def _join(attrs: list[tuple[str, str]]) -> str:
    return "".join(f", {k}={v}" for k, v in attrs)


def format_attributes(inst: HloInstruction) -> str:
    """The `, key=value` list. `control-predecessors=` always follows the live control
    edges (they may have been added or removed since parsing)."""
    text = inst._attr_text
    preds = inst.control_predecessors
    if text is not None and not preds and _CONTROL + "=" not in text:
        return text
    attrs = inst.attributes
    keys = [k for k, _ in attrs]
    want = [p.name for p in preds]
    if _CONTROL in keys:
        i = keys.index(_CONTROL)
        if _NAME.findall(re.sub(r"/\*.*?\*/", "", attrs[i][1])) == want:
            return text if text is not None else _join(attrs)
        attrs = list(attrs)
        if preds:
            attrs[i] = (_CONTROL, _control_value(inst))
        else:
            del attrs[i]
    elif preds:
        attrs = list(attrs)
        at = next((j for j, k in enumerate(keys) if k in _AFTER_CONTROL), len(attrs))
        attrs.insert(at, (_CONTROL, _control_value(inst)))
    elif text is not None:
        return text
    return _join(attrs)


def _control_value(inst: HloInstruction) -> str:
    pct = "%" if inst.span.percent else ""
    return "{" + ", ".join(pct + p.name for p in inst.control_predecessors) + "}"


def format_instruction(inst: HloInstruction) -> str:
    """One instruction line in XLA's default print form (no indentation)."""
    root = "ROOT " if inst.is_root else ""
    pct = "%" if inst.span.percent else ""
    # A result shape the source left out stays out: XLA's parser infers it (and may
    # correct an inconsistent hand-written operand shape while doing so).
    text = inst.shape_text
    shape = f"{text} " if text is not None else ""
    return (
        f"{root}{pct}{inst.name} = {shape}{inst.opcode}({format_operands(inst)})"
        f"{format_attributes(inst)}"
    )


def _without_layout(shape: Shape) -> Shape:
    if shape.tuple_shapes is not None:
        return Shape.tuple_of([_without_layout(s) for s in shape.tuple_shapes])
    return shape.replaced(layout=None)


def _signature(comp: HloComputation) -> str:
    """XLA's signature: parameters as `name: shape` and the root shape, without layouts."""
    params = ", ".join(f"{p.name}: {_without_layout(p.shape).to_text()}" for p in comp.parameters)
    assert comp.root is not None
    return f" ({params}) -> {_without_layout(comp.root.shape).to_text()}"


def format_computation_head(comp: HloComputation) -> str:
    span = comp.span
    if comp._sig and span is not None:
        return span.head
    lead = "\n\n"
    if span is not None:
        # Keep the whitespace and comments (lit CHECK lines) before the header.
        head = span.head
        try:
            lead = head[: skip_trivia(head, 0)]
        except ScanError:
            lead = head[: len(head) - len(head.lstrip())]
    entry = "ENTRY " if comp.is_entry else ""
    pct = "%" if comp.percent else ""
    sig = _signature(comp) if span is None or span.has_signature else ""
    return f"{lead}{entry}{pct}{comp.name}{sig} {{"


def _emission_order(comp: HloComputation) -> list[HloInstruction]:
    """Text order, except that an instruction is never printed before its operands
    (new instructions are appended, but XLA's parser needs definition before use)."""
    if not comp._reorder:
        return list(comp._instructions)
    emitted: set[HloInstruction] = set()
    order: list[HloInstruction] = []
    for start in comp._instructions:
        if start in emitted:
            continue
        stack: list[tuple[HloInstruction, bool]] = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if node not in emitted:
                    emitted.add(node)
                    order.append(node)
                continue
            if node in emitted:
                continue
            stack.append((node, True))
            for dep in reversed([*node.operands, *node.control_predecessors]):
                if dep not in emitted and dep.parent is comp:
                    stack.append((dep, False))
    return order


def _hidden(inst: HloInstruction) -> bool:
    """Instructions whose text lives inside another line (nested, compact GTE)."""
    span = inst.span
    if span.compact_gte_base is not None:
        return not inst.is_root
    # A nested operand lives in the nearest enclosing instruction that still has its line.
    host = span.host
    while host is not None and host.parent is inst.parent:
        if host.source_line is not None:
            return True
        host = host.span.host
    return False


def format_computation(comp: HloComputation) -> str:
    """The computation's text (`computation_text_pieces`, joined)."""
    return "".join(computation_text_pieces(comp))


def computation_text_pieces(comp: HloComputation) -> Iterator[str]:
    """The computation's text in pieces. An unchanged computation is one slice of the
    source; in a changed one, unchanged instructions that are also neighbours in the source
    are copied as one slice of it and the rest are printed line by line."""
    module = comp.parent
    source = module.source.text if module is not None and module.source is not None else None
    unchanged = _unchanged_range(comp) if source is not None else None
    if unchanged is not None:
        yield source[unchanged[0] : unchanged[1]]  # type: ignore[index]
        return
    yield format_computation_head(comp)
    run_start = run_end = -1
    for inst in _emission_order(comp):
        span = inst._span
        if type(span) is tuple and source is not None:
            # The span's fields as the reader left them: the line is unedited and its own.
            lead_start, end = span[SPAN_START] - len(span[SPAN_LEAD]), span[SPAN_END]
        else:
            span = inst.span
            # Most instructions are neither nested nor compact GTEs: only those ask _hidden.
            if (span.compact_gte_base is not None or span.host is not None) and _hidden(inst):
                continue
            unedited = not span.edited and span.end >= 0 and source is not None
            lead_start, end = (span.start - len(span.lead), span.end) if unedited else (-1, -1)
        if end >= 0:
            if lead_start != run_end:
                if run_end >= 0:
                    yield source[run_start:run_end]  # type: ignore[index]
                run_start = lead_start
            run_end = end
            continue
        if run_end >= 0:
            yield source[run_start:run_end]  # type: ignore[index]
            run_start = run_end = -1
        yield span.lead or "\n  "
        yield format_instruction(inst)
    if run_end >= 0:
        yield source[run_start:run_end]  # type: ignore[index]
    yield comp.span.tail if comp.span is not None else "\n}"


def _unchanged_range(comp: HloComputation) -> tuple[int, int] | None:
    """Where the computation's text is in the source (the whitespace before its header to
    the end of its closing text), while it is exactly that text; None once it must be printed."""
    whole = comp.span
    if whole is None or whole.body_end < 0 or not comp._sig or comp._changed or comp._reorder:
        return None
    return whole.start + 1 - len(whole.head), whole.body_end + len(whole.tail)


def format_module(module: HloModule) -> str:
    return "".join(module_text_pieces(module))


def module_text_pieces(module: HloModule) -> Iterator[str]:
    """The module's text in pieces, for a writer that streams it: a module of a million
    instructions is never one string (nor one more as bytes) next to its IR."""
    source = module.source
    if source is None:
        yield f"HloModule {module.name}" + "".join(f", {k}={v}" for k, v in module.header_attributes)
        for comp in module.computations:
            yield from computation_text_pieces(comp)
        yield "\n"
        return
    yield source.head
    text = source.text
    run_start = run_end = -1  # unchanged computations next to each other in the source: one slice
    for comp in module.computations:
        unchanged = _unchanged_range(comp)
        if unchanged is not None:
            if unchanged[0] != run_end:
                if run_end >= 0:
                    yield text[run_start:run_end]
                run_start = unchanged[0]
            run_end = unchanged[1]
            continue
        if run_end >= 0:
            yield text[run_start:run_end]
            run_start = run_end = -1
        yield from computation_text_pieces(comp)
    if run_end >= 0:
        yield text[run_start:run_end]
    yield source.tail
