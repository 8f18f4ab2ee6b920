"""Which ``HloModuleProto`` fields the text converter handles, and a fast check that
a module sets no other.

The message classes come from a copy of the project schema
(:mod:`hlo_dedup.io.hlo_schema`) with every unsupported field removed, so the
``protobuf`` runtime files unsupported fields as unknown fields while decoding.
:func:`check_supported` drops those and compares the re-encoded size with the
input: equal sizes prove no unsupported field was set, in one C call. Only when
they differ does it decode again with the full schema to name the field (or to
find that the difference was a harmless non-canonical encoding).
"""

from __future__ import annotations

import functools
from typing import Any

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
        "result_accuracy original_value ragged_dot_dimension_numbers is_reverse num_carries is_associative conv_kind "
        "sparsity_config".split()
    ),
    "OpMetadata": frozenset(
        "op_type op_name source_file source_line source_end_line source_column source_end_column "
        "profile_type deduplicated_name stack_frame_id scheduling_name".split()
    ),
    "OpSharding": frozenset(
        "type tile_shape tile_assignment_dimensions tile_assignment_devices tuple_shardings "
        "replicate_on_last_tile_dim metadata last_tile_dims iota_reshape_dims iota_transpose_perm "
        "is_shard_group shard_group_id shard_group_type".split()
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


@functools.lru_cache(maxsize=None)
def _classes(supported_only: bool) -> dict[str, Any]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from . import hlo_schema

    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.CopyFrom(hlo_schema.file_descriptor_proto())
    if supported_only:
        fdp.name = "hlo_dedup/hlo_schema_supported.proto"
        for msg in fdp.message_type:
            keep = SUPPORTED.get(msg.name)
            if keep is not None:
                _restrict(msg, keep)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"xla.{m.name}"))
        for m in fdp.message_type
    }


def _restrict(msg: Any, keep: frozenset[str]) -> None:
    """Drop the fields of ``msg`` not in ``keep``, renumbering its oneofs."""
    fields = [f for f in msg.field if f.name in keep]
    oneofs = [o.name for o in msg.oneof_decl]
    used = []
    for f in fields:
        if f.HasField("oneof_index"):
            name = oneofs[f.oneof_index]
            if name not in used:
                used.append(name)
    real = [n for n in used if not n.startswith("_")] + [n for n in used if n.startswith("_")]
    copies = []
    for f in fields:
        copy = type(f)()
        copy.CopyFrom(f)
        if f.HasField("oneof_index"):
            copy.oneof_index = real.index(oneofs[f.oneof_index])
        copies.append(copy)
    del msg.field[:]
    msg.field.extend(copies)
    del msg.oneof_decl[:]
    for name in real:
        msg.oneof_decl.add(name=name)


def module_class() -> Any:
    """``HloModuleProto`` with only the supported fields."""
    try:
        return _classes(True)["HloModuleProto"]
    except ImportError as exc:
        raise ImportError(f"reading HLO protos needs protobuf ({exc})") from None


def check_supported(module: Any, data: bytes) -> None:
    """Raise :class:`UnsupportedProto` if ``data`` sets a field outside :data:`SUPPORTED`."""
    module.DiscardUnknownFields()
    if module.ByteSize() == len(data):
        return
    full = _classes(False)["HloModuleProto"].FromString(data)
    path = _first_unsupported(full, "HloModuleProto")
    if path is not None:
        raise UnsupportedProto(path)


def _first_unsupported(msg: Any, path: str) -> str | None:
    keep = SUPPORTED.get(msg.DESCRIPTOR.name)
    for field, value in msg.ListFields():
        name = f"{msg.DESCRIPTOR.name}.{field.name}"
        if keep is not None and field.name not in keep:
            return name
        if field.type == field.TYPE_MESSAGE:
            items = value if field.is_repeated else [value]
            for item in items:
                found = _first_unsupported(item, name)
                if found is not None:
                    return found
    return None
