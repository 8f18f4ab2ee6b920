"""A proto's stack-frame table is rebuilt as XLA rebuilds it, each frame once: a chain
thousands deep, named by thousands of instructions, costs its length, not its square."""

from __future__ import annotations

from typing import Any

import support

from hlo_dedup.io.formats import modules_from_bytes
from hlo_dedup.io.proto_text import _StackFrames

DEPTH = 3000


def _deep_frames_module() -> Any:
    """proto_module() with a DEPTH-deep chain of frames (frame k's parent is k - 1, each on
    its own line of a.py), its last frame named by the entry's `negate`."""
    module = support.proto_module()
    index = module.stack_frame_index
    index.file_names.append("a.py")
    index.function_names.append("f")
    for k in range(1, DEPTH + 1):
        index.file_locations.add(file_name_id=1, function_name_id=1, line=k)
        index.stack_frames.add(file_location_id=k, parent_frame_id=k - 1)
    for comp in module.computations:
        for ins in comp.instructions:
            if ins.name == "n":
                ins.metadata.stack_frame_id = DEPTH
    return module


class _CountingFrames(list):
    reads = 0

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        _CountingFrames.reads += 1
        return super().__getitem__(i)


def test_each_frame_of_a_deep_chain_is_read_once() -> None:
    index = _deep_frames_module().stack_frame_index
    counting = _CountingFrames(index.stack_frames)

    class Module:  # the table as the printer hands it over, its frames counted as they are read
        stack_frame_index = index

        @staticmethod
        def HasField(name: str) -> bool:  # noqa: N802 (protobuf's spelling)
            return name == "stack_frame_index"

    class Decoded:
        stack_frames = counting
        file_locations, file_names, function_names = index.file_locations, index.file_names, index.function_names

    class Reader:
        @staticmethod
        def decode(message: str, data: Any) -> Any:
            return Decoded()

    frames = _StackFrames(Module(), Reader())  # type: ignore[arg-type]
    ids = [frames._add(k) for k in range(1, DEPTH + 1)]  # every frame named by some instruction
    assert _CountingFrames.reads == DEPTH
    assert ids == list(range(1, DEPTH + 1))  # frame k's chain is k frames: new ids follow


def test_a_deep_chain_prints_whole() -> None:
    (module,) = modules_from_bytes(_deep_frames_module().SerializeToString(), "deep.pb")
    text = module.to_text()
    assert f"{DEPTH} {{file_location_id={DEPTH} parent_frame_id={DEPTH}}}" in text
    assert f"stack_frame_id={DEPTH}" in text
