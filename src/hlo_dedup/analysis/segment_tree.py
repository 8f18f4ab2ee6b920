"""Range add and range maximum over program points, in O(log n) per operation.

Pricing a fold changes the live bytes of whole instruction ranges (a buffer that now
lives longer, one that is gone) and asks for the peak after each change; recomputing
the profile would cost O(n) per fold. This is the bottom-up tree with one pending add
per internal node: ``_top[i]`` is the maximum over node i's range with node i's own
pending add included but not its ancestors'. Adds commute with max, so pending adds
never move: a query adds those of the ancestors of the nodes it reads, and the argmax
descent compares siblings, which share every ancestor's add. Each operation is a few
loops of the tree's height in plain Python.
"""

from __future__ import annotations

_PADDING = -(1 << 62)  # leaves past n: never the maximum, whatever the real values become


class RangeAddMaxTree:
    """Values v[0..n) (n >= 1): ``add`` on [lo, hi], ``peak``, ``argmax``, and ``reaches``:
    whether the maximum on [lo, hi] is at least a value."""

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
        # Level by level from the leaves: node i's children are 2i, 2i+1, so the levels laid
        # end to end from the root are the array. (A comprehension, not map(max, ...): the
        # builtin's argument handling costs more than the comparison.) Only the nodes over
        # real values are compared: the rest of each level is padding, and a last real
        # node whose sibling is padding is its parent's value.
        level = values
        levels = [level]
        while len(level) > 1:
            odd = level[-1] if len(level) & 1 else None
            level = [a if a >= b else b for a, b in zip(level[0::2], level[1::2])]
            if odd is not None:
                level.append(odd)
            levels.append(level)
        top = [_PADDING]
        width = 1
        for level in reversed(levels):
            top.extend(level)
            top.extend([_PADDING] * (width - len(level)))
            width <<= 1
        self._top = top
        self._add = [0] * (2 * size)  # pending adds of internal nodes (a leaf's lives in _top)

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
                add[left] += delta  # a leaf's entry is never read
                left += 1
            if right & 1:
                right -= 1
                top[right] += delta
                add[right] += delta
            left >>= 1
            right >>= 1
        # Recompute the ancestors of both boundary leaves, bottom up: two paths until they
        # meet (their parents differ for bit_length(i ^ j) - 1 levels), then one to the
        # root. A child and its sibling are c and c ^ 1.
        i = lo + size
        j = hi + size
        apart = (i ^ j).bit_length() - 1
        for _ in range(apart):
            a = top[i]
            b = top[i ^ 1]
            i >>= 1
            top[i] = (a if a > b else b) + add[i]
            a = top[j]
            b = top[j ^ 1]
            j >>= 1
            top[j] = (a if a > b else b) + add[j]
        for _ in range(self._height - max(apart, 0)):
            a = top[i]
            b = top[i ^ 1]
            i >>= 1
            top[i] = (a if a > b else b) + add[i]

    def peak(self) -> int:
        """The maximum over all program points."""
        return self._top[1]

    def reaches(self, lo: int, hi: int, value: int) -> bool:
        """Whether max(v[lo..hi]) >= value (lo <= hi). Descends from the root into the nodes
        that reach `value` and overlap [lo, hi] in part, at most two a level; when `value`
        is the peak, that is the path to each peak point until it leaves the range, so a
        range far from the peak is answered a few levels down."""
        if hi < lo or lo < 0 or hi >= self.n:
            raise IndexError(f"range [{lo}, {hi}] outside [0, {self.n - 1}] or empty")
        top, add = self._top, self._add
        stack = [(1, 0, self._size, 0)]  # node, its first leaf, its leaf count, adds above it
        while stack:
            node, first, span, above = stack.pop()
            if top[node] + above < value or first > hi or first + span <= lo:
                continue
            if lo <= first and first + span - 1 <= hi:
                return True
            # Only part of the node is in range, so it is not a leaf.
            above += add[node]
            span >>= 1
            stack.append((2 * node + 1, first + span, span, above))
            stack.append((2 * node, first, span, above))
        return False

    def argmax(self) -> int:
        """The first program point holding the maximum."""
        top = self._top
        node = 1
        for _ in range(self._height):
            node <<= 1
            if top[node] < top[node + 1]:
                node += 1
        return node - self._size

    def values(self) -> list[int]:
        """All n values (O(n); for tests and reports)."""
        top, add, size = self._top, self._add, self._size
        above = [0] * (2 * size)  # the pending adds of each node's ancestors
        for i in range(2, 2 * size):
            above[i] = above[i >> 1] + add[i >> 1]
        return [top[i] + above[i] for i in range(size, size + self.n)]
