"""Reading a serialized ``HloModuleProto`` column by column.

The module view decodes the module and its computations; each computation's
instructions stay encoded. The instruction encodings are then decoded as
``HloInstructionColumns`` (every field ``repeated``), one call per chunk of
:data:`_CHUNK` instructions (a columns message holds about 1 KB per instruction): one
list per field over the whole module. Each encoding is preceded by a *separator*, one record per aligned
field holding a value no valid instruction has, so every aligned list is the
separator then the instruction's own value (if set) for each instruction in turn:
that says which value belongs to which instruction, including the unset ones. An
instruction is decoded on its own (:meth:`ModuleData.view`) only when the printer
needs one of its other fields.

No unknown field in the views or in the columns proves that no field outside
:data:`hlo_dedup.io.proto_fields.SUPPORTED` is set (sub-messages are checked as they
are decoded). A non-canonical encoding (an id list written unpacked, a field
repeated) is re-encoded canonically through the full schema and read again.
"""

from __future__ import annotations

from collections import Counter, deque
from itertools import chain, compress, islice, repeat
from operator import add, eq, ne, not_, sub
from typing import Any, Iterator

from .descriptors import length_delimited, varint, varint_field
from .proto_fields import first_unsupported, message_classes
from .proto_values import InvalidProto, UnsupportedProto

_NOT_A_MESSAGE = b"\x00"  # a tag of field 0: no valid message encoding is this
# field -> (separator value, value when unset). A false
# separator (0, "", b"") marks a field proto3 never writes with its default value (a
# scalar, a string, bytes): there, every value the encoding holds is true.
# Messages are written even when empty, so theirs is an encoding no message has.
_ALIGNED: dict[str, tuple[Any, Any]] = {
    "name": ("", ""),
    "opcode": ("", ""),
    "shape": (_NOT_A_MESSAGE, b""),
    "metadata": (_NOT_A_MESSAGE, b""),
    "id": (0, 0),
    "parameter_number": (0, 0),
    "sharding": (_NOT_A_MESSAGE, None),
    "frontend_attributes": (_NOT_A_MESSAGE, b""),
    "backend_config": (b"", b""),
    "statistics_viz": (_NOT_A_MESSAGE, b""),
    "original_value": (_NOT_A_MESSAGE, None),
}

#: Aligned fields whose values repeat from instruction to instruction (a module has a few
#: dozen opcodes and shapes and some thousand metadata): each distinct value is kept once,
#: not once per instruction (72 MB at the peak of a 554k-instruction module's printing).
_SHARED = ("opcode", "shape", "metadata", "sharding", "backend_config")

# Instruction id lists: each instruction's list in the columns follows an id of -1.
_ID_LISTS = ("operand_ids", "control_predecessor_ids", "called_computation_ids")
_ID_SEPARATOR = -1


def _separator() -> bytes:
    fields = message_classes(True)["HloInstructionColumns"].DESCRIPTOR.fields_by_name
    out = b""
    for name, (value, _) in _ALIGNED.items():
        number = fields[name].number
        if isinstance(value, int):
            out += varint_field(number, value)
        else:
            out += length_delimited(number, value.encode() if isinstance(value, str) else value)
    for name in _ID_LISTS:
        out += length_delimited(fields[name].number, varint(_ID_SEPARATOR))
    return out


def _align(column: Any, n: int, separator: Any, unset: Any) -> list[Any] | None:
    """One value per instruction from a column of separators and values (None when
    a value cannot be told from the separator: a default value written out, which the
    canonical re-encoding drops, or a field in several records of one instruction). Loops
    run in C: the value at position ``p`` that is the ``t``-th value (from 0) belongs to
    instruction ``p - t - 1``."""
    extra = len(column) - n
    if extra == 0:  # the separators alone: no instruction sets the field
        return [unset] * n
    if extra == n:
        # Every instruction sets it once exactly when no separator is at an odd position.
        odd = column[1::2]
        if (separator not in odd) if separator else all(odd):
            return odd
    values = column[:]
    is_value = list(map(ne, values, repeat(separator))) if separator else values
    positions = list(compress(range(len(values)), is_value))
    if len(positions) != extra:
        return None
    owners = list(map(sub, positions, range(1, extra + 1)))
    if len(set(owners)) != extra:
        return None  # a message merges, a scalar's last record wins: the canonical re-encoding says which
    out = [unset] * n
    deque(map(out.__setitem__, owners, compress(values, is_value)), maxlen=0)
    return out


def _split(column: Any, n: int) -> tuple[list[int], list[int]] | None:
    """(every instruction's ids in order, how many each has) from a column of ids in
    which each instruction's follow a separator (None when an id is the separator's value)."""
    if len(column) == n:  # the separators alone
        return [], [0] * n
    values = column[:]
    if len(values) - n <= n // 8:  # few ids (callees, control edges): find them, not the separators
        at = list(compress(range(len(values)), map(ne, values, repeat(_ID_SEPARATOR))))
        if len(values) - len(at) != n:
            return None
        counts = [0] * n
        # The t-th id (from 0), at position p, belongs to instruction p - t - 1.
        for owner, count in Counter(map(sub, at, range(1, len(at) + 1))).items():
            counts[owner] = count
        return list(map(values.__getitem__, at)), counts
    is_separator = list(map(eq, values, repeat(_ID_SEPARATOR)))  # shared bools: nothing allocated
    separators = list(compress(range(len(values)), is_separator))
    if len(separators) != n:
        return None
    counts = list(map(sub, chain(islice(separators, 1, None), (len(values),)), map(add, separators, repeat(1))))
    return list(compress(values, map(not_, is_separator))), counts


class ModuleData:
    """A module as the printer reads it: ``module`` (the view), ``computations`` (their
    views), ``raw`` (every instruction's encoding, computation after computation),
    ``bounds`` (each computation's range of ``raw``), ``columns`` (one aligned list
    per field of :data:`_ALIGNED`), ``id_lists`` (each id list field as every
    instruction's ids and how many each has) and ``counts`` (how many values each other
    instruction field has in the whole module)."""

    def __init__(self, data: bytes | memoryview) -> None:
        try:
            self._read(data)
        except _NotCanonical:
            full = message_classes(False)["HloModuleProto"].FromString(data)
            self._read(full.SerializeToString(), canonical=True)

    def _read(self, data: bytes | memoryview, canonical: bool = False) -> None:
        classes = message_classes(True)
        module = classes["HloModuleProtoView"].FromString(data)
        module.DiscardUnknownFields()
        if module.ByteSize() != len(data):  # unsupported fields, or a non-canonical encoding
            _unsupported_or_not_canonical("HloModuleProto", data, canonical)
        self.module = module
        self.computations = list(module.computations)
        raw: list[bytes] = []
        self.bounds: list[tuple[int, int]] = []
        for comp in self.computations:
            start = len(raw)
            raw.extend(comp.instructions)
            self.bounds.append((start, len(raw)))
        self.raw = raw
        self._view_class = classes["HloInstructionProtoView"]
        self.columns: dict[str, list[Any]] = {name: [] for name in _ALIGNED}
        self._distinct: dict[str, dict[Any, Any]] = {name: {} for name in _SHARED}
        self.counts: dict[str, int] = {}
        misaligned: set[str] = set()
        id_parts: dict[str, list[tuple[list[int], list[int]] | range]] = {name: [] for name in _ID_LISTS}
        separator = _separator()
        for start in range(0, max(len(raw), 1), _CHUNK):  # an empty module still counts its fields
            self._read_chunk(classes, separator, range(start, min(start + _CHUNK, len(raw))), misaligned, id_parts,
                             canonical)
        if misaligned:
            if canonical:
                name = next(name for name in _ALIGNED if name in misaligned)  # the first, as one pass over all says
                raise UnsupportedProto(f"HloInstructionProto.{name}", "a value the reader cannot tell apart")
            raise _NotCanonical
        self.id_lists: dict[str, tuple[list[int], list[int]]] = {}
        for name, parts in id_parts.items():
            ids: list[int] = []
            counts: list[int] = []
            for part in parts:
                if isinstance(part, range):  # an id is the separator's value: read each instruction's list on its own
                    part = packed_int64s([getattr(self.view(i), name) for i in part])
                ids += part[0]
                counts += part[1]
            self.id_lists[name] = ids, counts

    def _read_chunk(self, classes: dict[str, Any], separator: bytes, chunk: range, misaligned: set[str],
                    id_parts: dict[str, list[tuple[list[int], list[int]] | range]], canonical: bool) -> None:
        """Decode the instructions in ``chunk`` as columns and append them to the module's.
        A columns message takes about 1 KB per instruction: decoding a million instructions
        at once would hold a gigabyte."""
        raw = self.raw[chunk.start : chunk.stop]
        n = len(raw)
        columns = classes["HloInstructionColumns"].FromString(separator.join([b"", *raw]) if raw else b"")
        from google.protobuf.unknown_fields import UnknownFieldSet

        if len(UnknownFieldSet(columns)):
            for encoding in self.raw:
                path = first_unsupported("HloInstructionProto", encoding)
                if path is not None:
                    raise UnsupportedProto(path)
            if canonical:
                raise InvalidProto("an instruction does not decode")
            raise _NotCanonical
        for name, (sep, unset) in _ALIGNED.items():
            values = _align(getattr(columns, name), n, sep, unset)
            if values is None:
                misaligned.add(name)
            elif not misaligned:
                distinct = self._distinct.get(name)
                self.columns[name] += values if distinct is None else map(distinct.setdefault, values, values)
        for name in _ID_LISTS:
            id_parts[name].append(_split(getattr(columns, name), n) or chunk)
        read = {*_ALIGNED, *_ID_LISTS}
        for f in columns.DESCRIPTOR.fields:
            if f.name not in read:
                self.counts[f.name] = self.counts.get(f.name, 0) + len(getattr(columns, f.name))

    def view(self, i: int) -> Any:
        """Instruction ``i`` decoded on its own (message fields as bytes).

        A view that does not re-encode to its input's size had a field in several
        records (a message field's records merge, which its bytes cannot do) or a
        non-minimal encoding: it is read again from the full schema's canonical
        encoding."""
        raw = self.raw[i]
        view = self._view_class.FromString(raw)
        if view.ByteSize() != len(raw):
            canonical = message_classes(False)["HloInstructionProto"].FromString(raw).SerializeToString()
            view = self._view_class.FromString(canonical)
        return view

    def views(self, indices: list[int]) -> Iterator[Any]:
        """Instructions ``indices``' views, decoded a chunk of them per call (as many at
        once would hold their messages all together)."""
        for start in range(0, len(indices), _VIEW_CHUNK):
            yield from self._views(indices[start : start + _VIEW_CHUNK])

    def _views(self, indices: list[int]) -> Any:
        """Instructions ``indices`` decoded in one call: a sequence of views."""
        encodings = list(map(self.raw.__getitem__, indices))
        sizes = list(map(len, encodings))
        tags = {size: _ITEM_TAG + varint(size) for size in set(sizes)}
        framed = b"".join(chain.from_iterable(zip(map(tags.__getitem__, sizes), encodings)))
        views = message_classes(True)["HloInstructionViews"].FromString(framed)
        if views.ByteSize() != len(framed):
            return [self.view(i) for i in indices]
        return views.items

#: Instructions decoded as columns at a time (see `ModuleData._read_chunk`).
_CHUNK = 1 << 16
#: Instructions decoded as views at a time: the printer holds each chunk's views while it
#: prints their lines, so they are fewer (a view holds its whole instruction).
_VIEW_CHUNK = 1 << 13


class _NotCanonical(Exception):
    """The encoding is not canonical: re-encode it and read again."""


def _unsupported_or_not_canonical(message: str, data: bytes, canonical: bool) -> None:
    path = first_unsupported(message, data)
    if path is not None:
        raise UnsupportedProto(path)
    if canonical:
        raise InvalidProto(f"the {message} does not re-encode to its own size")
    raise _NotCanonical


def packed_int64s(blobs: list[bytes]) -> tuple[list[int], list[int]]:
    """Decode many packed ``repeated int64`` fields at once: (all values in order,
    how many each blob holds)."""
    joined = b"".join(blobs)
    if not joined:
        return [], [0] * len(blobs)
    values = list(message_classes(True)["PackedInt64s"].FromString(b"\x0a" + varint(len(joined)) + joined).values)
    # Each varint ends with its one byte below 0x80.
    counts = [len(b.translate(None, _CONTINUATION_BYTES)) for b in blobs]
    return values, counts


_CONTINUATION_BYTES = bytes(range(0x80, 0x100))
_ITEM_TAG = b"\x0a"  # HloInstructionViews.items: field 1, length-delimited

__all__ = ["ModuleData", "packed_int64s"]
