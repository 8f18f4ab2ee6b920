"""A dict that computes a missing value once: the report's writers spell the same few field
names and sizes thousands of times."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class Memo(dict, Generic[_K, _V]):  # type: ignore[type-arg]
    """`memo[key]` is `make(key)`, made on first use and kept (a hit is a plain dict
    lookup); emptied when it holds `limit` values, so that odd inputs cannot grow it."""

    def __init__(self, make: Callable[[_K], _V], limit: int = 4096) -> None:
        super().__init__()
        self.make = make
        self.limit = limit

    def __missing__(self, key: _K) -> _V:
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.make(key)
        return value
