"""The opcode-specific attributes of an instruction line (``PrintExtraAttributesImpl``).

:data:`OPCODE_ATTRIBUTES` maps an opcode to a function returning its attribute
strings (``key=value``), in XLA's order, from the fields XLA's loader reads for
that opcode (``HloInstruction::CreateFromProto``). Fields the loader ignores for an
opcode are ignored here too.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ..text.escape import c_escape
from .proto_literal import literal_with_shape_text
from .proto_sharding import replica_groups_text, sharding_text
from .proto_values import InvalidProto, ShapeText, UnsupportedProto, float_attribute, shape_index

Attributes = Callable[[Any, ShapeText], Iterator[str]]
OPCODE_ATTRIBUTES: dict[str, Attributes] = {}

CALLS_TO_APPLY = frozenset(
    "call map reduce-window reduce all-reduce reduce-scatter all-reduce-start scatter sort scan".split()
)

_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}
_DISTRIBUTIONS = {0: "rng_invalid", 1: "rng_uniform", 2: "rng_normal"}
_RNG_ALGORITHMS = {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}
_PRECISIONS = {0: "default", 1: "high", 2: "highest"}
_ALGORITHMS = {
    1: "dot_any_f8_any_f8_f32", 2: "dot_any_f8_any_f8_f32_fast_accum", 3: "dot_f16_f16_f16",
    4: "dot_f16_f16_f32", 5: "dot_bf16_bf16_bf16", 6: "dot_bf16_bf16_f32", 7: "dot_bf16_bf16_f32_x3",
    8: "dot_bf16_bf16_f32_x6", 9: "dot_tf32_tf32_f32", 10: "dot_tf32_tf32_f32_x3",
    11: "dot_f32_f32_f32", 12: "dot_f64_f64_f64", 13: "dot_bf16_bf16_f32_x9",
}  # fmt: skip
_PADDING_TYPES = {1: "PADDING_VALID", 2: "PADDING_SAME"}
_SCHEDULES = {1: "SCHEDULE_LATEST", 2: "SCHEDULE_EARLIEST"}
_API_VERSIONS = {
    0: "API_VERSION_UNSPECIFIED", 2: "API_VERSION_STATUS_RETURNING",
    3: "API_VERSION_STATUS_RETURNING_UNIFIED", 4: "API_VERSION_TYPED_FFI",
}  # fmt: skip
_TRANSPOSES = {0: "TRANSPOSE_INVALID", 1: "NO_TRANSPOSE", 2: "TRANSPOSE", 3: "ADJOINT"}
_DIRECTIONS = frozenset("EQ NE GE GT LE LT".split())
_COMPARISON_TYPES = frozenset("FLOAT TOTALORDER SIGNED UNSIGNED".split())
_FUSION_KINDS = frozenset("kLoop kInput kOutput kCustom".split())
_ACCURACY_OPCODES = frozenset(
    "acos acosh asin asinh atanh cbrt cosine cosh erf exponential exponential-minus-one log "
    "log-plus-one logistic rsqrt sine sinh sqrt tan tanh".split()
)


def _ints(values: Any) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _enum(table: dict[int, str], value: int, field: str) -> str:
    try:
        return table[value]
    except KeyError:
        raise UnsupportedProto(field, f"value {value}") from None


def _register(*opcodes: str) -> Callable[[Attributes], Attributes]:
    def wrap(fn: Attributes) -> Attributes:
        for opcode in opcodes:
            OPCODE_ATTRIBUTES[opcode] = fn
        return fn

    return wrap


def _one_dimension(ins: Any) -> int:
    dims = ins.proto.dimensions
    if len(dims) != 1:
        raise InvalidProto(f"{ins.opcode} {ins.name} needs exactly one dimension")
    return dims[0]


# ------------------------------------------------------------------------------------------
# Shared pieces


def window_text(window: Any) -> str:
    """``window_util::ToString``."""
    dims = window.dimensions
    parts = ["size=" + "x".join(str(d.size) for d in dims)]
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation != 1 for d in dims):
        parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.window_reversal for d in dims):
        parts.append("rhs_reversal=" + "x".join("1" if d.window_reversal else "0" for d in dims))
    return "window={" + " ".join(parts) + "}"


def dim_labels(dnums: Any) -> str:
    """``ConvolutionDimensionNumbersToString``."""

    def labels(batch: int, feature: int, spatial: Any, b: str, f: str) -> str:
        size = max([batch, feature, *spatial]) + 1
        out = ["?"] * size
        out[batch] = b
        out[feature] = f
        for i, d in enumerate(spatial):
            out[d] = str(i)
        return "".join(out)

    lhs = labels(dnums.input_batch_dimension, dnums.input_feature_dimension, dnums.input_spatial_dimensions, "b", "f")
    rhs = labels(dnums.kernel_input_feature_dimension, dnums.kernel_output_feature_dimension,
                 dnums.kernel_spatial_dimensions, "i", "o")
    out = labels(dnums.output_batch_dimension, dnums.output_feature_dimension, dnums.output_spatial_dimensions, "b", "f")
    return f"dim_labels={lhs}_{rhs}->{out}"


def _precision(ins: Any, operand_count: int) -> Iterator[str]:
    """``PrintPrecisionConfig`` after the loader resizes operand_precision."""
    config = ins.proto.precision_config
    precisions = list(config.operand_precision)[:operand_count]
    precisions += [0] * (operand_count - len(precisions))
    if any(p != 0 for p in precisions):
        yield "operand_precision={" + ",".join(_enum(_PRECISIONS, p, "PrecisionConfig.operand_precision") for p in precisions) + "}"
    if config.algorithm:
        yield "algorithm=" + _enum(_ALGORITHMS, config.algorithm, "PrecisionConfig.algorithm")


def _output_to_operand_aliasing(ins: Any) -> Iterator[str]:
    pairs = ins.proto.output_operand_aliasing
    if pairs:
        yield "output_to_operand_aliasing={" + ", ".join(
            f"{shape_index(p.output_shape_index)}: ({p.operand_index}, {shape_index(p.operand_shape_index)})"
            for p in pairs
        ) + "}"


def _channel(ins: Any) -> Iterator[str]:
    if ins.proto.channel_id > 0:
        yield f"channel_id={ins.proto.channel_id}"


def _collective(ins: Any, constrain_layout: bool = True) -> Iterator[str]:
    """``HloCollectiveInstruction``: channel, replica groups, constrain_layout."""
    proto = ins.proto
    channel = proto.channel_id
    if ins.opcode in ("all-reduce", "all-reduce-start", "reduce-scatter"):
        if channel > 0 and proto.all_reduce_id > 0:
            raise InvalidProto(f"{ins.name} has both channel_id and all_reduce_id")
        if proto.all_reduce_id > 0:
            channel = proto.all_reduce_id
    if channel > 0:
        yield f"channel_id={channel}"
    yield "replica_groups=" + replica_groups_text(proto)
    if constrain_layout and proto.constrain_layout:
        yield "constrain_layout=true"


def _derived_shape(ins: Any, shapes: ShapeText, expected: str, opcode: str) -> None:
    """Send, recv and feeds get a shape built by XLA's constructor; we print the
    proto's and refuse when the two differ."""
    if shapes.text(ins.shape_proto) != expected:
        raise UnsupportedProto("HloInstructionProto.shape", f"{opcode} shape XLA would rebuild as {expected}")


# ------------------------------------------------------------------------------------------
# Per opcode


@_register("batch-norm-training", "batch-norm-inference", "batch-norm-grad")
def _batch_norm(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "epsilon=" + float_attribute(ins.proto.epsilon)
    yield f"feature_index={ins.proto.feature_index}"


@_register("fft")
def _fft(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "fft_type=" + _enum(_FFT_TYPES, ins.proto.fft_type, "HloInstructionProto.fft_type")
    yield "fft_length=" + _ints(ins.proto.fft_length)


@_register("async-start")
def _async_start(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"async-start {ins.name} needs one called computation")
    if ins.async_thread != "main":
        yield f'async_execution_thread="{ins.async_thread}"'
    yield from _output_to_operand_aliasing(ins)


@_register("copy-start")
def _copy_start(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if proto.WhichOneof("optional_cross_program_prefetch_index") is not None:
        yield f"cross_program_prefetch_index={proto.cross_program_prefetch_index}"
    elif proto.is_cross_program_prefetch:
        yield "cross_program_prefetch_index=0"


def _default_comparison_type(element_type: int) -> str:
    from .proto_values import PRIMITIVE_NUMBERS

    name = PRIMITIVE_NUMBERS.get(element_type, "")
    if name.startswith(("F", "BF", "C")):
        return "FLOAT"
    if name.startswith("S"):
        return "SIGNED"
    return "UNSIGNED"


@_register("compare")
def _compare(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    direction = ins.direction or proto.comparison_direction
    if direction not in _DIRECTIONS:
        raise InvalidProto(f"compare {ins.name} has direction {direction!r}")
    yield "direction=" + direction
    if ins.direction:
        return
    if len(ins.operands) != 2:
        raise InvalidProto(f"compare {ins.name} needs 2 operands")
    default = _default_comparison_type(ins.operands[0].shape_proto.element_type)
    kind = proto.comparison_type or default
    if kind not in _COMPARISON_TYPES:
        raise InvalidProto(f"compare {ins.name} has type {kind!r}")
    if kind != default:
        yield "type=" + kind


@_register("triangular-solve")
def _triangular_solve(ins: Any, shapes: ShapeText) -> Iterator[str]:
    options = ins.proto.triangular_solve_options
    for field, value in options.ListFields():
        if field.name == "transpose_a":
            yield "transpose_a=" + _enum(_TRANSPOSES, value, "TriangularSolveOptions.transpose_a")
        else:
            yield f"{field.name}={'true' if value else 'false'}"


@_register("cholesky")
def _cholesky(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if ins.proto.cholesky_options.lower:
        yield "lower=true"


@_register("send", "recv", "send-done", "recv-done")
def _send_recv(ins: Any, shapes: ShapeText) -> Iterator[str]:
    opcode = ins.opcode
    if opcode == "send":
        expected = f"({shapes.text(ins.operands[0].shape_proto)}, u32[], token[])"
    elif opcode == "recv":
        element = ins.shape_proto.tuple_shapes[0] if len(ins.shape_proto.tuple_shapes) else None
        expected = f"({shapes.text(element)}, u32[], token[])" if element is not None else ""
    elif opcode == "recv-done":
        element = ins.operands[0].shape_proto.tuple_shapes
        expected = f"({shapes.text(element[0])}, token[])" if len(element) else ""
    else:
        expected = "token[]"
    _derived_shape(ins, shapes, expected, opcode)
    yield from _channel(ins)
    if ins.proto.is_host_transfer:
        yield "is_host_transfer=true"


@_register("all-gather", "all-gather-start")
def _all_gather(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield from _collective(ins)
    yield f"dimensions={{{_one_dimension(ins)}}}"
    if ins.proto.use_global_device_ids:
        yield "use_global_device_ids=true"


@_register("all-reduce", "all-reduce-start")
def _all_reduce(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield from _collective(ins)
    if ins.proto.use_global_device_ids:
        yield "use_global_device_ids=true"


@_register("reduce-scatter")
def _reduce_scatter(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield from _collective(ins)
    if ins.proto.use_global_device_ids:
        yield "use_global_device_ids=true"
    yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("all-to-all")
def _all_to_all(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield from _collective(ins)
    if len(ins.proto.dimensions):
        yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("ragged-all-to-all", "collective-broadcast")
def _plain_collective(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield from _collective(ins, constrain_layout=False)


@_register("collective-permute", "collective-permute-start")
def _collective_permute(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if len(ins.proto.dynamic_slice_sizes):
        raise UnsupportedProto("HloInstructionProto.dynamic_slice_sizes", "combined collective-permute")
    yield from _channel(ins)
    yield "source_target_pairs={" + ",".join(f"{{{p.source},{p.target}}}" for p in ins.proto.source_target_pairs) + "}"


@_register("reverse", "reduce", "transpose", "broadcast")
def _dimensions(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "dimensions=" + _ints(ins.proto.dimensions)


@_register("concatenate", "get-dimension-size", "set-dimension-size")
def _one_dimension_attribute(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("sort")
def _sort(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"dimensions={{{_one_dimension(ins)}}}"
    if ins.proto.is_stable:
        yield "is_stable=true"


@_register("map")
def _map(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "dimensions=" + _ints(range(len(ins.shape_proto.dimensions)))


@_register("reshape")
def _reshape(ins: Any, shapes: ShapeText) -> Iterator[str]:
    dims = ins.proto.dimensions
    if len(dims) and dims[0] != -1:
        yield f"inferred_dimension={dims[0]}"


@_register("slice")
def _slice(ins: Any, shapes: ShapeText) -> Iterator[str]:
    dims = ins.proto.slice_dimensions
    if all(d.stride == 1 for d in dims):
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}]" for d in dims) + "}"
    else:
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}:{d.stride}]" for d in dims) + "}"


@_register("fusion")
def _fusion(ins: Any, shapes: ShapeText) -> Iterator[str]:
    kind = ins.proto.fusion_kind
    if kind not in _FUSION_KINDS:
        raise InvalidProto(f"fusion {ins.name} has kind {kind!r}")
    if len(ins.called) != 1:
        raise InvalidProto(f"fusion {ins.name} needs one called computation")
    yield "kind=" + kind
    yield from _output_to_operand_aliasing(ins)


@_register("call")
def _call(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"call {ins.name} needs one called computation")
    if len(ins.proto.output_operand_aliasing):
        raise UnsupportedProto("HloInstructionProto.output_operand_aliasing", "on call")
    return iter(())


@_register("rng")
def _rng(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "distribution=" + _enum(_DISTRIBUTIONS, ins.proto.distribution, "HloInstructionProto.distribution")


@_register("rng-bit-generator")
def _rng_bit_generator(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "algorithm=" + _enum(_RNG_ALGORITHMS, ins.proto.rng_algorithm, "HloInstructionProto.rng_algorithm")


@_register("rng-get-and-update-state")
def _rng_state(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"delta={ins.proto.delta}"


@_register("parameter")
def _parameter(ins: Any, shapes: ShapeText) -> Iterator[str]:
    replicated = ins.proto.parameter_replication.replicated_at_leaf_buffers
    if len(replicated):
        yield "parameter_replication={" + ",".join("true" if r else "false" for r in replicated) + "}"


@_register("get-tuple-element")
def _get_tuple_element(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"index={ins.proto.tuple_index}"


@_register("reduce-precision")
def _reduce_precision(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"exponent_bits={ins.proto.exponent_bits}"
    yield f"mantissa_bits={ins.proto.mantissa_bits}"


@_register("infeed")
def _infeed(ins: Any, shapes: ShapeText) -> Iterator[str]:
    elements = ins.shape_proto.tuple_shapes
    if ins.shape_proto.element_type != 13 or len(elements) != 2:
        raise InvalidProto(f"infeed {ins.name} needs a (data, token) shape")
    _derived_shape(ins, shapes, f"({shapes.text(elements[0])}, token[])", "infeed")
    if ins.proto.infeed_config:
        yield 'infeed_config="' + c_escape(ins.proto.infeed_config.decode("utf-8", "surrogateescape")) + '"'


@_register("outfeed")
def _outfeed(ins: Any, shapes: ShapeText) -> Iterator[str]:
    _derived_shape(ins, shapes, "token[]", "outfeed")
    yield "outfeed_shape=" + shapes.text(ins.proto.outfeed_shape)
    if ins.proto.outfeed_config:
        yield 'outfeed_config="' + c_escape(ins.proto.outfeed_config.decode("utf-8", "surrogateescape")) + '"'


@_register("convolution")
def _convolution(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if not proto.HasField("window") or not proto.HasField("convolution_dimension_numbers"):
        raise InvalidProto(f"convolution {ins.name} needs a window and dimension numbers")
    if len(proto.window.dimensions):
        yield window_text(proto.window)
    yield dim_labels(proto.convolution_dimension_numbers)
    if max(proto.feature_group_count, 1) != 1:
        yield f"feature_group_count={proto.feature_group_count}"
    if max(proto.batch_group_count, 1) != 1:
        yield f"batch_group_count={proto.batch_group_count}"
    if proto.conv_kind:
        raise UnsupportedProto("HloInstructionProto.conv_kind")
    yield from _precision(ins, len(ins.operands))
    if proto.HasField("sparsity_config") and proto.sparsity_config.ListFields():
        raise UnsupportedProto("HloInstructionProto.sparsity_config")


@_register("reduce-window", "select-and-scatter")
def _windowed(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if len(ins.proto.window.dimensions):
        yield window_text(ins.proto.window)


@_register("custom-call")
def _custom_call(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if proto.HasField("window"):
        yield window_text(proto.window)
    if proto.HasField("convolution_dimension_numbers"):
        yield dim_labels(proto.convolution_dimension_numbers)
    if max(proto.feature_group_count, 1) != 1:
        yield f"feature_group_count={proto.feature_group_count}"
    if max(proto.batch_group_count, 1) != 1:
        yield f"batch_group_count={proto.batch_group_count}"
    yield from _precision(ins, len(ins.operands))
    if proto.padding_type:
        yield "padding_type=" + _enum(_PADDING_TYPES, proto.padding_type, "HloInstructionProto.padding_type")
    yield 'custom_call_target="' + c_escape(proto.custom_call_target) + '"'
    if proto.constrain_layout:
        yield "operand_layout_constraints={" + ", ".join(shapes.text(s) for s in proto.operand_shapes_with_layout) + "}"
    if proto.custom_call_has_side_effect:
        yield "custom_call_has_side_effect=true"
    if proto.HasField("literal"):
        yield "literal=" + literal_with_shape_text(proto.literal)
    yield from _output_to_operand_aliasing(ins)
    if proto.custom_call_schedule:
        yield "schedule=" + _enum(_SCHEDULES, proto.custom_call_schedule, "HloInstructionProto.custom_call_schedule")
    if proto.custom_call_api_version != 1:
        yield "api_version=" + _enum(_API_VERSIONS, proto.custom_call_api_version, "HloInstructionProto.custom_call_api_version")


@_register("pad")
def _pad(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if not ins.proto.HasField("padding_config"):
        raise InvalidProto(f"pad {ins.name} has no padding config")
    dims = ins.proto.padding_config.dimensions
    if any(d.interior_padding for d in dims):
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}_{d.interior_padding}" for d in dims)
    else:
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}" for d in dims)


@_register("dynamic-slice")
def _dynamic_slice(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield "dynamic_slice_sizes=" + _ints(ins.proto.dynamic_slice_sizes)


def _batching(name: str, values: Any) -> str:
    return f"}}, {name}={{" + ",".join(map(str, values)) if len(values) else ""


@_register("gather")
def _gather(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if not proto.HasField("gather_dimension_numbers"):
        raise InvalidProto(f"gather {ins.name} has no dimension numbers")
    d = proto.gather_dimension_numbers
    yield (
        f"offset_dims={_ints(d.offset_dims)}, collapsed_slice_dims={_ints(d.collapsed_slice_dims)}, "
        "start_index_map={" + ",".join(map(str, d.start_index_map))
        + _batching("operand_batching_dims", d.operand_batching_dims)
        + _batching("start_indices_batching_dims", d.start_indices_batching_dims)
        + f"}}, index_vector_dim={d.index_vector_dim}"
    )
    yield "slice_sizes=" + _ints(proto.gather_slice_sizes)
    if proto.indices_are_sorted:
        yield "indices_are_sorted=true"


@_register("scatter")
def _scatter(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if not proto.HasField("scatter_dimension_numbers"):
        raise InvalidProto(f"scatter {ins.name} has no dimension numbers")
    d = proto.scatter_dimension_numbers
    yield (
        f"update_window_dims={_ints(d.update_window_dims)}, inserted_window_dims={_ints(d.inserted_window_dims)}, "
        "scatter_dims_to_operand_dims={" + ",".join(map(str, d.scatter_dims_to_operand_dims))
        + _batching("input_batching_dims", d.input_batching_dims)
        + _batching("scatter_indices_batching_dims", d.scatter_indices_batching_dims)
        + f"}}, index_vector_dim={d.index_vector_dim}"
    )
    if proto.indices_are_sorted:
        yield "indices_are_sorted=true"
    if proto.unique_indices:
        yield "unique_indices=true"


@_register("iota")
def _iota(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"iota_dimension={_one_dimension(ins)}"


def dot_dimensions(d: Any) -> str:
    """``DotDimensionNumbersToString``."""
    parts = []
    if len(d.lhs_batch_dimensions):
        parts.append("lhs_batch_dims=" + _ints(d.lhs_batch_dimensions))
    parts.append("lhs_contracting_dims=" + _ints(d.lhs_contracting_dimensions))
    if len(d.rhs_batch_dimensions):
        parts.append("rhs_batch_dims=" + _ints(d.rhs_batch_dimensions))
    parts.append("rhs_contracting_dims=" + _ints(d.rhs_contracting_dimensions))
    return ", ".join(parts)


@_register("dot")
def _dot(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if not ins.proto.HasField("dot_dimension_numbers"):
        raise InvalidProto(f"dot {ins.name} has no dimension numbers")
    yield dot_dimensions(ins.proto.dot_dimension_numbers)
    yield from _precision(ins, len(ins.operands))


@_register("domain")
def _domain(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    entry = sharding_text(proto.domain_exit_sharding, None, False) if proto.HasField("domain_exit_sharding") else "{}"
    exit_ = sharding_text(proto.domain_entry_sharding, None, False) if proto.HasField("domain_entry_sharding") else "{}"
    yield f'domain={{kind="sharding", entry={entry}, exit={exit_}}}'


@_register("topk")
def _topk(ins: Any, shapes: ShapeText) -> Iterator[str]:
    yield f"k={ins.proto.k}"
    yield "largest=" + ("true" if ins.proto.largest else "false")


@_register("ragged-dot")
def _ragged_dot(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    if not proto.HasField("ragged_dot_dimension_numbers") or len(ins.operands) != 3:
        raise InvalidProto(f"ragged-dot {ins.name} needs 3 operands and dimension numbers")
    d = proto.ragged_dot_dimension_numbers
    yield dot_dimensions(d.dot_dimension_numbers)
    if len(d.lhs_ragged_dimensions):
        yield "lhs_ragged_dims=" + _ints(d.lhs_ragged_dimensions)
    if len(d.rhs_group_dimensions):
        yield "rhs_group_dims=" + _ints(d.rhs_group_dimensions)
    yield from _precision(ins, 2)


@_register("scaled-dot")
def _scaled_dot(ins: Any, shapes: ShapeText) -> Iterator[str]:
    if not ins.proto.HasField("dot_dimension_numbers") or len(ins.operands) != 4:
        raise InvalidProto(f"scaled-dot {ins.name} needs 4 operands and dimension numbers")
    yield dot_dimensions(ins.proto.dot_dimension_numbers)
    yield from _precision(ins, 2)


@_register("scan")
def _scan(ins: Any, shapes: ShapeText) -> Iterator[str]:
    proto = ins.proto
    carries = proto.num_carries
    if carries == 0:
        if len(ins.operands) % 2:
            raise InvalidProto(f"scan {ins.name} needs an even operand count")
        carries = len(ins.operands) // 2
    if not 0 <= carries <= len(ins.operands) or len(ins.called) != 1 or not len(proto.dimensions):
        raise InvalidProto(f"scan {ins.name} is malformed")
    yield f"dimensions={{{proto.dimensions[0]}}}"
    yield f"num_carries={carries}"
    if proto.is_reverse:
        yield "is_reverse=true"
    if proto.is_associative == 1:
        yield "is_associative=true"
    elif proto.is_associative == 2:
        yield "is_associative=false"
    elif proto.is_associative:
        raise UnsupportedProto("HloInstructionProto.is_associative", f"value {proto.is_associative}")


def result_accuracy_text(ins: Any) -> str:
    """``result_accuracy=`` of the unary ops the loader reads it for ('' when default)."""
    proto = ins.proto
    if ins.opcode not in _ACCURACY_OPCODES or not proto.HasField("result_accuracy"):
        return ""
    accuracy = proto.result_accuracy
    if accuracy.mode == 1:
        return "{mode=highest}"
    if accuracy.mode not in (0, 1):
        raise UnsupportedProto("ResultAccuracy.mode", f"value {accuracy.mode}")
    if accuracy.HasField("tolerance"):
        t = accuracy.tolerance
        return f"{{tolerance={{atol={t.atol:g},rtol={t.rtol:g},ulps={t.ulps}}}}}"
    return ""
