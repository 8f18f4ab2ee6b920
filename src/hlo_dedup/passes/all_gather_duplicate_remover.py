"""`neuron_all_gather_duplicate_remover`: neuronx-cc pass #106, exactly as specified.

NeuronDuplicateParameterAllGatherRemover (spec: shared/spec/dedup-passes.txt, first half).
For each computation, each `all-gather` (not `all-gather-start`) is traced from its
operand(0) up to a parameter through get-tuple-element / tuple / opt-barrier /
shape-preserving convert / nested all-gather(-start). Gathers with the same key —
(parameter, remaining tuple-index path, output element type, layout-sensitive output
shape, materialised replica groups) — are folded onto the first one in instruction order
with ReplaceAllUsesWith; HloDCE runs afterwards only if something was folded.

Choices where the spec leaves room (documented in README "Semantics"):
* The index path is kept whole (a stack of get-tuple-element indices, popped by tuple),
  not the binary's two scalars, so gathers of different tuple leaves never collide.
* Transactional (as every pass, see pass_base): anything that fails after the first
  rewrite (a malformed attribute met by the walk or by the trailing HloDCE, an IR
  precondition) rolls the module back, so a failed run leaves its text exactly unchanged.
* Hazards: the faithful key ignores operands after operand(0), the inner gathers a walk
  tunnelled through (each one's dimension, groups, shape, collective mode and its own
  operands after operand(0), any of which the index path may select), the collective
  mode and the gather dimension. Each fold whose two gathers differ in one of those is
  reported; `strict=True` refuses such folds (a gather then only folds onto an earlier
  one that matches it in all of them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..analysis.budget import spell_bytes
from ..analysis.fold_price import FoldPrice, FoldPricer
from ..analysis.live_profile import live_profile
from ..analysis.module_liveness import PRICE_BACKENDS
from ..ir.shape import byte_size
from .dce import run_dce
from .gather_survey import GatherSurvey
from .pass_base import HloPass, ModuleTransaction, PassResult
from .raw_parameter_walk import GATHERS, RawParameterWalker, Trail, walk_to_parameter
from .records import FoldRecord, Hazard, remembered, user_line


class _GatherConfig:
    """What decides a gather's value besides its operand(0): two gathers that agree in
    all of this and in operand(0) compute the same value. `others` are the operands after
    operand(0), which a multi-operand gather's index path may select."""

    __slots__ = ("dimensions", "groups", "mode", "opcode", "others", "shape")

    def __init__(self, opcode: str, dimensions: tuple[int, ...], groups: Any, shape: tuple[object, ...], mode: str,
                 others: tuple[HloInstruction, ...]) -> None:
        self.opcode = opcode
        self.dimensions = dimensions
        self.groups = groups
        self.shape = shape
        self.mode = mode
        self.others = others

    @classmethod
    def of(cls, inst: HloInstruction) -> _GatherConfig:
        return cls(inst.opcode, inst.dimensions, inst.replica_groups.groups, remembered(_SHAPES, inst.shape, _shape_facts)[0],
                   collective_mode(inst), tuple(inst.operands[1:]))

    def differences(self, other: _GatherConfig, same_value: dict[HloInstruction, HloInstruction]) -> list[str]:
        found = [label for label, a, b in (
            ("opcode", self.opcode, other.opcode),
            ("dimension", self.dimensions, other.dimensions),
            ("replica groups", self.groups, other.groups),
            ("shape", self.shape, other.shape),
            ("collective mode", self.mode, other.mode),
        ) if a != b]
        if not _same_values(self.others, other.others, same_value):
            found.append("operands after operand(0)")
        return found


def _same_values(a: tuple[HloInstruction, ...], b: tuple[HloInstruction, ...],
                 same_value: dict[HloInstruction, HloInstruction]) -> bool:
    """Operand lists known to hold the same values: the same instructions, or ones a
    hazard-free fold merged."""
    return len(a) == len(b) and all(same_value.get(x, x) is same_value.get(y, y) for x, y in zip(a, b))


#: Keys spell out replica groups of at most this many devices; larger ones keep XLA's
#: compact text (an iota list of a million devices is 300 bytes written, megabytes spelled).
_SPELLED_DEVICES = 4096


def _groups_json(groups: Any) -> list[list[int]] | str:
    devices = groups.groups
    if len(devices) * devices.group_size > _SPELLED_DEVICES:
        return groups.to_text()
    return [list(g) for g in devices]


class _Walk:
    """Result of FindRawParameter for one gather: the gather's own configuration and the
    trail of its walk (the parameter, the index path left, where a walk that found no
    parameter stopped, and the inner gathers it tunnelled through, which the key ignores)."""

    __slots__ = ("gather", "trail")

    def __init__(self, gather: _GatherConfig, trail: Trail) -> None:
        self.gather = gather
        self.trail = trail


def collective_mode(inst: HloInstruction) -> str:
    """XLA's CollectiveOpGroupMode for an all-gather (xla-semantics §8.4)."""
    has_channel = inst.channel_id is not None
    global_ids = inst.use_global_device_ids
    if not has_channel:
        return "invalid" if global_ids else "cross_replica"
    return "flattened_id" if global_ids else "cross_replica_and_partition"


class NeuronAllGatherDuplicateRemover(HloPass):
    """Fold all-gathers of the same parameter with the same effective configuration."""

    name = "neuron_all_gather_duplicate_remover"
    source_file = "neuron_all_gather_duplicate_remover.cc"

    def __init__(self, strict: bool = False, max_peak_increase: int | None = None,
                 refused_folds: Mapping[tuple[str, str], str] | None = None, price_backend: str = "native",
                 priced: bool = True) -> None:
        self.strict = strict
        self.max_peak_increase = max_peak_increase
        # Whether folds get a memory price (the model costs more than the rest of the pass on
        # large modules; a budget needs it).
        if not priced and max_peak_increase is not None:
            raise ValueError("a --max-peak-increase budget needs the memory price")
        self.priced = priced
        # The backend the memory price is for (`analysis.PRICE_BACKENDS`): whether it
        # computes bf16 and f16 in f32 (XLA:CPU) or natively.
        if price_backend not in PRICE_BACKENDS:
            raise ValueError(f"unknown price backend {price_backend!r} (known: {', '.join(PRICE_BACKENDS)})")
        self.price_backend = price_backend
        # (computation, removed gather) -> why that fold is refused (an outside judge: XLA's peak)
        self.refused_folds = refused_folds or {}
        self._walker = RawParameterWalker()
        self._price_seconds = 0.0  # of the current run: what the memory price took

    # ------------------------------------------------------------------- walk
    def find_raw_parameter(self, node: HloInstruction, ag: HloInstruction, vlog: bool) -> _Walk:
        """FindRawParameter: walk up from `node` through forwarding ops to a parameter."""
        gather = _GatherConfig.of(ag)  # the binary snapshots the gather's attributes first
        if vlog:
            walk_to_parameter(node, (), self.vlog)  # the log lines, hop by hop
        return _Walk(gather, self._walker.walk(node))

    # -------------------------------------------------------------------- run
    def run_on_module(self, module: HloModule, transaction: ModuleTransaction) -> PassResult:
        vlog = self.vlog_is_on(2)
        if vlog:
            self.vlog(2, "Running NeuronDuplicateParameterAllGatherRemover pass")
        folds: list[FoldRecord] = []
        hazards: list[Hazard] = []
        self._walker = RawParameterWalker()  # walks remembered for this module's run
        survey = GatherSurvey(module, self._walker)
        self._price_seconds = 0.0
        pricer = None
        if self.priced:  # built before the first rewrite; a computation's model only once it gets a fold
            started = time.perf_counter()
            pricer = FoldPricer(module, spmd=module.use_spmd_partitioning,
                                f32_arithmetic=PRICE_BACKENDS[self.price_backend])
            self._price_seconds = time.perf_counter() - started
        found = _by_computation(module, GATHERS, _MENTION)
        # Found while the module is as read (its text tells which computations to scan);
        # the folds and DCE only remove instructions.
        all_reduces = _by_computation(module, _ALL_REDUCES, "constrain_layout=true")
        priced: dict[HloComputation, list[FoldPrice]] = {}
        for comp in module.computations if vlog else found:
            if vlog:
                self.vlog(2, "Processing computation: %s", comp.name)
            gathers = found.get(comp)
            if gathers:
                self._process_computation(comp, gathers, vlog, folds, hazards, transaction, survey, pricer, priced)
        # After every fold (a callee's folds change its callers' profiles), before DCE
        # changes the module the pricer reads.
        profiles = []
        if pricer is not None:
            started = time.perf_counter()
            profiles = [live_profile(pricer, comp, prices) for comp, prices in priced.items()]
            self._price_seconds += time.perf_counter() - started
        changed = bool(folds)
        deleted: list[tuple[str, str, str]] = []
        if changed:
            rewritten = {f.computation for f in folds}
            before = [(c.name, c.instructions) for c in module.computations if c.name in rewritten]
            run_dce(module, transaction)
            deleted = [(name, i.name, i.to_text()) for name, insts in before for i in insts if i.parent is None]
        if vlog:
            self.vlog(2, "NeuronDuplicateParameterAllGatherRemover pass complete")
        records = survey.records()
        # torch-xla's pin_layout gathers are all-reduces with a pinned layout: the survey names them too.
        survey.pinned_gathers([i for insts in all_reduces.values() for i in insts
                               if i.parent is not None and i.parent.parent is module])
        notes = survey.notes() + ([] if records else _no_gather_notes(module))
        return PassResult(self.name, changed, folds, hazards, instructions=records,
                          near_misses=survey.near_misses(), deleted=deleted, notes=notes, profiles=profiles,
                          price_seconds=self._price_seconds)

    def _process_computation(
        self,
        comp: HloComputation,
        gathers: list[HloInstruction],
        vlog: bool,
        folds: list[FoldRecord],
        hazards: list[Hazard],
        transaction: ModuleTransaction,
        survey: GatherSurvey,
        pricer: FoldPricer | None,
        priced: dict[HloComputation, list[FoldPrice]],
    ) -> None:
        # The candidates: all-gathers with an operand; the survey hears why the others are not.
        candidates = [inst for inst in gathers if inst.opcode == "all-gather" and inst.operands]
        for inst in gathers:
            if inst.opcode != "all-gather" or not inst.operands:
                survey.not_candidate(inst, "no operand" if inst.opcode == "all-gather" else
                                     "asynchronous (all-gather-start): the pass folds only all-gather")
        # Hazards are judged on the program as written: a fold re-points users, which would
        # hide that a later walk went through a gather an earlier hazardous fold replaced.
        # (The keys do not change: a fold only swaps a gather for one with the same key.)
        walks = {inst: self.find_raw_parameter(inst.operands[0], inst, False) for inst in candidates}
        same_value: dict[HloInstruction, HloInstruction] = {}  # removed -> kept, for hazard-free folds
        seen: dict[tuple, list[HloInstruction]] = {}
        # Per key, the entries by what `_hazard_reasons` compares first: only entries alike
        # in it can match a gather in strict mode (a scan of all made nested gathers quadratic).
        alike: dict[tuple, dict[tuple, list[HloInstruction]]] = {}
        for inst in candidates:
            walk = self.find_raw_parameter(inst.operands[0], inst, True) if vlog else walks[inst]
            trail = walk.trail
            raw = trail.raw_param
            if raw is None:
                survey.not_traced(inst, trail.stop, trail.hops())
                continue
            if vlog:
                self.vlog(2, "Found all-gather instruction: %s", inst.to_text())
            gather = walk.gather  # the gather's own layout key and groups, read once
            key = (raw, trail.path, inst.shape.element_type, gather.shape, gather.groups)
            key_json = self._key_json(raw, trail.path, inst)
            survey.traced(inst, raw, trail.path, key, key_json, trail.hops())
            entries = seen.get(key)
            if entries is None:
                if vlog:
                    self.vlog(2, "Storing all-gather result for future use")
                seen[key] = [inst]
                alike[key] = {_hazard_class(walk): [inst]}
                continue
            keep = entries[0]
            reasons = _hazard_reasons(walks[keep], walks[inst], same_value)
            if self.strict and reasons:
                hazards.append(Hazard(comp.name, keep.name, inst.name, tuple(reasons), refused=True))
                similar = alike[key].setdefault(_hazard_class(walk), [])
                match = next((e for e in similar if not _hazard_reasons(walks[e], walks[inst], same_value)), None)
                if match is None:
                    survey.refused(inst, keep, tuple(reasons))
                    entries.append(inst)
                    similar.append(inst)
                    continue
                keep, reasons = match, []
            elif reasons:
                hazards.append(Hazard(comp.name, keep.name, inst.name, tuple(reasons), refused=False))
            if not comp.definition_ordered and _depends_on(keep, inst):
                hazards.append(Hazard(comp.name, keep.name, inst.name,
                                      ("folding would create a cycle",), refused=True))
                survey.refused(inst, keep, ("folding would create a cycle",))
                continue
            veto = self.refused_folds.get((comp.name, inst.name)) if self.refused_folds else None
            if veto is not None:
                survey.refused(inst, keep, (veto,))
                continue
            price = None if pricer is None else self._price(pricer, comp, keep, inst)
            if price is not None and price.refused:
                budget = self.max_peak_increase
                survey.refused(inst, keep, (
                    f"the estimated peak of {comp.name} would rise by {spell_bytes(price.peak_increase)} "
                    f"({spell_bytes(price.peak_bytes_before)} -> {spell_bytes(price.peak_bytes_after)}), more "
                    f"than the --max-peak-increase budget of {spell_bytes(budget)}",))
                continue
            if vlog:
                self.vlog(2, "Replacing all-gather with previous result: %s", keep.to_text())
            users = [(u, u.operand_indices(inst)) for u in inst.users]
            lines_before = [user_line(u, at) for u, at in users]
            removed_text = inst.to_text()
            transaction.before_rewrite()
            inst.replace_all_uses_with(keep)
            rewired = tuple((u.name, b, user_line(u, at)) for (u, at), b in zip(users, lines_before))
            folds.append(self._record(comp, keep, inst, key_json, bool(reasons),
                                      None if price is None else price.to_json(), removed_text, rewired))
            survey.folded(inst, keep)
            if price is not None:
                priced.setdefault(comp, []).append(price)
            if not reasons:
                same_value[inst] = keep
        survey.close_computation(comp)

    def _price(self, pricer: FoldPricer, comp: HloComputation, keep: HloInstruction,
               inst: HloInstruction) -> FoldPrice:
        """The fold's memory price (refused when over the budget), its time counted."""
        started = time.perf_counter()
        budget = self.max_peak_increase
        price = pricer.apply(comp, keep, inst) if budget is None else pricer.apply_within(comp, keep, inst, budget)
        self._price_seconds += time.perf_counter() - started
        return price

    @staticmethod
    def _key_json(raw: HloInstruction, path: tuple[int, ...], inst: HloInstruction) -> dict[str, Any]:
        _, printed, element_type = remembered(_SHAPES, inst.shape, _shape_facts)
        value = remembered(_GROUPS_JSON, inst.replica_groups, _groups_json)
        return {
            "parameter": raw.name,
            "index_path": list(reversed(path)),  # root first: the parameter's outermost index
            "element_type": element_type,
            "shape": printed,
            # Each record its own copy of the lists (a caller may edit one record).
            "replica_groups": [g[:] for g in value] if isinstance(value, list) else value,
        }

    def _record(self, comp: HloComputation, kept: HloInstruction, removed: HloInstruction, key: dict[str, Any],
                hazardous: bool, memory: dict[str, Any] | None, removed_text: str,
                rewired: tuple[tuple[str, str, str], ...]) -> FoldRecord:
        out_bytes = byte_size(removed.shape)
        shard_count = _shard_count(removed)
        per_device = out_bytes * (shard_count - 1) // shard_count if shard_count > 0 else 0
        return FoldRecord(self.name, comp.name, kept.name, removed.name, key, out_bytes, per_device,
                          hazardous=hazardous, memory=memory, removed_text=removed_text, rewired=rewired)


def _shape_facts(shape: Any) -> tuple[tuple[object, ...], str, str]:
    """(layout key, printed text, element type as a key spells it) of a Shape: the gathers
    of a module share a few shapes, so each is keyed and printed once (`_SHAPES`)."""
    # A multi-operand gather's output is a tuple: XLA's element_type() is TUPLE.
    element_type = "tuple" if shape.element_type is None else shape.element_type.value
    return shape.layout_key(), shape.to_text(), element_type


#: `_shape_facts` by Shape object, and the spelled replica groups by decoded value (shared
#: by text).
_SHAPES: dict[int, tuple[Any, Any]] = {}
_GROUPS_JSON: dict[int, tuple[Any, Any]] = {}


def _by_computation(module: HloModule, opcodes: tuple[str, ...], mention: str
                    ) -> dict[HloComputation, list[HloInstruction]]:
    """The computations that hold instructions of `opcodes` (all-gathers and
    all-gather-starts), in order, each with them in order (a fold changes no other
    computation's). Most computations of a real module hold none (fusion bodies, reducers):
    while the module is as read, one whose source lines never say `mention` has none and is
    not scanned at all."""
    source = module.source.text if module.is_pristine() else None  # type: ignore[union-attr]
    out: dict[HloComputation, list[HloInstruction]] = {}
    for comp in module.computations:
        span = comp.span
        if (source is not None and span is not None and span.body_end >= 0
                and source.find(mention, span.start, span.body_end) < 0):
            continue
        found = [inst for inst in comp if inst.opcode in opcodes]
        if found:
            out[comp] = found
    return out


_MENTION = "all-gather"
_ALL_REDUCES = ("all-reduce",)


def _no_gather_notes(module: HloModule) -> list[str]:
    """Why a module has no all-gather to fold, when the module says so."""
    for comp in module.computations:
        for inst in comp:
            if inst.attr("sharding") is not None or (
                    inst.opcode == "custom-call" and inst.custom_call_target in ("Sharding", "SPMDFullToShardShape")):
                return ["no all-gather instructions: the module carries sharding annotations but is not "
                        "partitioned yet; XLA's SPMD partitioner inserts the collectives (look at a dump "
                        "after spmd-partitioning, e.g. --xla_dump_hlo_pass_re=spmd-partitioning)"]
    return ["no all-gather instructions in the module"]


def _hazard_reasons(keep: _Walk, walk: _Walk, same_value: dict[HloInstruction, HloInstruction]) -> list[str]:
    """Why folding the gather of `walk` onto that of `keep` (same key) may change the
    program's results; empty when it cannot."""
    reasons = []
    a, b = keep.gather, walk.gather
    if not _same_values(a.others, b.others, same_value):
        reasons.append(
            "multi-operand all-gathers differ beyond operand(0) "
            f"({len(a.others) + 1} vs {len(b.others) + 1} operands)"
        )
    inner_a, inner_b = keep.trail, walk.trail
    if inner_a.gather_count != inner_b.gather_count:
        reasons.append(f"the walks tunnelled through different numbers of inner all-gathers "
                       f"({inner_a.gather_count} vs {inner_b.gather_count})")
    else:
        differing = sorted({label for x, y in _unshared(inner_a, inner_b)
                            for label in _GatherConfig.of(x).differences(_GatherConfig.of(y), same_value)})
        if differing:
            reasons.append("the walks tunnelled through inner all-gathers that differ in " + ", ".join(differing))
    if a.mode != b.mode:
        reasons.append(f"different collective modes ({a.mode} vs {b.mode}: channel_id / "
                       "use_global_device_ids differ, so the same replica_groups name "
                       "different devices)")
    if a.dimensions != b.dimensions:
        reasons.append(f"different all_gather_dimension ({a.dimensions} vs {b.dimensions})")
    return reasons


def _hazard_class(walk: _Walk) -> tuple:
    """What two walks must share for `_hazard_reasons` to find nothing: as many inner gathers,
    operands after operand(0), the collective mode and the gather dimension."""
    gather = walk.gather
    return walk.trail.gather_count, len(gather.others), gather.mode, gather.dimensions


def _unshared(a: Trail, b: Trail) -> Iterator[tuple[HloInstruction, HloInstruction]]:
    """The pairs of inner gathers two walks with as many tunnelled through, up to where
    the walks join (from there on they are the same instructions)."""
    for x, y in zip(a.tunnelled(), b.tunnelled()):
        if x is y:
            return
        yield x.node, y.node


def _shard_count(ag: HloInstruction) -> int:
    """How many shards one gather joins: output extent / operand extent along its dimension."""
    try:
        out = ag.shape
        src = ag.operands[0].shape
        dim = ag.dimensions[0]
        if out.is_tuple or src.is_tuple or not src.dimensions[dim]:
            raise ValueError
        return out.dimensions[dim] // src.dimensions[dim]
    except (ValueError, IndexError):
        groups = ag.replica_groups.groups
        return len(groups[0]) if groups else 1


def _depends_on(node: HloInstruction, target: HloInstruction) -> bool:
    """True if `node` (transitively) uses `target`."""
    stack = [node]
    seen: set[HloInstruction] = set()
    while stack:
        cur = stack.pop()
        if cur is target:
            return True
        if cur in seen:
            continue
        seen.add(cur)
        stack.extend(cur.operands)
    return False
