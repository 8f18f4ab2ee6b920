"""Byte counts for --max-peak-increase and their human form."""

from __future__ import annotations

import pytest

from hlo_dedup.analysis import parse_budget


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("4096", 4096),
        ("1e6", 1_000_000),
        ("512KiB", 512 * 1024),
        ("64MiB", 64 << 20),
        ("1.5GiB", 3 << 29),
        ("2TiB", 2 << 40),
        ("2GB", 2_000_000_000),
        ("1.5e3", 1500),
        (".5KiB", 512),
        ("10 mib", 10 << 20),
        ("7B", 7),
        (" 3kb ", 3000),
    ],
)
def test_accepted_forms(text: str, expected: int) -> None:
    assert parse_budget(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "1.5", "0.1KB.", "abc", "1e", "5 XB", "nan", "inf", "1e-1", "0x10"])
def test_rejected_forms_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="invalid byte count"):
        parse_budget(text)



@pytest.mark.parametrize("text", ["1e5000", "1" + "0" * 5000, "9223372036854775808", "1e19", "8388608TiB"])
def test_counts_past_int64_are_refused_without_building_them(text: str) -> None:
    with pytest.raises(ValueError, match="more than 9223372036854775807 bytes"):
        parse_budget(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("9223372036854775807", (1 << 63) - 1),
    ("0e99999999999999999999", 0),
    ("0.000", 0),
])
def test_the_edges_of_the_range(text: str, expected: int) -> None:
    assert parse_budget(text) == expected


def test_a_tiny_fraction_is_not_whole_bytes_at_any_exponent() -> None:
    with pytest.raises(ValueError, match="not a whole number of bytes"):
        parse_budget("1e-99999999999999999")
