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
* Transactional: anything that fails after the first rewrite (a malformed attribute met
  by the walk or by the trailing HloDCE, an IR precondition) restores the module from its
  text as it was before the first rewrite and re-raises, so a failed run leaves the module
  text exactly unchanged. Taking that text is free while the module is as parsed.
* Hazards: the faithful key ignores operands after operand(0), the inner gathers a walk
  tunnelled through, the collective mode and the gather dimension. Each fold whose two
  gathers differ in one of those is reported; `strict=True` refuses such folds (a
  gather then only folds onto an earlier one that matches it in all of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shape import byte_size, shapes_equal
from .dce import run_dce
from .pass_base import HloPass, PassResult
from .records import FoldRecord, Hazard


@dataclass(frozen=True)
class _Walk:
    """Result of FindRawParameter for one gather."""

    raw_param: HloInstruction | None
    path: tuple[int, ...]
    inner_gathers: tuple[tuple[str, int, Any, str], ...]  # (opcode, dim, groups, shape) per hop


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

    def __init__(self, strict: bool = False) -> None:
        super().__init__()
        self.strict = strict

    # ------------------------------------------------------------------- walk
    def find_raw_parameter(self, node: HloInstruction, ag: HloInstruction, vlog: bool) -> _Walk:
        """FindRawParameter: walk up from `node` through forwarding ops to a parameter."""
        log = self.logger.log if vlog else None
        level = 18
        pending: list[int] = []
        inner: list[tuple[str, int, Any, str]] = []
        while True:
            if log:
                log(level, "Finding raw parameter for instruction: %s", node.to_text())
            op = node.opcode
            if op == "parameter":
                return _Walk(node, tuple(pending), tuple(inner))
            if op == "get-tuple-element":
                index = node.tuple_index
                if log:
                    log(level, "Found get-tuple-element at index: %d", index)
                pending.append(index)
            elif op == "tuple":
                index = pending[-1] if pending else -1
                if log:
                    log(level, "Found tuple, moving to element at index: %d", index)
                if not 0 <= index < node.operand_count:
                    return _Walk(None, (), ())
                pending.pop()
                node = node.operands[index]
                continue
            elif op == "opt-barrier":
                if log:
                    log(level, "Found optimization barrier, moving to its input")
            elif op == "convert":
                if not node.operands or not shapes_equal(node.operands[0].shape, node.shape):
                    return _Walk(None, (), ())
                if log:
                    log(level, "Found convert operation, moving to its input")
            elif op in ("all-gather", "all-gather-start"):
                if log:
                    log(level, "Found all-gather operation, moving to its input")
                inner.append((op, node.dimensions[0] if node.dimensions else -1,
                              node.replica_groups.groups, node.shape_text or ""))
            else:
                return _Walk(None, (), ())
            if not node.operands:
                return _Walk(None, (), ())
            node = node.operands[0]

    # -------------------------------------------------------------------- run
    def run_on_module(self, module: HloModule) -> PassResult:
        logger = self.logger
        vlog = logger.isEnabledFor(18)
        if vlog:
            logger.log(18, "Running NeuronDuplicateParameterAllGatherRemover pass")
        folds: list[FoldRecord] = []
        hazards: list[Hazard] = []
        rollback = _Rollback(module)
        try:
            for comp in module.computations:
                if vlog:
                    logger.log(18, "Processing computation: %s", comp.name)
                self._process_computation(comp, vlog, folds, hazards, rollback)
            changed = bool(folds)
            if changed:
                run_dce(module)
        except Exception:
            rollback.restore()
            raise
        if vlog:
            logger.log(18, "NeuronDuplicateParameterAllGatherRemover pass complete")
        return PassResult(self.name, changed, folds, hazards)

    def _process_computation(
        self,
        comp: HloComputation,
        vlog: bool,
        folds: list[FoldRecord],
        hazards: list[Hazard],
        rollback: _Rollback,
    ) -> None:
        logger = self.logger
        seen: dict[tuple, list[tuple[HloInstruction, _Walk, tuple]]] = {}
        for inst in list(comp._instructions):
            if inst.opcode != "all-gather" or not inst.operands:
                continue
            walk = self.find_raw_parameter(inst.operands[0], inst, vlog)
            raw = walk.raw_param
            if raw is None or raw.opcode != "parameter":
                continue
            if vlog:
                logger.log(18, "Found all-gather instruction: %s", inst.to_text())
            shape = inst.shape
            key = (
                raw,
                walk.path,
                shape.element_type,
                shape.layout_key(),
                inst.replica_groups.groups,
            )
            entries = seen.get(key)
            if entries is None:
                if vlog:
                    logger.log(18, "Storing all-gather result for future use")
                seen[key] = [(inst, walk, self._safety_signature(inst, walk))]
                continue
            signature = self._safety_signature(inst, walk)
            keep, keep_walk, keep_sig = entries[0]
            reasons = self._hazard_reasons(keep, keep_walk, inst, walk)
            if self.strict and reasons:
                match = next((e for e in entries if e[2] == signature), None)
                hazards.append(Hazard(comp.name, keep.name, inst.name, tuple(reasons), refused=True))
                if match is None:
                    entries.append((inst, walk, signature))
                    continue
                keep, reasons = match[0], []
            elif reasons:
                hazards.append(Hazard(comp.name, keep.name, inst.name, tuple(reasons), refused=False))
            if comp._reorder and _depends_on(keep, inst):
                hazards.append(Hazard(comp.name, keep.name, inst.name,
                                      ("folding would create a cycle",), refused=True))
                continue
            if vlog:
                logger.log(18, "Replacing all-gather with previous result: %s", keep.to_text())
            record = self._record(comp, keep, inst, self._key_json(raw, walk, inst), bool(reasons))
            rollback.arm()
            inst.replace_all_uses_with(keep)
            folds.append(record)

    @staticmethod
    def _safety_signature(inst: HloInstruction, walk: _Walk) -> tuple:
        return (
            tuple(id(o) for o in inst.operands[1:]),
            walk.inner_gathers,
            collective_mode(inst),
            inst.dimensions,
        )

    @staticmethod
    def _hazard_reasons(keep: HloInstruction, keep_walk: _Walk, inst: HloInstruction, walk: _Walk) -> list[str]:
        reasons = []
        if keep.operands[1:] != inst.operands[1:] or len(keep.operands) != len(inst.operands):
            reasons.append(
                "multi-operand all-gathers differ beyond operand(0) "
                f"({keep.operand_count} vs {inst.operand_count} operands)"
            )
        if keep_walk.inner_gathers != walk.inner_gathers:
            reasons.append("the walks tunnelled through inner all-gathers with different "
                           "dimensions, replica groups or shapes")
        mode_a, mode_b = collective_mode(keep), collective_mode(inst)
        if mode_a != mode_b:
            reasons.append(f"different collective modes ({mode_a} vs {mode_b}: channel_id / "
                           "use_global_device_ids differ, so the same replica_groups name "
                           "different devices)")
        if keep.dimensions != inst.dimensions:
            reasons.append(f"different all_gather_dimension ({keep.dimensions} vs {inst.dimensions})")
        return reasons

    @staticmethod
    def _key_json(raw: HloInstruction, walk: _Walk, inst: HloInstruction) -> dict[str, Any]:
        shape = inst.shape
        # A multi-operand gather's output is a tuple: XLA's element_type() is TUPLE.
        element_type = "tuple" if shape.element_type is None else shape.element_type.value
        return {
            "parameter": raw.name,
            "index_path": list(walk.path),
            "element_type": element_type,
            "shape": shape.to_text(),
            "replica_groups": [list(g) for g in inst.replica_groups.groups],
        }

    def _record(
        self, comp: HloComputation, kept: HloInstruction, removed: HloInstruction, key: dict[str, Any], hazardous: bool
    ) -> FoldRecord:
        out_bytes = byte_size(removed.shape)
        shard_count = _shard_count(removed)
        per_device = out_bytes * (shard_count - 1) // shard_count if shard_count > 0 else 0
        return FoldRecord(self.name, comp.name, kept.name, removed.name, key, out_bytes, per_device,
                          hazardous=hazardous)


class _Rollback:
    """Undo for a run that fails after its first rewrite.

    `arm()` (called just before the first rewrite) keeps the module's text; `restore()`
    re-parses it into the same HloModule object, so the caller's module prints exactly as
    before. Runs that never rewrite pay nothing.
    """

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.text: str | None = None

    def arm(self) -> None:
        if self.text is None:
            self.text = self.module.snapshot_text()

    def restore(self) -> None:
        if self.text is None:
            return
        from ..text.parser import parse_module

        module = self.module
        same_source = self.text == module._source
        fresh = parse_module(
            self.text,
            module.filename,
            spmd=module.use_spmd_partitioning,
            first_line=module._first_line if same_source else 1,
        )
        vars(module).update(vars(fresh))
        for comp in module.computations:
            comp.parent = module
        module.touch()


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
