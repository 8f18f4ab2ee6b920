"""`dce`: XLA's HloDCE (newest algorithm, default constructor), xla-semantics §1.

Removes instructions that are dead (no users, not the root) and safe to remove, then
their operands as they become dead, prunes unused multi-output-fusion outputs and dead
fusion parameters, and deletes computations no surviving instruction calls.
Side-effecting instructions stay (the cross-partition-collective flag is off, as in the
default `HloDCE()` both Neuron passes construct).

Order note: as XLA, each computation that has dead code is walked in reverse post order
(users before operands) and every instruction that is removable when it is reached is
removed with its newly dead operands. The walk matters: the recursion skips
side-effecting operands, which the walk may still reach and remove later (an async op or
tpu_custom_call marked `xla_allow_dce_side_effecting_op="true"`). Computations without
dead code skip the post order entirely.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import OPCODES, is_known_opcode
from ..ir.shape import Shape
from .pass_base import HloPass, ModuleTransaction, PassResult

#: Frontend attribute keys that pin an instruction (HasDisableWhileLoopDceAttr).
_DISABLE_DCE_KEYS = (
    "xla_disable_while_loop_dce",
    "xla.disable_while_loop_dce",
    "xla_preserve_tuple_indices",
    "xla.preserve_tuple_indices",
)
_TRUE_STRINGS = frozenset({"true", "1", "yes"})


class HloDCE(HloPass):
    """Dead code elimination with XLA HloDCE semantics."""

    name = "dce"
    source_file = "hlo_dce.cc"

    def run_on_module(self, module: HloModule, transaction: ModuleTransaction) -> PassResult:
        return PassResult(self.name, run_dce(module, transaction))


def run_dce(module: HloModule, transaction: ModuleTransaction | None = None) -> bool:
    """Run HloDCE over `module`; returns XLA's `changed` (§1.9). A pass passes its
    transaction, which is told before the first edit; a direct call is not rolled back.

    Each computation reached from the entry through the instructions that survive is
    cleaned in turn, then the computations nothing reached are removed. A computation
    without dead code (most of a real module: thousands of small fusion bodies) costs one
    loop over its instructions (`dead_and_callers`), and nothing in it can die; the steps
    are inline, since a call per computation would be a visible share of that."""
    transaction = transaction or ModuleTransaction(module, tracked=False)
    entry = module.entry
    if entry is None:
        return False
    to_remove = set(module.computations)
    to_remove.discard(entry)
    stack = [entry]
    changed = False
    while stack:
        comp = stack.pop()
        root = comp.root
        if comp.fusion_instruction is not None and root is not None and root.opcode == "tuple":
            changed |= _remove_multi_output_fusion_unused_outputs(comp, transaction)  # may re-root
        dead, callers = comp.dead_and_callers()
        if dead:
            removed = _remove_dead_roots(comp, dead, transaction)
            changed |= _remove_dead_parameters(comp, transaction) or removed
            callers = [c for c in callers if c.parent is comp]  # the ones that survived
        for caller in callers:
            for callee in caller.called_computations:
                if callee in to_remove:
                    to_remove.discard(callee)
                    stack.append(callee)
    for comp in module.computations:
        if comp in to_remove:
            transaction.before_rewrite()
            module.remove_computation(comp)
            changed = True
    return changed


def _frontend_true(inst: HloInstruction, keys: tuple[str, ...]) -> bool:
    if inst.attr("frontend_attributes") is None:
        return False
    attrs = inst.frontend_attributes
    return any(attrs.get(k, "").lower() in _TRUE_STRINGS for k in keys)


_ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})


def _is_asynchronous(inst: HloInstruction) -> bool:
    """IsAsynchronous: async-start/-update/-done, including the `<op>-start` text sugar.

    The collectives' own start/done opcodes (all-gather-start, copy-done, ...) are not.
    """
    op = inst.opcode
    return op in _ASYNC_OPCODES or (op not in OPCODES and is_known_opcode(op))


def _async_chain_start(inst: HloInstruction) -> HloInstruction:
    """async_chain_start(): the async-start an update/done belongs to (else `inst`)."""
    node = inst
    while (
        _is_asynchronous(node)
        and node.opcode.endswith(("-update", "-done"))
        and node.operands
        and _is_asynchronous(node.operands[0])
    ):
        node = node.operands[0]
    return node


def _allow_side_effecting_attr(inst: HloInstruction, value: str) -> bool:
    start = _async_chain_start(inst)
    for node in (inst,) if start is inst else (inst, start):
        if node.attr("frontend_attributes") is not None:
            if node.frontend_attributes.get("xla_allow_dce_side_effecting_op") == value:
                return True
    return False


def can_remove_instruction(inst: HloInstruction) -> bool:
    """CanRemoveInstruction (§1.4) with the default HloDCE flags."""
    comp = inst.parent
    if comp is None or not inst.is_dead():
        return False
    if _frontend_true(inst, _DISABLE_DCE_KEYS):
        return False
    if not comp.is_safely_removable(inst):
        return False
    if inst.opcode == "parameter":
        return False
    if inst.opcode == "custom-call" and inst.operands and inst.custom_call_target == "Sharding":
        operand = inst.operands[0]
        if operand.is_root or operand.opcode == "parameter" or operand.user_count != 1:
            return False
    if _allow_side_effecting_attr(inst, "false"):
        return False
    if inst.has_side_effect():
        allow_custom_call = (
            (inst.opcode == "custom-call" and inst.custom_call_target == "tpu_custom_call")
            or _is_asynchronous(inst)
        ) and _allow_side_effecting_attr(inst, "true")
        return allow_custom_call
    return True


def _remove_dead_roots(comp: HloComputation, pending: list[HloInstruction], transaction: ModuleTransaction) -> bool:
    """RemoveDeadRoots, given the computation's dead instructions in order.

    XLA walks the whole reverse post order and removes what is removable when reached.
    Only dead instructions can be removed and an instruction only dies when a user is
    removed, so we visit the dead ones (users before operands) and then each operand a
    removal left dead — the same removals without a post order of all the live code.
    """
    changed = False
    while pending:
        inst = pending.pop()  # last in text order first: users before their operands
        if inst.parent is not comp or not can_remove_instruction(inst):
            continue
        operands = list(dict.fromkeys(inst.operands))
        transaction.before_rewrite()
        comp.remove_instruction_and_unused_operands(inst)
        changed = True
        # Operands the removal skipped (side-effecting ones) get their own chance.
        pending.extend(op for op in reversed(operands) if op.parent is comp and op.is_dead())
    return changed


def _remove_dead_parameters(comp: HloComputation, transaction: ModuleTransaction) -> bool:
    if comp.fusion_instruction is None:
        return False  # entry parameters stay; others need call analysis (off by default)
    before = comp.num_parameters
    for param in reversed(list(comp.parameters)):
        if param.parent is comp and param.is_dead() and comp.is_safely_removable(param):
            transaction.before_rewrite()
            comp.remove_instruction_and_unused_operands(param)
    return comp.num_parameters < before


def _remove_multi_output_fusion_unused_outputs(comp: HloComputation, transaction: ModuleTransaction) -> bool:
    """§1.7: shrink a multi-output fusion to the outputs its GTE users read."""
    fusion = comp.fusion_instruction
    if fusion is None or fusion.parent is None:
        return False
    root = comp.root
    if root is None or root.opcode != "tuple" or root.attr("sharding") is not None:
        return False
    if (
        fusion.attr("output_to_operand_aliasing") is not None
        or fusion.has_control_dependencies()
        or fusion.attr("kind") == "kCustom"
        or fusion.is_root
        or not fusion.user_count
        or any(u.opcode != "get-tuple-element" for u in fusion.users)
    ):
        return False
    used = {u.tuple_index for u in fusion.users}
    used |= {i for i, op in enumerate(root.operands) if op.has_side_effect()}
    if len(used) == len(root.operands):
        return False
    kept = sorted(used)
    kept_shapes = [fusion.shape.tuple_shapes[i] for i in kept]
    transaction.before_rewrite()
    if len(kept) == 1:
        caller = fusion.parent
        for gte in fusion.users:
            # ReplaceInstruction(gte, fusion, relay_control_dependency=true)
            for succ in list(gte.control_successors):
                fusion.add_control_dependency_to(succ)
            for pred in list(gte.control_predecessors):
                pred.add_control_dependency_to(fusion)
            gte.replace_all_uses_with_different_shape(fusion)
            caller.force_remove_instruction(gte)
        fusion.set_shape(kept_shapes[0])
        root.replace_all_uses_with_different_shape(root.operands[kept[0]])
    else:
        rank = {old: new for new, old in enumerate(kept)}
        for gte in fusion.users:
            gte.set_attr("index", str(rank[gte.tuple_index]))
        fusion.set_shape(Shape.tuple_of(kept_shapes))
        # ReplaceInstructionWithDifferentShape(root, new tuple): the new tuple takes the
        # old root's metadata / frontend attributes (when it has none) and, being the same
        # opcode, its name; the old root goes at once, with the outputs it alone used.
        carried = [(k, v) for k, v in root.attributes if k in ("metadata", "frontend_attributes")]
        new_root = HloInstruction(
            root.name, "tuple", Shape.tuple_of(kept_shapes), [root.operands[i] for i in kept], carried
        )
        comp.add_instruction(new_root)
        root.replace_all_uses_with_different_shape(new_root)
        if comp.is_safely_removable(root):  # a control edge would keep it (and its name)
            old_name = root.name
            comp.remove_instruction_and_unused_operands(root)
            comp.rename_instruction(new_root, old_name)
    return True

