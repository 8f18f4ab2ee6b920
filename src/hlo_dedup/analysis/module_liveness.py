"""Liveness of a whole module: each computation's model, built on first request.

A scheduled module (``is_scheduled=true``) is priced as written (`liveness`); one before
optimizations as a compiler would fuse and schedule it (`compiled_liveness`), on a backend
with 16-bit arithmetic unless told the backend computes bf16 and f16 in f32
(`f32_arithmetic`, XLA:CPU; `PRICE_BACKENDS` names the backends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .buffers import DEFINE, STATIC, ShapeInfo, kind_of, runs_callee
from .compiled_liveness import compiled_liveness
from .liveness import MODULE_SCHEDULE, SPECIAL_CODE, STATIC_CODE, TEXT_ORDER, ComputationLiveness

if TYPE_CHECKING:
    from ..ir.computation import HloComputation
    from ..ir.instruction import HloInstruction
    from ..ir.module import HloModule
    from ..ir.shape import Shape


#: The backends the model prices for (``--price-backend``), and whether each computes bf16
#: and f16 arithmetic in f32: Neuron and GPUs compute it natively, XLA:CPU does not.
PRICE_BACKENDS: dict[str, bool] = {"native": False, "xla-cpu": True}


class ModuleLiveness:
    """Liveness of a module's computations, each analysed on first request.

    `computation(c)` analyses `c` and, through its while/conditional/call/async call
    sites, the computations it runs; fusion bodies and scalar computations are never
    analysed. The module must not change while this object is in use.

    `f32_arithmetic`: the backend computes bf16 and f16 arithmetic in f32, as XLA:CPU does
    (`f32_arithmetic` module); read by the compiler model only, decided once here.
    """

    def __init__(self, module: HloModule, *, compiler_model: bool | None = None,
                 f32_arithmetic: bool = False) -> None:
        self.module = module
        self.f32_arithmetic = bool(f32_arithmetic)
        # A module before optimizations is priced as a compiler would fuse and schedule it
        # (`fusion_model`, `schedule`); a scheduled one as it is.
        self.compiler_model = not module.is_scheduled if compiler_model is None else compiler_model
        self._computations: dict[HloComputation, ComputationLiveness] = {}
        self.call_sites: dict[HloComputation, dict[tuple[HloComputation, HloInstruction], None]] = {}
        # Per shape text (a module writes few distinct ones): its bytes as a plain buffer,
        # -1 if tuple-shaped; the text is all the build reads of most instructions.
        self.text_size: dict[str, int] = {}
        # Per Shape object: `_shapes` keeps the objects alive so an id is never reused
        # while this analysis exists.
        self._shapes: dict[int, ShapeInfo] = {}
        # Per opcode: 0 for a plain definer, STATIC_CODE for parameter and constant,
        # SPECIAL_CODE for anything else the build visits one by one.
        self.opcode_code: dict[str, int] = {}
        self._nested_bytes: dict[HloComputation, int] = {}

    def learn_shape(self, inst: HloInstruction) -> int:
        """`inst`'s bytes as a plain buffer (-1 if tuple-shaped), learnt for its shape text;
        ValueError if its shape cannot be decoded."""
        info = self.shape_info(inst.shape)
        size = -1 if info.leaf_sizes is not None else info.size
        if inst.shape_text is not None:  # an inferred shape is not one text's
            self.text_size[inst.shape_text] = size
        return size

    def shape_info(self, shape: Shape) -> ShapeInfo:
        info = self._shapes.get(id(shape))
        if info is None or info.shape is not shape:
            info = self._shapes[id(shape)] = ShapeInfo(shape)
        return info

    def learn_opcode(self, opcode: str) -> int:
        kind = kind_of(opcode)[0]
        if kind == STATIC:
            code = STATIC_CODE
        elif kind != DEFINE or runs_callee(opcode):
            code = SPECIAL_CODE
        else:
            code = 0
        self.opcode_code[opcode] = code
        return code

    def computation(self, computation: HloComputation | str) -> ComputationLiveness:
        comp = self._resolve(computation)
        found = self._computations.get(comp)
        if found is None:
            found = self._computations[comp] = self._build(comp)
        return found

    def _build(self, comp: HloComputation) -> ComputationLiveness:
        """The model of one computation: as written for a scheduled module (or when asked),
        otherwise over the steps a compiler runs, under the better of the text order and
        the list scheduler's order (XLA's memory scheduler also takes the best of several)."""
        if not self.compiler_model:
            return ComputationLiveness(self, comp, schedule=MODULE_SCHEDULE if self.module.is_scheduled else TEXT_ORDER)
        return compiled_liveness(self, comp)

    def _resolve(self, computation: HloComputation | str) -> HloComputation:
        if not isinstance(computation, str):
            return computation
        for comp in self.module.computations:
            if comp.name == computation:
                return comp
        raise KeyError(f"no computation named {computation!r}")

    def nested_bytes(self, computation: HloComputation) -> int:
        """What running `computation` adds on top of its caller at the call point (once per
        computation: a module calls the same small computations from many sites)."""
        comp = self._resolve(computation)
        found = self._nested_bytes.get(comp)
        if found is None:
            c = self.computation(comp)
            found = max(0, max(c.nested_profile(c.live_bytes, c.result_buffers()), default=0))
            self._nested_bytes[comp] = found
        return found

    def nested_bytes_of(self, inst: HloInstruction, caller: HloComputation) -> int:
        """Nested bytes at a while/conditional/call/async call site (records the site)."""
        best = 0
        for callee in inst.called_computations:
            # Once each, in order: a computation may be modelled under two orders, and one
            # callee may have thousands of sites.
            self.call_sites.setdefault(callee, {})[caller, inst] = None
            best = max(best, self.nested_bytes(callee))
        return best

    @property
    def peak_bytes(self) -> int:
        """The entry computation's peak (nested computations included)."""
        if self.module.entry is None:
            return 0
        return self.computation(self.module.entry).peak_bytes

    def analysed(self) -> list[ComputationLiveness]:
        """Every computation analysed so far, after analysing the entry: at least the entry
        and every computation it runs (while, conditional, call, async)."""
        if self.module.entry is not None:
            self.computation(self.module.entry)
        return list(self._computations.values())


def analyze(module: HloModule, *, compiler_model: bool | None = None, f32_arithmetic: bool = False) -> ModuleLiveness:
    """Liveness for `module` (computations are analysed when first asked for); see
    `ModuleLiveness` for `compiler_model` and `f32_arithmetic`."""
    return ModuleLiveness(module, compiler_model=compiler_model, f32_arithmetic=f32_arithmetic)
