"""HLO opcode names and the opcode classes the IR and passes reason about."""

from __future__ import annotations

#: Every opcode XLA's text parser accepts (hlo-text-format §5.2).
OPCODES: frozenset[str] = frozenset(
    """abs acos acosh add add-dependency after-all all-gather all-gather-done
    all-gather-start all-reduce all-reduce-done all-reduce-start all-to-all and asin asinh
    async-done async-start async-update atan2 atanh batch-norm-grad batch-norm-inference
    batch-norm-training bitcast bitcast-convert broadcast call cbrt ceil cholesky clamp
    count-leading-zeros collective-broadcast collective-permute collective-permute-done
    collective-permute-start compare complex concatenate conditional constant convert
    convolution copy copy-done copy-start cosine cosh custom-call divide domain dot
    dynamic-reshape dynamic-slice dynamic-update-slice erf exponential
    exponential-minus-one fft floor fusion gather get-dimension-size get-tuple-element imag
    infeed iota is-finite log log-plus-one logistic map maximum minimum mulhi multiply
    negate not opt-barrier or outfeed pad parameter partition-id popcnt power
    ragged-all-to-all ragged-dot real recv recv-done reduce reduce-precision reduce-scatter
    reduce-window remainder replica-id reshape reverse rng rng-bit-generator
    rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scaled-dot scan
    scatter select select-and-scatter send send-done set-dimension-size shift-left
    shift-right-arithmetic shift-right-logical sign sine sinh slice sort sqrt
    stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while xor
    collective-reduce""".split()
)

#: Opcodes with real async forms; every other `<op>-start/-update/-done` is async sugar.
_REAL_ASYNC = frozenset({"all-gather", "all-reduce", "collective-permute", "copy", "recv", "send"})


def is_known_opcode(opcode: str) -> bool:
    """True for a real opcode or the `<op>-start/-update/-done` async sugar spelling."""
    if opcode in OPCODES:
        return True
    for suffix in ("-start", "-update", "-done"):
        if opcode.endswith(suffix):
            base = opcode[: -len(suffix)]
            return base in OPCODES and base not in _REAL_ASYNC
    return False


#: HasSideEffectNoRecurse: always side-effecting (xla-semantics §2).
ALWAYS_SIDE_EFFECTING: frozenset[str] = frozenset(
    """send send-done recv recv-done rng rng-get-and-update-state infeed outfeed
    all-reduce-start all-reduce-done all-gather-start all-gather-done collective-broadcast
    collective-permute-start collective-permute-done""".split()
)

#: Side-effecting with constrain_layout, else under the channel-id rule.
LAYOUT_CONSTRAINABLE_COLLECTIVES: frozenset[str] = frozenset(
    {"all-to-all", "all-gather", "all-reduce", "reduce-scatter"}
)

#: Attribute keys whose values name called computations, in XLA's print order.
CALLED_COMPUTATION_KEYS: tuple[str, ...] = (
    "condition",
    "body",
    "select",
    "scatter",
    "true_computation",
    "false_computation",
    "branch_computations",
    "to_apply",
    "called_computations",
    "calls",
)
