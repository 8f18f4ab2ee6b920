"""Range add and range max over program points, in O(log n) per operation.

Pricing a fold changes the live bytes of whole instruction ranges (a buffer that now
lives longer, one that is gone) and asks for the peak after each change; recomputing
the profile would cost O(n) per fold. This is the bottom-up tree with one pending add
per internal node: ``_top[i]`` is the maximum over node i's range with node i's own
pending add included but not its ancestors'. Queries first push the pending adds
down the two boundary paths, after which every node a query reads is exact.
"""

from __future__ import annotations

_PADDING = -(1 << 62)  # leaves past n: never the maximum, whatever the real values become


class RangeAddMaxTree:
    """Values v[0..n) (n >= 1): ``add`` on [lo, hi], ``max`` on [lo, hi], ``peak``, ``argmax``."""

    __slots__ = ("_add", "_height", "_size", "_top", "n")

    def __init__(self, values: list[int]) -> None:
        n = len(values)
        if n == 0:
            raise ValueError("a tree needs at least one program point")
        size = 1
        height = 0
        while size < n:
            size <<= 1
            height += 1
        self.n = n
        self._size = size
        self._height = height
        # Level by level from the leaves, with C-level maps: node i's children are 2i, 2i+1,
        # so the levels laid end to end from the root are the array.
        level = list(values)
        level.extend([_PADDING] * (size - n))
        levels = [level]
        while len(level) > 1:
            level = list(map(max, level[0::2], level[1::2]))
            levels.append(level)
        top = [_PADDING]
        for level in reversed(levels):
            top.extend(level)
        self._top = top
        self._add = [0] * size  # pending adds of internal nodes (a leaf's lives in _top)

    def add(self, lo: int, hi: int, delta: int) -> None:
        """v[i] += delta for lo <= i <= hi (nothing if hi < lo)."""
        if hi < lo or delta == 0:
            return
        if lo < 0 or hi >= self.n:
            raise IndexError(f"range [{lo}, {hi}] outside [0, {self.n - 1}]")
        top, add, size = self._top, self._add, self._size
        left = lo + size
        right = hi + size + 1
        while left < right:
            if left & 1:
                top[left] += delta
                if left < size:
                    add[left] += delta
                left += 1
            if right & 1:
                right -= 1
                top[right] += delta
                if right < size:
                    add[right] += delta
            left >>= 1
            right >>= 1
        self._pull(lo + size)
        self._pull(hi + size)

    def peak(self) -> int:
        """The maximum over all program points."""
        return self._top[1]

    def max(self, lo: int, hi: int) -> int:
        """The maximum of v[lo..hi] (lo <= hi)."""
        if hi < lo or lo < 0 or hi >= self.n:
            raise IndexError(f"range [{lo}, {hi}] outside [0, {self.n - 1}] or empty")
        size = self._size
        self._push(lo + size)
        self._push(hi + size)
        top = self._top
        best = _PADDING
        left = lo + size
        right = hi + size + 1
        while left < right:
            if left & 1:
                if top[left] > best:
                    best = top[left]
                left += 1
            if right & 1:
                right -= 1
                if top[right] > best:
                    best = top[right]
            left >>= 1
            right >>= 1
        return best

    def argmax(self) -> int:
        """The first program point holding the maximum."""
        top, add, size = self._top, self._add, self._size
        node = 1
        while node < size:
            pending = add[node]
            if pending:
                self._apply(2 * node, pending)
                self._apply(2 * node + 1, pending)
                add[node] = 0
            node = 2 * node if top[2 * node] >= top[2 * node + 1] else 2 * node + 1
        return node - size

    def values(self) -> list[int]:
        """All n values (O(n); for tests and reports)."""
        for i in range(1, self._size):
            pending = self._add[i]
            if pending:
                self._apply(2 * i, pending)
                self._apply(2 * i + 1, pending)
                self._add[i] = 0
        return self._top[self._size : self._size + self.n]

    # ------------------------------------------------------------------ internals
    def _apply(self, node: int, delta: int) -> None:
        self._top[node] += delta
        if node < self._size:
            self._add[node] += delta

    def _pull(self, leaf: int) -> None:
        """Recompute the ancestors of `leaf` from their children."""
        top, add = self._top, self._add
        i = leaf >> 1
        while i:
            left = top[2 * i]
            right = top[2 * i + 1]
            top[i] = (left if left > right else right) + add[i]
            i >>= 1

    def _push(self, leaf: int) -> None:
        """Move the pending adds on the root-to-`leaf` path into the children."""
        add = self._add
        for shift in range(self._height, 0, -1):
            node = leaf >> shift
            pending = add[node]
            if pending:
                self._apply(2 * node, pending)
                self._apply(2 * node + 1, pending)
                add[node] = 0
