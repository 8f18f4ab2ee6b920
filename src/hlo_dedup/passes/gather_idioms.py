"""Framework idioms that stop the all-gather pass's walk, named in the user's words.

The pass follows only get-tuple-element, tuple, opt-barrier, a convert that keeps the shape
and a nested all-gather. What stops it in real programs is rarely arbitrary: torch-xla adds
its collective token to every gathered operand, torch-xla's FSDP gathers a 2-D view of a
flattened shard, mixed precision casts the shard before the gather, a tied weight is gathered
transposed, and `xm.all_gather(pin_layout=True)` is not an all-gather at all but a zero pad
summed by an all-reduce. Each idiom here is recognised from the instructions themselves
(the evidence is quoted), and each says what XLA's own CSE would merge (HloCSE: identical
instructions with identical operands; a collective only when it has no `constrain_layout`
and no `channel_id`, or the module is SPMD-partitioned) against what neuronx-cc's pass folds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.shape import shapes_equal

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction

#: Ops that hand a collective's result on unchanged in value, as a token chain reads it back.
_SCALAR_READS = frozenset({"gather", "slice", "reshape", "bitcast", "get-tuple-element", "convert", "copy"})
_COLLECTIVES = frozenset({"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"})
_MAX_CHAIN = 100_000  # a token chain has one multiply per collective before it
_MAX_READS = 8
#: Ops that keep the gathered value's elements (what attribution steps through), by idiom.
_VIEWS = {"reshape": "flattened_view", "bitcast": "flattened_view", "transpose": "transposed_weight",
          "convert": "mixed_precision"}

#: Per idiom: what it is, then what XLA's CSE and neuronx-cc's pass make of two such gathers.
EXPLAIN = {
    "collective_token": (
        "torch-xla's collective token",
        "each gather reads the weight plus a different token (the previous collective's result), so "
        "neither XLA's CSE nor neuronx-cc's pass can merge them; DISABLE_NUMERIC_CC_TOKEN=1 drops the "
        "token and the pass then folds gathers of the same weight"),
    "flattened_view": (
        "a reshape (a view) of the shard before the gather, as torch-xla FSDP's view(-1, 128) of each "
        "flattened shard or a weight split into heads",
        "neuronx-cc's pass follows no reshape, so it folds none of them; XLA's CSE merges identical "
        "reshapes of the same value and then their identical gathers (with a channel_id only in an SPMD "
        "module), but not when each reads the shard through its own opt-barrier (FSDP's forward and backward)"),
    "mixed_precision": (
        "a convert that changes the dtype before the gather (mixed precision)",
        "neuronx-cc's pass follows only converts that keep shape and type, so it folds none of them; XLA's "
        "CSE merges identical converts of the same value and then their identical gathers (with a channel_id "
        "only in an SPMD module), and XLA's all-gather-cse pass walks through any convert"),
    "transposed_weight": (
        "a transpose of the weight before the gather (a tied weight used as its own transpose, such as an "
        "embedding reused as the output projection)",
        "a transposed gather is a different value, so neither XLA's CSE nor neuronx-cc's pass merges it with "
        "the plain one; gathering once and transposing the gathered weight would save the second gather"),
    "pin_layout": (
        "xm.all_gather(pin_layout=True): a zero pad of the shard at this device's offset, summed by an "
        "all-reduce",
        "neuronx-cc's pass folds only all-gather, so it never sees these; XLA's CSE never merges them either "
        "(constrain_layout=true makes an all-reduce side-effecting); pin_layout=False writes all-gathers, "
        "which the pass folds when they read the same weight"),
}


def token_operand(add: HloInstruction, memo: dict[HloInstruction, bool]) -> int | None:
    """The index of the weight in torch-xla's token add `add(weight, broadcast(token))`, or None
    when `add` is not one. A token is a scalar parameter (or an after-all) times a scalar read of
    each collective result since (or such a collective's token result)."""
    if add.opcode != "add" or add.operand_count != 2:
        return None
    for index, other in ((0, add.operands[1]), (1, add.operands[0])):
        scalar = other.operands[0] if other.opcode == "broadcast" and other.operands else other
        if not scalar.shape.is_tuple and not scalar.shape.dimensions and _is_token(scalar, memo):
            return index
    return None


def _is_token(node: HloInstruction, memo: dict[HloInstruction, bool]) -> bool:
    chain = []
    found = False
    for _ in range(_MAX_CHAIN):
        known = memo.get(node)
        if known is not None:
            found = known
            break
        chain.append(node)
        op = node.opcode
        if op in ("parameter", "after-all") or _reads_collective(node):
            found = True
            break
        if op != "multiply" or node.operand_count != 2:
            break
        a, b = node.operands
        if _reads_collective(b):
            node = a
        elif _reads_collective(a):
            node = b
        else:
            break
    for seen in chain:
        memo[seen] = found
    return found


def _reads_collective(node: HloInstruction) -> bool:
    """A scalar read back from a collective's result (how a token depends on the collective)."""
    for _ in range(_MAX_READS):
        if node.opcode in _COLLECTIVES:
            return True
        if node.opcode not in _SCALAR_READS or not node.operands:
            return False
        node = node.operands[0]
    return False


def view_idiom(stop: HloInstruction) -> str | None:
    """The idiom of a stop that keeps the gathered value's elements (a reshape, a transpose, a
    dtype-changing convert), or None."""
    kind = _VIEWS.get(stop.opcode)
    if kind is None or not stop.operands:
        return None
    if kind == "flattened_view" and shapes_equal(stop.shape, stop.operands[0].shape):
        return None
    return kind


def evidence(kind: str, inst: HloInstruction, token_index: int | None = None) -> str:
    """The instruction that shows the idiom, as a short phrase."""
    if kind == "collective_token" and token_index is not None:
        weight, other = inst.operands[token_index], inst.operands[1 - token_index]
        return f"{inst.name} = add({weight.name}, {other.name}) with {other.name} the token"
    if not inst.operands:
        return inst.name
    before = inst.operands[0].shape.to_text().split("{")[0]
    after = inst.shape.to_text().split("{")[0]
    return f"{inst.name}: {before} \u2192 {after}"


def pinned_gather_pad(all_reduce: HloInstruction, walk) -> HloInstruction | None:  # noqa: ANN001 - the pass's walk
    """The pad of torch-xla's pin_layout gather feeding `all_reduce`, or None: an all-reduce
    (sum, constrain_layout) of a zero pad along one dimension to group-size times its extent."""
    if all_reduce.opcode != "all-reduce" or not all_reduce.operands:
        return None
    # The cheap tests first: a model's many gradient all-reduces fail at the operand.
    _, path, node, _ = walk(all_reduce.operands[0], ())
    for _ in range(_MAX_READS):  # FSDP flattens the pad back before its opt-barrier
        if node is None or node.opcode != "reshape" or path:
            break
        _, path, node, _ = walk(node.operands[0], ())
    if node is None or node.opcode != "pad" or node.operand_count != 2 or path:
        return None
    reducer = all_reduce.called_computations[0] if all_reduce.called_computations else None
    if reducer is None or reducer.root is None or reducer.root.opcode != "add" or not all_reduce.constrain_layout:
        return None
    value = node.operands[1]
    if value.opcode != "constant" or (value.payload or "").strip() not in ("0", "0.0", "-0", "false"):
        return None
    groups = all_reduce.replica_groups.groups
    size = groups.group_size if len(groups) else 0
    source, padded = node.operands[0].shape, node.shape
    if source.is_tuple or padded.is_tuple:
        return None
    grown = [i for i, (a, b) in enumerate(zip(source.dimensions, padded.dimensions)) if a != b]
    if len(grown) != 1 or size < 2 or padded.dimensions[grown[0]] != size * source.dimensions[grown[0]]:
        return None
    return node
