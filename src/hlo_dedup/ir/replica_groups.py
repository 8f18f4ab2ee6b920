"""The ``replica_groups=`` attribute (§8.6): parse all three text forms and
materialise the device groups exactly as XLA does.

* list ``{{0,1},{2,3}}`` (``CollectiveDeviceList``);
* iota ``[G,S]<=[dims]T(perm)`` (``IotaReplicaGroupList``);
* mesh axes ``mesh['x'=2,'y'=4] {'y'}`` / ``maximal_mesh[device_id=1] {}``
  (``MeshAxesReplicaGroupList``, following ``replica_group.cc`` and
  ``mesh_and_axis.cc``).

Unlike XLA, whose ``operator==`` never equates different forms, two
:class:`ReplicaGroups` are equal when they denote the same groups: dedup
passes care about who communicates, not how it was spelled. An iota list is not
spelled out until someone iterates its groups (:class:`DeviceGroups`), and a value
naming more than ``MAX_DEVICES`` devices is refused.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Iterable, Literal, NamedTuple

from ..syntax.cursor import TextCursor, TextSyntaxError, int64
from ..syntax.escape import UnescapeError, c_unescape
from .device_groups import MAX_DEVICES, DeviceGroups, iota_transposed

__all__ = ["ReplicaGroups", "ReplicaGroupsError", "parse_replica_groups"]

Kind = Literal["list", "iota", "mesh"]
Groups = tuple[tuple[int, ...], ...]


class ReplicaGroupsError(TextSyntaxError):
    """Malformed or invalid replica groups; ``offset`` indexes the text when known."""


class ReplicaGroups(NamedTuple):
    """The device groups plus the text they came from.

    ``raw`` is the exact parsed text (None when built from groups) so printing
    can reproduce the source form; ``kind`` records which form it was. Equal when the
    groups are. (Named tuples, not dataclasses: a dataclass compiles its methods when
    this module loads, on a pass's first collective, and that was most of the load.)
    """

    groups: DeviceGroups
    raw: str | None = None
    kind: Kind = "list"

    @staticmethod
    def parse(text: str) -> ReplicaGroups:
        """Parse any of the three forms (memoised; see :func:`parse_replica_groups`)."""
        return parse_replica_groups(text)

    @staticmethod
    def from_groups(groups: Iterable[Iterable[int]]) -> ReplicaGroups:
        return ReplicaGroups(DeviceGroups.of(groups))

    @property
    def is_empty(self) -> bool:
        """``{}``: XLA's shorthand for one group of all participants."""
        return not self.groups

    def to_text(self) -> str:
        """The parsed text if any, else XLA's list form ``{{0,1},{2,3}}``."""
        if self.raw is not None:
            return self.raw
        return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in self.groups) + "}"

    def group_size(self, total_devices: int | None = None) -> int:
        """Devices per group: all ``total_devices`` when empty, else the size of
        the first group (XLA's ``num_devices_per_group``)."""
        if self.groups:
            return self.groups.group_size
        if total_devices is None:
            raise ValueError("empty replica groups mean all devices; pass total_devices")
        return total_devices

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReplicaGroups):
            return NotImplemented
        return self.groups == other.groups

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.groups)

    def __str__(self) -> str:
        return self.to_text()


@functools.lru_cache(maxsize=4096)
def parse_replica_groups(text: str) -> ReplicaGroups:
    """Parse a ``replica_groups=`` value; memoised because modules repeat the
    same few values on every collective. Raises :class:`ReplicaGroupsError`."""
    if _PLAIN_LIST.fullmatch(text):  # as XLA prints it: no blanks, no comments
        inner = text[2:-2]
        groups = tuple(tuple(map(int, g.split(","))) if g else () for g in inner.split("},{")) if text != "{}" else ()
        return ReplicaGroups(DeviceGroups(groups), text, "list")
    p = _Parser(text)
    value, kind = p.value()
    p.finish("replica groups")
    return ReplicaGroups(value, text, kind)


# ----------------------------------------------------------------------------
# Materialisation
# ----------------------------------------------------------------------------


def _chunk(flat: list[int], size: int, count: int) -> Groups:
    return tuple(tuple(flat[i * size : (i + 1) * size]) for i in range(count))


def _held(dims: tuple[int, ...]) -> str:
    total = _device_count(dims)
    return f"more than {MAX_DEVICES}" if total is None else str(total)


def _device_count(sizes: Iterable[int]) -> int | None:
    """The product of `sizes` (all >= 0), or None once it passes MAX_DEVICES (without
    multiplying further: thousands of huge factors would make a huge number)."""
    sizes = list(sizes)
    if 0 in sizes:
        return 0
    total = 1
    for size in sizes:
        total *= size
        if total > MAX_DEVICES:
            return None
    return total


class _AxisRef(NamedTuple):
    index: int
    pre_size: int = 1
    size: int | None = None  # None: the whole axis


def _validate_axis_refs(refs: list[_AxisRef], sizes: tuple[int, ...], names: list[str]) -> None:
    """``ValidateSpanOfAxes``: valid sub-axes, no overlap, no mergeable neighbours."""

    def show(r: _AxisRef) -> str:
        return names[r.index] + (f":({r.pre_size}){r.size}" if r.size is not None else "")

    for r in refs:
        if r.size is None:
            continue
        full = sizes[r.index]
        if r.pre_size < 1 or r.size < 2:
            raise ReplicaGroupsError(f"invalid sub-axis {show(r)}: needs pre-size >= 1 and size > 1")
        if full % (r.pre_size * r.size):
            raise ReplicaGroupsError(f"sub-axis {show(r)} does not divide axis size {full}")
        if r.size >= full:
            raise ReplicaGroupsError(f"sub-axis {show(r)} is not smaller than axis size {full}")
    by_axis: dict[int, list[_AxisRef]] = {}
    for r in refs:
        by_axis.setdefault(r.index, []).append(r)
    pairs = ((a, b) for same in by_axis.values() for i, a in enumerate(same) for b in same[i + 1 :])
    for a, b in pairs:
        if a.size is None or b.size is None:
            raise ReplicaGroupsError(f"axes overlap: {show(a)}, {show(b)}")
        a_next, b_next = a.pre_size * a.size, b.pre_size * b.size
        if a_next > b.pre_size and b_next > a.pre_size:
            raise ReplicaGroupsError(f"axes overlap: {show(a)}, {show(b)}")
        if max(a.pre_size, b.pre_size) % min(a_next, b_next):
            raise ReplicaGroupsError(f"axes cannot coexist: {show(a)}, {show(b)}")
    for a, b in zip(refs, refs[1:]):
        if a.index == b.index and a.size and b.size and a.pre_size * a.size == b.pre_size:
            raise ReplicaGroupsError(f"adjacent axes can be merged: {show(a)}, {show(b)}")


def _mesh_groups(sizes: tuple[int, ...], devices: list[int], refs: list[_AxisRef]) -> Groups:
    """``MeshAxesReplicaGroupList::flattened_replica_groups``.

    Each mesh axis named in ``refs`` is split so every referenced (sub-)axis is
    its own dimension; the device array is reshaped to that, the grouped
    dimensions are moved last (in ``refs`` order), and consecutive runs of
    ``group size`` devices are the groups.
    """
    by_axis: dict[int, list[_AxisRef]] = {}
    for r in refs:
        by_axis.setdefault(r.index, []).append(r)
    split: dict[int, tuple[list[int], list[int]]] = {}  # axis -> (reshape dims, grouped dims)
    for axis, axis_refs in by_axis.items():
        full = sizes[axis]
        if len(axis_refs) == 1:
            r = axis_refs[0]
            if r.size is None:
                split[axis] = ([full], [0])
            else:
                split[axis] = ([r.pre_size, r.size, full // (r.pre_size * r.size)], [1])
            continue
        order = sorted(range(len(axis_refs)), key=lambda i: axis_refs[i].pre_size)
        dims: list[int] = []
        grouped_sorted: list[int] = []
        prefix = 1
        for i in order:
            r = axis_refs[i]
            if r.pre_size != prefix:
                dims.append(r.pre_size // prefix)
                prefix *= dims[-1]
            assert r.size is not None
            grouped_sorted.append(len(dims))
            dims.append(r.size)
            prefix *= r.size
        if prefix != full:
            dims.append(full // prefix)
        grouped = [0] * len(axis_refs)
        for rank, i in enumerate(order):
            grouped[i] = grouped_sorted[rank]
        split[axis] = (dims, grouped)

    new_dims: list[int] = []
    offsets: list[int] = []
    for axis, size in enumerate(sizes):
        offsets.append(len(new_dims))
        new_dims.extend(split[axis][0] if axis in split else [size])
    consumed: dict[int, int] = {}
    grouped_dims: list[int] = []
    for r in refs:
        k = consumed.get(r.index, 0)
        consumed[r.index] = k + 1
        grouped_dims.append(split[r.index][1][k] + offsets[r.index])
    grouped_set = set(grouped_dims)
    perm = [d for d in range(len(new_dims)) if d not in grouped_set] + grouped_dims

    order = iota_transposed(new_dims, perm)
    flat = [devices[i] for i in order]
    group_size = math.prod((r.size if r.size is not None else sizes[r.index]) for r in refs)
    return _chunk(flat, group_size, len(flat) // group_size)


# ----------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------

_INT_RE = re.compile(r"-?[0-9]+")
_PLAIN_GROUP = r"\{(?:-?[0-9]{1,18}(?:,-?[0-9]{1,18})*)?\}"
_PLAIN_LIST = re.compile(rf"\{{(?:{_PLAIN_GROUP}(?:,{_PLAIN_GROUP})*)?\}}")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_STRING_RE = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'")


class _Parser(TextCursor):
    __slots__ = ()
    error_type = ReplicaGroupsError

    def ident(self) -> str | None:
        self.skip()
        m = _IDENT_RE.match(self.text, self.pos)
        return None if m is None else m.group()

    def value(self) -> tuple[DeviceGroups, Kind]:
        self.skip()
        if self.text.startswith("{", self.pos):
            return DeviceGroups(self.list_form()), "list"
        if self.text.startswith("[", self.pos):
            return self.iota_form(), "iota"
        word = self.ident()
        if word in ("mesh", "maximal_mesh"):
            return DeviceGroups(self.mesh_form(word)), "mesh"
        raise self.error(f"expected '{{', '[' or a mesh, found {self.describe()}")

    def device_count(self, sizes: Iterable[int], what: str, at: int) -> int:
        total = _device_count(sizes)
        if total is None:
            raise self.error(f"{what} of more than {MAX_DEVICES} devices (the most hlo-dedup accepts)", at)
        return total

    def list_form(self) -> Groups:
        self.expect("{", "to start replica groups")
        if self.eat("}"):
            return ()
        groups = [self.int_list("{", "}", "replica group")]
        while self.eat(","):
            groups.append(self.int_list("{", "}", "replica group"))
        self.expect("}", "to end replica groups")
        return tuple(groups)

    def iota_array(self, context: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``[reshape_dims]`` then ``T(perm)``, which XLA requires for 2+ dims."""
        start = self.pos
        dims = self.int_list("[", "]", f"{context} reshape dims")
        if not dims:
            raise self.error(f"{context} reshape dims must not be empty", start)
        if any(d < 0 for d in dims):
            raise self.error(f"{context} reshape dims must be >= 0", start)
        if len(dims) == 1:
            return dims, (0,)
        if self.ident() != "T":
            raise self.error(f"expected 'T(' after {context} reshape dims with more than one entry")
        self.pos += 1
        perm_start = self.pos
        perm = self.int_list("(", ")", f"{context} transpose permutation")
        if sorted(perm) != list(range(len(dims))):
            raise self.error(f"{context} transpose {perm} is not a permutation of the reshape dims", perm_start)
        return dims, perm

    def iota_form(self) -> DeviceGroups:
        start = self.pos
        shape = self.int_list("[", "]", "iota group shape")
        if len(shape) != 2 or min(shape) < 0:
            raise self.error("iota replica groups need exactly [num_groups,group_size] >= 0", start)
        total = self.device_count(shape, "iota replica groups", start)
        self.expect("<=", "after iota group shape")
        dims_at = self.pos
        dims, perm = self.iota_array("iota")
        if _device_count(dims) != total:
            raise self.error(f"iota reshape dims hold {_held(dims)} devices, not {shape[0]}x{shape[1]}", dims_at)
        return DeviceGroups.iota(shape[0], shape[1], dims, perm)

    def name(self, context: str) -> str:
        """A quoted (escaped) or bare axis name."""
        self.skip()
        start = self.pos
        m = _STRING_RE.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            body = m.group(1) if m.group(1) is not None else m.group(2)
            try:
                return c_unescape(body)
            except UnescapeError as e:
                raise self.error(f"bad escape in {context}: {e.message}", start + 1 + e.offset) from None
        word = self.ident()
        if word is None:
            raise self.error(f"expected {context}, found {self.describe()}")
        self.pos += len(word)
        return word

    def mesh_form(self, word: str) -> Groups:
        start = self.pos
        self.pos += len(word)
        self.expect("[", f"after {word}")
        if word == "maximal_mesh":
            if self.ident() != "device_id":
                raise self.error("expected device_id= in maximal_mesh")
            self.pos += len("device_id")
            self.expect("=", "after device_id")
            device = self.integer("as device_id")
            self.expect("]", "to end maximal_mesh")
            names: list[str] = []
            sizes: tuple[int, ...] = ()
            devices = [device]
        else:
            names, axis_sizes = [], []
            if not self.eat("]"):
                while True:
                    names.append(self.name("a mesh axis name"))
                    self.expect("=", "after mesh axis name")
                    size_at = self.pos
                    axis_sizes.append(self.integer("as mesh axis size"))
                    if axis_sizes[-1] <= 0:
                        raise self.error("mesh axis sizes must be positive", size_at)
                    if not self.eat(","):
                        break
                self.expect("]", "to end mesh axes")
            if not names:
                # XLA's parser refuses an empty mesh, but its printer writes one for a
                # proto's mesh without axes, whose groups are none: all devices, as `{}`.
                self.skip()
                self.expect("{", "to start the grouped mesh axes")
                self.expect("}", "to end the grouped mesh axes of an empty mesh")
                return ()
            if len(set(names)) != len(names):
                raise self.error(f"mesh has duplicate axis names: {names}", start)
            sizes = tuple(axis_sizes)
            devices = self.device_ids(self.device_count(sizes, "a mesh", start))
        refs = self.axis_refs(names)
        _validate_axis_refs(refs, sizes, names)
        return _mesh_groups(sizes, devices, refs)

    def device_ids(self, total: int) -> list[int]:
        """Optional ``, device_ids=(...)``: iota ``[dims]T(perm)`` or an explicit list."""
        self.skip()
        mark = self.pos
        if not self.eat(","):
            return list(range(total))
        if self.ident() != "device_ids":
            raise self.error("expected device_ids= after ',' in mesh", mark)
        self.pos += len("device_ids")
        self.expect("=", "after device_ids")
        self.expect("(", "to start device_ids")
        start = self.pos
        self.skip()
        if self.text.startswith("[", self.pos):
            dims, perm = self.iota_array("device_ids")
            self.expect(")", "to end device_ids")
            if _device_count(dims) != total:
                raise self.error(f"device_ids iota holds {_held(dims)} devices, mesh has {total}", start)
            return iota_transposed(dims, perm)
        ids: list[int] = []
        if not self.eat(")"):
            ids.append(self.integer("in device_ids"))
            while self.eat(","):
                ids.append(self.integer("in device_ids"))
            self.expect(")", "to end device_ids")
        if len(ids) != total:
            raise self.error(f"mesh has {total} devices but device_ids lists {len(ids)}", start)
        if sorted(ids) != list(range(total)):
            raise self.error("device_ids must be a permutation of 0..N-1", start)
        if ids == list(range(total)):
            raise self.error("explicit device_ids must not be the identity (XLA rejects it)", start)
        return ids

    def axis_refs(self, names: list[str]) -> list[_AxisRef]:
        self.expect("{", "to start the grouped mesh axes")
        refs: list[_AxisRef] = []
        if self.eat("}"):
            return refs
        index_of = {name: i for i, name in reversed(list(enumerate(names)))}
        while True:
            refs.append(self.axis_ref(index_of, len(names)))
            if not self.eat(","):
                break
        self.expect("}", "to end the grouped mesh axes")
        return refs

    def axis_ref(self, index_of: dict[str, int], axis_count: int) -> _AxisRef:
        self.skip()
        start = self.pos
        m = _INT_RE.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            token = m.group()
        else:
            token = self.name("a mesh axis reference")
        number = int64(token) if token.isdigit() else None
        if token in index_of:
            index = index_of[token]
        elif number is not None and number < axis_count:
            index = number
        else:
            raise self.error(f"unknown mesh axis {token!r}", start)
        colon = self.eat(":")
        if not self.eat("("):
            if colon:
                raise self.error("expected '(' after ':' in a sub-axis")
            return _AxisRef(index)
        pre_size = self.integer("as sub-axis pre-size")
        self.expect(")", "after sub-axis pre-size")
        return _AxisRef(index, pre_size, self.integer("as sub-axis size"))
