"""Attributes of the instructions that communicate: collectives (channel, replica
groups, layout constraint), send/recv and the host feeds, whose shapes XLA's
constructors rebuild rather than read."""

from __future__ import annotations

from typing import Iterator

from .proto_sharding import replica_groups_text
from .proto_site import AttributePrinters, Site, one_dimension, required
from .proto_values import InvalidProto, UnsupportedProto, escape

COLLECTIVE_ATTRIBUTES = _PRINTERS = AttributePrinters()


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
    yield "replica_groups=" + replica_groups_text(view, ins.printer.decoder)
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


@_PRINTERS.register("send", "recv", "send-done", "recv-done")
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


@_PRINTERS.register("all-gather", "all-gather-start")
def _all_gather(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    yield f"dimensions={{{one_dimension(ins)}}}"
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"


@_PRINTERS.register("all-reduce", "all-reduce-start")
def _all_reduce(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"


@_PRINTERS.register("reduce-scatter")
def _reduce_scatter(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if ins.view.use_global_device_ids:
        yield "use_global_device_ids=true"
    yield f"dimensions={{{one_dimension(ins)}}}"


@_PRINTERS.register("all-to-all")
def _all_to_all(ins: Site) -> Iterator[str]:
    yield from _collective(ins)
    if len(ins.view.dimensions):
        yield f"dimensions={{{one_dimension(ins)}}}"


@_PRINTERS.register("ragged-all-to-all", "collective-broadcast")
def _plain_collective(ins: Site) -> Iterator[str]:
    yield from _collective(ins, constrain_layout=False)


@_PRINTERS.register("collective-permute", "collective-permute-start")
def _collective_permute(ins: Site) -> Iterator[str]:
    if len(ins.view.dynamic_slice_sizes):
        raise UnsupportedProto("HloInstructionProto.dynamic_slice_sizes", "combined collective-permute")
    yield from _channel(ins)
    decode = ins.printer.decoder.decode
    pairs = [decode("SourceTarget", b) for b in ins.view.source_target_pairs]
    yield "source_target_pairs={" + ",".join(f"{{{p.source},{p.target}}}" for p in pairs) + "}"


def _config(raw: bytes) -> str:
    return escape(raw.decode("utf-8", "surrogateescape"))


@_PRINTERS.register("infeed")
def _infeed(ins: Site) -> Iterator[str]:
    shape = ins.shape()
    if shape.element_type != 13 or len(shape.tuple_shapes) != 2:
        raise InvalidProto(f"infeed {ins.name} needs a (data, token) shape")
    _derived_shape(ins, f"({ins.shape_text(shape.tuple_shapes[0].SerializeToString())}, token[])")
    if ins.view.infeed_config:
        yield 'infeed_config="' + _config(ins.view.infeed_config) + '"'


@_PRINTERS.register("outfeed")
def _outfeed(ins: Site) -> Iterator[str]:
    _derived_shape(ins, "token[]")
    yield "outfeed_shape=" + ins.shape_text(required(ins, "outfeed_shape"))
    if ins.view.outfeed_config:
        yield 'outfeed_config="' + _config(ins.view.outfeed_config) + '"'
