"""`neuron-preprocess-kernel-duplicate-remover`: neuronx-cc pass #76, as specified.

NeuronPreprocessKernelDuplicateRemover (spec: shared/spec/dedup-passes.txt, second half).
The first `AwsNeuronCustomNativeKernel` custom-call with the flash-attention preprocess
fingerprint is canonical; its raw backend config is the dedup key. Every other kernel
whose inner kernel (reached by a fixed operand(0) descent) carries that exact config is
replaced by a clone of the canonical kernel on the duplicate's operands, with the
canonical q/kv slices substituted where the duplicate feeds an identical reshape.
HloDCE then always runs (once a canonical kernel exists), while `changed` reports only
rewrites.

Choices where the spec leaves room (README "Semantics"):
* Where the C++ descent would index past an operand list, the kernel does not match.
* q/kv order: the slice with the lexicographically smaller `slice_starts` is q (the spec
  leaves open which start index the C++ compares; for halves of the last dimension every
  reading agrees). The order decides which reshape operand n-2 is compared with.
* All checks (the four RET_CHECKs and every ReplaceAllUsesWith shape check) run before
  the first rewrite, so a failing pass leaves the module exactly as it was.
* The C++ loop rewrites each match before it visits the next instruction, so a later
  kernel whose descent runs through an earlier match sees that match's clone. A clone
  differs from the match it replaces, as far as IsFlashAttentionKernel can see, only in
  its backend config (the canonical one): same opcode, same operand count, and the same
  operand(0) (only operands n-2 and n-1, both >= 6, are ever substituted). The matches are
  therefore collected in loop order, with earlier matches read as carrying the canonical
  config, which gives the C++ loop's matches without touching the module.
"""

from __future__ import annotations

from typing import Collection

from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shape import byte_size, shapes_compatible_ignoring_fp_precision
from .dce import run_dce
from .pass_base import HloPass, ModuleTransaction, PassError, PassResult, ret_check_failure
from .records import FoldRecord, InstructionFate, identify

KERNEL_TARGET = "AwsNeuronCustomNativeKernel"
_CC_FILE = "hilo/hlo_passes/neuron_preprocess_kernel_duplicate_remover.cc"


def _ret_check(ok: bool, line: int, condition: str, detail: str = "") -> None:
    """The binary's line numbers are not recoverable, so each check has a fixed number of
    ours: the message names the same line however this file changes."""
    if not ok:
        raise ret_check_failure(_CC_FILE, line, condition, detail)


def _is_kernel(inst: HloInstruction) -> bool:
    return inst.opcode == "custom-call" and inst.custom_call_target == KERNEL_TARGET


def find_first_preprocess_kernel(module: HloModule) -> HloInstruction | None:
    """FindFirstPreprocessKernel: first kernel with one rank-3 [1,...] operand whose result
    doubles the operand's trailing dimension."""
    for comp in module.computations:
        for inst in comp:
            if _is_kernel(inst) and not_a_first_kernel(inst) is None:
                return inst
    return None


def not_a_first_kernel(inst: HloInstruction) -> str | None:
    """Why FindFirstPreprocessKernel passes over this kernel; None if it takes it."""
    if inst.operand_count != 1:
        return f"{inst.operand_count} operands, the first kernel has exactly 1"
    op_shape = inst.operands[0].shape
    out = inst.shape
    if not op_shape.is_array or op_shape.rank != 3 or op_shape.dimensions[0] != 1:
        return f"operand shape {op_shape.to_text()} is not rank 3 with dimension 0 of size 1"
    if not out.is_array or out.rank < 3:
        return f"result shape {out.to_text()} has no dimension 2"  # the C++ would read past it
    if 2 * op_shape.dimensions[2] != out.dimensions[2]:
        return f"result dimension 2 ({out.dimensions[2]}) is not twice the operand's ({op_shape.dimensions[2]})"
    return None


def _operand0(inst: HloInstruction | None) -> HloInstruction | None:
    """operand(0), or None where the C++ would read out of bounds."""
    if inst is None or not inst.operands:
        return None
    return inst.operands[0]


def is_flash_attention_kernel(
    inst: HloInstruction, name: str, rewritten: Collection[HloInstruction] = ()
) -> bool:
    """IsFlashAttentionKernel: an outer kernel (not the canonical config) with >= 8
    operands whose fixed operand(0) descent reaches an inner kernel configured `name`.

    `rewritten`: earlier matches that Run has already replaced by clones of the first
    kernel when it visits `inst`; an inner kernel among them carries config `name`.
    """
    return _is_kernel(inst) and not_a_duplicate(inst, name, rewritten) is None


def not_a_duplicate(inst: HloInstruction, name: str, rewritten: Collection[HloInstruction] = ()) -> str | None:
    """Why IsFlashAttentionKernel rejects this kernel; None if it matches."""
    if inst.raw_backend_config == name:
        return "carries the first kernel's backend config itself"
    n = inst.operand_count
    if n <= 7:
        return f"{n} operands, a duplicate has at least 8"
    o: HloInstruction | None = inst.operands[n - 1]
    if not o.operands:
        return "operand chain too short: its last operand has no operand"
    o = _operand0(_operand0(o))
    if o is None or not o.operands:
        return "operand chain too short within 4 operand(0) hops of its last operand"
    o = _operand0(_operand0(_operand0(o)))
    if o is None:
        return "operand chain too short within 6 operand(0) hops of its last operand"
    if o.opcode != "custom-call":
        return f"6 operand(0) hops from its last operand is a {o.opcode}, not a custom-call"
    inner = _operand0(_operand0(_operand0(o)))
    if inner is None:
        return "operand chain too short: no inner kernel 9 hops from its last operand"
    if inner in rewritten or inner.raw_backend_config == name:
        return None
    return f"the inner kernel {inner.name} has a different backend config than the first kernel"


class NeuronPreprocessKernelDuplicateRemover(HloPass):
    """Rewrite duplicate flash-attention preprocess kernels onto clones of the first."""

    name = "neuron-preprocess-kernel-duplicate-remover"
    source_file = "neuron_preprocess_kernel_duplicate_remover.cc"

    def run_on_module(self, module: HloModule, transaction: ModuleTransaction) -> PassResult:
        if module.is_pristine() and KERNEL_TARGET not in module.source.text:  # type: ignore[union-attr]
            return PassResult(self.name, False)  # no kernel in the text: nothing to decode
        kernels = [inst for comp in module.computations for inst in comp if _is_kernel(inst)]
        first = find_first_preprocess_kernel(module)
        if first is None:
            fates = [InstructionFate(**identify(k), fate="not_matched",
                                     reason=f"no first kernel in the module; this one: {not_a_first_kernel(k)}")
                     for k in kernels]
            return PassResult(self.name, False, instructions=fates)
        name = first.raw_backend_config
        _ret_check(first.user_count == 2, 123, "first->user_count() == 2",
                   f"({first.name} has {first.user_count} users)")
        u0, u1 = first.users
        _ret_check(
            u0.opcode == "slice" and u1.opcode == "slice", 126,
            "first->users()[0]->opcode() == HloOpcode::kSlice && "
            "first->users()[1]->opcode() == HloOpcode::kSlice",
            f"(users are {u0.opcode} {u0.name} and {u1.opcode} {u1.name})",
        )
        q_slice, kv_slice = (u0, u1) if u0.slice_starts <= u1.slice_starts else (u1, u0)
        _ret_check(
            q_slice.user_count == 1 and q_slice.users[0].opcode == "reshape", 133,
            "q_slice->user_count() == 1 && q_slice->users()[0]->opcode() == HloOpcode::kReshape",
            f"({q_slice.name})",
        )
        _ret_check(
            kv_slice.user_count == 1 and kv_slice.users[0].opcode == "reshape", 138,
            "kv_slice->user_count() == 1 && kv_slice->users()[0]->opcode() == HloOpcode::kReshape",
            f"({kv_slice.name})",
        )
        q_reshape = q_slice.users[0]
        kv_reshape = kv_slice.users[0]

        matches: dict[HloInstruction, None] = {}
        for comp in module.computations:
            for inst in comp:
                if is_flash_attention_kernel(inst, name, matches):
                    matches[inst] = None
        for inst in matches:
            if not shapes_compatible_ignoring_fp_precision(inst.shape, first.shape):
                raise PassError(
                    "RET_CHECK failure ShapeUtil::CompatibleIgnoringFpPrecision(shape(), "
                    f"new_producer->shape()) The shape doesn't match when replacing "
                    f"'{inst.name}' ({inst.shape.to_text()}) with a clone of '{first.name}' "
                    f"({first.shape.to_text()})"
                )

        fates = {k: InstructionFate(**identify(k), fate="first" if k is first else "not_matched",
                                    reason=None if k is first else not_a_duplicate(k, name, matches))
                 for k in kernels if k not in matches}
        folds: list[FoldRecord] = []
        for inst in matches:
            facts = identify(inst)
            transaction.before_rewrite()
            comp = inst.parent
            assert comp is not None
            n = inst.operand_count
            ops = list(inst.operands)
            if ops[n - 2].identical(q_reshape, layout_sensitive=True):
                ops[n - 2] = q_slice
            if ops[n - 1].identical(kv_reshape, layout_sensitive=True):
                ops[n - 1] = kv_slice
            clone = comp.add_instruction(first.clone_with_new_operands(first.shape, ops))
            removed_name = inst.name
            inst.replace_all_uses_with(clone)
            folds.append(
                FoldRecord(self.name, comp.name, first.name, removed_name,
                           {"backend_config": name}, byte_size(inst.shape), 0, clone.name)
            )
            fates[inst] = InstructionFate(**facts, fate="rewritten", folded_into=first.name,
                                          reason=f"replaced by {clone.name}, a clone of {first.name}")
        run_dce(module, transaction)
        if self.vlog_is_on(2):
            self.vlog(2, "NeuronPreprocessKernelDuplicateRemover pass complete")
        return PassResult(self.name, bool(folds), folds, instructions=[fates[k] for k in kernels])
