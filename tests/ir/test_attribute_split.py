"""The one-regex split of attribute lists in XLA's printed form against the careful scanner.

`split_printed` may decline any text (the careful split then reads it), but a list it does
split must be exactly the careful split's, on real modules and on generated texts full of
what makes the careful scanner work: strings holding commas and brackets, comments, nested
groups, raw-JSON backend configs, values of several tokens.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import corpus_instructions
from hlo_dedup.ir.attributes import split_printed
from hlo_dedup.syntax.lexer import ScanError, split_attributes


def careful(text: str) -> list[tuple[str, str]] | None:
    try:
        attrs, _ = split_attributes(text, 0)
    except ScanError:
        return None
    return [(k, v) for k, v, _ in attrs]


def test_corpus_attribute_lists_split_as_the_careful_scanner_does() -> None:
    checked = declined = 0
    for inst in corpus_instructions():
        text = inst._attr_text
        if not text:
            continue
        fast = split_printed(text)
        if fast is None:
            declined += 1
            continue
        checked += 1
        assert fast == careful(text), (inst.parent.name, inst.name, text)
    assert checked > 1000
    assert declined < checked / 100  # XLA's printed form is what modules hold


_NAMES = st.sampled_from(["dimensions", "replica_groups", "device_ids", "metadata", "backend_config", "sharding",
                          "frontend_attributes", "calls", "channel_id", "slice", "x.y-z", "ROOT"])
_STRINGS = st.text(alphabet='ab, {}[]()/*\'"\\=\n', max_size=8).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')
#: Mostly what XLA prints, with a good share of what it does not (texts the fast split must
#: decline or split exactly as the careful scanner does).
_PIECES = st.one_of(
    st.sampled_from(["0", "true", "%a.1", "b01f_01io->b01f", "<=", "mesh", "T", "{0,1}", "[2,4]", "(1,0)",
                     "{{0},{1}}", "{}", "'q'", '{"a":[1,"}"]}', "{op_name=\"x, y=1\" stack_frame_id=3}",
                     "{devices=[2,1]<=[2]}", "{a={b=(1)}}"]),
    st.sampled_from([", device_ids=", ", device_ids=(0,1)", "ROOT", "L.1@2:4", "-1", "a/b", "{", "}", "[", "]", "(", ")", ",", ", ", ", k=", "=",
                     " ", "  ", "/*c*/", "//c\n", "\n", "'", "{{{0}}}"]),
    _STRINGS,
)
_VALUES = st.lists(_PIECES, min_size=1, max_size=5).map("".join)
_TEXTS = st.lists(st.tuples(st.sampled_from([", "] * 8 + [",", " , ", ", /*c*/ "]), _NAMES,
                            st.sampled_from(["="] * 8 + ["= ", "=="]), _VALUES), max_size=4).map(
    lambda parts: "".join(sep + name + eq + value for sep, name, eq, value in parts))


@given(_TEXTS)
def test_generated_attribute_lists_split_as_the_careful_scanner_does(text: str) -> None:
    fast = split_printed(text)
    if fast is not None:
        assert fast == careful(text)


@given(_TEXTS)
def test_a_text_the_shallow_pattern_tiles_is_tiled_the_same_by_the_deep_one(text: str) -> None:
    from hlo_dedup.ir.attributes import _UNTILED, _tile

    shallow = _tile(text, 1)
    if shallow is not _UNTILED:
        assert shallow == _tile(text, 2)


@pytest.mark.parametrize("text", [
    ", channel_id=7, replica_groups={{0,1},{2,3}}, dimensions={0}",  # shallow: the list of lists
    ", sharding={devices=[2,1]<=[2]}, metadata={op_name=\"a(b)\"}",  # deep: a group in a group
    ", x={{0,1} ,{2}}",
])
def test_both_depths_split_as_the_careful_scanner_does(text: str) -> None:
    assert split_printed(text) == careful(text)


@pytest.mark.parametrize("text", [
    (", channel_id=1, replica_groups=mesh['axis_0'=8] {'axis_0'}, dimensions={0}, use_global_device_ids=true, "
     'metadata={op_name="jit(train_step)/jvp()/sharding_constraint" stack_frame_id=12}'),
    ", replica_groups=[2,4]<=[8]T(1,0), dimensions={1}",
    ', backend_config={"a":[1,"}, c=2"]}, custom_call_target="x"',
    ", slice={[0:2], [0:4:2]}, sharding={devices=[2,1]<=[2]}",
    ", dim_labels=b01f_01io->b01f, window={size=3x3 pad=1_1x1_1}",
    ", channel_id=1, replica_groups=mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}, dimensions={0}",
    ", replica_groups=mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'x'}, use_global_device_ids=true",
])
def test_printed_lists_are_split(text: str) -> None:
    fast = split_printed(text)
    assert fast is not None and fast == careful(text)


@pytest.mark.parametrize("text", [
    ", calls=%a, %b",  # a comma that does not start an attribute: the careful scanner's call
    ", x=1 /*c*/",
    ", x={a /*}*/}",
    ",x=1",
    ", x= 1",
    ", x=a ROOT",
    ", backend_config={'a': '}'}",  # raw JSON: `'` is no quote there
    ", x={{{{0}}}}",  # deeper than the pattern's groups
])
def test_other_forms_are_left_to_the_careful_scanner(text: str) -> None:
    assert split_printed(text) is None


@pytest.mark.parametrize("ids", ["([2,4]T(1,0))", "(0,2,4,6,1,3,5,7)", "([8])"])
def test_a_mesh_keeps_its_device_ids_in_both_splits(ids: str) -> None:
    # XLA's mesh reader takes `, device_ids=(...) {axes}` as part of the replica groups.
    text = f", channel_id=1, replica_groups=mesh['a'=4,'b'=2], device_ids={ids} {{'a'}}, dimensions={{0}}"
    expected = [("channel_id", "1"), ("replica_groups", f"mesh['a'=4,'b'=2], device_ids={ids} {{'a'}}"),
                ("dimensions", "{0}")]
    assert careful(text) == expected
    assert split_printed(text) == expected


def test_device_ids_after_another_attribute_is_left_to_the_careful_scanner() -> None:
    assert split_printed(", dimensions=0, replica_groups=, device_ids=") is None  # no groups before the ids
    assert careful(", dimensions=0, replica_groups=, device_ids=") is None
    text = ", dimensions={0}, device_ids=(0,1)"
    assert split_printed(text) is None
    assert careful(text) == [("dimensions", "{0}"), ("device_ids", "(0,1)")]
