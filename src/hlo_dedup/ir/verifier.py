"""Structural verifier: the IR invariants passes rely on (a subset of XLA's HloVerifier).

It uses only the IR's public interface, as a pass would.

`verify_structure(module)` checks, for every computation:

* each operand and control edge stays inside the computation, and operand/user and
  control predecessor/successor links are symmetric;
* the operand + control graph has no cycle;
* there is one root and it belongs to the computation;
* instruction names are unique in the computation;
* called computations are computations of this module;
* parameters are numbered densely 0..n-1 and `computation.parameters` lists them;
* the shapes of get-tuple-element, tuple, slice, reshape (element count) and
  all-gather / all-gather-start (xla-semantics §8.5) agree with their operands.

The first violation raises HloVerifyError naming the computation and instruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .instruction import HloIrError
from .shape import UNBOUNDED_SIZE, Shape, shapes_compatible
from ..syntax.errors import HloParseError

if TYPE_CHECKING:
    from .computation import HloComputation
    from .instruction import HloInstruction
    from .module import HloModule

__all__ = ["HloVerifyError", "verify_structure"]


class HloVerifyError(ValueError):
    """A broken IR invariant; `computation` and `instruction` name where it was found."""

    def __init__(self, message: str, *, computation: str | None = None, instruction: str | None = None) -> None:
        self.message = message
        self.computation = computation
        self.instruction = instruction
        where = ""
        if computation is not None:
            where = f"computation {computation!r}"
            if instruction is not None:
                where += f", instruction {instruction!r}"
            where += ": "
        super().__init__(where + message)


def _fail(comp: HloComputation | None, inst: HloInstruction | None, message: str) -> HloVerifyError:
    location = ""
    module = comp.parent if comp is not None else None
    if inst is not None and inst.span.start >= 0 and module is not None and module.source is not None:
        line, column = module.source.location(inst.span.start)
        if line:
            location = f" (defined at {module.filename}:{line}:{column})"
    return HloVerifyError(
        message + location,
        computation=comp.name if comp is not None else None,
        instruction=inst.name if inst is not None else None,
    )


def verify_structure(module: HloModule) -> None:
    """Raise HloVerifyError at the first broken invariant of `module`."""
    computations = module.computations
    if module.entry is None:
        raise HloVerifyError("module has no entry computation")
    if module.get_computation(module.entry.name) is not module.entry:
        raise HloVerifyError(f"entry computation {module.entry.name!r} is not in the module")
    for comp in computations:
        if comp.parent is not module:
            raise _fail(comp, None, "computation's parent is not this module")
    # Edges first, from the using side, so a bad operand is reported at its user.
    for comp in computations:
        for inst in comp:
            _verify_uses(comp, inst)
    for comp in computations:
        _verify_computation(module, comp)


def _verify_computation(module: HloModule, comp: HloComputation) -> None:
    if not len(comp):
        raise _fail(comp, None, "computation has no instructions")
    root = comp.root
    if root is None:
        raise _fail(comp, None, "computation has no root")
    if root.parent is not comp or root not in comp:
        raise _fail(comp, root, "root instruction does not belong to the computation")

    names: dict[str, HloInstruction] = {}
    for inst in comp:
        if inst.parent is not comp:
            raise _fail(comp, inst, "instruction's parent is not this computation")
        if inst.name in names:
            raise _fail(comp, inst, f"duplicate instruction name {inst.name!r}")
        names[inst.name] = inst
        _verify_edges(comp, inst)
        for callee in inst.called_computations:
            if callee.parent is not module or module.get_computation(callee.name) is not callee:
                raise _fail(comp, inst, f"called computation {callee.name!r} is not in the module")

    _verify_parameters(comp)
    _verify_acyclic(comp)
    for inst in comp:
        _verify_shape(module, comp, inst)


def _verify_uses(comp: HloComputation, inst: HloInstruction) -> None:
    """Operands and control predecessors: in this computation, and linked back."""
    for i, op in enumerate(inst.operands):
        if op.parent is not comp or op not in comp:
            where = op.parent.name if op.parent is not None else "no computation"
            raise _fail(comp, inst, f"operand {i} ({op.name!r}) is defined in {where}, not in this computation")
        if not inst.is_user_of(op):
            raise _fail(comp, inst, f"operand {i} ({op.name!r}) does not list this instruction as a user")
    for pred in inst.control_predecessors:
        if pred.parent is not comp or pred not in comp:
            raise _fail(comp, inst, f"control predecessor {pred.name!r} is not in this computation")
        if inst not in pred.control_successors:
            raise _fail(comp, inst, f"control predecessor {pred.name!r} does not list this instruction as a successor")


def _verify_edges(comp: HloComputation, inst: HloInstruction) -> None:
    """Users and control successors: in this computation, and linked back."""
    for user in inst.users:
        if user.parent is not comp or user not in comp:
            raise _fail(comp, inst, f"user {user.name!r} is not in this computation")
        if not user.operand_indices(inst):
            raise _fail(comp, inst, f"user {user.name!r} does not have this instruction as an operand")
    for succ in inst.control_successors:
        if succ.parent is not comp or succ not in comp:
            raise _fail(comp, inst, f"control successor {succ.name!r} is not in this computation")
        if inst not in succ.control_predecessors:
            raise _fail(comp, inst, f"control successor {succ.name!r} does not list this instruction as a predecessor")


def _verify_parameters(comp: HloComputation) -> None:
    found = [inst for inst in comp if inst.opcode == "parameter"]
    listed = comp.parameters
    for i, param in enumerate(listed):
        if param.opcode != "parameter":
            raise _fail(comp, param, f"parameters[{i}] is a {param.opcode}, not a parameter")
        if param.parent is not comp or param not in comp:
            raise _fail(comp, param, f"parameters[{i}] is not in this computation")
        number = _checked(comp, param, lambda p=param: p.parameter_number)
        if number != i:
            raise _fail(comp, param, f"parameter number {number} at position {i}: numbers must be dense 0..{len(listed) - 1}")
    if len(found) != len(listed) or set(found) != set(listed):
        extra = next((p for p in found if p not in listed), found[0] if found else None)
        raise _fail(comp, extra, f"{len(found)} parameter instructions but {len(listed)} listed parameters")


def _verify_acyclic(comp: HloComputation) -> None:
    """Iterative DFS over operands and control predecessors (all in this computation)."""
    state: dict[HloInstruction, int] = {}  # 1 = on the stack, 2 = done
    for start in comp:
        if start in state:
            continue
        stack = [(start, iter([*start.operands, *start.control_predecessors]))]
        state[start] = 1
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                mark = state.get(dep)
                if mark == 1:
                    raise _fail(comp, dep, f"cycle: {dep.name!r} depends on itself through {node.name!r}")
                if mark is None:
                    state[dep] = 1
                    stack.append((dep, iter([*dep.operands, *dep.control_predecessors])))
                    break
            else:
                state[node] = 2
                stack.pop()


# ------------------------------------------------------------------------ shapes
def _checked(comp: HloComputation, inst: HloInstruction, get):  # type: ignore[no-untyped-def]
    """Run a typed accessor; a malformed attribute or shape becomes an HloVerifyError."""
    try:
        return get()
    except (HloParseError, HloIrError, ValueError) as e:
        raise _fail(comp, inst, str(e)) from None


def _text(shape: Shape) -> str:
    return shape.to_text()


def _verify_shape(module: HloModule, comp: HloComputation, inst: HloInstruction) -> None:
    op = inst.opcode
    if op not in _SHAPE_CHECKS:
        return
    shape = _checked(comp, inst, lambda: inst.shape)
    operand_shapes = [_checked(comp, o, lambda o=o: o.shape) for o in inst.operands]
    _SHAPE_CHECKS[op](module, comp, inst, shape, operand_shapes)


def _check_gte(module, comp, inst, shape, operands) -> None:  # type: ignore[no-untyped-def]
    if len(operands) != 1:
        raise _fail(comp, inst, f"get-tuple-element takes 1 operand, has {len(operands)}")
    base = operands[0]
    index = _checked(comp, inst, lambda: inst.tuple_index)
    if base.tuple_shapes is None:
        raise _fail(comp, inst, f"get-tuple-element of non-tuple operand shape {_text(base)}")
    if not 0 <= index < len(base.tuple_shapes):
        raise _fail(comp, inst, f"get-tuple-element index={index} out of range for {_text(base)}")
    if not shapes_compatible(shape, base.tuple_shapes[index]):
        raise _fail(
            comp, inst,
            f"shape {_text(shape)} is not element {index} of the operand shape {_text(base)}",
        )  # fmt: skip


def _check_tuple(module, comp, inst, shape, operands) -> None:  # type: ignore[no-untyped-def]
    if shape.tuple_shapes is None:
        raise _fail(comp, inst, f"tuple has non-tuple shape {_text(shape)}")
    if len(shape.tuple_shapes) != len(operands):
        raise _fail(comp, inst, f"tuple shape has {len(shape.tuple_shapes)} elements but {len(operands)} operands")
    for i, (element, operand) in enumerate(zip(shape.tuple_shapes, operands)):
        if not shapes_compatible(element, operand):
            raise _fail(comp, inst, f"tuple element {i} {_text(element)} does not match operand shape {_text(operand)}")


def _array_operand(comp, inst, shape, operands) -> Shape:  # type: ignore[no-untyped-def]
    """The one operand of a slice or reshape, both it and the result arrays."""
    if len(operands) != 1:
        raise _fail(comp, inst, f"{inst.opcode} takes 1 operand, has {len(operands)}")
    base = operands[0]
    if not base.is_array or not shape.is_array:
        raise _fail(comp, inst, f"{inst.opcode} needs array shapes, got {_text(base)} -> {_text(shape)}")
    return base


def _check_slice(module, comp, inst, shape, operands) -> None:  # type: ignore[no-untyped-def]
    base = _array_operand(comp, inst, shape, operands)
    starts = _checked(comp, inst, lambda: inst.slice_starts)
    limits = _checked(comp, inst, lambda: inst.slice_limits)
    strides = _checked(comp, inst, lambda: inst.slice_strides)
    if len(starts) != base.rank:
        raise _fail(comp, inst, f"slice has {len(starts)} dimensions, operand rank is {base.rank}")
    if shape.element_type is not base.element_type:
        raise _fail(comp, inst, f"slice changes the element type: {_text(base)} -> {_text(shape)}")
    expected = []
    for d, (start, limit, stride, size) in enumerate(zip(starts, limits, strides, base.dimensions)):
        if stride < 1 or start < 0 or limit < start or (size != UNBOUNDED_SIZE and not base.dynamic[d] and limit > size):
            raise _fail(comp, inst, f"slice dimension {d} [{start}:{limit}:{stride}] is invalid for {_text(base)}")
        expected.append(-(-(limit - start) // stride))
    if tuple(expected) != shape.dimensions:
        want = "[" + ",".join(map(str, expected)) + "]"
        raise _fail(comp, inst, f"slice result shape {_text(shape)} should have dimensions {want}")


def _check_reshape(module, comp, inst, shape, operands) -> None:  # type: ignore[no-untyped-def]
    base = _array_operand(comp, inst, shape, operands)
    if base.is_dynamic or shape.is_dynamic:
        return  # bounded/unbounded sizes: the element count is not static
    if base.element_count != shape.element_count:
        raise _fail(
            comp, inst,
            f"reshape changes the element count: {_text(base)} ({base.element_count}) -> "
            f"{_text(shape)} ({shape.element_count})",
        )  # fmt: skip


def _subgroup_size(module: HloModule, comp: HloComputation, inst: HloInstruction) -> int | None:
    """GetSubgroupSize for an all-gather (collective_ops_utils); None when the mode is invalid."""
    groups = _checked(comp, inst, lambda: inst.replica_groups).groups
    has_channel = _checked(comp, inst, lambda: inst.channel_id) is not None
    global_ids = _checked(comp, inst, lambda: inst.use_global_device_ids)
    replica_count = _checked(comp, inst, lambda: module.replica_count)
    num_partitions = _checked(comp, inst, lambda: module.num_partitions)
    if not has_channel:
        if global_ids:
            raise _fail(comp, inst, "use_global_device_ids=true needs a channel_id")
        return len(groups[0]) if groups else replica_count
    if global_ids:  # kFlattenedID
        if not groups:
            raise _fail(comp, inst, "use_global_device_ids=true needs non-empty replica_groups")
        return len(groups[0])
    # kCrossReplicaAndPartition: replicas of every partition take part.
    return (len(groups[0]) if groups else replica_count) * num_partitions


def _check_all_gather(module, comp, inst, shape, operands) -> None:  # type: ignore[no-untyped-def]
    if not operands:
        raise _fail(comp, inst, "all-gather needs at least one operand")
    dim = _checked(comp, inst, lambda: inst.all_gather_dimension)
    result = shape
    if inst.opcode == "all-gather-start" and shape.tuple_shapes is not None and len(shape.tuple_shapes) == 2:
        # Usually (operand shapes, result shapes); old hand-written tests give the result alone.
        result = shape.tuple_shapes[1]
    if len(operands) == 1:
        outputs = [result]
    elif result.tuple_shapes is None or len(result.tuple_shapes) != len(operands):
        raise _fail(comp, inst, f"all-gather of {len(operands)} operands needs a {len(operands)}-tuple shape, has {_text(result)}")
    else:
        outputs = list(result.tuple_shapes)
    if dim < 0:
        raise _fail(comp, inst, f"all-gather dimension {dim} is negative")
    for i, (operand, output) in enumerate(zip(operands, outputs)):
        if not operand.is_array or not output.is_array:
            raise _fail(comp, inst, f"all-gather operand {i} and result must be arrays: {_text(operand)} -> {_text(output)}")
        if dim >= operand.rank or dim >= output.rank:
            raise _fail(comp, inst, f"all-gather dimension {dim} is out of range for {_text(operand)} -> {_text(output)}")
    operand0, output0 = operands[0], outputs[0]
    if UNBOUNDED_SIZE in operand0.dimensions or UNBOUNDED_SIZE in output0.dimensions:
        return
    in_size, out_size = operand0.dimensions[dim], output0.dimensions[dim]
    if in_size == 0:
        if out_size != 0:
            raise _fail(comp, inst, f"all-gather of an empty dimension {dim} gives {_text(output0)}")
        return
    shard_count = -(-out_size // in_size)
    subgroup = _subgroup_size(module, comp, inst)
    if subgroup == 1 and shard_count != 1 and _checked(comp, inst, lambda: inst.replica_groups).is_empty:
        # XLA's verifier skips 1-participant gathers (counts left at their default); its shape
        # inference gives them the operand's shape, and XLA:CPU leaves the rest unwritten.
        raise _fail(
            comp, inst,
            f"all-gather over all participants (replica_groups={{}}) has result dimension {dim} {shard_count}x "
            f"the operand's, but the header states no replica_count or num_partitions above 1, so it has 1 "
            f"participant and XLA's shape inference gives it the operand's shape {_text(operand0)}; state the "
            f"device count in the header (e.g. replica_count={shard_count})",
        )  # fmt: skip
    if subgroup is not None and subgroup != 1 and shard_count != subgroup:
        raise _fail(
            comp, inst,
            f"all-gather result dimension {dim} is {shard_count}x the operand's but the replica "
            f"group size is {subgroup}",
        )  # fmt: skip
    for i, (operand, output) in enumerate(zip(operands, outputs)):
        want = list(operand.dimensions)
        if want[dim] != UNBOUNDED_SIZE:
            want[dim] *= shard_count
        if (
            operand.rank != output.rank
            or output.element_type is not operand.element_type
            or any(w != o for w, o in zip(want, output.dimensions) if w != UNBOUNDED_SIZE and o != UNBOUNDED_SIZE)
        ):
            dims = "[" + ",".join(map(str, want)) + "]"
            raise _fail(
                comp, inst,
                f"all-gather result {i} {_text(output)} should be {operand.element_type.value}{dims} "  # type: ignore[union-attr]
                f"(operand {_text(operand)} gathered {shard_count}x along dimension {dim})",
            )  # fmt: skip


_SHAPE_CHECKS = {
    "get-tuple-element": _check_gte,
    "tuple": _check_tuple,
    "slice": _check_slice,
    "reshape": _check_reshape,
    "all-gather": _check_all_gather,
    "all-gather-start": _check_all_gather,
}
