"""Typed decoding of an instruction's raw attribute values, done on first access.

The IR keeps attributes as the text it was read from (XLA keeps a backend config as its
raw string the same way) and decodes a value only when a pass asks for it. Each decoder
reads exactly the syntax XLA's parser accepts for that attribute (whitespace and comments
between tokens included) and raises HloParseError located at the offending character, as
a parse error would be, because a bad value is only discovered when a pass first reads it.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any
from weakref import ref

from ..syntax.cursor import TextCursor, TextSyntaxError
from ..syntax.errors import HloParseError
from ..syntax.escape import c_unescape
from ..syntax.lexer import MESH_DEVICE_IDS, ScanError, attribute_value_end, split_attributes
from .shape_inference import infer_shape
from .shape_reader import parse_shape

if TYPE_CHECKING:
    from .instruction import HloInstruction
    from .metadata import OpMetadata
    from .replica_groups import ReplicaGroups
    from .shape import Shape

# Values that need no scanner: a word, an int list, a list of int lists, an iota device
# list; each must be followed by the next `, key=` or the end.
_PLAIN_VALUE = re.compile(
    r"(?:[\w.\-]+|\{[\d,]*\}|\{(?:\{[\d,]*\},?)*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)"
    r"(?=, [A-Za-z_][\w.\-]*=|$)"
)
_VALUE_START = re.compile(r"[^\s/,]")
# Integers and integer lists as XLA prints them, short enough to fit int64 whatever their
# digits: read with int() instead of a cursor (anything else takes the cursor's path).
_PLAIN_INT = re.compile(r"-?[0-9]{1,18}")
_PLAIN_INT_LIST = re.compile(r"\{(?:-?[0-9]{1,18}(?:,-?[0-9]{1,18})*)?\}")
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|\'[^\'\\]*+(?:\\.[^\'\\]*+)*+\'', re.S)


# ------------------------------------------------------------------------ locations
def _location(inst: HloInstruction, key: str | None, offset: int) -> tuple[str, int, int]:
    """File, line and column of character `offset` of attribute `key`'s raw value (of the
    instruction itself when `key` is None or the value is not in the source any more)."""
    module = inst.module
    source = module.source if module is not None else None
    if source is None:
        return (module.filename if module is not None else "<string>"), 0, 0
    at = _value_offset(inst, key) if key is not None else None
    if at is None:
        written_in = _written_in(inst)
        if written_in is None:  # made by a pass from nothing in the text: its computation
            comp = inst.parent
            at = comp.span.start if comp is not None and comp.span is not None else 0
        else:  # the opcode, if the line is still as written (after ` = `: names hold no `(`)
            written = written_in.source_line or ""
            found = written.find(inst.opcode + "(", written.find("=") + 1) if written_in is inst else -1
            at = written_in.span.start + max(found, 0)
        offset = 0
    line, column = source.location(at + offset)
    return module.filename, line, column  # type: ignore[union-attr]


def _written_in(inst: HloInstruction) -> HloInstruction | None:
    """The instruction whose line holds `inst`: itself, or for a nested operand its host and
    for a compact GTE (`%t#0`) its first user, outwards until one has a line of its own."""
    while inst.span.start < 0:
        span = inst.span
        if span.host is not None:
            inst = span.host
        elif span.compact_gte_base is not None and inst.user_count:
            inst = inst.users[0]
        else:
            return None
    return inst if inst.span.start >= 0 else None


def _value_offset(inst: HloInstruction, key: str) -> int | None:
    """Source offset where the raw value of `key` starts, while the attribute list is the
    source's; found again on this error path only."""
    tail = inst.span.tail_start
    text = inst._attr_text
    if tail < 0 or text is None:
        return None
    try:
        attrs, _ = split_attributes(text, 0)
    except ScanError:
        attrs = []
    for k, _, at in attrs:
        if k == key:
            return tail + at
    at = text.find(key + "=")
    return None if at < 0 else tail + at + len(key) + 1


def attribute_error(inst: HloInstruction, key: str, message: str, offset: int = 0) -> HloParseError:
    """An HloParseError at character `offset` of attribute `key`'s raw value."""
    filename, line, column = _location(inst, key, offset)
    return HloParseError(f"{message} (instruction {inst.name!r})", filename=filename, line=line, column=column)


def instruction_error(inst: HloInstruction, message: str) -> HloParseError:
    """An HloParseError about `inst` as a whole, located where it is written."""
    filename, line, column = _location(inst, None, 0)
    return HloParseError(message, filename=filename, line=line, column=column)


# ------------------------------------------------------------------------ raw values
def attribute_value_at(inst: HloInstruction, start: int, key: str) -> str | None:
    """The raw value of `key` starting at `start` of the unsplit attribute text, or None
    to let the caller split the whole list (which reports any malformed text)."""
    text = inst._attr_text or ""
    quick = _PLAIN_VALUE.match(text, start)
    if quick is not None:
        return quick.group()
    if _VALUE_START.match(text, start) is None:
        return None  # trivia first: the full split gives the value without it
    try:
        end = attribute_value_end(text, start, key)
    except ScanError:
        return None
    return text[start:end] if end > start else None


def _printed_attribute_pattern(depth: int) -> re.Pattern[str]:
    """`, key=value` as XLA prints it: the value is words, `<=`, quoted strings and bracket
    groups (nested at most `depth` deep, no comment in them; one deep also takes XLA's
    list of integer lists, `{{0,1},{2,3}}`) with at most one space between them, and ends
    where the next `, key=` or the text does. Built on first use (milliseconds: the
    deeper, the longer); possessive everywhere, so a text it does not fit fails at once."""
    string = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|\'[^\'\\]*+(?:\\.[^\'\\]*+)*+\''
    inner = rf'[^"\'{{}}\[\]()/]++|{string}'
    for _ in range(depth):
        group = rf"\{{(?:{inner})*+\}}|\[(?:{inner})*+\]|\((?:{inner})*+\)"
        inner = rf"{inner}|{group}"
    lists = r"\{(?:\{[0-9,]*+\}(?:,\{[0-9,]*+\})*+)?\}|" if depth == 1 else ""
    part = rf"%?(?:[A-Za-z0-9_.]++|->?)++|<=|, {MESH_DEVICE_IDS}|{string}|{lists}{group}"
    name = r"[A-Za-z_][A-Za-z0-9_.\-]*+"
    return re.compile(rf", ({name})=(?![= ])((?: ?(?:{part}))++)(?=, {name}=(?!=)|\Z)")


_MESH_IDS_PART = ", " + MESH_DEVICE_IDS

#: The patterns by depth, built when first needed.
_PRINTED_ATTRIBUTE: dict[int, re.Pattern[str]] = {}


#: Split pieces by text: XLA repeats a layer's attribute tails layer after layer, and the
#: metadata that ends most of them even where the heads differ (`channel_id=N`).
_PIECES: dict[str, tuple[tuple[str, str], ...] | None] = {}
_METADATA_KEY = ", metadata="
#: A leading attribute whose value is one plain word (`, channel_id=7`, `, calls=%f.3`): the
#: printed-form pattern reads it as exactly this value, since no value goes on past `, `
#: (but a mesh's `, device_ids=`, which is left to the pattern).
_PLAIN_ATTRIBUTE = re.compile(
    r", ([A-Za-z_][A-Za-z0-9_.\-]*+)=(%?[A-Za-z0-9_.\-]++)(?=, (?!device_ids=)[A-Za-z_][A-Za-z0-9_.\-]*+=(?!=)|\Z)"
)


def split_printed(text: str) -> list[tuple[str, str]] | None:
    """The `(key, raw value)` pairs of an attribute text in XLA's printed form, the same as
    the careful split gives; None for any other text (comments, other spacing, values the
    careful scanner must read token by token), which the careful split then reads. One
    regex match per attribute instead of a scan per character.

    The text is read as two pieces split before `, metadata=`; when both tile, so does the
    whole, the same way (no value reaches across the cut: an open bracket or string keeps
    the first piece from tiling, and no value goes on past a top-level `, `). Otherwise the
    whole text is read. Each piece is remembered by its text, after the leading attributes
    with a plain value (a channel id, a called computation) that keep a head unique."""
    cut = text.find(_METADATA_KEY)
    if cut > 0:
        head = _read_piece(text[:cut])
        if head is not None:
            rest = _read_piece(text[cut:])
            if rest is not None:
                return head + rest
    return _read_piece(text)


def _read_piece(text: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        piece = text[pos:] if pos else text
        found = _PIECES.get(piece, False)
        if found is not False:
            break
        plain = _PLAIN_ATTRIBUTE.match(text, pos)
        if plain is None or "ROOT" in plain.group(2):  # ROOT ends a value: the whole split declines
            if len(_PIECES) >= 8192:
                _PIECES.clear()
            found = _PIECES[piece] = _split_printed(piece)
            break
        out.append(plain.groups())  # type: ignore[arg-type]
        pos = plain.end()
    if found is None:
        return None
    out.extend(found)  # type: ignore[arg-type]
    return out


def _split_printed(text: str) -> tuple[tuple[str, str], ...] | None:
    """One piece split in printed form: with groups one deep (what most values hold, and a
    third of the cost to build), and only where that does not tile it, two deep. A value
    the shallow pattern reads whole, the deep one reads the same way (its extra choices
    start only at a bracket the shallow one cannot take inside a group)."""
    found = _tile(text, 1)
    if found is _UNTILED:
        found = _tile(text, 2)
    return None if found is _UNTILED else found  # type: ignore[return-value]


_UNTILED = object()


def _tile(text: str, depth: int) -> tuple[tuple[str, str], ...] | object | None:
    """The pairs, None where a value says the careful split must read the text, or
    `_UNTILED` where the pattern of `depth` does not tile it."""
    pattern = _PRINTED_ATTRIBUTE.get(depth)
    if pattern is None:
        pattern = _PRINTED_ATTRIBUTE[depth] = _printed_attribute_pattern(depth)
    out = []
    pos, end = 0, len(text)
    while pos < end:
        m = pattern.match(text, pos)
        if m is None:
            return _UNTILED
        key, value = m.groups()
        # A later word ROOT ends a value; a raw-JSON backend config treats `'` as text;
        # only a mesh `replica_groups` goes on past `, device_ids=`.
        if "ROOT" in value or ("'" in value and key == "backend_config") or (
                _MESH_IDS_PART in value and (key != "replica_groups" or value.startswith(","))):
            return None
        out.append((key, value))
        pos = m.end()
    return tuple(out)


def raw_attribute(inst: HloInstruction, key: str) -> str | None:
    """`inst.attr(key)` for the decoders: the first decoder to ask splits the attribute
    list in one go when it is in printed form (what `inst.attributes` would hold), so the
    next ones look the key up in a short list instead of scanning the text again."""
    if inst._attrs is None:
        text = inst._attr_text
        pairs = split_printed(text) if text else None
        if pairs is None:
            return inst.attr(key)
        inst._attrs = pairs
    for k, v in inst._attrs:
        if k == key:
            return v
    return None


def split_attribute_text(inst: HloInstruction) -> list[tuple[str, str]]:
    text = inst._attr_text or ""
    printed = split_printed(text)
    if printed is not None:
        return printed
    try:
        attrs, _ = split_attributes(text, 0)
    except ScanError as e:
        filename, line, column = "<string>", 0, 0
        if inst.span.tail_start >= 0:
            filename, line, column = _location(inst, None, 0)
            module = inst.module
            if module is not None and module.source is not None:
                line, column = module.source.location(inst.span.tail_start + e.offset)
        raise HloParseError(e.message, filename=filename, line=line, column=column) from None
    return [(k, v) for k, v, _ in attrs]


class _Value(TextCursor):
    """A cursor over one raw attribute value; its errors name the instruction and key."""

    __slots__ = ("inst", "key", "base")

    def __init__(self, inst: HloInstruction, key: str, raw: str, base: int = 0) -> None:
        super().__init__(raw)
        self.inst = inst
        self.key = key
        self.base = base  # where `raw` starts in the attribute's whole value

    def fail(self, error: TextSyntaxError) -> HloParseError:
        offset = self.pos if error.offset is None else error.offset
        return attribute_error(self.inst, self.key, f"bad {self.key}: {error.message}", self.base + offset)

    def string(self) -> str:
        """One quoted string token, unescaped as absl's CUnescape."""
        self.skip()
        m = _STRING.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected a quoted string, found {self.describe()}")
        try:
            value = c_unescape(m.group()[1:-1])
        except TextSyntaxError as e:
            raise self.error(e.message, self.pos + 1 + (e.offset or 0)) from None
        self.pos = m.end()
        return value


def _decode(inst: HloInstruction, key: str, raw: str, read, base: int = 0):  # type: ignore[no-untyped-def]
    """`read(cursor)` over the whole of `raw`; any syntax error becomes a located one."""
    cursor = _Value(inst, key, raw, base)
    try:
        value = read(cursor)
        cursor.finish(f"the {key} value")
    except TextSyntaxError as e:
        raise cursor.fail(e) from None
    return value


# ------------------------------------------------------------------------ decoders
def decode_shape(inst: HloInstruction) -> Shape:
    """The result shape: its text parsed, or inferred when the text left it out."""
    text = inst.shape_text
    if text is None:
        return infer_shape(inst)
    try:
        if text.startswith("("):
            flat = _flat_tuple(text)
            if flat is not None:
                return flat
        return parse_shape(text)
    except TextSyntaxError as e:
        message, offset = f"bad shape: {e.message}", e.offset or 0
    except ValueError as e:  # a Shape invariant the text breaks
        message, offset = f"bad shape: {e}", 0
    filename, line, column = _location(inst, None, 0)
    written = inst.source_line
    if written is not None and line:
        # The shape is the first thing after ` = ` (XLA prints no space inside the name).
        at = written.find(text, written.find("=") + 1)
        if at >= 0:
            line, column = inst.module.source.location(inst.span.start + at + offset)  # type: ignore[union-attr]
    raise HloParseError(f"{message} (instruction {inst.name!r})", filename=filename, line=line, column=column)


_TUPLE_SEPARATOR = re.compile(r", (?:/\*index=[0-9]+\*/)?")
#: Flat tuple shapes decoded so far, by text (a root's tuple of thousands of arrays).
_TUPLES: dict[str, Shape] = {}


def _flat_tuple(text: str) -> Shape | None:
    """A tuple of plain array shapes as XLA prints it (`(f32[2]{0}, /*index=5*/s32[])`),
    read element by element with the memoised array reader instead of the careful one
    (~15x faster on a root tuple of 4,000 arrays); None for any other text, and for any
    text the careful reader would refuse (it then says why)."""
    found = _TUPLES.get(text)
    if found is not None:
        return found
    from .shape import Shape
    from .shape_reader import _FAST_SHAPE_RE

    inner = text[1:-1]
    if not text.endswith(")") or "(" in inner or ")" in inner:
        return None
    elements = []
    for part in _TUPLE_SEPARATOR.split(inner) if inner else ():
        if _FAST_SHAPE_RE.fullmatch(part) is None:
            return None
        try:
            elements.append(parse_shape(part))
        except ValueError:
            return None
    if len(_TUPLES) >= 1024:
        _TUPLES.clear()
    found = _TUPLES[text] = Shape(None, tuple_shapes=tuple(elements))
    return found


def decode_dimensions(inst: HloInstruction) -> tuple[int, ...]:
    raw = raw_attribute(inst, "dimensions")
    if raw is None:
        return ()
    found = _plain_int_list(raw)
    if found is None:
        found = _decode(inst, "dimensions", raw, lambda c: c.int_list("{", "}", "dimensions"))
    return found


def decode_int_attr(inst: HloInstruction, key: str) -> int:
    raw = raw_attribute(inst, key)
    if raw is None:
        raise attribute_error(inst, key, f"expected integer attribute {key}=N")
    return _int_value(inst, key, raw)


def _int_value(inst: HloInstruction, key: str, raw: str) -> int:
    found = _plain_int(raw)
    if found is None:
        found = _decode(inst, key, raw, lambda c: c.integer(f"for {key}"))
    return found


# Plain values by raw text (a value depends on nothing else: modules repeat a few dimension
# lists and indices on thousands of instructions); None for a text the careful read takes.
@functools.lru_cache(maxsize=4096)
def _plain_int_list(raw: str) -> tuple[int, ...] | None:
    if _PLAIN_INT_LIST.fullmatch(raw) is None:
        return None
    return tuple(map(int, raw[1:-1].split(","))) if len(raw) > 2 else ()


@functools.lru_cache(maxsize=8192)
def _plain_int(raw: str) -> int | None:
    return int(raw) if _PLAIN_INT.fullmatch(raw) else None


def decode_channel_id(inst: HloInstruction) -> int | None:
    raw = raw_attribute(inst, "channel_id")
    if raw is None:
        return None
    value = _int_value(inst, "channel_id", raw)
    return value if value > 0 else None


def _boolean(cursor: TextCursor) -> bool:
    for word in ("true", "false"):
        if cursor.eat(word):
            return word == "true"
    raise cursor.error(f"expected true or false, found {cursor.describe()}")


def decode_bool_attr(inst: HloInstruction, key: str) -> bool:
    raw = raw_attribute(inst, key)
    if raw is None or raw == "false":
        return False
    return True if raw == "true" else _decode(inst, key, raw, _boolean)


def decode_string(inst: HloInstruction, key: str, raw: str, base: int = 0) -> str:
    return _decode(inst, key, raw, _Value.string, base)


def decode_string_attr(inst: HloInstruction, key: str) -> str:
    raw = raw_attribute(inst, key)
    return "" if raw is None else decode_string(inst, key, raw)


def decode_backend_config(inst: HloInstruction) -> str:
    """Raw string form: a JSON dict verbatim, or the unescaped quoted string."""
    raw = raw_attribute(inst, "backend_config")
    if raw is None:
        return ""
    if raw.startswith("{"):
        return raw
    return decode_string(inst, "backend_config", raw)


def read_parameter_number(payload: str) -> int:
    """N of `parameter(N)`: an int64 >= 0, comments allowed around it (as XLA's parser).
    Raises TextSyntaxError whose offset indexes `payload`."""
    if payload.isdigit() and payload.isascii() and len(payload) <= 18:
        return int(payload)
    cursor = TextCursor(payload)
    cursor.skip()
    start = cursor.pos
    number = cursor.integer("as the parameter number")
    cursor.finish("the parameter number")
    if number < 0:
        raise TextSyntaxError(f"parameter number must be >= 0, got {number}", start)
    return number


def decode_parameter_number(inst: HloInstruction) -> int:
    if inst.opcode != "parameter" or inst.payload is None:
        raise instruction_error(inst, f"{inst.name!r} is not a parameter(N) instruction")
    try:
        return read_parameter_number(inst.payload)
    except TextSyntaxError as e:
        raise instruction_error(inst, f"bad parameter number: {e.message}") from None


def _slice_ranges(cursor: TextCursor) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """`{[start:limit(:stride)?], ...}` (XLA's SliceRanges)."""
    starts: list[int] = []
    limits: list[int] = []
    strides: list[int] = []
    cursor.expect("{", "to start slice ranges")
    if not cursor.eat("}"):
        while True:
            cursor.expect("[", "to start a slice range")
            starts.append(cursor.integer("as slice start"))
            cursor.expect(":", "after slice start")
            limits.append(cursor.integer("as slice limit"))
            strides.append(cursor.integer("as slice stride") if cursor.eat(":") else 1)
            cursor.expect("]", "to end a slice range")
            if not cursor.eat(","):
                break
        cursor.expect("}", "to end slice ranges")
    return tuple(starts), tuple(limits), tuple(strides)


def decode_slice(inst: HloInstruction) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    raw = raw_attribute(inst, "slice")
    if raw is None:
        raise instruction_error(inst, f"slice {inst.name!r} needs slice={{[start:limit:stride], ...}}")
    return _decode(inst, "slice", raw, _slice_ranges)


def decode_replica_groups(inst: HloInstruction) -> ReplicaGroups:
    parse = _LAZY.get("replica_groups")
    if parse is None:  # decoded for collectives only: loaded on the first
        from .replica_groups import parse_replica_groups as parse

        _LAZY["replica_groups"] = parse
    raw = raw_attribute(inst, "replica_groups")
    try:
        groups = parse(raw if raw is not None else "{}")
    except TextSyntaxError as e:
        raise attribute_error(inst, "replica_groups", f"bad replica_groups: {e.message}", e.offset or 0) from None
    except ValueError as e:  # an IR invariant the groups break
        raise attribute_error(inst, "replica_groups", f"bad replica_groups: {e}") from None
    module = inst.module
    if groups.kind != "list" and module is not None:
        # A compact form may name more devices than the module runs on; XLA's verifier
        # rejects that (replica_count x num_partitions of 1 means "not said", as there).
        # Checked once per groups value and module (each collective of a module repeats it).
        fits = _FITS.get(id(groups))
        if fits is None or fits[0] is not groups or fits[1]() is not module:
            devices = module.replica_count * module.num_partitions
            named = len(groups.groups) * groups.groups.group_size
            if 1 < devices < named:
                raise attribute_error(inst, "replica_groups", f"bad replica_groups: they name {named} devices, the "
                                      f"module runs on {devices} (replica_count x num_partitions)")
            if len(_FITS) >= 1024:
                _FITS.clear()
            _FITS[id(groups)] = (groups, ref(module))
    return groups


#: Compact replica groups (decoded once per text, so shared; kept alive here, so the id
#: stays theirs) and the module they were found to fit, by the groups' id (the module
#: weakly: a batch worker's finished modules are not kept).
_FITS: dict[int, tuple[Any, Any]] = {}


def decode_frontend_attributes(inst: HloInstruction) -> dict[str, str]:
    raw = raw_attribute(inst, "frontend_attributes")
    if raw is None:
        return {}
    body = raw.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise attribute_error(inst, "frontend_attributes", "expected {key=value,...}")
    inner = body[1:-1]
    try:
        pairs, end = split_attributes("," + inner, 0)
    except ScanError as e:
        raise attribute_error(inst, "frontend_attributes", e.message, e.offset) from None
    if ("," + inner)[end:].strip():
        raise attribute_error(inst, "frontend_attributes", "expected key=value entries", end)
    out: dict[str, str] = {}
    for key, value, at in pairs:  # `at` counts in "," + inner: the same as in raw
        out[key] = value if value.startswith("{") else decode_string(inst, "frontend_attributes", value, at)
    return out


#: Functions of modules a plain run does not load, by name, once a decoder imported them
#: (an import statement costs a lookup in the import machinery on every call).
_LAZY: dict[str, Any] = {}

#: Decoded metadata by raw text: the gathers of one layer stack share a handful of values.
_METADATA: dict[str | None, OpMetadata] = {}


def decode_metadata(inst: HloInstruction) -> OpMetadata:
    raw = raw_attribute(inst, "metadata")
    found = _METADATA.get(raw)
    if found is None:
        from .metadata import OpMetadata  # read for reports only: not every run's start-up

        if len(_METADATA) >= 4096:
            _METADATA.clear()
        found = _METADATA[raw] = OpMetadata.parse(raw)
    return found
