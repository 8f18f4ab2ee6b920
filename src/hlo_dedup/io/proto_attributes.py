"""The opcode-specific attributes of an instruction line (``PrintExtraAttributesImpl``).

:data:`OPCODE_ATTRIBUTES` maps an opcode to a function returning its attribute
strings (``key=value``), in XLA's order, from the fields XLA's loader reads for
that opcode (``HloInstruction::CreateFromProto``). Fields the loader ignores for an
opcode are ignored here too. This module holds the opcodes with attributes of their
own; communicating instructions are in :mod:`hlo_dedup.io.proto_collectives`, those
built from dimension numbers and windows in :mod:`hlo_dedup.io.proto_dimension_numbers`.
"""

from __future__ import annotations

from typing import Iterator

from .proto_collectives import COLLECTIVE_ATTRIBUTES
from .proto_dimension_numbers import CONTRACTION_ATTRIBUTES
from .proto_sharding import sharding_text
from .proto_site import AttributePrinters, Attributes, Site, enum_name, ints, one_dimension, output_to_operand_aliasing
from .proto_values import PRIMITIVE_NUMBERS, InvalidProto, UnsupportedProto, float_attribute

_PRINTERS = AttributePrinters()

CALLS_TO_APPLY = frozenset(
    "call map reduce-window reduce all-reduce reduce-scatter all-reduce-start scatter sort scan".split()
)

_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}
_DISTRIBUTIONS = {0: "rng_invalid", 1: "rng_uniform", 2: "rng_normal"}
_RNG_ALGORITHMS = {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}
_TRANSPOSES = {0: "TRANSPOSE_INVALID", 1: "NO_TRANSPOSE", 2: "TRANSPOSE", 3: "ADJOINT"}
_DIRECTIONS = frozenset("EQ NE GE GT LE LT".split())
_COMPARISON_TYPES = frozenset("FLOAT TOTALORDER SIGNED UNSIGNED".split())
_FUSION_KINDS = frozenset("kLoop kInput kOutput kCustom".split())
ACCURACY_OPCODES = frozenset(
    "acos acosh asin asinh atanh cbrt cosine cosh erf exponential exponential-minus-one log "
    "log-plus-one logistic rsqrt sine sinh sqrt tan tanh".split()
)


@_PRINTERS.register("batch-norm-training", "batch-norm-inference", "batch-norm-grad")
def _batch_norm(ins: Site) -> Iterator[str]:
    yield "epsilon=" + float_attribute(ins.view.epsilon)
    yield f"feature_index={ins.view.feature_index}"


@_PRINTERS.register("fft")
def _fft(ins: Site) -> Iterator[str]:
    yield "fft_type=" + enum_name(_FFT_TYPES, ins.view.fft_type, "HloInstructionProto.fft_type")
    yield "fft_length=" + ints(ins.view.fft_length)


@_PRINTERS.register("async-start")
def _async_start(ins: Site) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"async-start {ins.name} needs one called computation")
    thread = ins.table.async_threads.get(ins.i, "main")
    if thread != "main":
        yield f'async_execution_thread="{thread}"'
    yield from output_to_operand_aliasing(ins)


@_PRINTERS.register("copy-start")
def _copy_start(ins: Site) -> Iterator[str]:
    view = ins.view
    if view.WhichOneof("optional_cross_program_prefetch_index") is not None:
        yield f"cross_program_prefetch_index={view.cross_program_prefetch_index}"
    elif view.is_cross_program_prefetch:
        yield "cross_program_prefetch_index=0"


def _default_comparison_type(element_type: int) -> str:
    name = PRIMITIVE_NUMBERS.get(element_type, "")
    if name.startswith(("F", "BF", "C")):
        return "FLOAT"
    if name.startswith("S"):
        return "SIGNED"
    return "UNSIGNED"


@_PRINTERS.register("compare")
def _compare(ins: Site) -> Iterator[str]:
    view = ins.view
    deprecated = ins.table.directions.get(ins.i, "")
    direction = deprecated or view.comparison_direction
    if direction not in _DIRECTIONS:
        raise InvalidProto(f"compare {ins.name} has direction {direction!r}")
    yield "direction=" + direction
    if deprecated:
        return
    if ins.operand_count != 2:
        raise InvalidProto(f"compare {ins.name} needs 2 operands")
    default = _default_comparison_type(ins.operand_shape(0).element_type)
    kind = view.comparison_type or default
    if kind not in _COMPARISON_TYPES:
        raise InvalidProto(f"compare {ins.name} has type {kind!r}")
    if kind != default:
        yield "type=" + kind


@_PRINTERS.register("triangular-solve")
def _triangular_solve(ins: Site) -> Iterator[str]:
    options = ins.decode("TriangularSolveOptions", "triangular_solve_options")
    for field, value in options.ListFields():
        if field.name == "transpose_a":
            yield "transpose_a=" + enum_name(_TRANSPOSES, value, "TriangularSolveOptions.transpose_a")
        else:
            yield f"{field.name}={'true' if value else 'false'}"


@_PRINTERS.register("cholesky")
def _cholesky(ins: Site) -> Iterator[str]:
    if ins.decode("CholeskyOptions", "cholesky_options").lower:
        yield "lower=true"


@_PRINTERS.register("reverse", "reduce", "transpose", "broadcast")
def _dimensions(ins: Site) -> Iterator[str]:
    yield "dimensions=" + ints(ins.view.dimensions)


@_PRINTERS.register("concatenate", "get-dimension-size", "set-dimension-size")
def _one_dimension_attribute(ins: Site) -> Iterator[str]:
    yield f"dimensions={{{one_dimension(ins)}}}"


@_PRINTERS.register("sort")
def _sort(ins: Site) -> Iterator[str]:
    yield f"dimensions={{{one_dimension(ins)}}}"
    if ins.view.is_stable:
        yield "is_stable=true"


@_PRINTERS.register("map")
def _map(ins: Site) -> Iterator[str]:
    yield "dimensions=" + ints(range(len(ins.shape().dimensions)))


@_PRINTERS.register("reshape", quiet_unless=("dimensions",))
def _reshape(ins: Site) -> Iterator[str]:
    dims = ins.view.dimensions
    if len(dims) and dims[0] != -1:
        yield f"inferred_dimension={dims[0]}"


@_PRINTERS.register("slice")
def _slice(ins: Site) -> Iterator[str]:
    decode = ins.printer.decoder.decode
    dims = [decode("HloInstructionProto.SliceDimensions", b) for b in ins.view.slice_dimensions]
    if all(d.stride == 1 for d in dims):
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}]" for d in dims) + "}"
    else:
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}:{d.stride}]" for d in dims) + "}"


@_PRINTERS.register("fusion")
def _fusion(ins: Site) -> Iterator[str]:
    kind = ins.view.fusion_kind
    if kind not in _FUSION_KINDS:
        raise InvalidProto(f"fusion {ins.name} has kind {kind!r}")
    if len(ins.called) != 1:
        raise InvalidProto(f"fusion {ins.name} needs one called computation")
    yield "kind=" + kind
    yield from output_to_operand_aliasing(ins)


@_PRINTERS.register("call")
def _call(ins: Site) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"call {ins.name} needs one called computation")
    if len(ins.view.output_operand_aliasing):
        raise UnsupportedProto("HloInstructionProto.output_operand_aliasing", "on call")
    return iter(())


@_PRINTERS.register("conditional")
def _conditional(ins: Site) -> Iterator[str]:
    called = ins.called
    if not ins.operand_count or not called:
        raise InvalidProto(f"conditional {ins.name} needs a predicate and branches")
    if ins.operand_shape(0).element_type == 1:  # PRED
        if len(called) != 2:
            raise InvalidProto(f"conditional {ins.name} on a pred needs 2 branches")
        yield f"true_computation=%{called[0].name}, false_computation=%{called[1].name}"
    else:
        yield "branch_computations={" + ", ".join("%" + c.name for c in called) + "}"


@_PRINTERS.register("rng")
def _rng(ins: Site) -> Iterator[str]:
    yield "distribution=" + enum_name(_DISTRIBUTIONS, ins.view.distribution, "HloInstructionProto.distribution")


@_PRINTERS.register("rng-bit-generator")
def _rng_bit_generator(ins: Site) -> Iterator[str]:
    yield "algorithm=" + enum_name(_RNG_ALGORITHMS, ins.view.rng_algorithm, "HloInstructionProto.rng_algorithm")


@_PRINTERS.register("rng-get-and-update-state")
def _rng_state(ins: Site) -> Iterator[str]:
    yield f"delta={ins.view.delta}"


@_PRINTERS.register("parameter", quiet_unless=("parameter_replication",))
def _parameter(ins: Site) -> Iterator[str]:
    if ins.view.parameter_replication:
        replicated = ins.decode("ParameterReplication", "parameter_replication").replicated_at_leaf_buffers
        if len(replicated):
            yield "parameter_replication={" + ",".join("true" if r else "false" for r in replicated) + "}"


@_PRINTERS.register("get-tuple-element")
def _get_tuple_element(ins: Site) -> Iterator[str]:
    yield f"index={ins.view.tuple_index}"


@_PRINTERS.register("reduce-precision")
def _reduce_precision(ins: Site) -> Iterator[str]:
    yield f"exponent_bits={ins.view.exponent_bits}"
    yield f"mantissa_bits={ins.view.mantissa_bits}"


@_PRINTERS.register("dynamic-slice")
def _dynamic_slice(ins: Site) -> Iterator[str]:
    yield "dynamic_slice_sizes=" + ints(ins.view.dynamic_slice_sizes)


# Per opcode: the dimension-numbers message and field, the lists always printed and
# the batching lists printed when not empty (field names are the attribute names).


@_PRINTERS.register("iota")
def _iota(ins: Site) -> Iterator[str]:
    yield f"iota_dimension={one_dimension(ins)}"


@_PRINTERS.register("scan")
def _scan(ins: Site) -> Iterator[str]:
    view = ins.view
    carries = view.num_carries
    if carries == 0:
        if ins.operand_count % 2:
            raise InvalidProto(f"scan {ins.name} needs an even operand count")
        carries = ins.operand_count // 2
    if not 0 <= carries <= ins.operand_count or len(ins.called) != 1 or not len(view.dimensions):
        raise InvalidProto(f"scan {ins.name} is malformed")
    yield f"dimensions={{{view.dimensions[0]}}}"
    yield f"num_carries={carries}"
    if view.is_reverse:
        yield "is_reverse=true"
    if view.is_associative == 1:
        yield "is_associative=true"
    elif view.is_associative == 2:
        yield "is_associative=false"
    elif view.is_associative:
        raise UnsupportedProto("HloInstructionProto.is_associative", f"value {view.is_associative}")


@_PRINTERS.register("domain")
def _domain(ins: Site) -> Iterator[str]:
    view = ins.view

    def side(field: str) -> str:
        return sharding_text(ins.decode("OpSharding", field), None, False) if view.HasField(field) else "{}"

    yield f'domain={{kind="sharding", entry={side("domain_exit_sharding")}, exit={side("domain_entry_sharding")}}}'


@_PRINTERS.register("topk")
def _topk(ins: Site) -> Iterator[str]:
    yield f"k={ins.view.k}"
    yield "largest=" + ("true" if ins.view.largest else "false")


def result_accuracy_text(ins: Site) -> str:
    """``result_accuracy=`` of the unary ops the loader reads it for ('' when default)."""
    if ins.opcode not in ACCURACY_OPCODES or not ins.view.HasField("result_accuracy"):
        return ""
    accuracy = ins.decode("ResultAccuracy", "result_accuracy")
    if accuracy.mode == 1:
        return "{mode=highest}"
    if accuracy.mode not in (0, 1):
        raise UnsupportedProto("ResultAccuracy.mode", f"value {accuracy.mode}")
    if accuracy.HasField("tolerance"):
        t = accuracy.tolerance
        return f"{{tolerance={{atol={t.atol:g},rtol={t.rtol:g},ulps={t.ulps}}}}}"
    return ""



OPCODE_ATTRIBUTES: dict[str, Attributes] = {**_PRINTERS, **COLLECTIVE_ATTRIBUTES, **CONTRACTION_ATTRIBUTES}
QUIET_UNLESS = _PRINTERS.quiet_unless
