"""Message classes for reading an ``HloModuleProto`` fast, and the proof that it sets
no field the printer does not handle.

Two sets of classes are built at run time from a copy of the project schema
(:mod:`hlo_dedup.io.hlo_schema`) in which every unsupported field is removed:

* **values** (``OpMetadata``, ``ShapeProto``, ``OpSharding``, ...): ordinary messages;
* **views** of ``HloModuleProto``, ``HloComputationProto``, ``HloInstructionProto`` and ``ShapeProto``
  whose message-typed fields are declared ``bytes`` (``optional``, so presence is
  kept): a computation's instructions are their encodings, id lists (operands,
  control predecessors, called computations) their packed bytes;
* **columns**: ``HloInstructionColumns`` declares every instruction field
  ``repeated``, so the concatenated encodings of all instructions decode in one call
  into one list per field (:mod:`hlo_dedup.io.proto_columns`).

A length-delimited field reads the same as a message or as bytes, and the
``protobuf`` runtime files fields missing from a class as unknown fields: a message
whose view or columns hold no unknown field sets no unsupported field.
:func:`Decoder.decode` checks each sub-message it decodes the same way (only when
the encoded tag of an unsupported field occurs in its bytes at all). Only on a
mismatch is the message decoded again with the full schema, to name the field.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from .descriptors import TYPE_BYTES, TYPE_MESSAGE, TYPE_NUMBERS, FieldSpec, MessageClasses, MessageSpec, encode_file, varint
from .proto_values import UnsupportedProto

# Fields per message that are printed exactly, or that XLA's printer never shows.
# Messages not listed keep all their fields.
SUPPORTED: dict[str, frozenset[str]] = {
    "HloModuleProto": frozenset(
        "name entry_computation_name entry_computation_id computations host_program_shape id pjrt_id "
        "schedule input_output_alias buffer_donor cross_program_prefetches is_dynamic "
        "spmd_output_sharding spmd_parameters_shardings use_auto_spmd_partitioning profile_info "
        "device_assignment stack_frame_index frontend_attributes".split()
    ),
    "HloInstructionProto": frozenset(
        "name opcode shape metadata literal parameter_number fusion_kind tuple_index dimensions "
        "window convolution_dimension_numbers feature_group_count batch_group_count slice_dimensions "
        "exponent_bits mantissa_bits dynamic_slice_sizes padding_config outfeed_config distribution "
        "epsilon feature_index channel_id infeed_config custom_call_target outfeed_shape "
        "dot_dimension_numbers fft_type fft_length comparison_direction gather_dimension_numbers "
        "gather_slice_sizes id operand_ids control_predecessor_ids called_computation_ids sharding "
        "backend_config replica_groups all_reduce_id use_global_device_ids is_host_transfer is_stable "
        "scatter_dimension_numbers precision_config source_target_pairs domain_entry_sharding "
        "domain_exit_sharding constrain_layout operand_shapes_with_layout triangular_solve_options "
        "cholesky_options parameter_replication custom_call_has_side_effect output_operand_aliasing "
        "custom_call_schedule delta indices_are_sorted frontend_attributes unique_indices rng_algorithm "
        "comparison_type is_cross_program_prefetch cross_program_prefetch_index padding_type "
        "custom_call_api_version async_execution_thread k largest statistics_viz "
        "collective_device_list iota_collective_device_list mesh_axes_replica_group_list is_composite "
        "result_accuracy original_value ragged_dot_dimension_numbers is_reverse num_carries "
        "is_associative conv_kind sparsity_config".split()
    ),
    "OpMetadata": frozenset(
        "op_type op_name source_file source_line source_end_line source_column source_end_column "
        "profile_type size_of_generated_code_in_bytes size_of_memory_working_set_in_bytes profile_info "
        "deduplicated_name stack_frame_id scheduling_name".split()
    ),
    "OpSharding": frozenset(
        "type tile_shape tile_assignment_dimensions tile_assignment_devices tuple_shardings "
        "replicate_on_last_tile_dim metadata last_tile_dims iota_reshape_dims iota_transpose_perm "
        "is_shard_group shard_group_id shard_group_type named_sharding".split()
    ),
    "LayoutProto": frozenset(
        "minor_to_major tiles tail_padding_alignment_in_elements element_size_in_bits memory_space "
        "index_primitive_type pointer_primitive_type split_configs dynamic_shape_metadata_prefix_bytes".split()
    ),
    "LiteralProto": frozenset(
        "shape preds s1s s2s s4s s8s u1s u2s u4s u8s s32s s64s u32s u64s f32s f64s c64s c128s "
        "tuple_literals f16s bf16s u16s s16s f4e2m1fns f8e3m4s f8e4m3b11fnuzs f8e4m3fns f8e4m3fnuzs "
        "f8e4m3s f8e5m2fnuzs f8e5m2s f8e8m0fnus f6e3m2fns f6e2m3fns".split()
    ),
}
_VIEWS = ("HloModuleProto", "HloComputationProto", "HloInstructionProto", "ShapeProto")
_VIEW_LINKS = {"computations": ".xla.HloComputationProtoView"}
_PACKED_IDS = frozenset(("operand_ids", "control_predecessor_ids", "called_computation_ids"))


#: `supported_file()` as shipped (package data), written by tests/io/gen_supported_schema.py:
#: a `.pb` run reads these bytes instead of parsing the table and encoding ~650 fields,
#: about a twentieth of what reading a small module costs.
SUPPORTED_FILE = "hlo_schema_supported.binpb"


def shipped_supported_file() -> bytes:
    from .hlo_schema import package_data

    return package_data(SUPPORTED_FILE)


def supported_file() -> bytes:
    """The schema with unsupported fields removed, plus the views, the instruction
    columns and ``PackedInt64s``, encoded as a ``FileDescriptorProto``."""
    from . import hlo_schema

    messages, enums = hlo_schema.specs()
    out: list[MessageSpec] = []
    for msg in messages:
        keep = SUPPORTED.get(msg.name)
        fields = [f for f in msg.fields if keep is None or f.name in keep]
        out.append(MessageSpec(msg.name, fields))
        if msg.name in _VIEWS:
            out.append(MessageSpec(msg.name + "View", [_view_field(f) for f in fields]))
        if msg.name == "HloInstructionProto":
            out.append(MessageSpec("HloInstructionColumns", [_column_field(f) for f in fields]))
    out.append(MessageSpec("PackedInt64s", [FieldSpec("values", 1, TYPE_NUMBERS["int64"], repeated=True)]))
    out.append(MessageSpec("HloInstructionViews", [FieldSpec("items", 1, TYPE_MESSAGE, ".xla.HloInstructionProtoView", repeated=True)]))
    return encode_file("hlo_dedup/hlo_schema_supported.proto", "xla", out, enums)


def _view_field(f: FieldSpec) -> FieldSpec:
    """A view's field: message-typed fields become bytes (``optional`` when singular,
    so presence is kept), id lists their packed bytes, a computation's instructions
    their encodings; the module's computations are computation views."""
    if f.name in _VIEW_LINKS:
        return f.replaced(type_name=_VIEW_LINKS[f.name])
    if f.name in _PACKED_IDS:
        return f.replaced(type=TYPE_BYTES, repeated=False)
    if f.type != TYPE_MESSAGE:
        return f
    return f.replaced(type=TYPE_BYTES, type_name="", optional=not f.repeated and not f.oneof)


def _column_field(f: FieldSpec) -> FieldSpec:
    """An instruction column: every field repeated, messages as bytes."""
    as_bytes = f.type == TYPE_MESSAGE
    return f.replaced(type=TYPE_BYTES if as_bytes else f.type, type_name="" if as_bytes else f.type_name,
                      repeated=True, oneof="", optional=False)


@functools.lru_cache(maxsize=None)
def message_classes(supported_only: bool) -> MessageClasses:
    """The value and view classes (supported schema), or the full schema's classes."""
    if supported_only:
        return MessageClasses(shipped_supported_file(), "xla")
    from . import hlo_schema

    messages, enums = hlo_schema.specs()
    return MessageClasses(encode_file("hlo_dedup/hlo_schema_full.proto", "xla", messages, enums), "xla")


def first_unsupported(message: str, data: bytes) -> str | None:
    """The first field outside :data:`SUPPORTED` that ``data`` (a ``message``) sets,
    as ``Message.field``, or None."""
    return _first_unsupported(message_classes(False)[message].FromString(data))


def _name_unsupported(message: str, data: bytes) -> None:
    path = first_unsupported(message, data)
    if path is not None:
        raise UnsupportedProto(path)


def _first_unsupported(msg: Any) -> str | None:
    keep = SUPPORTED.get(msg.DESCRIPTOR.full_name.removeprefix("xla."))
    for field, value in msg.ListFields():
        if keep is not None and field.name not in keep:
            return f"{msg.DESCRIPTOR.name}.{field.name}"
        if field.type == field.TYPE_MESSAGE:
            repeated = getattr(field, "is_repeated", None)
            if repeated is None:
                repeated = field.label == field.LABEL_REPEATED
            for item in value if repeated else [value]:
                found = _first_unsupported(item)
                if found is not None:
                    return found
    return None


_WIRE_TYPES = {1: 1, 6: 1, 16: 1, 2: 5, 7: 5, 15: 5, 9: 2, 11: 2, 12: 2}  # others: varint (0)


@functools.lru_cache(maxsize=None)
def _unsupported_tags(message: str) -> tuple[bytes, ...]:
    """The encoded tags of every unsupported field in ``message`` or in a message it
    can contain: bytes of ``message`` holding none of them set no unsupported field."""
    from . import hlo_schema

    specs = {m.name: m for m in hlo_schema.specs()[0]}
    tags: set[bytes] = set()
    seen: set[str] = set()
    todo = [message]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        keep = SUPPORTED.get(name)
        for f in specs[name].fields:
            if keep is not None and f.name not in keep:
                wire = _WIRE_TYPES.get(f.type, 0)
                tags.add(varint(f.number << 3 | wire))
                if f.repeated and wire != 2:
                    tags.add(varint(f.number << 3 | 2))  # packed
            elif f.type == TYPE_MESSAGE:
                todo.append(f.type_name.removeprefix(".xla."))
    return tuple(sorted(tags))


class Decoder:
    """Decodes sub-message bytes with the value classes, checked and memoised."""

    def __init__(self) -> None:
        self._classes = message_classes(True)
        self._cache: dict[tuple[str, bytes], Any] = {}
        self._texts: dict[tuple[Any, ...], Any] = {}

    def decode(self, message: str, data: bytes) -> Any:
        key = (message, data)
        msg = self._cache.get(key)
        if msg is None:
            msg = self._classes[message].FromString(data)
            tags = _unsupported_tags(message)
            if tags and any(t in data for t in tags):  # maybe set: check exactly
                msg.DiscardUnknownFields()
                if msg.ByteSize() != len(data):
                    _name_unsupported(message, data)
            self._cache[key] = msg
        return msg

    def view(self, message: str, data: bytes) -> Any:
        """The view of a ``message`` (its message fields as bytes) that :meth:`decode`
        has checked."""
        return self._classes[message + "View"].FromString(data)

    def printed(self, message: str, data: bytes, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(decoded data, *args)``, memoised on the function, bytes and arguments: for
        the texts of sub-messages that repeat over many instructions (dimension numbers,
        precision configs, shardings)."""
        key = (fn, data, args)
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = fn(self.decode(message, data), *args)
        return text

    def memo(self, fn: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        """``fn`` memoised on its bytes argument (for texts printed from sub-messages)."""
        cache: dict[bytes, Any] = {}

        def cached(data: bytes) -> Any:
            value = cache.get(data)
            if value is None:
                value = cache[data] = fn(data)
            return value

        return cached
