"""The opcode-specific attributes of an instruction line (``PrintExtraAttributesImpl``).

:data:`OPCODE_ATTRIBUTES` maps an opcode to a function returning its attribute
strings (``key=value``), in XLA's order, from the fields XLA's loader reads for
that opcode (``HloInstruction::CreateFromProto``). Fields the loader ignores for an
opcode are ignored here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from .proto_literal import literal_with_shape_text
from .proto_sharding import replica_groups_text, sharding_text
from .proto_values import PRIMITIVE_NUMBERS, InvalidProto, UnsupportedProto, escape, float_attribute, shape_index

if TYPE_CHECKING:
    from .proto_instruction import Computation, Instructions
    from .proto_line import LinePrinter


class Site:
    """One instruction as the attribute printers see it: its view message (sub-messages
    as bytes), its computation, and the module's decoder and shape texts."""

    __slots__ = ("table", "i", "view", "printer")

    def __init__(self, table: "Instructions", i: int, printer: "LinePrinter", view: Any = None) -> None:
        self.table = table
        self.i = i
        self.view = table.view(i) if view is None else view
        self.printer = printer

    @property
    def name(self) -> str:
        return self.table.names[self.i]

    @property
    def opcode(self) -> str:
        return self.table.opcodes[self.i]

    @property
    def operand_count(self) -> int:
        return len(self.table.operands[self.i])

    @property
    def called(self) -> list["Computation"]:
        return self.table.called.get(self.i, [])

    def decode(self, message: str, field: str) -> Any:
        return self.printer.decoder.decode(message, getattr(self.view, field))

    def shape(self) -> Any:
        """The instruction's ShapeProto."""
        return self.printer.shapes.proto(self.table.shapes[self.i])

    def operand_shape(self, k: int) -> Any:
        table = self.table
        return self.printer.shapes.proto(table.shapes[table.operands[self.i][k]])

    def shape_text(self, data: bytes) -> str:
        return self.printer.shapes.text(data)


Attributes = Callable[[Site], Iterator[str]]
OPCODE_ATTRIBUTES: dict[str, Attributes] = {}
QUIET_UNLESS: dict[str, tuple[str, ...]] = {}

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
ACCURACY_OPCODES = frozenset(
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


def _register(*opcodes: str, quiet_unless: tuple[str, ...] = ()) -> Callable[[Attributes], Attributes]:
    """Register the attribute printer of ``opcodes``; ``quiet_unless``: instruction
    fields without which it prints nothing."""

    def wrap(fn: Attributes) -> Attributes:
        for opcode in opcodes:
            OPCODE_ATTRIBUTES[opcode] = fn
            if quiet_unless:
                QUIET_UNLESS[opcode] = quiet_unless
        return fn

    return wrap


def _one_dimension(ins: Site) -> int:
    dims = ins.view.dimensions
    if len(dims) != 1:
        raise InvalidProto(f"{ins.opcode} {ins.name} needs exactly one dimension")
    return dims[0]


def _required(ins: Site, field: str) -> bytes:
    if not ins.view.HasField(field):
        raise InvalidProto(f"{ins.opcode} {ins.name} has no {field}")
    return getattr(ins.view, field)


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


def _window(ins: Site) -> str | None:
    window = ins.decode("Window", "window")
    return window_text(window) if len(window.dimensions) else None


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


def _precision(ins: Site, operand_count: int) -> Iterator[str]:
    """``PrintPrecisionConfig`` after the loader resizes operand_precision."""
    if not ins.view.precision_config:
        return
    config = ins.decode("PrecisionConfig", "precision_config")
    precisions = list(config.operand_precision)[:operand_count]
    precisions += [0] * (operand_count - len(precisions))
    if any(p != 0 for p in precisions):
        names = [_enum(_PRECISIONS, p, "PrecisionConfig.operand_precision") for p in precisions]
        yield "operand_precision={" + ",".join(names) + "}"
    if config.algorithm:
        yield "algorithm=" + _enum(_ALGORITHMS, config.algorithm, "PrecisionConfig.algorithm")


def _output_to_operand_aliasing(ins: Site) -> Iterator[str]:
    pairs = ins.view.output_operand_aliasing
    if len(pairs):
        decode = ins.printer.decoder.decode
        items = [decode("OutputOperandAliasing", b) for b in pairs]
        yield "output_to_operand_aliasing={" + ", ".join(
            f"{shape_index(p.output_shape_index)}: ({p.operand_index}, {shape_index(p.operand_shape_index)})"
            for p in items
        ) + "}"


def _channel(ins: Site) -> Iterator[str]:
    if ins.view.channel_id > 0:
        yield f"channel_id={ins.view.channel_id}"


def _collective(ins: Site, constrain_layout: bool = True) -> Iterator[str]:
    """``HloCollectiveInstruction``: channel, replica groups, constrain_layout."""
    view = ins.view
    channel = view.channel_id
    if ins.opcode in ("all-reduce", "all-reduce-start", "reduce-scatter"):
        if channel > 0 and view.all_reduce_id > 0:
            raise InvalidProto(f"{ins.name} has both channel_id and all_reduce_id")
        if view.all_reduce_id > 0:
            channel = view.all_reduce_id
    if channel > 0:
        yield f"channel_id={channel}"
    yield "replica_groups=" + replica_groups_text(view, ins.printer.decoder.decode)
    if constrain_layout and view.constrain_layout:
        yield "constrain_layout=true"


def _derived_shape(ins: Site, expected: str) -> None:
    """Send, recv and feeds get a shape built by XLA's constructor; we print the
    proto's and refuse when the two differ."""
    if ins.shape_text(ins.table.shapes[ins.i]) != expected:
        raise UnsupportedProto("HloInstructionProto.shape", f"{ins.opcode} shape XLA would rebuild as {expected}")


def _element_shape_texts(ins: Site, shape_bytes: bytes) -> list[str]:
    shape = ins.printer.shapes.proto(shape_bytes)
    return [ins.shape_text(e.SerializeToString()) for e in shape.tuple_shapes]


# ------------------------------------------------------------------------------------------
# Per opcode


@_register("batch-norm-training", "batch-norm-inference", "batch-norm-grad")
def _batch_norm(ins: Site) -> Iterator[str]:
    yield "epsilon=" + float_attribute(ins.view.epsilon)
    yield f"feature_index={ins.view.feature_index}"


@_register("fft")
def _fft(ins: Site) -> Iterator[str]:
    yield "fft_type=" + _enum(_FFT_TYPES, ins.view.fft_type, "HloInstructionProto.fft_type")
    yield "fft_length=" + _ints(ins.view.fft_length)


@_register("async-start")
def _async_start(ins: Site) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"async-start {ins.name} needs one called computation")
    thread = ins.table.async_threads.get(ins.i, "main")
    if thread != "main":
        yield f'async_execution_thread="{thread}"'
    yield from _output_to_operand_aliasing(ins)


@_register("copy-start")
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


@_register("compare")
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


@_register("triangular-solve")
def _triangular_solve(ins: Site) -> Iterator[str]:
    options = ins.decode("TriangularSolveOptions", "triangular_solve_options")
    for field, value in options.ListFields():
        if field.name == "transpose_a":
            yield "transpose_a=" + _enum(_TRANSPOSES, value, "TriangularSolveOptions.transpose_a")
        else:
            yield f"{field.name}={'true' if value else 'false'}"


@_register("cholesky")
def _cholesky(ins: Site) -> Iterator[str]:
    if ins.decode("CholeskyOptions", "cholesky_options").lower:
        yield "lower=true"


@_register("send", "recv", "send-done", "recv-done")
def _send_recv(ins: Site) -> Iterator[str]:
    opcode = ins.opcode
    table, i = ins.table, ins.i
    ops = table.operands[i]
    if opcode == "send":
        expected = f"({ins.shape_text(table.shapes[ops[0]])}, u32[], token[])" if ops else ""
    elif opcode == "recv":
        elements = _element_shape_texts(ins, table.shapes[i])
        expected = f"({elements[0]}, u32[], token[])" if elements else ""
    elif opcode == "recv-done":
        elements = _element_shape_texts(ins, table.shapes[ops[0]]) if ops else []
        expected = f"({elements[0]}, token[])" if elements else ""
    else:
        expected = "token[]"
    _derived_shape(ins, expected)
    yield from _channel(ins)
    if ins.view.is_host_transfer:
        yield "is_host_transfer=true"


@_register("all-gather", "all-gather-start")
def _all_gather(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    yield f"dimensions={{{_one_dimension(ins)}}}"
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"


@_register("all-reduce", "all-reduce-start")
def _all_reduce(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"


@_register("reduce-scatter")
def _reduce_scatter(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"
    yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("all-to-all")
def _all_to_all(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if len(ins.view.dimensions):
        yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("ragged-all-to-all", "collective-broadcast")
def _plain_collective(ins: Site) -> Iterator[str]:
    yield from _collective(ins, constrain_layout=False)


@_register("collective-permute", "collective-permute-start")
def _collective_permute(ins: Site) -> Iterator[str]:
    if len(ins.view.dynamic_slice_sizes):
        raise UnsupportedProto("HloInstructionProto.dynamic_slice_sizes", "combined collective-permute")
    yield from _channel(ins)
    decode = ins.printer.decoder.decode
    pairs = [decode("SourceTarget", b) for b in ins.view.source_target_pairs]
    yield "source_target_pairs={" + ",".join(f"{{{p.source},{p.target}}}" for p in pairs) + "}"


@_register("reverse", "reduce", "transpose", "broadcast")
def _dimensions(ins: Site) -> Iterator[str]:
    yield "dimensions=" + _ints(ins.view.dimensions)


@_register("concatenate", "get-dimension-size", "set-dimension-size")
def _one_dimension_attribute(ins: Site) -> Iterator[str]:
    yield f"dimensions={{{_one_dimension(ins)}}}"


@_register("sort")
def _sort(ins: Site) -> Iterator[str]:
    yield f"dimensions={{{_one_dimension(ins)}}}"
    if ins.view.is_stable:
        yield "is_stable=true"


@_register("map")
def _map(ins: Site) -> Iterator[str]:
    yield "dimensions=" + _ints(range(len(ins.shape().dimensions)))


@_register("reshape", quiet_unless=("dimensions",))
def _reshape(ins: Site) -> Iterator[str]:
    dims = ins.view.dimensions
    if len(dims) and dims[0] != -1:
        yield f"inferred_dimension={dims[0]}"


@_register("slice")
def _slice(ins: Site) -> Iterator[str]:
    decode = ins.printer.decoder.decode
    dims = [decode("HloInstructionProto.SliceDimensions", b) for b in ins.view.slice_dimensions]
    if all(d.stride == 1 for d in dims):
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}]" for d in dims) + "}"
    else:
        yield "slice={" + ", ".join(f"[{d.start}:{d.limit}:{d.stride}]" for d in dims) + "}"


@_register("fusion")
def _fusion(ins: Site) -> Iterator[str]:
    kind = ins.view.fusion_kind
    if kind not in _FUSION_KINDS:
        raise InvalidProto(f"fusion {ins.name} has kind {kind!r}")
    if len(ins.called) != 1:
        raise InvalidProto(f"fusion {ins.name} needs one called computation")
    yield "kind=" + kind
    yield from _output_to_operand_aliasing(ins)


@_register("call")
def _call(ins: Site) -> Iterator[str]:
    if len(ins.called) != 1:
        raise InvalidProto(f"call {ins.name} needs one called computation")
    if len(ins.view.output_operand_aliasing):
        raise UnsupportedProto("HloInstructionProto.output_operand_aliasing", "on call")
    return iter(())


@_register("conditional")
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


@_register("rng")
def _rng(ins: Site) -> Iterator[str]:
    yield "distribution=" + _enum(_DISTRIBUTIONS, ins.view.distribution, "HloInstructionProto.distribution")


@_register("rng-bit-generator")
def _rng_bit_generator(ins: Site) -> Iterator[str]:
    yield "algorithm=" + _enum(_RNG_ALGORITHMS, ins.view.rng_algorithm, "HloInstructionProto.rng_algorithm")


@_register("rng-get-and-update-state")
def _rng_state(ins: Site) -> Iterator[str]:
    yield f"delta={ins.view.delta}"


@_register("parameter", quiet_unless=("parameter_replication",))
def _parameter(ins: Site) -> Iterator[str]:
    if ins.view.parameter_replication:
        replicated = ins.decode("ParameterReplication", "parameter_replication").replicated_at_leaf_buffers
        if len(replicated):
            yield "parameter_replication={" + ",".join("true" if r else "false" for r in replicated) + "}"


@_register("get-tuple-element")
def _get_tuple_element(ins: Site) -> Iterator[str]:
    yield f"index={ins.view.tuple_index}"


@_register("reduce-precision")
def _reduce_precision(ins: Site) -> Iterator[str]:
    yield f"exponent_bits={ins.view.exponent_bits}"
    yield f"mantissa_bits={ins.view.mantissa_bits}"


def _config(raw: bytes) -> str:
    return escape(raw.decode("utf-8", "surrogateescape"))


@_register("infeed")
def _infeed(ins: Site) -> Iterator[str]:
    shape = ins.shape()
    if shape.element_type != 13 or len(shape.tuple_shapes) != 2:
        raise InvalidProto(f"infeed {ins.name} needs a (data, token) shape")
    _derived_shape(ins, f"({ins.shape_text(shape.tuple_shapes[0].SerializeToString())}, token[])")
    if ins.view.infeed_config:
        yield 'infeed_config="' + _config(ins.view.infeed_config) + '"'


@_register("outfeed")
def _outfeed(ins: Site) -> Iterator[str]:
    _derived_shape(ins, "token[]")
    yield "outfeed_shape=" + ins.shape_text(_required(ins, "outfeed_shape"))
    if ins.view.outfeed_config:
        yield 'outfeed_config="' + _config(ins.view.outfeed_config) + '"'


def _groups(ins: Site) -> Iterator[str]:
    view = ins.view
    if max(view.feature_group_count, 1) != 1:
        yield f"feature_group_count={view.feature_group_count}"
    if max(view.batch_group_count, 1) != 1:
        yield f"batch_group_count={view.batch_group_count}"


@_register("convolution")
def _convolution(ins: Site) -> Iterator[str]:
    view = ins.view
    _required(ins, "window")
    dnums = ins.printer.decoder.decode("ConvolutionDimensionNumbers", _required(ins, "convolution_dimension_numbers"))
    window = _window(ins)
    if window:
        yield window
    yield dim_labels(dnums)
    yield from _groups(ins)
    if view.conv_kind:
        raise UnsupportedProto("HloInstructionProto.conv_kind")
    yield from _precision(ins, ins.operand_count)
    if view.sparsity_config:
        raise UnsupportedProto("HloInstructionProto.sparsity_config")


@_register("reduce-window", "select-and-scatter")
def _windowed(ins: Site) -> Iterator[str]:
    window = _window(ins)
    if window:
        yield window


@_register("custom-call")
def _custom_call(ins: Site) -> Iterator[str]:
    view = ins.view
    if view.HasField("window"):
        yield window_text(ins.decode("Window", "window"))
    if view.HasField("convolution_dimension_numbers"):
        yield dim_labels(ins.decode("ConvolutionDimensionNumbers", "convolution_dimension_numbers"))
    yield from _groups(ins)
    yield from _precision(ins, ins.operand_count)
    if view.padding_type:
        yield "padding_type=" + _enum(_PADDING_TYPES, view.padding_type, "HloInstructionProto.padding_type")
    yield 'custom_call_target="' + escape(view.custom_call_target) + '"'
    if view.constrain_layout:
        yield "operand_layout_constraints={" + ", ".join(ins.shape_text(s) for s in view.operand_shapes_with_layout) + "}"
    if view.custom_call_has_side_effect:
        yield "custom_call_has_side_effect=true"
    if view.HasField("literal"):
        yield "literal=" + literal_with_shape_text(ins.decode("LiteralProto", "literal"))
    yield from _output_to_operand_aliasing(ins)
    if view.custom_call_schedule:
        yield "schedule=" + _enum(_SCHEDULES, view.custom_call_schedule, "HloInstructionProto.custom_call_schedule")
    if view.custom_call_api_version != 1:
        version = _enum(_API_VERSIONS, view.custom_call_api_version, "HloInstructionProto.custom_call_api_version")
        yield "api_version=" + version


@_register("pad")
def _pad(ins: Site) -> Iterator[str]:
    dims = ins.printer.decoder.decode("PaddingConfig", _required(ins, "padding_config")).dimensions
    if any(d.interior_padding for d in dims):
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}_{d.interior_padding}" for d in dims)
    else:
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}" for d in dims)


@_register("dynamic-slice")
def _dynamic_slice(ins: Site) -> Iterator[str]:
    yield "dynamic_slice_sizes=" + _ints(ins.view.dynamic_slice_sizes)


# Per opcode: the dimension-numbers message and field, the lists always printed and
# the batching lists printed when not empty (field names are the attribute names).
_DIMENSION_NUMBERS = {
    "gather": (
        "GatherDimensionNumbers", "gather_dimension_numbers",
        ("offset_dims", "collapsed_slice_dims", "start_index_map"),
        ("operand_batching_dims", "start_indices_batching_dims"),
    ),
    "scatter": (
        "ScatterDimensionNumbers", "scatter_dimension_numbers",
        ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims"),
        ("input_batching_dims", "scatter_indices_batching_dims"),
    ),
}  # fmt: skip


def _gather_scatter_dimensions(ins: Site) -> str:
    message, field, listed, batching = _DIMENSION_NUMBERS[ins.opcode]
    d = ins.printer.decoder.decode(message, _required(ins, field))
    parts = [f"{name}={_ints(getattr(d, name))}" for name in listed]
    parts += [f"{name}={_ints(getattr(d, name))}" for name in batching if len(getattr(d, name))]
    return ", ".join(parts) + f", index_vector_dim={d.index_vector_dim}"


@_register("gather")
def _gather(ins: Site) -> Iterator[str]:
    yield _gather_scatter_dimensions(ins)
    yield "slice_sizes=" + _ints(ins.view.gather_slice_sizes)
    if ins.view.indices_are_sorted:
        yield "indices_are_sorted=true"


@_register("scatter")
def _scatter(ins: Site) -> Iterator[str]:
    yield _gather_scatter_dimensions(ins)
    if ins.view.indices_are_sorted:
        yield "indices_are_sorted=true"
    if ins.view.unique_indices:
        yield "unique_indices=true"


@_register("iota")
def _iota(ins: Site) -> Iterator[str]:
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
def _dot(ins: Site) -> Iterator[str]:
    raw = _required(ins, "dot_dimension_numbers")
    yield dot_dimensions(ins.printer.decoder.decode("DotDimensionNumbers", raw))
    yield from _precision(ins, ins.operand_count)


@_register("ragged-dot")
def _ragged_dot(ins: Site) -> Iterator[str]:
    if ins.operand_count != 3:
        raise InvalidProto(f"ragged-dot {ins.name} needs 3 operands")
    d = ins.printer.decoder.decode("RaggedDotDimensionNumbers", _required(ins, "ragged_dot_dimension_numbers"))
    yield dot_dimensions(d.dot_dimension_numbers)
    if len(d.lhs_ragged_dimensions):
        yield "lhs_ragged_dims=" + _ints(d.lhs_ragged_dimensions)
    if len(d.rhs_group_dimensions):
        yield "rhs_group_dims=" + _ints(d.rhs_group_dimensions)
    yield from _precision(ins, 2)


@_register("scaled-dot")
def _scaled_dot(ins: Site) -> Iterator[str]:
    if ins.operand_count != 4:
        raise InvalidProto(f"scaled-dot {ins.name} needs 4 operands")
    yield dot_dimensions(ins.printer.decoder.decode("DotDimensionNumbers", _required(ins, "dot_dimension_numbers")))
    yield from _precision(ins, 2)


@_register("scan")
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


@_register("domain")
def _domain(ins: Site) -> Iterator[str]:
    view = ins.view

    def side(field: str) -> str:
        return sharding_text(ins.decode("OpSharding", field), None, False) if view.HasField(field) else "{}"

    yield f'domain={{kind="sharding", entry={side("domain_exit_sharding")}, exit={side("domain_entry_sharding")}}}'


@_register("topk")
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
