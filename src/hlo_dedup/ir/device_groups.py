"""The device groups a `replica_groups=` value denotes, kept compact where XLA's is.

An iota list `[G,S]<=[dims]T(perm)` names G*S devices in a few characters, so it stays
in that form (as XLA's `IotaReplicaGroupList` does): two iota lists compare and hash by
their canonical form, and the groups are only spelled out when someone iterates them.
Every form compares equal to any other that denotes the same groups, as the dedup passes
need, and hashes alike: the hash reads a few dozen ids at fixed positions of the groups
laid end to end, which an iota list computes without spelling the rest out.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence, overload

__all__ = ["MAX_DEVICES", "DeviceGroups", "canonical_iota", "iota_transposed"]

#: Most devices a replica-groups value may name: far beyond any machine XLA runs on, and
#: small enough that spelling the groups out stays cheap.
MAX_DEVICES = 1 << 20

Groups = tuple[tuple[int, ...], ...]


def iota_transposed(reshape_dims: Sequence[int], perm: Sequence[int]) -> list[int]:
    """`iota(N)` reshaped to `reshape_dims`, transposed by `perm`, flattened."""
    strides = [1] * len(reshape_dims)
    for d in range(len(reshape_dims) - 2, -1, -1):
        strides[d] = strides[d + 1] * reshape_dims[d + 1]
    values = [0]
    for axis in perm:
        stride, size = strides[axis], reshape_dims[axis]
        values = [base + i * stride for base in values for i in range(size)]
    return values


def _transposed_iota_at(position: int, dims: Sequence[int], perm: Sequence[int], strides: Sequence[int]) -> int:
    """Element `position` of iota_transposed(dims, perm), without the others."""
    value = 0
    for axis in reversed(perm):
        position, digit = divmod(position, dims[axis])
        value += digit * strides[axis]
    return value


def canonical_iota(dims: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The one (dims, perm) that spells the same transposed iota: dimensions of size 1
    dropped and axes that stay neighbours after the transpose merged (as XLA's
    IotaTileAssignment canonicalises). `((0,), (0,))` when it holds no device."""
    if 0 in dims:
        return (0,), (0,)
    kept = [axis for axis in range(len(dims)) if dims[axis] != 1]
    renumber = {axis: i for i, axis in enumerate(kept)}
    sizes = [dims[axis] for axis in kept]
    order = [renumber[axis] for axis in perm if axis in renumber]
    # Runs of consecutive axes in transposed order become one axis.
    runs: list[list[int]] = []
    for axis in order:
        if runs and runs[-1][-1] + 1 == axis:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    by_first_axis = sorted(range(len(runs)), key=lambda r: runs[r][0])
    merged: list[int] = []
    for r in by_first_axis:
        size = 1
        for axis in runs[r]:
            size *= sizes[axis]
        merged.append(size)
    position = {r: i for i, r in enumerate(by_first_axis)}
    return tuple(merged), tuple(position[r] for r in range(len(runs)))


class DeviceGroups(Sequence[tuple[int, ...]]):
    """Groups of device (or replica) ids: a sequence of tuples, compact for iota lists."""

    __slots__ = ("_groups", "_iota", "_hash")

    def __init__(self, groups: Groups | None = None, iota: tuple[int, int, tuple[int, ...], tuple[int, ...]] | None = None) -> None:
        self._groups = groups
        self._iota = iota  # (group count, group size, canonical dims, canonical perm)
        self._hash: int | None = None

    @staticmethod
    def of(groups: Iterable[Iterable[int]]) -> DeviceGroups:
        return DeviceGroups(tuple(tuple(int(i) for i in g) for g in groups))

    @staticmethod
    def iota(num_groups: int, group_size: int, dims: Sequence[int], perm: Sequence[int]) -> DeviceGroups:
        """`[num_groups,group_size]<=[dims]T(perm)`; the caller checked that the sizes agree
        and that there are at most MAX_DEVICES devices."""
        canonical_dims, canonical_perm = canonical_iota(dims, perm)
        return DeviceGroups(iota=(num_groups, group_size, canonical_dims, canonical_perm))

    @property
    def group_size(self) -> int:
        """Size of the first group (0 when there is none)."""
        if self._iota is not None:
            return self._iota[1] if self._iota[0] else 0
        return len(self._groups[0]) if self._groups else 0  # type: ignore[index]

    def _all(self) -> Groups:
        if self._groups is None:
            count, size, dims, perm = self._iota  # type: ignore[misc]
            flat = iota_transposed(dims, perm) if count * size else []
            self._groups = tuple(tuple(flat[i * size : (i + 1) * size]) for i in range(count))
        return self._groups

    def __len__(self) -> int:
        return self._iota[0] if self._iota is not None else len(self._groups)  # type: ignore[arg-type]

    @overload
    def __getitem__(self, index: int) -> tuple[int, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> Groups: ...
    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self._all()[index]

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeviceGroups):
            if self._iota is not None and other._iota is not None:
                return self._iota == other._iota
            if len(self) != len(other) or self.group_size != other.group_size:
                return False
            return self._all() == other._all()
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and self._all() == tuple(tuple(g) for g in other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((len(self), self.group_size, self._samples()))
        return self._hash

    def _samples(self) -> tuple[int, ...]:
        """The ids at positions 0, 1, 2, 4, ... and n-1, n-2, n-4, ... of the n ids laid end
        to end (for groups of one size; other lists: the first group)."""
        count, size = len(self), self.group_size
        n = count * size
        positions = sorted({0, *(p for k in range(n.bit_length()) for p in (1 << k, n - (1 << k)) if 0 <= p < n)}) if n else []
        if self._iota is not None:
            _, _, dims, perm = self._iota
            strides = [1] * len(dims)
            for d in range(len(dims) - 2, -1, -1):
                strides[d] = strides[d + 1] * dims[d + 1]
            return tuple(_transposed_iota_at(p, dims, perm, strides) for p in positions)
        groups = self._all()
        if any(len(g) != size for g in groups):
            return groups[0][:16]
        return tuple(groups[p // size][p % size] for p in positions)

    def __repr__(self) -> str:
        if self._groups is None:
            count, size, dims, perm = self._iota  # type: ignore[misc]
            return f"DeviceGroups(iota [{count},{size}]<=[{','.join(map(str, dims))}]T({','.join(map(str, perm))}))"
        return f"DeviceGroups({self._groups!r})"
