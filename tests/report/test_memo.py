"""report.memo.Memo: each value made once, and the memo bounded."""

from __future__ import annotations

from hlo_dedup.report.memo import Memo


def test_a_value_is_made_on_first_use_only_and_the_memo_empties_at_its_limit() -> None:
    made: list[int] = []

    def square(n: int) -> int:
        made.append(n)
        return n * n

    memo: Memo[int, int] = Memo(square, limit=3)
    assert [memo[2], memo[3], memo[2]] == [4, 9, 4] and made == [2, 3]
    assert memo.get(5) is None and made == [2, 3]  # get does not make
    memo[4], memo[5]  # the fourth value empties it first
    assert sorted(memo) == [5] and made == [2, 3, 4, 5]
