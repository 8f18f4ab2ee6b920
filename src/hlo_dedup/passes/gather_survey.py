"""What the all-gather pass saw: the fate of every all-gather, and the near misses.

A user who gets "0 folds" needs to know why: walks that stopped at a reshape or copy
before reaching a parameter, the same parameter gathered with different replica groups,
or forward and backward gathers that live in different computations (the pass folds only
within one). The pass tells the survey what it decided; the survey turns that into one
`InstructionFate` per all-gather and the `NearMiss` groups, with the source attribution
of each gather taken from its metadata while it still exists (DCE deletes folded ones).
Every gather is attributed to the weight it gathers, in the user's words where the module
carries them (gather_names), also past the framework idioms that stop the pass's walk
(gather_idioms), which are named in near misses and notes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable

from .gather_idioms import EXPLAIN, evidence, pinned_gather_pad, token_operand, view_idiom
from .gather_names import layer_of, parameter_name
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

    __slots__ = ("bytes_output", "comp_name", "fate", "folded_into", "inst", "key", "key_json", "name", "obstacles",
                 "op_name", "opcode", "origin", "path", "raw", "reason", "refused_onto", "source", "stop", "walk")

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
        # The weight a walk that stopped early still comes from, and the idioms on the way:
        # (kind, instruction, token operand index or None), nearest the gather first.
        self.origin: tuple[HloInstruction, tuple[int, ...]] | None = (raw, path) if raw is not None else None
        self.obstacles: tuple[tuple[str, HloInstruction, int | None], ...] = ()


class GatherSurvey:
    """Collects the pass's decisions for one module, in instruction order. `walk` is the
    pass's: (node, path) -> (parameter or None, path left, stop, inner gathers)."""

    def __init__(self, module: HloModule, walk: Callable[[HloInstruction, tuple[int, ...]], tuple[Any, ...]]) -> None:
        self.module = module
        self.walk = walk
        self._entries: dict[HloInstruction, _Entry] = {}
        self._open: list[_Entry] = []  # the computation being processed
        self._near: list[NearMiss] = []
        self._callers: dict[HloComputation, list[HloInstruction]] | None = None
        self._resolved: dict[tuple, tuple[HloInstruction, tuple[int, ...]] | None] = {}
        self._tokens: dict[HloInstruction, bool] = {}
        self._channel_folds: list[tuple[HloInstruction, HloInstruction]] = []
        self._pin_notes: list[str] = []

    # ------------------------------------------------------------- decisions
    def not_candidate(self, inst: HloInstruction, reason: str) -> None:
        self._add(_Entry(inst, "not_candidate", reason=reason))

    def not_traced(self, inst: HloInstruction, stop: HloInstruction | None, hops: tuple[tuple[str, str], ...]) -> None:
        reason = f"the walk stopped at {stop.opcode} {stop.name}" if stop is not None else "no operand"
        entry = _Entry(inst, "not_traced", reason=reason, stop=stop, walk=hops)
        entry.origin, entry.obstacles = self._attribute(inst.operands[0], (), idioms=True)
        self._add(entry)

    def traced(self, inst: HloInstruction, raw: HloInstruction, path: tuple[int, ...], key: tuple,
               key_json: dict[str, Any], hops: tuple[tuple[str, str], ...]) -> None:
        self._add(_Entry(inst, "unique", key=key, key_json=key_json, path=path, raw=raw, walk=hops))

    def folded(self, removed: HloInstruction, kept: HloInstruction) -> None:
        if removed.channel_id is not None and kept.channel_id is not None and removed.channel_id != kept.channel_id:
            self._channel_folds.append((kept, removed))
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
                first = next(iter(groups.values()))[0]
                self._near.append(_key_field_miss(comp, list(groups.values()), self._tensor(first.origin)))
        for (stop, direct), group in stops.items():
            if len(group) > 1:
                self._near.append(_same_operand_miss(comp, stop, group, direct))
        by_weight: dict[tuple, list[_Entry]] = defaultdict(list)
        for entry in entries:
            if entry.origin is not None:
                by_weight[entry.origin].append(entry)
        for group in by_weight.values():
            # Gathers of one weight, some behind an idiom, not all behind the same instruction
            # (those are a same_operand near miss already).
            stopped = [e for e in group if e.obstacles]
            if len(group) > 1 and stopped and len({e.stop for e in stopped}) + len(group) - len(stopped) > 1:
                self._near.append(self._idiom_miss(comp, group))

    def records(self) -> list[InstructionFate]:
        return [InstructionFate(e.comp_name, e.name, e.opcode, e.fate, e.folded_into, e.reason,
                                (e.stop.opcode, e.stop.name) if e.stop is not None else None,
                                e.key_json, e.bytes_output, e.op_name, e.source, e.walk, e.refused_onto,
                                self._tensor(e.origin))
                for e in self._entries.values()]

    def pinned_gathers(self, all_reduces: list[HloInstruction]) -> None:
        """Hear the layout-constrained all-reduces: those that are `xm.all_gather(pin_layout=True)`
        make a note, and a near miss for each weight gathered twice."""
        self._pin_notes = self._pinned_gathers(all_reduces)

    def notes(self) -> list[str]:
        """One line per idiom met: the gathers that read their weight through it, with
        evidence; folds across channel ids; pin_layout gathers."""
        out = []
        by_kind: dict[str, list[tuple[str, HloInstruction, int | None]]] = defaultdict(list)
        for entry in self._entries.values():
            for kind in dict.fromkeys(k for k, _, _ in entry.obstacles):
                by_kind[kind].append(next(o for o in entry.obstacles if o[0] == kind))
        for kind, met in by_kind.items():
            what, _ = EXPLAIN[kind]
            out.append(f"{len(met)} all-gather{'s read their weight' if len(met) > 1 else ' reads its weight'} "
                       f"through {what}, e.g. {evidence(*met[0])}, which the pass's walk does not follow")
        if self._channel_folds:
            kept, removed = self._channel_folds[0]
            out.append(f"{len(self._channel_folds)} fold{'s' if len(self._channel_folds) > 1 else ''} joined "
                       f"all-gathers with different channel_id (e.g. {removed.name} channel_id={removed.channel_id} "
                       f"onto {kept.name} channel_id={kept.channel_id}): neuronx-cc's pass folds them (channel_id is "
                       "not in its key); XLA's CSE keeps them apart (it compares channel_id values)")
        return out + self._pin_notes

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
        groups: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
        for entry in self._entries.values():
            if entry.key is None or entry.raw is None or entry.raw.parent is None:
                continue
            origin = self._resolve((entry.raw, entry.path))
            if origin is None:
                continue
            param, path = origin
            groups[(param, path, *entry.key[2:])].append((entry.comp_name, entry.name))
        out = []
        for (param, path, *_), members in groups.items():
            computations = tuple(dict.fromkeys(c for c, _ in members))
            if len(computations) > 1:
                where = f"{param.name}" + (f" (index path {list(reversed(path))})" if path else "")
                tensor = self._tensor((param, path))
                out.append(NearMiss(
                    "cross_computation",
                    f"the same value, {where} of {param.parent.name}" + (f" (the weight {tensor})" if tensor else "")
                    + f", is gathered in {len(computations)} "
                    "computations; the pass folds only within a computation",
                    computations, tuple(name for _, name in members)))
        return out

    def _resolve(self, at: tuple[HloInstruction, tuple[int, ...]]) -> tuple[HloInstruction, tuple[int, ...]] | None:
        """`_origin` of a (parameter, path), once per pair: a layer's forward and backward
        gathers share theirs."""
        if at not in self._resolved:
            param = at[0]
            if param.parent is None or param.parent is self.module.entry:
                self._resolved[at] = at
            else:
                self._resolved[at] = self._origin(param, at[1], self._call_sites())
        return self._resolved[at]

    def _call_sites(self) -> dict[HloComputation, list[HloInstruction]]:
        """Every computation's callers. Built only for a gathered parameter outside the
        entry (gathers mostly read the entry's): only then is every instruction visited."""
        if self._callers is None:
            self._callers = defaultdict(list)
            for comp in self.module.computations:
                for inst in comp:
                    if inst.called_computations:
                        for callee in inst.called_computations:
                            self._callers[callee].append(inst)
        return self._callers

    def _tensor(self, at: tuple[HloInstruction, tuple[int, ...]] | None) -> str | None:
        """The user's name of the weight at `at` (an entry parameter, or a parameter that one
        reaches through calls), with the index path left (root first)."""
        resolved = self._resolve(at) if at is not None else None
        if resolved is None or resolved[0].parent is not self.module.entry:
            return None  # a loop body's parameters are named by the framework, not the user
        param, path = resolved
        name = parameter_name(param)
        if name is None:
            return None
        return name + (f"{{{','.join(map(str, reversed(path)))}}}" if path else "")

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
        return self._attribute(node, path, idioms=False)[0]

    def _attribute(self, node: HloInstruction, path: tuple[int, ...], *, idioms: bool
                   ) -> tuple[tuple[HloInstruction, tuple[int, ...]] | None, tuple[tuple[str, HloInstruction, int | None], ...]]:
        """The walk, also through Shardy's GlobalToLocalShape (element i is operand i's local
        shard) and, with `idioms`, through the idioms that stop it (a token add, a reshape, a
        transpose, a dtype-changing convert): attribution follows the value where
        the pass's key would stop. Returns the (parameter, path) reached and the idioms met."""
        met: list[tuple[str, HloInstruction, int | None]] = []
        for _ in range(_MAX_ORIGIN_DEPTH):
            found, path, stop, _ = self.walk(node, path)
            if found is not None:
                return (found, path), tuple(met)
            if stop is None:
                break
            if stop.opcode == "custom-call" and stop.custom_call_target == _GLOBAL_TO_LOCAL:
                index = path[-1] if path else 0
                if index >= stop.operand_count:
                    break
                node, path = stop.operands[index], path[:-1]
                continue
            if not idioms or path:
                break
            token = token_operand(stop, self._tokens)
            kind = "collective_token" if token is not None else view_idiom(stop)
            if kind is None:
                break
            met.append((kind, stop, token))
            node = stop.operands[token or 0]
        return None, tuple(met)

    def _idiom_miss(self, comp: HloComputation, group: list[_Entry]) -> NearMiss:
        """Gathers of one weight in one computation, some behind idioms that stop the walk."""
        kinds = {e.obstacles[0][0] if e.obstacles else "" for e in group}
        stopped = [e for e in group if e.obstacles]
        kind = stopped[0].obstacles[0][0] if len(kinds - {""}) == 1 else "same_tensor"
        param, path = group[0].origin  # type: ignore[misc]
        weight = self._tensor(group[0].origin) or param.name + (f" {{{','.join(map(str, reversed(path)))}}}" if path else "")
        how = "; ".join(
            f"{e.name} " + (", ".join(f"behind {evidence(k, i, t)} ({k.replace('_', ' ')})" for k, i, t in e.obstacles)
                            if e.obstacles else "directly")
            for e in group[:4])
        if kind == "same_tensor":
            why = "neuronx-cc's pass folds only gathers it traces to the same parameter, so none of these"
        else:
            what, why = EXPLAIN[kind]
            how = f"{what}: {how}"
        reason = f"{len(group)} all-gathers of the same weight {weight}, {how}; {why}"
        return NearMiss(kind, reason, (comp.name,), tuple(e.name for e in group))

    def _pinned_gathers(self, all_reduces: list[HloInstruction]) -> list[str]:
        """`xm.all_gather(pin_layout=True)`: near misses for two of the same weight, one note."""
        found: dict[tuple, list[tuple[HloInstruction, HloInstruction]]] = defaultdict(list)
        for inst in all_reduces:
            pad = pinned_gather_pad(inst, self.walk)
            if pad is not None:
                origin, _ = self._attribute(pad.operands[0], (), idioms=True)
                found[(inst.parent, origin if origin is not None else pad)].append((inst, pad))
        if not found:
            return []
        what, why = EXPLAIN["pin_layout"]
        for (comp, origin), pairs in found.items():
            if len(pairs) > 1:
                weight = (self._tensor(origin) or origin[0].name) if isinstance(origin, tuple) else origin.name
                self._near.append(NearMiss(
                    "pin_layout", f"{len(pairs)} all-reduces gather the same weight {weight} by {what} "
                    f"({', '.join(evidence('pin_layout', pad) for _, pad in pairs[:4])}); {why}",
                    (comp.name,), tuple(inst.name for inst, _ in pairs)))
        count = sum(map(len, found.values()))
        inst, pad = next(iter(found.values()))[0]
        return [f"{count} all-reduce{'s are' if count > 1 else ' is'} {what} (e.g. {inst.name} of "
                f"{evidence('pin_layout', pad)}); the pass folds only all-gather"]

def _key_field_miss(comp: HloComputation, groups: list[list[_Entry]], tensor: str | None) -> NearMiss:
    """The same parameter (and index path) gathered under different keys."""
    first = [g[0] for g in groups]
    a, b = first[0], first[1]
    differing = [label for label, i in (("element type", 2), ("layout", 3), ("replica groups", 4)) if a.key[i] != b.key[i]]  # type: ignore[index]
    if "layout" in differing and a.key_json["shape"].split("{")[0] != b.key_json["shape"].split("{")[0]:  # type: ignore[index]
        differing[differing.index("layout")] = "shape"
    param = (a.raw.name if a.raw is not None else "?") + (f" (the weight {tensor})" if tensor else "")
    reason = (f"the same parameter {param} is gathered with {len(groups)} different keys "
              f"(they differ in {', '.join(differing) or 'the key'}), so they cannot fold")
    return NearMiss("key_field", reason, (comp.name,), tuple(e.name for g in groups for e in g))


def _same_operand_miss(comp: HloComputation, stop: HloInstruction, group: list[_Entry], direct: bool) -> NearMiss:
    how = "of" if direct else "reaching"
    reason = (f"{len(group)} all-gathers {how} the same {stop.opcode} {stop.name}: not traced to a parameter "
              "(the pass only follows forwarding ops); XLA's CSE merges such gathers when they are identical")
    return NearMiss("same_operand", reason, (comp.name,), tuple(e.name for e in group))
