"""Attributes built from dimension numbers, windows and precision configs:
convolution (and the custom-calls that carry the same fields), windowed reductions,
pad, gather, scatter and the dots."""

from __future__ import annotations

from typing import Any, Iterator

from .proto_literal import literal_with_shape_text
from .proto_site import AttributePrinters, Site, enum_name, ints, output_to_operand_aliasing, required
from .proto_values import InvalidProto, UnsupportedProto, escape

CONTRACTION_ATTRIBUTES = _PRINTERS = AttributePrinters()

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


def _precision(ins: Site, operand_count: int) -> tuple[str, ...]:
    """``PrintPrecisionConfig`` after the loader resizes operand_precision."""
    data = ins.view.precision_config
    if not data:
        return ()
    return ins.printer.decoder.printed("PrecisionConfig", data, _precision_parts, operand_count)  # type: ignore[no-any-return]


def _precision_parts(config: Any, operand_count: int) -> tuple[str, ...]:
    parts = []
    precisions = list(config.operand_precision)[:operand_count]
    precisions += [0] * (operand_count - len(precisions))
    if any(p != 0 for p in precisions):
        names = [enum_name(_PRECISIONS, p, "PrecisionConfig.operand_precision") for p in precisions]
        parts.append("operand_precision={" + ",".join(names) + "}")
    if config.algorithm:
        parts.append("algorithm=" + enum_name(_ALGORITHMS, config.algorithm, "PrecisionConfig.algorithm"))
    return tuple(parts)


def _groups(ins: Site) -> Iterator[str]:
    view = ins.view
    if max(view.feature_group_count, 1) != 1:
        yield f"feature_group_count={view.feature_group_count}"
    if max(view.batch_group_count, 1) != 1:
        yield f"batch_group_count={view.batch_group_count}"


@_PRINTERS.register("convolution")
def _convolution(ins: Site) -> Iterator[str]:
    view = ins.view
    required(ins, "window")
    dnums = ins.printer.decoder.decode("ConvolutionDimensionNumbers", required(ins, "convolution_dimension_numbers"))
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


@_PRINTERS.register("reduce-window", "select-and-scatter")
def _windowed(ins: Site) -> Iterator[str]:
    window = _window(ins)
    if window:
        yield window


@_PRINTERS.register("custom-call")
def _custom_call(ins: Site) -> Iterator[str]:
    view = ins.view
    if view.HasField("window"):
        yield window_text(ins.decode("Window", "window"))
    if view.HasField("convolution_dimension_numbers"):
        yield dim_labels(ins.decode("ConvolutionDimensionNumbers", "convolution_dimension_numbers"))
    yield from _groups(ins)
    yield from _precision(ins, ins.operand_count)
    if view.padding_type:
        yield "padding_type=" + enum_name(_PADDING_TYPES, view.padding_type, "HloInstructionProto.padding_type")
    yield 'custom_call_target="' + escape(view.custom_call_target) + '"'
    if view.constrain_layout:
        yield "operand_layout_constraints={" + ", ".join(ins.shape_text(s) for s in view.operand_shapes_with_layout) + "}"
    if view.custom_call_has_side_effect:
        yield "custom_call_has_side_effect=true"
    if view.HasField("literal"):
        yield "literal=" + literal_with_shape_text(ins.decode("LiteralProto", "literal"))
    yield from output_to_operand_aliasing(ins)
    if view.custom_call_schedule:
        yield "schedule=" + enum_name(_SCHEDULES, view.custom_call_schedule, "HloInstructionProto.custom_call_schedule")
    if view.custom_call_api_version != 1:
        version = enum_name(_API_VERSIONS, view.custom_call_api_version, "HloInstructionProto.custom_call_api_version")
        yield "api_version=" + version


@_PRINTERS.register("pad")
def _pad(ins: Site) -> Iterator[str]:
    dims = ins.printer.decoder.decode("PaddingConfig", required(ins, "padding_config")).dimensions
    if any(d.interior_padding for d in dims):
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}_{d.interior_padding}" for d in dims)
    else:
        yield "padding=" + "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}" for d in dims)


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
    d = ins.printer.decoder.decode(message, required(ins, field))
    parts = [f"{name}={ints(getattr(d, name))}" for name in listed]
    parts += [f"{name}={ints(getattr(d, name))}" for name in batching if len(getattr(d, name))]
    return ", ".join(parts) + f", index_vector_dim={d.index_vector_dim}"


@_PRINTERS.register("gather")
def _gather(ins: Site) -> Iterator[str]:
    yield _gather_scatter_dimensions(ins)
    yield "slice_sizes=" + ints(ins.view.gather_slice_sizes)
    if ins.view.indices_are_sorted:
        yield "indices_are_sorted=true"


@_PRINTERS.register("scatter")
def _scatter(ins: Site) -> Iterator[str]:
    yield _gather_scatter_dimensions(ins)
    if ins.view.indices_are_sorted:
        yield "indices_are_sorted=true"
    if ins.view.unique_indices:
        yield "unique_indices=true"


def dot_dimensions(d: Any) -> str:
    """``DotDimensionNumbersToString``."""
    parts = []
    if len(d.lhs_batch_dimensions):
        parts.append("lhs_batch_dims=" + ints(d.lhs_batch_dimensions))
    parts.append("lhs_contracting_dims=" + ints(d.lhs_contracting_dimensions))
    if len(d.rhs_batch_dimensions):
        parts.append("rhs_batch_dims=" + ints(d.rhs_batch_dimensions))
    parts.append("rhs_contracting_dims=" + ints(d.rhs_contracting_dimensions))
    return ", ".join(parts)


@_PRINTERS.register("dot")
def _dot(ins: Site) -> Iterator[str]:
    yield ins.printer.decoder.printed("DotDimensionNumbers", required(ins, "dot_dimension_numbers"), dot_dimensions)
    yield from _precision(ins, ins.operand_count)


@_PRINTERS.register("ragged-dot")
def _ragged_dot(ins: Site) -> Iterator[str]:
    if ins.operand_count != 3:
        raise InvalidProto(f"ragged-dot {ins.name} needs 3 operands")
    d = ins.printer.decoder.decode("RaggedDotDimensionNumbers", required(ins, "ragged_dot_dimension_numbers"))
    yield dot_dimensions(d.dot_dimension_numbers)
    if len(d.lhs_ragged_dimensions):
        yield "lhs_ragged_dims=" + ints(d.lhs_ragged_dimensions)
    if len(d.rhs_group_dimensions):
        yield "rhs_group_dims=" + ints(d.rhs_group_dimensions)
    yield from _precision(ins, 2)


@_PRINTERS.register("scaled-dot")
def _scaled_dot(ins: Site) -> Iterator[str]:
    if ins.operand_count != 4:
        raise InvalidProto(f"scaled-dot {ins.name} needs 4 operands")
    yield dot_dimensions(ins.printer.decoder.decode("DotDimensionNumbers", required(ins, "dot_dimension_numbers")))
    yield from _precision(ins, 2)
