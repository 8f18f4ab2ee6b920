"""What a file holds, from its first bytes: HLO text, an HLO proto (binary or text), or not HLO.

Used to find the modules in a directory without parsing every file (and without jax, which
proto reading needs): HLO text starts with `HloModule <name>` after any comments; a text
proto with `hlo_module {` / `hlo {` or `name: ...` followed by `computations {`; a binary proto
is walked at the wire level, as hlo-opt's loader tries the containers: an `HloSnapshot`
(field 1: an `HloProto`), an `HloProto` (field 1: an `HloModuleProto`) or an
`HloModuleProto` whose field 1 is its name (UTF-8) and whose field 3 holds computations,
each starting with its own name. XLA and protobuf write fields in number order, so the name
and the first computation sit at the start of the file: only its first 64 KiB are read.

The verdict is a sniff, not a parse: a file that passes can still fail to load, and is then
reported as a failure, which is what it is.
"""

from __future__ import annotations

import gzip
import mmap
import os
import re
import zlib
from dataclasses import dataclass

from ..syntax.foreign import is_mlir_text
from .formats import GZIP_SUFFIX, looks_like_text, read_varint

HEAD_BYTES = 64 * 1024
# Possessive where blank space and comments repeat: a head of blank space that leads
# elsewhere must fail at once, not try every way of splitting it (2**n for n spaces).
_TEXT_START = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s++|//[^\n]*+|/\*.*?\*/)*+HloModule\s+(\"(?:[^\"\\]|\\.)*\"|[^\s,]+)",
                         re.S)
_PBTXT_WRAPPER = re.compile(rb"\A(?:\s++|#[^\n]*+)*+(hlo_module|hlo)\s*\{")
_PBTXT_MODULE = re.compile(rb"\A(?:\s++|#[^\n]*+)*+name\s*:\s*\"((?:[^\"\\]|\\.)*)\"")
_PBTXT_COMPUTATIONS = re.compile(rb"^\s*computations\s*\{", re.M)
_PBTXT_NAME = re.compile(rb"\bname\s*:\s*\"((?:[^\"\\]|\\.)*)\"")
#: Neuron's wrapper of a compiled NEFF: an HLO module whose entry is one custom-call to this.
NEFF_WRAPPER_TARGET = b"AwsNeuronNeff"
_MAX_FIELDS = 64  # top-level fields looked at before the module's name and first computation
_UNKNOWN_END = 1 << 62  # `data` may be only the head of the file: its outer message ends who knows where


@dataclass(frozen=True)
class Content:
    """What a file holds. `format`: hlo, pb or pbtxt for an HLO module, None for anything
    else; `module`: the module's name where the sniff saw it; `what`: for a file that is not
    HLO, what it is instead."""

    format: str | None
    module: str | None = None
    what: str = ""

    @property
    def is_hlo(self) -> bool:
        return self.format is not None


def head(path: str, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a file, decompressed first if it is named `*.gz`."""
    if path.lower().endswith(GZIP_SUFFIX):
        try:
            with gzip.open(path, "rb") as f:
                return f.read(size)
        except (EOFError, zlib.error, gzip.BadGzipFile):
            with open(path, "rb") as f:  # not gzip after all, or cut short: judge the raw bytes
                return f.read(size)
    with open(path, "rb") as f:
        return f.read(size)


def sniff(data: bytes) -> Content:
    """What the head `data` of a file says it holds."""
    if not data:
        return Content(None, what="an empty file")
    if looks_like_text(data):
        match = _TEXT_START.match(data)
        if match is not None:
            return Content("hlo", _unquote(match.group(1)))
        if _PBTXT_WRAPPER.match(data):
            name = _PBTXT_NAME.search(data)
            return Content("pbtxt", _unquote(name.group(1)) if name else None)
        name = _PBTXT_MODULE.match(data)
        if name is not None and _PBTXT_COMPUTATIONS.search(data):
            return Content("pbtxt", _unquote(name.group(1)))
        if is_mlir_text(data[:4096].decode("utf-8", "replace")):
            return Content(None, what="MLIR (StableHLO) text, not HLO text")
        return Content(None, what="text that is not HLO (no HloModule header)")
    for wrappers in (2, 1, 0):  # HloSnapshot, HloProto, HloModuleProto, as hlo-opt tries them
        name = _module_name(data, 0, _UNKNOWN_END, wrappers)
        if name is not None:
            return Content("pb", name)
    return Content(None, what="binary data that is not an HLO proto")


_FORMAT_NAMES = {"hlo": "HLO text", "pb": "a binary HLO proto", "pbtxt": "an HLO text proto"}


def held_instead(data: bytes, read_as: str) -> str:
    """For a file that failed to read as `read_as`: what its head says it holds instead
    (HLO text saved as `.pb`, a binary proto named `.pbtxt`) and how to read it so, as a
    clause to append to the error; "" when it says nothing else."""
    held = sniff(data[:HEAD_BYTES]).format
    if held is None or held == read_as:
        return ""
    return f"; the file holds {_FORMAT_NAMES[held]}: name it .{held} or give --format={held}"


def contains(path: str, needle: bytes) -> bool:
    """Whether the (decompressed) file holds `needle` anywhere: a scan, not a parse. A file
    that cannot be read holds nothing (reading it for real reports why)."""
    try:
        if path.lower().endswith(GZIP_SUFFIX):
            tail = b""
            with gzip.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    if needle in tail + chunk:
                        return True
                    tail = chunk[-len(needle) + 1:]
            return False
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return view.find(needle) >= 0
    except (OSError, EOFError, zlib.error, ValueError):
        return False


def _unquote(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return text.replace('\\"', '"')


# ------------------------------------------------------------------------------------------
# The protobuf wire format, just enough to recognise the three containers


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    found = read_varint(data, pos)
    if found is None:
        raise _Malformed
    return found


def _fields(data: bytes, start: int, end: int):  # noqa: ANN202 - yields (number, wire type, payload start, payload end)
    """The fields of the message in data[start:end]; `end` may lie past the bytes we have
    (a head), in which case the walk stops where they run out."""
    pos = start
    for _ in range(_MAX_FIELDS):
        if pos >= min(end, len(data)):
            return
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Malformed
        if wire == 0:
            _, after = _varint(data, pos)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == 2:
            length, pos = _varint(data, pos)
            after = pos + length
        else:  # groups (3, 4) are not used by these messages; 6 and 7 do not exist
            raise _Malformed
        if after > end:
            raise _Malformed
        yield number, wire, pos, after
        pos = after


def _module_name(data: bytes, start: int, end: int, wrappers: int) -> str | None:
    """The name of the HloModuleProto in data[start:end] below `wrappers` field-1 wrappers,
    or None if it does not look like one."""
    try:
        if wrappers:
            for number, wire, begin, after in _fields(data, start, end):
                if number == 1:
                    return _module_name(data, begin, after, wrappers - 1) if wire == 2 else None
            return None
        name = None
        for number, wire, begin, after in _fields(data, start, end):
            if number in (1, 2, 3) and wire != 2:
                return None
            if number == 1:
                name = _text(data[begin:after])
                if name is None:
                    return None
            elif number == 3:
                return name if name and _is_computation(data, begin, after) else None
        return None
    except _Malformed:
        return None


def _is_computation(data: bytes, start: int, end: int) -> bool:
    """An HloComputationProto starts with its name (field 1, UTF-8)."""
    for number, wire, begin, after in _fields(data, start, end):
        return number == 1 and wire == 2 and after <= len(data) and bool(_text(data[begin:after]))
    return False


def _text(raw: bytes) -> str | None:
    if len(raw) > 1024:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


__all__ = ["Content", "HEAD_BYTES", "NEFF_WRAPPER_TARGET", "contains", "head", "sniff"]
