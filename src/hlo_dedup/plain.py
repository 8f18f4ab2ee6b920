"""Plain data records: compared and shown by their fields, copied with changes.

What a dataclass gives, written out: the `dataclasses` module imports `inspect` and compiles
each class's methods from source when the class is made, about a tenth of what every run of
the command spends before reading a byte. A subclass names its fields in `__slots__` (in
order) and sets each in `__init__`, whose parameters are the fields (so `replaced` goes
through its checks); a `FrozenRecord` sets them with `init_frozen`.
"""

from __future__ import annotations

from typing import TypeVar

_R = TypeVar("_R", bound="Record")


class Record:
    """Base of a record whose fields are its `__slots__`: equal when its fields are."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable: equal records may stop being so

    def fields(self) -> tuple[object, ...]:
        """The field values, in `__slots__` order."""
        return tuple([getattr(self, name) for name in self.__slots__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.fields() == other.fields()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def replaced(self: _R, **changes: object) -> _R:
        """A copy with some fields changed, made (and checked) by `__init__`."""
        unknown = set(changes).difference(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{name: changes.get(name, getattr(self, name)) for name in self.__slots__})


class FrozenRecord(Record):
    """An immutable record, hashed by its fields."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return _restore, (type(self), self.fields())


def init_frozen(record: FrozenRecord, *values: object) -> None:
    """Set a frozen record's fields to `values`, in `__slots__` order (from its `__init__`)."""
    for name, value in zip(record.__slots__, values):
        object.__setattr__(record, name, value)


def _restore(cls: type[_R], fields: tuple[object, ...]) -> _R:
    """Unpickle a frozen record: its fields as they were, without running `__init__` again."""
    record = object.__new__(cls)
    init_frozen(record, *fields)  # type: ignore[arg-type]
    return record
