"""Where an instruction came from: metadata and stack-frame tables decode what they can."""

from __future__ import annotations

from hlo_dedup.ir.metadata import OpMetadata, StackFrameIndex, program_location

HUGE = "9" * 5000


def test_ordinary_fields_decode() -> None:
    m = OpMetadata.parse('{op_type="dot" op_name="jit(f)/dot" source_file="a.py" source_line=12 source_column=3}')
    assert (m.op_type, m.op_name, m.source_file, m.source_line, m.source_column) == ("dot", "jit(f)/dot", "a.py", 12, 3)
    assert str(program_location(m, None)) == "a.py:12"


def test_a_number_past_int64_is_left_out_not_an_error() -> None:
    # int() refuses 4,300 digits; XLA's fields are int64: such a value is unreadable.
    m = OpMetadata.parse(f'{{op_name="x" source_file="a.py" source_line={HUGE} stack_frame_id={HUGE}}}')
    assert (m.op_name, m.source_line, m.stack_frame_id) == ("x", 0, 0)
    assert OpMetadata.parse("{source_line=12345678901234567890}").source_line == 0
    assert OpMetadata.parse("{source_line=1234567890123456789}").source_line == 1234567890123456789


def test_stack_frame_tables_with_huge_ids_keep_the_readable_entries() -> None:
    head = (f'FileNames\n1 "a.py"\n{HUGE} "b.py"\nFunctionNames\n1 "f"\nFileLocations\n'
            f"1 {{file_name_id=1 function_name_id=1 line={HUGE}}}\n2 {{file_name_id=1 function_name_id=1 line=7}}\n"
            "StackFrames\n1 {file_location_id=2 parent_frame_id=0}\n")
    index = StackFrameIndex.parse(head)
    assert index.files == {1: "a.py"}
    assert str(index.frame(1)) == "a.py:7"
    assert index.locations[1] == {"file_name_id": 1, "function_name_id": 1}


def test_a_long_op_name_decodes_in_linear_memory() -> None:
    import tracemalloc

    name = "x" * (2 << 20)
    raw = f'{{op_name="{name}\\"q" source_file="a.py" source_line=3}}'
    tracemalloc.start()
    try:
        m = OpMetadata.parse(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.op_name == name + '"q' and m.source_line == 3
    # The decoded copy and a little more: a backtracking string pattern took ~80x the input.
    assert peak < 4 * len(raw)
