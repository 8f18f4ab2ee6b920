"""What a dedup pass did, for reports: one record per fold and per hazard, the fate of every
instruction the pass considered, and the near misses it saw."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..ir.shape import byte_size
from ..plain import FrozenRecord, init_frozen

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction


class Hazard(FrozenRecord):
    """A fold the faithful key allows although the two values may differ."""

    __slots__ = ("computation", "kept", "removed", "reasons", "refused")

    def __init__(self, computation: str, kept: str, removed: str, reasons: tuple[str, ...],
                 refused: bool) -> None:  # refused: True in strict mode, the fold was not made
        init_frozen(self, computation, kept, removed, reasons, refused)


class FoldRecord(FrozenRecord):
    """One duplicate folded onto a kept instruction.

    `replacement` is the clone that replaced `removed` (preprocess pass). `memory` is the
    fold's memory price (analysis.FoldPrice.to_json: live_range_extension,
    peak_bytes_before/after, crosses_peak, peak_instruction), None where not priced. The
    rewrite: `removed_text` is the removed instruction's line, `rewired` a (user, line
    before, line after) for every user re-pointed from it (a user of many operands: an
    excerpt, see `user_line`).
    """

    __slots__ = ("pass_name", "computation", "kept", "removed", "key", "bytes_output", "bytes_per_device",
                 "replacement", "hazardous", "memory", "removed_text", "rewired")

    def __init__(self, pass_name: str, computation: str, kept: str, removed: str,
                 key: dict[str, Any] | None = None, bytes_output: int = 0, bytes_per_device: int = 0,
                 replacement: str | None = None, hazardous: bool = False, memory: dict[str, Any] | None = None,
                 removed_text: str = "", rewired: tuple[tuple[str, str, str], ...] = ()) -> None:
        init_frozen(self, pass_name, computation, kept, removed, {} if key is None else key, bytes_output,
                    bytes_per_device, replacement, hazardous, memory, removed_text, rewired)


#: Users with more operands than this are recorded as an excerpt around the rewired ones.
_FULL_LINE_OPERANDS = 16


def user_line(user: HloInstruction, positions: list[int]) -> str:
    """How a fold record shows a user it re-points: its line, or for a wide user (a tuple
    of thousands of gathers) the operands next to those at `positions`, `…` for the rest,
    so that recording every fold into one wide user stays linear in its width."""
    operands = user.operands
    if len(operands) <= _FULL_LINE_OPERANDS:
        return user.to_text()
    shown = sorted({i for at in positions[:4] for i in range(max(0, at - 1), min(len(operands), at + 2))})
    parts, last = [], -1
    for i in shown:
        if i != last + 1:
            parts.append("…")
        parts.append(operands[i].name)
        last = i
    if last != len(operands) - 1:
        parts.append("…")
    return f"{user.name} = {user.opcode}({', '.join(parts)}) /* {len(operands)} operands */"


class InstructionFate(FrozenRecord):
    """One instruction a pass considered (an all-gather, a kernel) and what became of it.

    Fates of the all-gather pass: `kept` (duplicates were folded onto it), `folded` (onto
    `folded_into`), `refused` (a fold was refused: `reason`), `not_traced` (the walk stopped
    at `stop`, an (opcode, instruction) pair, before a parameter), `unique` (traced, no
    duplicate), `not_candidate` (e.g. `all-gather-start`). Of the preprocess-kernel pass:
    `first`, `rewritten` (onto a clone of `folded_into`), `not_matched` (`reason`).
    `key` is the traced key; `op_name` and `source` (file:line) come from the metadata.
    `refused_onto` names the gather a refused fold would have kept (what `reason` names).
    `tensor` is the user's name of the gathered weight where the module carries one
    (`params['layers'][5]['w2']`, see gather_names), also for a walk that stopped early.
    """

    __slots__ = ("computation", "name", "opcode", "fate", "folded_into", "reason", "stop", "key", "bytes_output",
                 "op_name", "source", "walk", "refused_onto", "tensor")

    def __init__(self, computation: str, name: str, opcode: str, fate: str, folded_into: str | None = None,
                 reason: str | None = None, stop: tuple[str, str] | None = None, key: dict[str, Any] | None = None,
                 bytes_output: int = 0, op_name: str | None = None, source: str | None = None,
                 walk: tuple[tuple[str, str], ...] = (), refused_onto: str | None = None,
                 tensor: str | None = None) -> None:
        # walk: (opcode, name) from operand(0) up to where the walk ended
        init_frozen(self, computation, name, opcode, fate, folded_into, reason, stop, key, bytes_output, op_name,
                    source, walk, refused_onto, tensor)


class NearMiss(FrozenRecord):
    """Instructions that would fold but for one thing.

    `kind`: `key_field` (same parameter, a key field differs), `same_operand` (the walks
    stopped at the same non-parameter value), `cross_computation` (the same parameter,
    gathered in different computations). `reason` says it in words.
    """

    __slots__ = ("kind", "reason", "computations", "instructions")

    def __init__(self, kind: str, reason: str, computations: tuple[str, ...], instructions: tuple[str, ...]) -> None:
        init_frozen(self, kind, reason, computations, instructions)


def identify(inst: HloInstruction) -> dict[str, Any]:
    """What a record says about an instruction while it still exists (DCE may delete it):
    where it is, its output bytes, and its framework op and source line from metadata."""
    return dict(zip(_FACTS, facts(inst)))


_FACTS = ("computation", "name", "opcode", "bytes_output", "op_name", "source")


def facts(inst: HloInstruction) -> tuple[str, str, str, int, str | None, str | None]:
    """`identify`'s values in its order, for a caller that keeps them in its own fields."""
    global _LOCATED
    module = inst.module
    metadata = inst.metadata  # loads ir.metadata (read only for what a pass records)
    index = module.stack_frames if module is not None else None
    # The gathers of a layer stack share a few metadata values (one object per text) and
    # shapes: each is located, and sized, once.
    if _LOCATED[0] is not index:
        _LOCATED = (index, {})
    op_name, source = remembered(_LOCATED[1], metadata, lambda m: _located(m, index))
    parent = inst.parent
    return (parent.name if parent is not None else "", inst.name, inst.opcode,
            remembered(_BYTES, inst.shape, byte_size), op_name, source)


def _located(metadata: Any, index: Any) -> tuple[str | None, str | None]:
    from ..ir.metadata import program_location

    frame = program_location(metadata, index)
    return metadata.op_name or None, str(frame) if frame is not None else None


def remembered(memo: dict[int, tuple[Any, Any]], obj: Any, make: Callable[[Any], Any], limit: int = 1024) -> Any:
    """`make(obj)`, computed once per object while it lives: `memo` maps id(obj) to (obj,
    value), keeping `obj` alive so that its id stays its own; it is emptied at `limit`."""
    found = memo.get(id(obj))
    if found is None or found[0] is not obj:
        if len(memo) >= limit:
            memo.clear()
        found = memo[id(obj)] = (obj, make(obj))
    return found[1]


#: The stack-frame tables of the module being recorded, and (op name, location) by its
#: metadata objects (decoded once per text, so shared).
_LOCATED: tuple[Any, dict[int, tuple[Any, Any]]] = (None, {})
#: Output bytes by Shape object.
_BYTES: dict[int, tuple[Any, Any]] = {}
