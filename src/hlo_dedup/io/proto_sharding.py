"""XLA's text of an ``OpSharding`` and of collective device lists.

``HloSharding::FromProto`` normalises what it reads (a one-device tile becomes
``maximal``, a partially replicated tile has its groups sorted or its iota
regrouped, a tuple sharding is spread over the instruction's tuple shape);
:func:`sharding_text` does the same before printing as ``HloSharding::Print``.
Subgroup shardings that XLA would merge or reorder are refused rather than guessed.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..ir.shape import Shape
from .proto_values import InvalidProto, UnsupportedProto, op_metadata

# OpSharding.Type
REPLICATED, MAXIMAL, TUPLE, OTHER, MANUAL, UNKNOWN, UNREDUCED = 0, 1, 2, 3, 4, 5, 6
_SUBGROUP_NAMES = {MANUAL: "manual", REPLICATED: "replicated", UNREDUCED: "unreduced"}


# ------------------------------------------------------------------------------------------
# Iota tile assignments (tile_assignment.cc)


def canonical_iota(reshape_dims: Sequence[int], perm: Sequence[int]) -> tuple[list[int], list[int]]:
    """``CanonicalizeIotaDims``: drop size-1 dims and merge runs that stay in order."""
    dims = list(reshape_dims)
    perm = list(perm)
    if len(dims) > 1:
        while True:
            keep = [i for i, d in enumerate(dims) if d != 1]
            if len(keep) != len(dims):
                new_index = {old: new for new, old in enumerate(keep)}
                perm = [new_index[p] for p in perm if p in new_index]
                dims = [dims[i] for i in keep]
            changed = False
            base = 0
            for i in range(1, len(dims)):
                if perm[base] + (i - base) == perm[i]:
                    dims[perm[base]] *= dims[perm[i]]
                    dims[perm[i]] = 1
                    changed = True
                else:
                    base = i
            if not changed:
                break
    if not dims:
        return [1], [0]
    return dims, perm


def iota_array_text(reshape_dims: Sequence[int], perm: Sequence[int]) -> str:
    """``IotaTileAssignment::PrintArray``: ``[dims]`` and ``T(perm)`` when transposed."""
    text = "[" + ",".join(map(str, reshape_dims)) + "]"
    if len(reshape_dims) > 1:
        text += "T(" + ",".join(map(str, perm)) + ")"
    return text


def iota_values(reshape_dims: Sequence[int], perm: Sequence[int]) -> list[int]:
    """The device ids of ``iota(reshape_dims)`` transposed by ``perm``, row-major."""
    strides = [0] * len(reshape_dims)
    stride = 1
    for axis in range(len(reshape_dims) - 1, -1, -1):
        strides[axis] = stride
        stride *= reshape_dims[axis]
    out = [0]
    for axis in perm:
        step, size = strides[axis], reshape_dims[axis]
        out = [base + i * step for base in out for i in range(size)]
    return out


def _group_minor_iota_dims_sorted(
    dims: list[int], perm: list[int], group_size: int
) -> tuple[list[int], list[int]] | None:
    """``GroupMinorIotaDimsSorted``: make the minor ``group_size`` devices one sorted run."""
    grouped = 0
    split: tuple[int, int] | None = None
    for i in range(len(perm) - 1, -1, -1):
        dim = perm[i]
        size = dims[dim]
        if size <= group_size:
            if group_size % size:
                return None
            group_size //= size
            grouped += 1
        else:
            if size % group_size:
                return None
            split = (dim, size // group_size)
            grouped += 1
            group_size = 1
            break
    if split is None:
        new_perm = perm[: len(perm) - grouped] + sorted(perm[len(perm) - grouped :])
        return list(dims), new_perm
    split_i, split_size = split
    new_dims = dims[:split_i] + [split_size, dims[split_i] // split_size] + dims[split_i + 1 :]
    new_perm = [0] * (len(perm) + 1)
    perm_split = 0
    for i, p in enumerate(perm):
        new_perm[i] = p if p <= split_i else p + 1
        if p == split_i:
            perm_split = i
            break
    new_perm[perm_split + 1] = new_perm[perm_split] + 1
    for i in range(perm_split + 2, len(new_perm)):
        p = perm[i - 1]
        new_perm[i] = p if p <= split_i else p + 1
    head, tail = new_perm[: len(new_perm) - grouped], new_perm[len(new_perm) - grouped :]
    return new_dims, head + sorted(tail)


# ------------------------------------------------------------------------------------------
# HloSharding


class _Sharding:
    """An HloSharding as the printer needs it: `kind` is one of "replicated", "manual",
    "unknown", "unreduced", "maximal", "tiled", "tuple"; `iota` the canonical
    (reshape_dims, perm) of an iota tile assignment."""

    __slots__ = ("kind", "metadata", "group", "device", "dims", "iota", "devices", "replicate_last", "subgroups",
                 "elements")

    def __init__(self, kind: str, metadata: list[Any], group: str = "", device: int = 0, dims: list[int] | None = None,
                 iota: tuple[list[int], list[int]] | None = None, devices: list[int] | None = None,
                 replicate_last: bool = False, subgroups: list[int] | None = None,
                 elements: list[_Sharding] | None = None) -> None:
        self.kind = kind
        self.metadata = metadata
        self.group = group
        self.device = device
        self.dims = dims
        self.iota = iota
        self.devices = devices
        self.replicate_last = replicate_last
        self.subgroups = subgroups
        self.elements = elements


def _shard_group(proto: Any) -> str:
    if not proto.is_shard_group:
        return ""
    return f"shard_as {proto.shard_group_id}" if proto.shard_group_type == 0 else f"shard_like {proto.shard_group_id}"


def _partial_tile(s: _Sharding) -> _Sharding:
    """``HloSharding::PartialTile``."""
    dims = s.dims
    assert dims is not None
    total = math.prod(dims)
    if len(dims) == 1 or dims[-1] == total:
        return _Sharding("replicated", s.metadata, s.group)
    if dims[-1] == 1:
        s.dims = dims[:-1]
        return s
    group_size = dims[-1]
    if s.iota is not None:
        reshape, perm = s.iota
        if reshape[perm[-1]] == group_size:
            s.replicate_last = True
            return s
        grouped = _group_minor_iota_dims_sorted(reshape, perm, group_size)
        if grouped is not None:
            s.iota = canonical_iota(*grouped)
            s.replicate_last = True
            return s
        s.devices = iota_values(reshape, perm)
        s.iota = None
    assert s.devices is not None
    devices = s.devices
    s.devices = [d for start in range(0, total, group_size) for d in sorted(devices[start : start + group_size])]
    s.replicate_last = True
    return s


def _from_proto(proto: Any) -> _Sharding:
    """``HloSharding::FromProto``."""
    metadata = list(proto.metadata)
    group = _shard_group(proto)
    kind = proto.type
    if kind == TUPLE:
        if metadata:
            raise InvalidProto("a tuple sharding has metadata")
        elements = [_from_proto(e) for e in proto.tuple_shardings]
        return _Sharding("tuple", [], group, elements=elements)
    simple = {REPLICATED: "replicated", MANUAL: "manual", UNKNOWN: "unknown", UNREDUCED: "unreduced"}
    if kind in simple:
        return _Sharding(simple[kind], metadata, group)
    devices = list(proto.tile_assignment_devices)
    reshape = list(proto.iota_reshape_dims)
    if len(devices) == 1:
        return _Sharding("maximal", metadata, group, device=devices[0])
    if reshape and all(d == 1 for d in reshape):
        return _Sharding("maximal", metadata, group, device=0)
    if kind == MAXIMAL:
        raise InvalidProto("a maximal sharding needs exactly one device")
    if kind != OTHER:
        raise UnsupportedProto("OpSharding.type", f"type {kind}")
    dims = list(proto.tile_assignment_dimensions)
    if not dims:
        raise InvalidProto("a tiled sharding has no tile_assignment_dimensions")
    s = _Sharding("tiled", metadata, group, dims=dims)
    if reshape:
        perm = list(proto.iota_transpose_perm)
        if devices or len(perm) != len(reshape) or sorted(perm) != list(range(len(perm))):
            raise InvalidProto("an iota sharding needs a permutation of its reshape dims and no devices")
        if math.prod(reshape) != math.prod(dims):
            raise InvalidProto("iota sharding sizes do not match")
        s.iota = canonical_iota(reshape, perm)
    else:
        if len(devices) != math.prod(dims):
            raise InvalidProto("sharding device count does not match its tile assignment")
        s.devices = devices
    subgroups = list(proto.last_tile_dims)
    if subgroups:
        if proto.replicate_on_last_tile_dim:
            raise InvalidProto("a sharding has both last_tile_dims and replicate_on_last_tile_dim")
        return _subgroup(s, subgroups)
    if proto.replicate_on_last_tile_dim:
        return _partial_tile(s)
    return s


def _subgroup(s: _Sharding, types: list[int]) -> _Sharding:
    """``HloSharding::Subgroup`` for subgroups XLA keeps as they are."""
    dims = s.dims
    assert dims is not None
    data_dims = len(dims) - len(types)
    if len(set(types)) == 1 and math.prod(dims[:data_dims]) == 1:
        simple = {MANUAL: "manual", REPLICATED: "replicated", UNREDUCED: "unreduced"}
        if types[0] in simple:
            return _Sharding(simple[types[0]], s.metadata, s.group)
    sizes = dims[data_dims:]
    if 1 in sizes or len(set(types)) != len(types) or any(t not in _SUBGROUP_NAMES for t in types):
        raise UnsupportedProto("OpSharding.last_tile_dims", "subgroups XLA would merge")
    if len(types) > 1:
        raise UnsupportedProto("OpSharding.last_tile_dims", "several subgroup types")
    if types[0] == REPLICATED:
        return _partial_tile(s)
    if types[0] == MANUAL and math.prod(dims) == dims[-1]:
        return _Sharding("manual", s.metadata, s.group)
    s.subgroups = types
    return s


def _leaf_count(shape: Shape) -> int:
    if shape.tuple_shapes is None:
        return 1
    return sum(_leaf_count(s) for s in shape.tuple_shapes)


def _print(s: _Sharding, include_metadata: bool) -> str:
    if s.kind == "tuple":
        assert s.elements is not None
        if not s.elements:
            return "{}"
        parts = [_print(s.elements[0], include_metadata)]
        for i in range(1, len(s.elements)):
            parts.append((f", /*index={i}*/" if i % 5 == 0 else ", ") + _print(s.elements[i], include_metadata))
        return "{" + "".join(parts) + "}"
    tail = (" " + s.group if s.group else "") + _metadata_text(s.metadata, include_metadata) + "}"
    if s.kind == "maximal":
        return f"{{maximal device={s.device}" + tail
    if s.kind != "tiled":
        return "{" + s.kind + tail
    assert s.dims is not None
    text = "{devices=[" + ",".join(map(str, s.dims)) + "]"
    if s.iota is not None:
        text += "<=" + iota_array_text(*s.iota)
    else:
        assert s.devices is not None
        text += ",".join(map(str, s.devices))
    if s.replicate_last:
        text += " last_tile_dim_replicate"
    if s.subgroups:
        text += " last_tile_dims={" + ", ".join(_SUBGROUP_NAMES[t] for t in s.subgroups) + "}"
    return text + tail


def _metadata_text(metadata: list[Any], include: bool) -> str:
    if not include or not metadata:
        return ""
    if len(metadata) == 1:
        return " metadata={" + op_metadata(metadata[0]) + "}"
    return " metadata={" + ", ".join("{" + op_metadata(m) + "}" for m in metadata) + "}"


def sharding_text(proto: Any, shape: Shape | None, include_metadata: bool = True) -> str:
    """An instruction's ``sharding=`` value (``NormalizeTupleSharding`` to ``shape``
    when given), or a domain's entry/exit sharding (``shape`` None)."""
    s = _from_proto(proto)
    if shape is not None and shape.tuple_shapes is not None and s.kind != "tuple":
        s = _Sharding("tuple", [], elements=[s] * max(_leaf_count(shape), 1))
    return _print(s, include_metadata)


# ------------------------------------------------------------------------------------------
# Collective device lists (replica_group.cc)


def replica_groups_text(view: Any, decoder: Any) -> str:
    """``CollectiveDeviceListBase::DeviceListFromProto(...)->ToString()`` of an
    instruction view (its device-list fields are bytes); an iota or mesh list's text is
    made once per distinct list (``decoder`` is a :class:`~hlo_dedup.io.proto_fields.Decoder`)."""
    which = view.WhichOneof("replica_group_list")
    if which == "iota_collective_device_list":
        return decoder.printed("IotaReplicaGroupListProto", view.iota_collective_device_list, _iota_list_text)
    if which == "mesh_axes_replica_group_list":
        return decoder.printed("MeshAxesReplicaGroupListProto", view.mesh_axes_replica_group_list, _mesh_axes_text)
    if which == "collective_device_list":
        groups = decoder.decode("CollectiveDeviceListProto", view.collective_device_list).replica_groups
    else:
        groups = [decoder.decode("ReplicaGroup", g) for g in view.replica_groups]
    return "{" + ",".join("{" + ",".join(map(str, g.replica_ids)) + "}" for g in groups) + "}"


def _iota_list_text(iota: Any) -> str:
    reshape, perm = canonical_iota(list(iota.iota_reshape_dims), list(iota.iota_transpose_perm))
    return f"[{iota.num_replica_groups},{iota.num_devices_per_group}]<=" + iota_array_text(reshape, perm)


def _mesh_axes_text(proto: Any) -> str:
    mesh = proto.mesh
    if not mesh.axes:
        raise UnsupportedProto("MeshAxesReplicaGroupListProto.mesh", "meshes without axes")
    names = [a.name for a in mesh.axes]
    axes = []
    for ref in proto.axes:
        if not 0 <= ref.mesh_axis_index < len(names):
            raise InvalidProto("mesh axis index out of range")
        text = f"'{names[ref.mesh_axis_index]}'"
        if ref.HasField("sub_axis_info"):
            text += f":({ref.sub_axis_info.pre_size}){ref.sub_axis_info.size}"
        axes.append(text)
    mesh_text = "mesh[" + ",".join(f"'{a.name}'={a.size}" for a in mesh.axes) + "]"
    return mesh_text + _mesh_devices_text(mesh) + " {" + ",".join(axes) + "}"


def _mesh_devices_text(mesh: Any) -> str:
    """``, device_ids=(...)`` of a mesh whose devices are not in iota order: an iota
    transposed (``([4,2]T(1,0))``, canonical as XLA keeps it) or a list; nothing for iota order,
    which XLA keeps as no field at all."""
    if not mesh.device_ids and not mesh.HasField("iota_transform"):
        return ""
    if mesh.device_ids and mesh.HasField("iota_transform"):
        raise InvalidProto("a mesh has both device_ids and an iota_transform")
    size = math.prod(a.size for a in mesh.axes)
    if mesh.HasField("iota_transform"):
        iota = mesh.iota_transform
        reshape, perm = canonical_iota(list(iota.reshape_dims), list(iota.transpose_perm))
        if math.prod(reshape) != size or sorted(perm) != list(range(len(reshape))):
            raise InvalidProto("a mesh's iota_transform does not cover its devices")
        if perm == sorted(perm):  # XLA writes no transform for iota order, and prints none
            raise UnsupportedProto("MeshProto.iota_transform", "an iota_transform in iota order")
        return ", device_ids=(" + iota_array_text(reshape, perm) + ")"
    ids = list(mesh.device_ids)
    if sorted(ids) != list(range(size)):
        raise InvalidProto("a mesh's device_ids are not its devices, each once")
    if ids == sorted(ids):  # XLA's reader refuses (CHECK-fails on) a device list in iota order
        raise UnsupportedProto("MeshProto.device_ids", "a device list in iota order")
    return ", device_ids=(" + ",".join(map(str, ids)) + ")"
