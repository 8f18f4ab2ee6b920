"""Result shapes of instructions written without one (hand-written tests), for simple ops.

XLA's parser infers them with ShapeInference; this covers the opcodes hand-written modules
leave bare. An instruction whose shape cannot be worked out here is an input problem,
reported as an HloParseError located at the instruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .shape import PrimitiveType, Shape

if TYPE_CHECKING:
    from .instruction import HloInstruction

__all__ = ["infer_shape"]


def _needs_inference(inst: HloInstruction) -> bool:
    return inst._shape is None and inst.shape_text is None


_FAILURE = "shape inference failure"


def _failure(inst: HloInstruction) -> Exception | None:
    cache = inst._cache
    return cache.get(_FAILURE) if cache else None  # type: ignore[return-value]


def _remember_failure(inst: HloInstruction, error: Exception) -> None:
    if inst._cache is None:
        inst._cache = {}
    inst._cache[_FAILURE] = error


def infer_shape(inst: HloInstruction) -> Shape:
    """The shape of `inst` (which has no shape text). Operands that need inference too are
    resolved first, deepest first, so a long chain of bare instructions costs no recursion.
    A failure is remembered on the instruction and on those that read it, so asking every
    instruction of a long broken chain (the liveness scan does) costs linear time, each
    raising the first error XLA would report."""
    failure = _failure(inst)
    if failure is not None:
        raise failure.with_traceback(None)
    pending = [op for op in inst.operands if _needs_inference(op)]
    if pending:
        order: list[HloInstruction] = []
        seen: set[HloInstruction] = set()
        stack = [(op, False) for op in pending]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
            elif node not in seen:
                seen.add(node)
                stack.append((node, True))
                if _failure(node) is None:
                    stack.extend((op, False) for op in node.operands if _needs_inference(op) and op not in seen)
        for i, node in enumerate(order):
            try:
                node.shape  # noqa: B018 - decodes and caches, its operands already known
            except ValueError as e:
                failed = {node}
                for later in (*order[i + 1:], inst):
                    if any(op in failed for op in later.operands):
                        failed.add(later)
                        _remember_failure(later, e)
                raise
    try:
        return _infer_one(inst)
    except ValueError as e:
        _remember_failure(inst, e)
        raise


def _infer_one(inst: HloInstruction) -> Shape:
    """The shape of `inst` from its operands' shapes (already known or cheap to know)."""
    op = inst.opcode
    ops = inst.operands
    if op == "tuple":
        return Shape.tuple_of([o.shape for o in ops])
    if op == "get-tuple-element" and ops:
        base = ops[0].shape
        index = inst.tuple_index
        if base.tuple_shapes is None or not 0 <= index < len(base.tuple_shapes):
            raise _shape_error(inst, f"get-tuple-element index={index} does not select an element of {base.to_text()}")
        return base.tuple_shapes[index]
    if op in ("after-all", "add-dependency") and not ops:
        return Shape.token()
    if op in ("partition-id", "replica-id"):
        return Shape.array(PrimitiveType.U32)
    if op == "get-dimension-size":
        return Shape.array(PrimitiveType.S32)
    if op in ("compare", "is-finite") and ops and ops[0].shape.is_array:
        base = ops[0].shape
        return Shape.array(PrimitiveType.PRED, base.dimensions, base.dynamic, base.layout)
    if op in ("real", "imag", "abs") and ops and ops[0].shape.is_array and ops[0].shape.element_type in (
        PrimitiveType.C64,
        PrimitiveType.C128,
    ):
        base = ops[0].shape
        et = PrimitiveType.F32 if base.element_type is PrimitiveType.C64 else PrimitiveType.F64
        return Shape.array(et, base.dimensions, base.dynamic, base.layout)
    if op == "complex" and ops and ops[0].shape.is_array and ops[0].shape.element_type in (
        PrimitiveType.F32,
        PrimitiveType.F64,
    ):
        base = ops[0].shape
        et = PrimitiveType.C64 if base.element_type is PrimitiveType.F32 else PrimitiveType.C128
        return Shape.array(et, base.dimensions, base.dynamic, base.layout)
    if ops and op not in _NOT_INFERRED_FROM_OPERAND and op not in ("compare", "is-finite", "complex"):
        idx = 1 if op in ("select", "clamp") and len(ops) > 1 else 0
        return ops[idx].shape
    raise _shape_error(inst, f"instruction {inst.name!r} ({op}) was written without a shape and its shape cannot be inferred here")


_NOT_INFERRED_FROM_OPERAND = frozenset(
    """broadcast reshape dot convolution reduce concatenate slice pad transpose gather scatter
    call while conditional sort map reduce-window fft topk select-and-scatter parameter constant
    iota get-tuple-element""".split()
)


def _shape_error(inst: HloInstruction, message: str) -> Exception:
    from .attributes import instruction_error

    return instruction_error(inst, message)
