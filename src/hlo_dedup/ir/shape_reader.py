"""Reading shapes and layouts from HLO text (hlo-text-format §6).

The IR keeps an instruction's shape as the text it was read from and decodes it here on
first use; the result keeps what the text says (no layout written is ``layout=None``).
"""

from __future__ import annotations

import functools
import re

from ..syntax.cursor import SKIP_RE, TextCursor, TextSyntaxError
from .shape import PRIMITIVE_TYPES_BY_NAME, UNBOUNDED_SIZE, Layout, PrimitiveType, Shape, SplitConfig, Tile

__all__ = ["ShapeSyntaxError", "parse_shape"]


class ShapeSyntaxError(TextSyntaxError):
    """Malformed shape or layout text; ``offset`` indexes the text."""


# ----------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------

_MAX_DEPTH = 200  # nesting of tuples/buffers/physical shapes; keeps clear of RecursionError

# Compact "type[dims]" and "{m2m}" with at most 18 digits per number (so no
# int64 range check is needed); anything else takes the general parser.
_FAST_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[((?:(?:<=)?\d{1,18}|\?)(?:,(?:(?:<=)?\d{1,18}|\?))*)?\]")
_FAST_LAYOUT_RE = re.compile(r"\{(\d{1,18}(?:,\d{1,18})*)\}")
# The whole text is a plain array shape: the overwhelmingly common case.
_FAST_SHAPE_RE = re.compile(_FAST_ARRAY_RE.pattern + "(?:" + _FAST_LAYOUT_RE.pattern + ")?")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_INT_RE = re.compile(r"-?[0-9]+")


def _dims_from_text(text: str | None) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    if not text:
        return (), ()
    dims: list[int] = []
    dyn: list[bool] = []
    for item in text.split(","):
        if item == "?":
            dims.append(UNBOUNDED_SIZE)
            dyn.append(True)
        elif item[0] == "<":
            dims.append(int(item[2:]))
            dyn.append(True)
        else:
            dims.append(int(item))
            dyn.append(False)
    return tuple(dims), tuple(dyn)


def _m2m_from_text(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


@functools.lru_cache(maxsize=65536)
def parse_shape(text: str) -> Shape:
    """Parse a shape in HLO text syntax (§6), keeping "no layout" as ``layout=None``.

    Memoised: real modules repeat the same shape text thousands of times, and
    shapes are immutable. Raises :class:`ShapeSyntaxError` on malformed input.
    """
    m = _FAST_SHAPE_RE.fullmatch(text)
    if m is not None:
        et = PRIMITIVE_TYPES_BY_NAME.get(m.group(1))
        if et is not None and et.is_array_type:
            dims, dyn = _dims_from_text(m.group(2))
            m2m = m.group(3)
            if m2m is None:
                return Shape(et, dims, dyn)
            minor_to_major = _m2m_from_text(m2m)
            if len(minor_to_major) == len(dims):
                return Shape(et, dims, dyn, Layout(minor_to_major))
    return _ShapeParser(text).parse()


class _ShapeParser(TextCursor):
    """Recursive-descent parser over the token grammar of §6 (whitespace and
    comments allowed between any two tokens)."""

    __slots__ = ("depth",)
    error_type = ShapeSyntaxError

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0

    def peek_ident(self) -> str | None:
        self.skip()
        m = _IDENT_RE.match(self.text, self.pos)
        return None if m is None else m.group()

    def int_list(self, close: str, context: str) -> tuple[int, ...]:
        """Integers separated by ',' up to and including ``close``; may be empty."""
        if self.eat(close):
            return ()
        items = [self.integer(context)]
        while self.eat(","):
            items.append(self.integer(context))
        self.expect(close, f"to end {context}")
        return tuple(items)

    # -- grammar -------------------------------------------------------------

    def parse(self) -> Shape:
        shape = self.shape()
        self.skip()
        if self.pos != len(self.text):
            raise self.error(f"unexpected text after shape: {self.describe()}")
        return shape

    def shape(self) -> Shape:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error("shape nesting is too deep")
        try:
            self.skip()
            text, pos = self.text, self.pos
            if text.startswith("(", pos):
                return self.tuple_shape()
            if text.startswith("b", pos) and self.peek_ident() == "b":
                start = pos
                self.pos += 1
                if self.eat("("):
                    inner = self.shape()
                    if not inner.is_array:
                        raise self.error("a buffer shape must hold an array shape", start)
                    self.expect(")", "to end buffer shape")
                    return inner.replaced(buffer=True)
                self.pos = start
            return self.array_shape()
        finally:
            self.depth -= 1

    def tuple_shape(self) -> Shape:
        self.pos += 1  # '('
        elements: list[Shape] = []
        if not self.eat(")"):
            elements.append(self.shape())
            while self.eat(","):
                elements.append(self.shape())
            self.expect(")", "to end tuple shape")
        return Shape(None, tuple_shapes=tuple(elements))

    def array_shape(self) -> Shape:
        start = self.pos
        fast = _FAST_ARRAY_RE.match(self.text, start)
        if fast is not None:
            name = fast.group(1)
            dims, dyn = _dims_from_text(fast.group(2))
            self.pos = fast.end()
        else:
            m = _IDENT_RE.match(self.text, start)
            if m is None:
                raise self.error(f"expected a shape, found {self.describe()}")
            name = m.group()
            self.pos = m.end()
            dims, dyn = self.dimension_list()
        et = PRIMITIVE_TYPES_BY_NAME.get(name)
        if et is None:
            raise self.error(f"unknown primitive type {name!r}", start)
        if not et.is_array_type:
            if dims:
                raise self.error(f"{name} shapes take no dimensions", start)
            if self.layout_follows():
                raise self.error(f"{name} shapes cannot have a layout")
            return Shape(et)
        for d, is_dyn in zip(dims, dyn):
            if d < 0 and not (is_dyn and d == UNBOUNDED_SIZE):
                raise self.error(f"invalid dimension size {d}", start)
        layout = None
        if self.layout_follows():
            layout_start = self.pos
            simple = _FAST_LAYOUT_RE.match(self.text, self.pos)
            if simple is not None:
                self.pos = simple.end()
                layout = Layout(_m2m_from_text(simple.group(1)))
            else:
                layout = self.layout()
            if len(layout.minor_to_major) != len(dims):
                raise self.error(
                    f"layout has {len(layout.minor_to_major)} minor-to-major entries "
                    f"but the shape has rank {len(dims)}",
                    layout_start,
                )
        return Shape(et, dims, dyn, layout)

    def dimension_list(self) -> tuple[tuple[int, ...], tuple[bool, ...]]:
        self.expect("[", "after element type")
        dims: list[int] = []
        dyn: list[bool] = []
        if not self.eat("]"):
            while True:
                if self.eat("?"):
                    dims.append(UNBOUNDED_SIZE)
                    dyn.append(True)
                else:
                    bounded = self.eat("<=")
                    start = self.pos
                    size = self.integer("as dimension size")
                    if size < 0:
                        raise self.error(f"invalid dimension size {size}", start)
                    dims.append(size)
                    dyn.append(bounded)
                if not self.eat(","):
                    break
            self.expect("]", "to end dimensions")
        return tuple(dims), tuple(dyn)

    def layout_follows(self) -> bool:
        """XLA reads '{' as a layout only when an INT or ':' comes next."""
        self.skip()
        if not self.text.startswith("{", self.pos):
            return False
        after = SKIP_RE.match(self.text, self.pos + 1).end()  # type: ignore[union-attr]
        return self.text.startswith(":", after) or _INT_RE.match(self.text, after) is not None

    def layout(self) -> Layout:
        self.expect("{", "to start layout")
        self.skip()
        minor_to_major: tuple[int, ...] = ()
        if _INT_RE.match(self.text, self.pos):
            items = [self.integer("in minor_to_major")]
            while self.eat(","):
                items.append(self.integer("in minor_to_major"))
            minor_to_major = tuple(items)
        fields: dict[str, object] = {}
        if self.eat(":"):
            if self.peek_ident() == "D":
                self.pos += 1
                fields["dim_level_types"] = self.dim_level_types()
            if self.peek_ident() == "T":
                self.pos += 1
                fields["tiles"] = self.tiles()
            if self.peek_ident() == "L":
                self.pos += 1
                start = self.pos
                alignment = self.paren_int("tail padding alignment")
                if alignment < 1:
                    raise self.error("tail padding alignment must be at least 1", start)
                fields["tail_padding_alignment"] = alignment
            if self.eat("#"):
                fields["index_primitive_type"] = self.paren_integral_type("index")
            if self.eat("*"):
                fields["pointer_primitive_type"] = self.paren_integral_type("pointer")
            if self.peek_ident() == "E":
                self.pos += 1
                fields["element_size_in_bits"] = self.paren_int("element size in bits")
            if self.peek_ident() == "S":
                self.pos += 1
                fields["memory_space"] = self.paren_int("memory space")
            if self.peek_ident() == "SC":
                self.pos += 2
                fields["split_configs"] = self.split_configs()
            if self.peek_ident() == "P":
                self.pos += 1
                self.expect("(", "after P")
                fields["physical_shape"] = self.shape()
                self.expect(")", "to end physical shape")
            if self.peek_ident() == "M":
                self.pos += 1
                fields["dynamic_shape_metadata_prefix_bytes"] = self.paren_int(
                    "dynamic shape metadata prefix bytes"
                )
        self.expect("}", "to end layout")
        return Layout(minor_to_major, **fields)  # type: ignore[arg-type]

    def paren_int(self, context: str) -> int:
        self.expect("(", f"before {context}")
        value = self.integer(f"as {context}")
        self.expect(")", f"after {context}")
        return value

    def paren_integral_type(self, what: str) -> PrimitiveType:
        self.expect("(", f"before {what} primitive type")
        start = self.pos
        name = self.peek_ident()
        et = PRIMITIVE_TYPES_BY_NAME.get(name or "")
        if et is None or not et.is_unsigned_integral:
            raise self.error(f"expected an unsigned integer {what} primitive type", start)
        self.pos += len(et.value)
        self.expect(")", f"after {what} primitive type")
        return et

    def dim_level_types(self) -> tuple[str, ...]:
        self.expect("(", "after D")
        items: list[str] = []
        if self.eat(")"):
            return ()
        while True:
            start = self.pos
            name = self.peek_ident()
            if name not in ("D", "C", "S", "H"):
                raise self.error("expected a dim level type (D, C, S or H)", start)
            self.pos += 1
            item = name
            if self.eat("+"):
                item += "+"
            if self.eat("~"):
                item += "~"
            items.append(item)
            if not self.eat(","):
                break
        self.expect(")", "to end dim level types")
        return tuple(items)

    def tiles(self) -> tuple[Tile, ...]:
        tiles: list[Tile] = []
        self.expect("(", "after T")
        while True:
            dims: list[int] = []
            if not self.eat(")"):
                while True:
                    if self.eat("*"):
                        dims.append(Tile.COMBINE)
                    else:
                        start = self.pos
                        size = self.integer("as tile dimension")
                        if size < 0:
                            raise self.error("tile dimensions must be >= 0 or '*'", start)
                        dims.append(size)
                    if not self.eat(","):
                        break
                self.expect(")", "to end tile")
            tiles.append(Tile(tuple(dims)))
            if not self.eat("("):
                return tuple(tiles)

    def split_configs(self) -> tuple[SplitConfig, ...]:
        configs: list[SplitConfig] = []
        self.expect("(", "after SC")
        while True:
            dimension = self.integer("as split dimension")
            self.expect(":", "after split dimension")
            configs.append(SplitConfig(dimension, self.int_list(")", "split indices")))
            if not self.eat("("):
                return tuple(configs)
