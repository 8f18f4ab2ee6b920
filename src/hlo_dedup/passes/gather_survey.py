"""What the all-gather pass saw: the fate of every all-gather, and the near misses.

A user who gets "0 folds" needs to know why: walks that stopped at a reshape or copy
before reaching a parameter, the same parameter gathered with different replica groups,
or forward and backward gathers that live in different computations (the pass folds only
within one). The pass tells the survey what it decided; the survey turns that into one
`InstructionFate` per all-gather and the `NearMiss` groups, with the source attribution
of each gather taken from its metadata while it still exists (DCE deletes folded ones).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable

from .records import InstructionFate, NearMiss, facts

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from ..ir.module import HloModule

#: Ops whose called computations receive the caller's operands as their parameters.
_PARAMETER_PASSING = frozenset({"call", "fusion", "async-start", "custom-call"})
_MAX_ORIGIN_DEPTH = 64
_GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"


class _Entry:
    """One gather as the pass saw it; what the record needs is copied while it exists
    (`GatherSurvey._add` fills the facts from `records.facts`)."""

    __slots__ = ("bytes_output", "comp_name", "fate", "folded_into", "inst", "key", "key_json", "name", "op_name",
                 "opcode", "path", "raw", "reason", "refused_onto", "source", "stop", "walk")

    def __init__(self, inst: HloInstruction, fate: str, *, reason: str | None = None,
                 stop: HloInstruction | None = None, key: tuple | None = None,
                 key_json: dict[str, Any] | None = None, path: tuple[int, ...] = (),
                 raw: HloInstruction | None = None, walk: tuple[tuple[str, str], ...] = ()) -> None:
        self.inst = inst
        self.fate = fate
        self.reason = reason
        self.stop = stop
        self.key = key
        self.key_json = key_json
        self.path = path
        self.raw = raw
        self.folded_into: str | None = None
        self.refused_onto: str | None = None
        self.walk = walk
        self.comp_name = ""
        self.name = ""
        self.opcode = ""
        self.bytes_output = 0
        self.op_name: str | None = None
        self.source: str | None = None


class GatherSurvey:
    """Collects the pass's decisions for one module, in instruction order. `walk` is the
    pass's: (node, path) -> (parameter or None, path left, stop, inner gathers)."""

    def __init__(self, module: HloModule, walk: Callable[[HloInstruction, tuple[int, ...]], tuple[Any, ...]]) -> None:
        self.module = module
        self.walk = walk
        self._entries: dict[HloInstruction, _Entry] = {}
        self._open: list[_Entry] = []  # the computation being processed
        self._near: list[NearMiss] = []

    # ------------------------------------------------------------- decisions
    def not_candidate(self, inst: HloInstruction, reason: str) -> None:
        self._add(_Entry(inst, "not_candidate", reason=reason))

    def not_traced(self, inst: HloInstruction, stop: HloInstruction | None, hops: tuple[tuple[str, str], ...]) -> None:
        reason = f"the walk stopped at {stop.opcode} {stop.name}" if stop is not None else "no operand"
        self._add(_Entry(inst, "not_traced", reason=reason, stop=stop, walk=hops))

    def traced(self, inst: HloInstruction, raw: HloInstruction, path: tuple[int, ...], key: tuple,
               key_json: dict[str, Any], hops: tuple[tuple[str, str], ...]) -> None:
        self._add(_Entry(inst, "unique", key=key, key_json=key_json, path=path, raw=raw, walk=hops))

    def folded(self, removed: HloInstruction, kept: HloInstruction) -> None:
        self._entries[removed].fate = "folded"
        self._entries[removed].folded_into = kept.name
        if self._entries[kept].fate == "unique":
            self._entries[kept].fate = "kept"

    def refused(self, inst: HloInstruction, kept: HloInstruction, reasons: tuple[str, ...]) -> None:
        entry = self._entries[inst]
        entry.fate = "refused"
        entry.refused_onto = kept.name
        entry.reason = f"not folded onto {kept.name}: " + "; ".join(reasons)

    # -------------------------------------------------------------- results
    def close_computation(self, comp: HloComputation) -> None:
        """Near misses inside one computation, while its instructions all still exist."""
        entries, self._open = self._open, []
        by_parameter: dict[tuple, dict[tuple, list[_Entry]]] = defaultdict(dict)
        stops: dict[tuple, list[_Entry]] = defaultdict(list)
        for entry in entries:
            if entry.key is not None:
                by_parameter[(entry.raw, entry.path)].setdefault(entry.key, []).append(entry)
            elif entry.fate == "not_traced" and entry.stop is not None:
                stops[(entry.stop, entry.inst.operands[0] is entry.stop)].append(entry)
        for groups in by_parameter.values():
            if len(groups) > 1:
                self._near.append(_key_field_miss(comp, list(groups.values())))
        for (stop, direct), group in stops.items():
            if len(group) > 1:
                self._near.append(_same_operand_miss(comp, stop, group, direct))

    def records(self) -> list[InstructionFate]:
        return [InstructionFate(e.comp_name, e.name, e.opcode, e.fate, e.folded_into, e.reason,
                                (e.stop.opcode, e.stop.name) if e.stop is not None else None,
                                e.key_json, e.bytes_output, e.op_name, e.source, e.walk, e.refused_onto)
                for e in self._entries.values()]

    def near_misses(self) -> list[NearMiss]:
        """Every near miss, the cross-computation ones last (they need the whole module)."""
        return self._near + self._cross_computation()

    # ------------------------------------------------------------ internals
    def _add(self, entry: _Entry) -> None:
        (entry.comp_name, entry.name, entry.opcode, entry.bytes_output, entry.op_name,
         entry.source) = facts(entry.inst)
        self._entries[entry.inst] = entry
        self._open.append(entry)

    def _cross_computation(self) -> list[NearMiss]:
        """Traced gathers whose parameters are the same value seen from different
        computations (a weight passed to a forward and a backward body)."""
        callers: dict[HloComputation, list[HloInstruction]] = defaultdict(list)
        top = self.module.entry
        # The call sites only matter for a gathered parameter outside the entry (gathers
        # mostly sit in the entry): only then is every instruction of the module visited.
        if any(e.raw is not None and e.raw.parent not in (None, top) for e in self._entries.values()):
            for comp in self.module.computations:
                for inst in comp:
                    if inst.called_computations:
                        for callee in inst.called_computations:
                            callers[callee].append(inst)
        groups: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
        # By (parameter, path): a layer's forward and backward gathers share theirs.
        origins: dict[tuple, tuple[HloInstruction, tuple[int, ...]] | None] = {}
        for entry in self._entries.values():
            if entry.key is None or entry.raw is None or entry.raw.parent is None:
                continue
            at = (entry.raw, entry.path)
            if at not in origins:
                origins[at] = self._origin(entry.raw, entry.path, callers)
            origin = origins[at]
            if origin is None:
                continue
            param, path = origin
            groups[(param, path, *entry.key[2:])].append((entry.comp_name, entry.name))
        out = []
        for (param, path, *_), members in groups.items():
            computations = tuple(dict.fromkeys(c for c, _ in members))
            if len(computations) > 1:
                where = f"{param.name}" + (f" (index path {list(reversed(path))})" if path else "")
                out.append(NearMiss(
                    "cross_computation",
                    f"the same value, {where} of {param.parent.name}, is gathered in {len(computations)} "
                    "computations; the pass folds only within a computation",
                    computations, tuple(name for _, name in members)))
        return out

    def _origin(self, param: HloInstruction, path: tuple[int, ...],
                callers: dict[HloComputation, list[HloInstruction]]) -> tuple[HloInstruction, tuple[int, ...]] | None:
        """The entry-level parameter (and path) a computation's parameter receives, through
        calls with one call site; None when that is not one value."""
        for _ in range(_MAX_ORIGIN_DEPTH):
            comp = param.parent
            if comp is None or comp is self.module.entry:
                return param, path
            sites = callers.get(comp, [])
            if len(sites) != 1 or sites[0].opcode not in _PARAMETER_PASSING:
                return None
            number = param.parameter_number
            site = sites[0]
            if number >= site.operand_count:
                return None
            found = self._see_through(site.operands[number], path)
            if found is None:
                return None
            param, path = found
        return None

    def _see_through(self, node: HloInstruction, path: tuple[int, ...]) -> tuple[HloInstruction, tuple[int, ...]] | None:
        """The walk, also through Shardy's GlobalToLocalShape (element i is operand i's
        local shard): attribution follows the value, where the pass's key would stop."""
        for _ in range(_MAX_ORIGIN_DEPTH):
            found, path, stop, _ = self.walk(node, path)
            if found is not None:
                return found, path
            if stop is None or stop.opcode != "custom-call" or stop.custom_call_target != _GLOBAL_TO_LOCAL:
                return None
            index = path[-1] if path else 0
            if index >= stop.operand_count:
                return None
            node, path = stop.operands[index], path[:-1]
        return None


def _key_field_miss(comp: HloComputation, groups: list[list[_Entry]]) -> NearMiss:
    """The same parameter (and index path) gathered under different keys."""
    first = [g[0] for g in groups]
    a, b = first[0], first[1]
    differing = [label for label, i in (("element type", 2), ("layout", 3), ("replica groups", 4)) if a.key[i] != b.key[i]]  # type: ignore[index]
    if "layout" in differing and a.key_json["shape"].split("{")[0] != b.key_json["shape"].split("{")[0]:  # type: ignore[index]
        differing[differing.index("layout")] = "shape"
    param = a.raw.name if a.raw is not None else "?"
    reason = (f"the same parameter {param} is gathered with {len(groups)} different keys "
              f"(they differ in {', '.join(differing) or 'the key'}), so they cannot fold")
    return NearMiss("key_field", reason, (comp.name,), tuple(e.name for g in groups for e in g))


def _same_operand_miss(comp: HloComputation, stop: HloInstruction, group: list[_Entry], direct: bool) -> NearMiss:
    how = "of" if direct else "reaching"
    reason = (f"{len(group)} all-gathers {how} the same {stop.opcode} {stop.name}: not traced to a parameter "
              "(the pass only follows forwarding ops); XLA's CSE merges such gathers when they are identical")
    return NearMiss("same_operand", reason, (comp.name,), tuple(e.name for e in group))
