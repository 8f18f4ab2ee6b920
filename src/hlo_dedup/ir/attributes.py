"""Typed decoding of an instruction's raw attribute values, done on first access.

The IR keeps attributes as the text it was read from (XLA keeps a backend config as its
raw string the same way) and decodes a value only when a pass asks for it. Errors name
the file, line and column of the offending value, like parse errors do, because a bad
value is only discovered when a pass first reads it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..syntax.errors import HloParseError
from ..syntax.escape import c_unescape
from ..syntax.lexer import ScanError, attribute_value_end, split_attributes

if TYPE_CHECKING:
    from .instruction import HloInstruction
    from .metadata import OpMetadata
    from .replica_groups import ReplicaGroups

_INT = re.compile(r"-?\d+")
# Values that need no scanner: a word, an int list, a list of int lists, an iota device
# list; each must be followed by the next `, key=` or the end.
_PLAIN_VALUE = re.compile(
    r"(?:[\w.\-]+|\{[\d,]*\}|\{(?:\{[\d,]*\},?)*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)"
    r"(?=, [A-Za-z_][\w.\-]*=|$)"
)
_SLICE_DIM = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def _location(inst: HloInstruction, needle: str) -> tuple[str, int, int]:
    """File, line and column of `needle` inside `inst`'s source text (best effort)."""
    module = inst.module
    if module is None:
        return "<string>", 0, 0
    text = inst.source_line
    if text is None or module.source is None:
        return module.filename, 0, 0
    line, column = module.source.location(inst.span.start + max(text.find(needle), 0))
    return module.filename, line, column


def attribute_error(inst: HloInstruction, key: str, message: str) -> HloParseError:
    filename, line, column = _location(inst, key + "=")
    raw = inst.attr(key) if inst._attrs is not None else None
    return HloParseError(
        f"{message} (instruction {inst.name!r})",
        filename=filename,
        line=line,
        column=column,
        snippet=(raw or "")[:40],
    )


def instruction_error(inst: HloInstruction, message: str) -> HloParseError:
    """An HloParseError about `inst` as a whole, located at its opcode."""
    filename, line, column = _location(inst, inst.opcode + "(")
    return HloParseError(message, filename=filename, line=line, column=column)


def attribute_value_at(inst: HloInstruction, start: int, key: str) -> str | None:
    """The raw value of `key` starting at `start` of the unsplit attribute text, or None
    to let the caller split the whole list (which reports any malformed text)."""
    text = inst._attr_text or ""
    quick = _PLAIN_VALUE.match(text, start)
    if quick is not None:
        return quick.group()
    try:
        end = attribute_value_end(text, start, key)
    except ScanError:
        return None
    return text[start:end] if end > start else None


def split_attribute_text(inst: HloInstruction) -> list[tuple[str, str]]:
    text = inst._attr_text or ""
    try:
        attrs, end = split_attributes(text, 0)
    except ScanError as e:
        filename, line, column = _location(inst, text[e.offset : e.offset + 8] or ",")
        raise HloParseError(e.message, filename=filename, line=line, column=column) from None
    return [(k, v) for k, v, _ in attrs]


def _int_list(inst: HloInstruction, key: str, raw: str) -> tuple[int, ...]:
    body = raw.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise attribute_error(inst, key, f"expected {{int,...}} for {key}")
    items = [t.strip() for t in body[1:-1].split(",") if t.strip()]
    if not all(_INT.fullmatch(t) for t in items):
        raise attribute_error(inst, key, f"expected integers in {key}")
    return tuple(int(t) for t in items)


def decode_dimensions(inst: HloInstruction) -> tuple[int, ...]:
    raw = inst.attr("dimensions")
    return () if raw is None else _int_list(inst, "dimensions", raw)


def decode_int_attr(inst: HloInstruction, key: str) -> int:
    raw = inst.attr(key)
    if raw is None or not _INT.fullmatch(raw.strip()):
        raise attribute_error(inst, key, f"expected integer attribute {key}=N")
    return int(raw)


def decode_channel_id(inst: HloInstruction) -> int | None:
    raw = inst.attr("channel_id")
    if raw is None:
        return None
    value = decode_int_attr(inst, "channel_id")
    return value if value > 0 else None


def decode_bool_attr(inst: HloInstruction, key: str) -> bool:
    raw = inst.attr(key)
    if raw is None:
        return False
    if raw not in ("true", "false"):
        raise attribute_error(inst, key, f"expected true or false for {key}")
    return raw == "true"


def decode_string(inst: HloInstruction, key: str, raw: str) -> str:
    if len(raw) < 2 or raw[0] not in "\"'" or raw[-1] != raw[0]:
        raise attribute_error(inst, key, f"expected a quoted string for {key}")
    try:
        return c_unescape(raw[1:-1])
    except ValueError as e:
        raise attribute_error(inst, key, f"bad escape in {key}: {e}") from None


def decode_string_attr(inst: HloInstruction, key: str) -> str:
    raw = inst.attr(key)
    return "" if raw is None else decode_string(inst, key, raw)


def decode_backend_config(inst: HloInstruction) -> str:
    """Raw string form: a JSON dict verbatim, or the unescaped quoted string."""
    raw = inst.attr("backend_config")
    if raw is None:
        return ""
    if raw.startswith("{"):
        return raw
    return decode_string(inst, "backend_config", raw)


def decode_parameter_number(inst: HloInstruction) -> int:
    payload = (inst.payload or "").strip()
    if inst.opcode != "parameter" or not payload.isdigit():
        raise attribute_error(inst, "parameter", "not a parameter(N) instruction")
    return int(payload)


def decode_slice(inst: HloInstruction) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    raw = inst.attr("slice")
    if raw is None:
        raise attribute_error(inst, "slice", "slice needs slice={[start:limit:stride], ...}")
    body = raw.strip()
    dims = _SLICE_DIM.findall(body)
    rebuilt = re.sub(r"\s+", "", body)
    expected = "{" + ",".join(
        f"[{a}:{b}" + (f":{c}]" if c else "]") for a, b, c in dims
    ) + "}"
    if rebuilt != expected:
        raise attribute_error(inst, "slice", "malformed slice={[start:limit:stride], ...}")
    starts = tuple(int(a) for a, _, _ in dims)
    limits = tuple(int(b) for _, b, _ in dims)
    strides = tuple(int(c) if c else 1 for _, _, c in dims)
    return starts, limits, strides


def decode_replica_groups(inst: HloInstruction) -> ReplicaGroups:
    from .replica_groups import ReplicaGroups

    raw = inst.attr("replica_groups")
    try:
        return ReplicaGroups.parse(raw if raw is not None else "{}")
    except ValueError as e:
        raise attribute_error(inst, "replica_groups", f"bad replica_groups: {e}") from None


def decode_frontend_attributes(inst: HloInstruction) -> dict[str, str]:
    raw = inst.attr("frontend_attributes")
    if raw is None:
        return {}
    body = raw.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise attribute_error(inst, "frontend_attributes", "expected {key=value,...}")
    inner = body[1:-1]
    try:
        pairs, end = split_attributes("," + inner, 0)
    except ScanError as e:
        raise attribute_error(inst, "frontend_attributes", e.message) from None
    if ("," + inner)[end:].strip():
        raise attribute_error(inst, "frontend_attributes", "expected key=value entries")
    out: dict[str, str] = {}
    for key, value, _ in pairs:
        out[key] = value if value.startswith("{") else decode_string(inst, "frontend_attributes", value)
    return out


def decode_metadata(inst: HloInstruction) -> OpMetadata:
    from .metadata import OpMetadata

    return OpMetadata.parse(inst.attr("metadata"))
