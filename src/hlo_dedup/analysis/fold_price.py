"""The memory price of folds: how each fold changes its computation's estimated peak.

A fold (kept instruction K, removed duplicate R in the same computation) re-points R's
uses to K, after which R and the operand chain only R kept alive are deleted (the dedup
passes end with HloDCE). Under the liveness model (`liveness`), that means: each buffer
of R disappears and its readers read K's buffer instead, so K's buffer lives until the
later of the two last readers; every instruction the deletion leaves without a reader
is deleted in turn, freeing its buffers and shortening the ranges of what it read.

`FoldPricer` applies folds to that model, never to the module: pricing fold i sees folds
0..i-1 applied. Live bytes per program point sit in a range-add/range-max tree, so a fold
costs O(log n) per buffer range it changes plus the few instructions it touches; the
model is built once, in linear time, for each computation that gets a fold (and the
computations it runs). A fold the budget refuses is rolled back exactly.

What the model deletes is conservative: parameters, custom-calls, calls, whiles,
conditionals, async and send/recv/infeed/outfeed/rng instructions are never deleted (XLA's
DCE keeps the side-effecting ones; their attributes are not read here), so a chain is
shortened at most as far as HloDCE would shorten it. Collectives are deleted in SPMD
modules (``spmd=True``, the loader's default). With ``spmd=False`` XLA's DCE keeps every
collective with a channel id: a removed gather then stays, read by nothing, holding its
buffer at its own program point only.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..plain import FrozenRecord, init_frozen
from .buffers import Leaf
from .compiled_liveness import rescheduled_peak
from .liveness import MODULE_SCHEDULE, ComputationLiveness
from .module_liveness import ModuleLiveness
from .segment_tree import RangeAddMaxTree

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from ..ir.module import HloModule
    from .buffers import Buffer

#: Never deleted by the model's DCE (side effects it cannot rule out without attributes).
_KEPT = frozenset(
    """parameter custom-call call while conditional send send-done recv recv-done infeed
    outfeed rng rng-get-and-update-state all-gather-start all-gather-done all-reduce-start
    all-reduce-done collective-permute-start collective-permute-done copy-start copy-done
    async-start async-update async-done""".split()
)
_NAME = attrgetter("name")
_COLLECTIVES = frozenset(
    """all-gather all-reduce reduce-scatter all-to-all ragged-all-to-all collective-permute
    collective-broadcast collective-reduce""".split()
)


class FoldPrice(FrozenRecord):
    """What one fold does to the estimated peak of its computation.

    `live_range_extension`: program points K's buffer now lives past its old last reader,
    from `extended_from` on (-1 when it does not grow; of a tuple, its leaf that grew most);
    `crosses_peak`: K's buffer is live at a program point holding the new peak, whose first
    instruction is `peak_instruction`; `refused` by `FoldPricer.apply_within`: the model is
    as if the fold never happened; `schedule`: the schedule the price assumes
    (`liveness.ComputationLiveness.schedule`), the one computed before any fold: the fold
    is priced on it, not on a schedule made for the folded program.
    """

    __slots__ = ("computation", "kept", "removed", "live_range_extension", "peak_bytes_before",
                 "peak_bytes_after", "crosses_peak", "peak_instruction", "refused", "schedule", "extended_from")

    def __init__(self, computation: str, kept: str, removed: str, live_range_extension: int,
                 peak_bytes_before: int, peak_bytes_after: int, crosses_peak: bool, peak_instruction: str,
                 refused: bool = False, schedule: str = MODULE_SCHEDULE, extended_from: int = -1) -> None:
        init_frozen(self, computation, kept, removed, live_range_extension, peak_bytes_before, peak_bytes_after,
                    crosses_peak, peak_instruction, refused, schedule, extended_from)

    @property
    def peak_increase(self) -> int:
        return self.peak_bytes_after - self.peak_bytes_before

    def to_json(self) -> dict[str, Any]:
        return dict(zip(self.__slots__, self.fields()))


class FoldPricer:
    """Prices folds in order against one module's liveness model.

    Build it before the pass rewrites anything and call it with each fold just before
    the fold's ReplaceAllUsesWith: the module is only read, and the answers are the same
    whether or not the uses of earlier removed instructions were already re-pointed. It
    must not change otherwise (no DCE) while folds are priced. `spmd` is the module's
    `use_spmd_partitioning`: whether HloDCE may delete collectives; `compiler_model` as in
    `liveness.ModuleLiveness` (by default: on for a module that is not scheduled);
    `f32_arithmetic`: the backend computes bf16 and f16 in f32, as XLA:CPU does
    (`f32_arithmetic`; off: priced as written).
    """

    def __init__(self, module: HloModule, *, spmd: bool = True, compiler_model: bool | None = None,
                 f32_arithmetic: bool = False) -> None:
        self.liveness = ModuleLiveness(module, compiler_model=compiler_model, f32_arithmetic=f32_arithmetic)
        self.spmd = spmd
        self._states: dict[HloComputation, _State] = {}
        self._journal: list[Callable[[], None]] | None = None

    # ------------------------------------------------------------------ public
    def price(self, computation: HloComputation | str, kept: HloInstruction | str,
              removed: HloInstruction | str) -> FoldPrice:
        """The price of a fold given the folds applied so far; the model stays as it was."""
        return self._run(computation, kept, removed, budget=None, commit=False)

    def apply(self, computation: HloComputation | str, kept: HloInstruction | str,
              removed: HloInstruction | str) -> FoldPrice:
        """Apply a fold to the model and return its price. Nothing can refuse it, so it keeps
        no undo journal: an invalid fold raises before the first edit."""
        return self._run(computation, kept, removed, budget=None, commit=True)

    def apply_within(self, computation: HloComputation | str, kept: HloInstruction | str,
                     removed: HloInstruction | str, budget: int) -> FoldPrice:
        """Apply a fold unless it raises its computation's peak by more than `budget`
        bytes; a refused fold (``refused=True``) leaves the model untouched."""
        return self._run(computation, kept, removed, budget=budget, commit=True)

    def peak_bytes(self, computation: HloComputation | str) -> int:
        """The computation's estimated peak with the folds applied so far."""
        return self._state(self.liveness.computation(computation).computation).tree.peak()

    def rescheduled_peak(self, computation: HloComputation | str) -> int | None:
        """The computation's estimated peak with the folds applied so far and the folded
        program scheduled anew, as a compiler schedules what it is given (`peak_bytes`
        keeps the schedule made before any fold, so it can only overstate); None when the
        model keeps the module's own schedule."""
        cl = self.liveness.computation(computation)
        if cl.plan is None:
            return None
        state = self._states.get(cl.computation)
        if state is None:
            return cl.peak_bytes
        return rescheduled_peak(cl, state.forward, state.deleted)

    def live_bytes(self, computation: HloComputation | str) -> list[int]:
        """Live bytes per program point with the folds applied so far (O(n))."""
        return self._state(self.liveness.computation(computation).computation).tree.values()

    # ---------------------------------------------------------------- internals
    def _run(self, computation: HloComputation | str, kept: HloInstruction | str,
             removed: HloInstruction | str, *, budget: int | None, commit: bool) -> FoldPrice:
        state = None if isinstance(computation, str) else self._states.get(computation)
        if state is None:
            state = self._state(self.liveness.computation(computation).computation)
        k = state.instruction(kept)
        r = state.instruction(removed)
        # Only a price or a budget can undo a fold; a plain apply keeps no undo journal
        # (its checks all come before the first edit).
        self._journal = [] if budget is not None or not commit else None
        try:
            price = self._fold(state, k, r)
            if budget is not None and price.peak_increase > budget:
                self._rollback()
                return price.replaced(refused=True)
            if not commit:
                self._rollback()
            return price
        except BaseException:
            self._rollback()
            raise
        finally:
            self._journal = None

    def _rollback(self) -> None:
        journal = self._journal or []
        while journal:
            journal.pop()()

    def _state(self, comp: HloComputation) -> _State:
        state = self._states.get(comp)
        if state is None:
            state = self._states[comp] = _State(self, self.liveness.computation(comp))
        return state

    def contribution(self, comp: HloComputation) -> int:
        """Nested bytes `comp` adds at its call sites, with the folds applied so far."""
        state = self._states.get(comp)
        if state is None:
            return self.liveness.nested_bytes(comp)
        nested = state.nested_tree()
        return max(0, nested.peak()) if nested is not None else 0

    def _fold(self, state: _State, k: HloInstruction, r: HloInstruction) -> FoldPrice:
        cl = state.cl
        deleted = state.deleted
        if k is r or k in deleted or r in deleted:
            raise ValueError(f"cannot fold {r.name} onto {k.name}: one of them is already folded away")
        if cl.position[k] > cl.position[r]:
            raise ValueError(f"cannot fold {r.name} onto {k.name}: the kept instruction comes later")
        removed_buffers = cl.leaves_of(r)
        if cl.own_buffers(r) != removed_buffers:
            raise ValueError(f"{r.name} aliases another instruction's buffers; only folds of "
                             "instructions that define their value are priced")
        forward = state.forward
        kept_buffers = [state.find(b) for b in cl.leaves_of(k)]
        if len(kept_buffers) != len(removed_buffers):
            raise ValueError(f"{k.name} and {r.name} have different tuple structures")
        tree = state.tree
        before = tree.peak()
        extension, extended_from = 0, -1
        for kb, rb in zip(kept_buffers, removed_buffers):
            if rb in state.results:
                state.replace_result(rb, kb)
            old_end = state.end(kb)
            grown = state.fold_buffer(rb, kb)
            if grown > extension:
                extension, extended_from = grown, old_end + 1
            self.set_item(forward, rb, kb)
            self.append(state.merged(kb), rb)
        state.absorb(k, r)
        self.set_item(state.replaced, r, k)
        if state.root is r:
            self.set_attr(state, "root", k)
        if self.spmd or r.opcode not in _COLLECTIVES:  # the pass's DCE deletes R
            state.delete(r)
        else:  # R stays, read by nothing: its buffer only at its own program point
            for rb in removed_buffers:
                state.add(state.pos(r), state.pos(r), cl.size_of(rb))
        if cl.computation in self.liveness.call_sites:
            self._propagate(cl.computation)
        after = tree.peak()
        at = tree.argmax()
        # A range holding the first peak point holds the peak; otherwise ask the tree
        # whether it reaches the peak, which rules out a range far from it in few steps.
        crosses = False
        for b in kept_buffers:
            if b in cl.static:
                crosses = True
                break
            start, end = cl.start_of(b), state.end(b)
            if start <= at <= end or tree.reaches(start, end, after):
                crosses = True
                break
        return FoldPrice(cl.computation.name, k.name, r.name, extension, before, after, crosses,
                         cl.instructions[at].name, schedule=cl.schedule, extended_from=extended_from)

    def _propagate(self, comp: HloComputation) -> None:
        """A callee's nested bytes changed: update every analysed call site above it."""
        for caller, inst in self.liveness.call_sites.get(comp, ()):
            state = self._states.get(caller)
            if state is not None and state.update_site(inst):
                self._propagate(caller)

    def removable(self, inst: HloInstruction) -> bool:
        op = inst.opcode
        if op in _KEPT or op.endswith(("-start", "-done", "-update")):
            return False
        return self.spmd or op not in _COLLECTIVES

    # Journalled edits: while a fold that may be undone is applied, each records how to
    # undo itself.
    def tree_add(self, tree: RangeAddMaxTree, lo: int, hi: int, delta: int) -> None:
        if hi < lo or delta == 0:
            return
        tree.add(lo, hi, delta)
        if self._journal is not None:
            self._journal.append(lambda: tree.add(lo, hi, -delta))

    def set_item(self, container, key, value) -> None:
        if self._journal is not None:
            if isinstance(container, dict) and key not in container:
                self._journal.append(lambda: container.pop(key))
            else:
                old = container[key]
                self._journal.append(lambda: container.__setitem__(key, old))
        container[key] = value

    def add(self, container: set, item) -> None:
        if item not in container:
            container.add(item)
            if self._journal is not None:
                self._journal.append(lambda: container.discard(item))

    def discard(self, container: set, item) -> None:
        if item in container:
            container.discard(item)
            if self._journal is not None:
                self._journal.append(lambda: container.add(item))

    def append(self, container: list, item) -> None:
        container.append(item)
        if self._journal is not None:
            self._journal.append(container.pop)

    def set_attr(self, obj, name: str, value) -> None:
        if self._journal is not None:
            old = getattr(obj, name)
            self._journal.append(lambda: setattr(obj, name, old))
        setattr(obj, name, value)


class _State:
    """The mutable model of one computation: live bytes, buffer ends, what is gone."""

    def __init__(self, pricer: FoldPricer, cl: ComputationLiveness) -> None:
        self.pricer = pricer
        self.cl = cl
        self.n = len(cl.instructions)
        self.ends = list(cl.ends)
        self.leaf_ends = dict(cl.leaf_ends)
        self.forward: dict[Buffer, Buffer] = {}  # a removed buffer -> the kept one
        self._merged: dict[Buffer, list[Buffer]] = {}  # a kept buffer -> removed ones
        self.replaced: dict[HloInstruction, HloInstruction] = {}  # removed -> kept
        # Per kept instruction, once it differs from its user count: the readers not deleted
        # of its value and of every value folded into it (one per reader and value read).
        self._readers: dict[HloInstruction, int] = {}
        self.deleted: set[HloInstruction] = set()
        self.freed: set[Buffer] = set()
        self.root = cl.computation.root
        self._names: dict[str, HloInstruction] | None = None
        self.sites: dict[int, int] = dict(cl.nested)
        self.tree = RangeAddMaxTree(cl.live_bytes or [0])
        self.results = cl.result_buffers()
        # What this computation adds at its call sites, point by point: `nested_tree`
        # builds it when a caller first asks (none for the entry), kept up to date after.
        self.nested: RangeAddMaxTree | None = None
        self.called = cl.computation is not pricer.liveness.module.entry
        for p, value in cl.nested.items():  # callees may have folds priced already
            now = self.site_value(cl.instructions[p])
            if now != value:
                self.tree.add(p, p, now - value)
                self.sites[p] = now

    def nested_tree(self) -> RangeAddMaxTree | None:
        """The live bytes less the parameters and the result buffers live at each point,
        built from the live bytes and results as they are now (what updating it since the
        model was built would hold); most computations priced are never asked."""
        if self.nested is None and self.called:
            self.nested = RangeAddMaxTree(self.cl.nested_profile(self.tree.values(), self.results) or [0])
            journal = self.pricer._journal
            if journal is not None:  # built during a fold that may be undone: built again after
                journal.append(lambda: setattr(self, "nested", None))
        return self.nested

    # ----------------------------------------------------------------- lookup
    def instruction(self, ref: HloInstruction | str) -> HloInstruction:
        if not isinstance(ref, str):
            if ref not in self.cl.position:
                raise ValueError(f"{ref.name} is not in computation {self.cl.computation.name}")
            return ref
        if self._names is None:
            self._names = dict(zip(map(_NAME, self.cl.instructions), self.cl.instructions))
        found = self._names.get(ref)
        if found is None:
            raise ValueError(f"no instruction {ref!r} in computation {self.cl.computation.name}")
        return found

    def pos(self, inst: HloInstruction) -> int:
        return self.cl.position[inst]

    def find(self, b: Buffer) -> Buffer:
        forward = self.forward
        while b in forward:
            b = forward[b]
        return b

    def merged(self, b: Buffer) -> list[Buffer]:
        found = self._merged.get(b)
        if found is None:
            found = self._merged[b] = []
        return found

    def kept(self, inst: HloInstruction) -> HloInstruction:
        """The instruction whose value `inst`'s value is now (itself unless folded away)."""
        replaced = self.replaced
        while inst in replaced:
            inst = replaced[inst]
        return inst

    def readers(self, inst: HloInstruction) -> int:
        """Readers not deleted of a kept instruction's value and the values folded into it."""
        found = self._readers.get(inst)
        return inst.user_count if found is None else found

    def absorb(self, k: HloInstruction, r: HloInstruction) -> None:
        """`r`'s readers now read `k`'s value."""
        k = self.kept(k)
        self.pricer.set_item(self._readers, k, self.readers(k) + self.readers(r))

    def start(self, b: Buffer) -> int:
        return self.cl.start_of(b)

    def end(self, b: Buffer) -> int:
        if b in self.cl.static:
            return self.n - 1
        if type(b) is Leaf:
            return self.leaf_ends[b]
        return self.ends[self.cl.position[b]]

    # ---------------------------------------------------------------- editing
    def add(self, lo: int, hi: int, delta: int) -> None:
        """Live bytes change on [lo, hi] (in both profiles)."""
        pricer = self.pricer
        if pricer._journal is None:  # nothing to undo: straight to the trees
            self.tree.add(lo, hi, delta)
            if self.nested is not None:
                self.nested.add(lo, hi, delta)
            return
        pricer.tree_add(self.tree, lo, hi, delta)
        if self.nested is not None:
            pricer.tree_add(self.nested, lo, hi, delta)

    def replace_result(self, removed: Buffer, kept: Buffer) -> None:
        """A result buffer of the root is now another one: the caller holds that instead."""
        pricer = self.pricer
        end = self.n - 1
        if self.nested is not None:
            pricer.tree_add(self.nested, self.start(removed), end, self.cl.size_of(removed))
        pricer.discard(self.results, removed)
        if kept not in self.results:
            pricer.add(self.results, kept)
            if self.nested is not None:
                pricer.tree_add(self.nested, self.start(kept), end, -self.cl.size_of(kept))

    def set_end(self, b: Buffer, end: int) -> None:
        """Move a (non-static) buffer's last point, adding or removing its bytes."""
        old = self.end(b)
        size = self.cl.size_of(b)
        if end > old:
            self.add(old + 1, end, size)
        else:
            self.add(end + 1, old, -size)
        self._record_end(b, end)

    def _record_end(self, b: Buffer, end: int) -> None:
        if type(b) is Leaf:
            self.pricer.set_item(self.leaf_ends, b, end)
        else:
            self.pricer.set_item(self.ends, self.cl.position[b], end)

    def fold_buffer(self, removed: Buffer, kept: Buffer) -> int:
        """`removed` is gone and its readers read `kept` instead: its bytes leave its range
        and `kept`'s range reaches its last reader. Returns how many points `kept`'s
        range grew. With equal sizes the two changes cancel where the ranges overlap, so
        they are one range add."""
        cl = self.cl
        r_end = self.end(removed)
        k_end = -1 if kept in cl.static else self.end(kept)
        if r_end <= k_end:
            self.free(removed)
            return 0
        size = cl.size_of(removed)
        if removed in self.freed or k_end < 0 or cl.size_of(kept) != size:
            self.free(removed)
            if k_end >= 0:
                self.set_end(kept, r_end)
            return r_end - k_end if k_end >= 0 else 0
        # -size on [r_start, r_end] and +size on [k_end + 1, r_end]: what is left lies
        # between r_start and k_end + 1.
        r_start = cl.start_of(removed)
        if k_end + 1 < r_start:
            self.add(k_end + 1, r_start - 1, size)
        else:
            self.add(r_start, k_end, -size)
        self.pricer.add(self.freed, removed)
        self._record_end(kept, r_end)
        return r_end - k_end

    def free(self, b: Buffer) -> None:
        """The buffer is gone: its bytes leave every point of its range."""
        if b in self.freed:
            return
        self.add(self.start(b), self.end(b), -self.cl.size_of(b))
        self.pricer.add(self.freed, b)

    def delete(self, inst: HloInstruction) -> None:
        """Delete `inst` and then every operand left without a reader (HloDCE)."""
        pricer, cl, deleted, forward, freed = self.pricer, self.cl, self.deleted, self.forward, self.freed
        static, readers = cl.static, self._readers
        stack = [inst]
        while stack:
            d = stack.pop()
            if d in deleted:
                continue
            pricer.add(deleted, d)
            for b in cl.own_buffers(d):
                if b not in forward:
                    self.free(b)
            p = cl.position[d]
            if cl.scratch and p in cl.scratch and cl.instructions[p] is d:  # its f32 temporaries
                self.add(p, p, -cl.scratch[p])
            for b in {self.find(x) for x in cl.reads(d)}:
                if b not in freed and b not in static and self.end(b) == p:
                    self.set_end(b, self.last_reader(b))
            operands = {}
            for o in dict.fromkeys(d.operands):  # d was one reader of each value it read
                o = self.kept(o)  # what a removed operand stands for now
                pricer.set_item(readers, o, self.readers(o) - 1)
                operands[o] = None
            for o in operands:
                if o not in deleted and o is not self.root and pricer.removable(o) and not readers[o]:
                    stack.append(o)

    # ---------------------------------------------------------------- readers

    def last_reader(self, b: Buffer) -> int:
        """The last program point reading `b` now: its readers through every instruction
        whose value holds it, the root's end, or else its own definition."""
        cl = self.cl
        last = self.start(b)
        if self.root is not None and any(self.find(x) is b for x in cl.leaves_of(self.root)):
            return self.n - 1
        origins = [b, *self._all_merged(b)]
        holders = [x.instruction if type(x) is Leaf else x for x in origins]
        seen = set(holders)
        while holders:
            h = holders.pop()
            for u in h.iter_users():
                if u in self.deleted or u in seen:
                    continue
                if not any(self.find(x) is b for x in cl.reads(u)):
                    continue
                last = max(last, self.pos(u))
                if u in cl.leaves and any(self.find(x) is b for x in cl.leaves[u]):
                    seen.add(u)
                    holders.append(u)
        return last

    def _all_merged(self, b: Buffer) -> list[Buffer]:
        out = []
        pending = list(self._merged.get(b, ()))
        while pending:
            x = pending.pop()
            out.append(x)
            pending.extend(self._merged.get(x, ()))
        return out

    # ------------------------------------------------------------ call sites
    def site_value(self, inst: HloInstruction) -> int:
        return max((self.pricer.contribution(c) for c in inst.called_computations), default=0)

    def update_site(self, inst: HloInstruction) -> bool:
        """Re-read the nested bytes at a call site; True if they changed."""
        p = self.pos(inst)
        now = self.site_value(inst)
        old = self.sites.get(p, 0)
        if now == old:
            return False
        self.add(p, p, now - old)
        self.pricer.set_item(self.sites, p, now)
        return True
