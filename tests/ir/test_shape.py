"""Tests for hlo_dedup.ir.shape: text round trip, errors, XLA equality rules,
sizes, the corpus, and (marker ``oracle``) agreement with XLA's own printer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support import corpus_files
from hlo_dedup.ir.shape import (
    UNBOUNDED_SIZE,
    Layout,
    PrimitiveType,
    Shape,
    SplitConfig,
    Tile,
    byte_size,
    shapes_compatible,
    shapes_compatible_ignoring_fp_precision,
    shapes_compatible_kind,
    shapes_equal,
    shapes_equal_ignoring_fp_precision,
)
from hlo_dedup.ir.shape_reader import ShapeSyntaxError, _ShapeParser, parse_shape

P = PrimitiveType


# A result shape: everything between "name = " and " opcode(", with balanced
# parentheses for tuples (which contain ", " and /*index=N*/ comments).
_LHS_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[A-Za-z0-9_.\-]+\s*=\s*", re.M)
_OPCODE_RE = re.compile(r"\s+[a-z][a-z0-9\-]*\(")


def result_shapes(text: str) -> list[str]:
    found = []
    for m in _LHS_RE.finditer(text):
        start = end = m.end()
        if text.startswith("(", start):
            depth = 0
            for end in range(start, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            end += 1
        else:
            while end < len(text) and not text[end].isspace():
                end += 1
        if end > start and _OPCODE_RE.match(text, end):
            found.append(text[start:end])
    return found


# ----------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------

ARRAY_TYPES = [t for t in P if t.is_array_type]
UNSIGNED_TYPES = [t for t in P if t.is_unsigned_integral]


@st.composite
def dims_and_flags(draw: st.DrawFn, max_dim: int = 2**40) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    kinds = draw(st.lists(st.sampled_from(["static", "bounded", "unbounded"]), max_size=5))
    dims = tuple(UNBOUNDED_SIZE if k == "unbounded" else draw(st.integers(0, max_dim)) for k in kinds)
    return dims, tuple(k != "static" for k in kinds)


@st.composite
def layouts(draw: st.DrawFn, rank: int, xla_safe: bool = False, validated: bool = False) -> Layout:
    """Any layout that prints losslessly.

    ``xla_safe`` avoids forms today's XLA parser rejects or crashes on (``*``
    tiles, physical shapes). ``validated`` also keeps to what XLA's
    ``ValidateLayoutForShape`` accepts, which it applies to tuple elements:
    non-empty positive tiles, no index/pointer types or split configs, E >= 0.
    """
    unsigned = st.nothing() if validated else st.sampled_from(UNSIGNED_TYPES)
    if validated:
        tile = st.lists(st.integers(1, 512), min_size=1, max_size=3)
    elif xla_safe:
        tile = st.lists(st.integers(0, 512), max_size=3)
    else:
        tile = st.lists(st.integers(0, 512) | st.just(Tile.COMBINE), max_size=3)
    split = st.builds(SplitConfig, st.integers(0, 4), st.lists(st.integers(0, 99), max_size=3).map(tuple))
    return Layout(
        minor_to_major=tuple(draw(st.permutations(range(rank)))),
        tiles=tuple(Tile(tuple(t)) for t in draw(st.lists(tile, max_size=3))),
        tail_padding_alignment=draw(st.integers(1, 64)),
        index_primitive_type=draw(st.none() | unsigned),
        pointer_primitive_type=draw(st.none() | unsigned),
        element_size_in_bits=draw(st.integers(0 if validated else -2, 64)),
        memory_space=draw(st.integers(-2, 8)),
        split_configs=() if validated else tuple(draw(st.lists(split, max_size=2))),
        physical_shape=None if xla_safe else draw(st.none() | arrays(with_layout=False)),
        dynamic_shape_metadata_prefix_bytes=draw(st.integers(0, 64)),
    )


@st.composite
def arrays(draw: st.DrawFn, with_layout: bool = True, xla_safe: bool = False, validated: bool = False) -> Shape:
    dims, dyn = draw(dims_and_flags(2**10 if validated else 2**40))  # XLA rejects oversized tuple elements
    layout = draw(st.none() | layouts(len(dims), xla_safe, validated)) if with_layout else None
    if layout is not None and not dims and layout.to_text() == "{}":
        layout = None  # XLA prints a trivial scalar layout as nothing
    return Shape(draw(st.sampled_from(ARRAY_TYPES)), dims, dyn, layout)


def shapes(xla_safe: bool = False) -> st.SearchStrategy[Shape]:
    """Nested shapes; with ``xla_safe``, only a top-level array may carry layout
    fields that XLA validates away inside tuples and buffers."""
    array = arrays(xla_safe=xla_safe, validated=xla_safe)
    leaf = (
        array
        | st.sampled_from([Shape(P.TOKEN), Shape(P.OPAQUE)])
        | array.map(lambda s: Shape(s.element_type, s.dimensions, s.dynamic, s.layout, buffer=True))
    )
    nested = st.recursive(leaf, lambda kids: st.lists(kids, max_size=7).map(Shape.tuple_of), max_leaves=10)
    return arrays(xla_safe=True) | nested if xla_safe else nested


# ----------------------------------------------------------------------------
# Primitive types
# ----------------------------------------------------------------------------


def test_primitive_type_names_match_reference() -> None:
    names = (
        "pred s1 s2 s4 s8 s16 s32 s64 u1 u2 u4 u8 u16 u32 u64 f16 bf16 f32 f64 "
        "f8e5m2 f8e4m3 f8e4m3fn f8e4m3b11fnuz f8e3m4 f8e5m2fnuz f8e4m3fnuz f8e8m0fnu "
        "f6e3m2fn f6e2m3fn f4e2m1fn c64 c128 token opaque"
    ).split()
    assert [t.value for t in P] == names
    assert P("bf16") is P.BF16


@pytest.mark.parametrize(
    ("t", "floating", "complex_", "integral", "bits"),
    [
        (P.PRED, False, False, False, 8),
        (P.S1, False, False, True, 1),
        (P.S4, False, False, True, 4),
        (P.U2, False, False, True, 2),
        (P.U64, False, False, True, 64),
        (P.F16, True, False, False, 16),
        (P.BF16, True, False, False, 16),
        (P.F8E4M3FN, True, False, False, 8),
        (P.F8E8M0FNU, True, False, False, 8),
        (P.F6E2M3FN, True, False, False, 6),
        (P.F4E2M1FN, True, False, False, 4),
        (P.C64, False, True, False, 64),
        (P.C128, False, True, False, 128),
        (P.TOKEN, False, False, False, 0),
        (P.OPAQUE, False, False, False, 0),
    ],
)
def test_primitive_type_properties(
    t: PrimitiveType, floating: bool, complex_: bool, integral: bool, bits: int
) -> None:
    assert (t.is_floating, t.is_complex, t.is_integral, t.bit_width) == (floating, complex_, integral, bits)


# ----------------------------------------------------------------------------
# Printing and parsing
# ----------------------------------------------------------------------------

# Each pair was checked against XLA's printer (which also fills default layouts).
ROUND_TRIPS = [
    "f32[2,3]{1,0}",
    "f32[2,3]",
    "f32[]",
    "pred[]",
    "token[]",
    "opaque[]",
    "()",
    "((), f32[])",
    "s32[<=4]",
    "f32[?,3]{1,0}",
    "f32[]{:S(1)}",
    "u8[]{:E(4)}",
    "f32[]{:T()}",
    "f32[2,3]{0,1:T(8,128)(2,1)}",
    "f32[2,3]{0,1:T(8,128)(2,1)L(2)#(u32)*(u32)E(4)S(1)SC(0:1,2)M(8)}",
    "f32[2,3]{0,1:SC(0:1,2)(1:3)}",
    "f32[2]{0:SC(0:)}",
    "f32[2]{0:T(2)(*)}",
    "f32[2]{0:T(2,*)}",
    "f32[1]{0:E(-2)}",
    "b(f32[2]{0})",
    "s32[1,2]{1,0:P(s32[2]{0})}",
    "(f32[], s32[<=4]{0}, f32[?,3]{1,0}, pred[], token[], /*index=5*/u4[3]{0}, b(f32[2]{0}))",
    "(s32[], s32[], s32[], s32[], s32[], /*index=5*/s32[], s32[], s32[], s32[], s32[], /*index=10*/s32[])",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_print_parse_round_trip(text: str) -> None:
    assert parse_shape(text).to_text() == text
    assert str(parse_shape(text)) == text


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("f32[ 2 , 3 ] { 1 , 0 }", "f32[2,3]{1,0}"),
        ("( f32[] ,/*index=1*/ s32[2] )", "(f32[], s32[2])"),
        ("(f32[],\n  // trailing comment\n s32[])", "(f32[], s32[])"),
        ("f32[3]{0:D(D,C+~)}", "f32[3]{0}"),  # D(...) is parse-only
        ("f32[]{:}", "f32[]"),
        ("f32[2]{0:}", "f32[2]{0}"),
        ("f32[1]{0:L(1)E(0)S(0)M(0)}", "f32[1]{0}"),
        ("f32[1]{0:M(-3)}", "f32[1]{0}"),
        ("f32[007]", "f32[7]"),
        ("b ( f32[2] )", "b(f32[2])"),
    ],
)
def test_parse_normalises_like_xla(text: str, printed: str) -> None:
    assert parse_shape(text).to_text() == printed


def test_parsed_fields() -> None:
    s = parse_shape("f32[<=4,?,2]{2,1,0:T(8,128)(*)L(2)#(u32)*(u16)E(4)S(1)SC(0:1,2)M(8)}")
    assert s.dimensions == (4, UNBOUNDED_SIZE, 2)
    assert s.dynamic == (True, True, False)
    assert s.layout == Layout(
        (2, 1, 0),
        tiles=(Tile((8, 128)), Tile((Tile.COMBINE,))),
        tail_padding_alignment=2,
        index_primitive_type=P.U32,
        pointer_primitive_type=P.U16,
        element_size_in_bits=4,
        memory_space=1,
        split_configs=(SplitConfig(0, (1, 2)),),
        dynamic_shape_metadata_prefix_bytes=8,
    )
    assert parse_shape("f32[3]{0:D(D,C+~)}").layout.dim_level_types == ("D", "C+~")  # type: ignore[union-attr]
    assert parse_shape("f32[2,3]").layout is None
    buf = parse_shape("b(f32[2]{0})")
    assert buf.buffer and buf.element_type is P.F32 and buf.layout == Layout((0,))


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("", 0),
        ("f32", 3),
        ("f33[2]", 0),
        ("f32[2", 5),
        ("f32[2]{}", 6),  # '{' not followed by INT or ':' is not a layout
        ("f32[]{}", 5),
        ("f32[2]{0,1}", 6),
        ("f32[<=-1]", 6),
        ("f32[-1]", 4),
        ("f32[2.5]", 5),
        ("f32[2x3]", 5),
        ("f32[99999999999999999999]", 4),
        ("token[]{:S(1)}", 7),
        ("token[2]", 0),
        ("f32[2]{0:L(0)}", 10),
        ("f32[2]{0:T(-3)}", 11),
        ("f32[2]{0:#(f32)}", 11),
        ("f32[2]{0:#(s32)}", 11),
        ("f32[2]{0:*(pred)}", 11),
        ("f32[2]{0:S(1)E(4)}", 13),
        ("f32[2]{0:T(2)T(3)}", 13),
        ("f32[2]{0:X(1)}", 9),
        ("f32[2]{0:D(Q)}", 11),
        ("(f32[],)", 7),
        ("(f32[]", 6),
        ("b(token[])", 0),
        ("b(f32[2]", 8),
        ("b[2]", 0),
        ("f32[2] junk", 7),
        ("/* unterminated", 0),
        ("(" * 5000 + ")" * 5000, 200),
        ("f32[2]{0:P(" * 300, 200 * 11),
    ],
)
def test_malformed_shapes_raise_shape_syntax_error(text: str, offset: int) -> None:
    with pytest.raises(ShapeSyntaxError) as info:
        parse_shape(text)
    assert info.value.offset == offset
    assert isinstance(info.value, ValueError)
    assert f"offset {offset}" in str(info.value)


@given(shapes())
def test_print_then_parse_is_identity(shape: Shape) -> None:
    text = shape.to_text()
    parsed = parse_shape(text)
    assert parsed == shape
    assert parsed.to_text() == text


@given(shapes())
def test_fast_path_whitespace_and_comments_agree_with_full_parser(shape: Shape) -> None:
    text = shape.to_text()
    assert _ShapeParser(text).parse() == shape
    spaced = text
    for token in ",()[]{}:":
        spaced = spaced.replace(token, f" {token} ")
    assert parse_shape(spaced) == shape
    assert parse_shape(text.replace(",", ",/* c */\n")) == shape


_FUZZ_ALPHABET = "fsupbredtokn0123456789[]{}()<=?,:*#TLESCPMDH+~ /\n"


@given(st.text(_FUZZ_ALPHABET, max_size=40))
def test_arbitrary_text_only_raises_shape_syntax_error(text: str) -> None:
    try:
        parse_shape(text)
    except ShapeSyntaxError as e:
        assert 0 <= e.offset <= len(text)


@given(shapes(), st.data())
def test_mutated_text_only_raises_shape_syntax_error(shape: Shape, data: st.DataObject) -> None:
    text = shape.to_text()
    i = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from(["", "(", ")", "{", "}", ",", ":", "[", "-", "*", "x"]))
    mutated = text[:i] + junk + text[i + 1 :]
    try:
        parse_shape(mutated)
    except ShapeSyntaxError:
        pass


def test_parse_shape_is_memoised() -> None:
    assert parse_shape("f32[17,19]{0,1}") is parse_shape("f32[17,19]{0,1}")
    assert parse_shape.cache_info().maxsize


# ----------------------------------------------------------------------------
# Shape API
# ----------------------------------------------------------------------------


def test_shape_properties() -> None:
    t = parse_shape("(f32[2,3], token[], b(s8[4]))")
    assert t.is_tuple and not t.is_array
    with pytest.raises(ValueError):
        _ = t.rank
    arr, tok, buf = t.tuple_shapes  # type: ignore[misc]
    assert arr.is_array and arr.rank == 2 and arr.element_count == 6
    assert not tok.is_array and tok.rank == 0
    assert buf.is_buffer and not buf.is_array and buf.element_count == 4
    assert parse_shape("f32[<=5,2]").element_count == 10
    assert parse_shape("f32[<=5,2]").is_dynamic and not arr.is_dynamic
    with pytest.raises(ValueError):
        _ = parse_shape("f32[?]").element_count
    with pytest.raises(ValueError):
        _ = tok.element_count
    assert Shape.array(P.F32, [2], layout=Layout.default(1)).to_text() == "f32[2]{0}"
    assert Shape.tuple_of([]).to_text() == "()"
    assert Shape.token().to_text() == "token[]"
    with pytest.raises(ValueError):
        Shape(P.F32, (2, 3), (True,))
    with pytest.raises(ValueError):
        Shape(P.TOKEN, (2,))


def test_with_default_layout() -> None:
    s = parse_shape("(f32[2,3], s32[], f32[4]{0:S(1)}, token[], b(f32[5]))").with_default_layout()
    assert s.to_text() == "(f32[2,3]{1,0}, s32[], f32[4]{0:S(1)}, token[], b(f32[5]{0}))"
    assert s.tuple_shapes[1].layout == Layout(())  # type: ignore[index]
    assert Layout.default(3) == Layout((2, 1, 0))


# ----------------------------------------------------------------------------
# Equality rules (xla-semantics §7)
# ----------------------------------------------------------------------------


def eq(a: str, b: str) -> tuple[bool, bool, bool, bool, bool]:
    x, y = parse_shape(a), parse_shape(b)
    return (
        shapes_equal(x, y),
        shapes_equal_ignoring_fp_precision(x, y),
        shapes_compatible(x, y),
        shapes_compatible_ignoring_fp_precision(x, y),
        shapes_compatible_kind(x, y),
    )


T, F = True, False


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # missing layout == default layout (as after XLA fills missing layouts)
        ("f32[2,3]", "f32[2,3]{1,0}", (T, T, T, T, T)),
        ("f32[]", "f32[]{:}", (T, T, T, T, T)),
        ("f32[2,3]", "f32[2,3]{0,1}", (F, F, T, T, T)),
        ("(f32[2,3], s32[])", "(f32[2,3]{1,0}, s32[])", (T, T, T, T, T)),
        # every compared layout field matters
        ("f32[8,128]{1,0}", "f32[8,128]{1,0:T(8,128)}", (F, F, T, T, T)),
        ("f32[8,128]{1,0:T(8,128)}", "f32[8,128]{1,0:T(8,128)(2,1)}", (F, F, T, T, T)),
        ("f32[2]{0}", "f32[2]{0:S(1)}", (F, F, T, T, T)),
        ("f32[]", "f32[]{:S(1)}", (F, F, T, T, T)),
        ("s4[2]{0}", "s4[2]{0:E(4)}", (F, F, T, T, T)),
        ("f32[2]{0}", "f32[2]{0:L(2)}", (F, F, T, T, T)),
        ("f32[2]{0:#(u32)}", "f32[2]{0:#(u16)}", (F, F, T, T, T)),
        ("f32[2]{0:*(u32)}", "f32[2]{0}", (F, F, T, T, T)),
        ("f32[2]{0:SC(0:1)}", "f32[2]{0}", (F, F, T, T, T)),
        ("f32[2]{0:P(f32[2]{0})}", "f32[2]{0:P(f32[2])}", (T, T, T, T, T)),
        ("f32[2]{0:P(f32[2]{0})}", "f32[2]{0}", (F, F, T, T, T)),
        # not compared by Layout::Equal
        ("f32[2]{0:M(8)}", "f32[2]{0}", (T, T, T, T, T)),
        ("f32[2]{0:D(C)}", "f32[2]{0}", (T, T, T, T, T)),
        # element types
        ("f32[2]", "bf16[2]", (F, T, F, T, T)),
        ("f8e4m3fn[2]", "f4e2m1fn[2]", (F, T, F, T, T)),
        ("f32[2]", "bf16[2]{0:S(1)}", (F, F, F, T, T)),
        ("f32[2]", "s32[2]", (F, F, F, F, T)),
        ("c64[2]", "c128[2]", (F, F, F, F, T)),
        ("c64[2]", "f32[2]", (F, F, F, F, T)),
        ("pred[2]", "s8[2]", (F, F, F, F, T)),
        # dimensions and dynamic flags
        ("f32[2]", "f32[3]", (F, F, F, F, T)),
        ("f32[2]", "f32[2,1]", (F, F, F, F, F)),
        ("f32[<=4]", "f32[4]", (F, F, T, T, T)),
        ("f32[?]", "f32[7]", (F, F, T, T, T)),
        ("f32[?]", "f32[?]", (T, T, T, T, T)),
        ("f32[<=4]", "f32[<=5]", (F, F, F, F, T)),
        # structure
        ("(f32[2], s32[])", "(bf16[7], f32[])", (F, F, F, F, T)),
        ("(f32[2])", "(f32[2], f32[2])", (F, F, F, F, F)),
        ("(f32[2])", "f32[2]", (F, F, F, F, F)),
        ("f32[2]", "(f32[2])", (F, F, F, F, F)),
        ("()", "()", (T, T, T, T, T)),
        ("token[]", "token[]", (T, T, T, T, T)),
        ("token[]", "opaque[]", (F, F, F, F, F)),
        ("token[]", "()", (F, F, F, F, F)),
        ("f32[]", "token[]", (F, F, F, F, F)),
        # buffers compare their contents strictly, whatever the flags
        ("b(f32[2])", "b(f32[2]{0})", (T, T, T, T, T)),
        ("b(f32[2])", "f32[2]", (F, F, F, F, F)),
        ("b(f32[2]{0})", "b(f32[2]{0:S(1)})", (F, F, F, F, F)),
        ("b(f32[2])", "b(bf16[2])", (F, F, F, F, F)),
    ],
)
def test_equality_rules(a: str, b: str, expected: tuple[bool, ...]) -> None:
    assert eq(a, b) == expected
    assert eq(b, a) == expected


def small_shapes() -> st.SearchStrategy[Shape]:
    """A small space so that equal-but-differently-written pairs are common."""
    layout = st.sampled_from([None, "default", "swapped", "S1", "M8"])

    def build(t: PrimitiveType, dims: tuple[int, ...], dyn: bool, lay: str | None) -> Shape:
        rank = len(dims)
        layouts = {
            None: None,
            "default": Layout.default(rank),
            "swapped": Layout(tuple(range(rank))),
            "S1": Layout(Layout.default(rank).minor_to_major, memory_space=1),
            "M8": Layout(Layout.default(rank).minor_to_major, dynamic_shape_metadata_prefix_bytes=8),
        }
        return Shape(t, dims, (dyn,) + (False,) * (rank - 1) if rank else (), layouts[lay])

    arr = st.builds(
        build,
        st.sampled_from([P.F32, P.BF16]),
        st.sampled_from([(), (2,), (2, 2), (2, 3)]),
        st.booleans(),
        layout,
    )
    def tuples(kids: st.SearchStrategy[Shape]) -> st.SearchStrategy[Shape]:
        return st.lists(kids, max_size=3).map(Shape.tuple_of)

    return st.recursive(arr | st.just(Shape(P.TOKEN)), tuples, max_leaves=4)


@given(small_shapes(), small_shapes())
def test_layout_key_matches_shapes_equal(a: Shape, b: Shape) -> None:
    assert (a.layout_key() == b.layout_key()) == shapes_equal(a, b)
    if shapes_equal(a, b):
        assert hash(a.layout_key()) == hash(b.layout_key())


@given(shapes())
def test_equality_is_reflexive_and_default_layout_invisible(shape: Shape) -> None:
    filled = shape.with_default_layout()
    for fn in (shapes_equal, shapes_equal_ignoring_fp_precision, shapes_compatible, shapes_compatible_kind):
        assert fn(shape, shape) and fn(shape, filled) and fn(filled, shape)
    assert shape.layout_key() == filled.layout_key()


# ----------------------------------------------------------------------------
# byte_size
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("f32[2,3]", 24),
        ("f32[]", 4),
        ("pred[3]", 3),
        ("s4[3]", 2),
        ("u1[9]", 2),
        ("f6e2m3fn[3]", 3),
        ("c128[2]", 32),
        ("f32[0,5]", 0),
        ("f32[<=4]", 16),
        ("b(f32[2])", 8),
        ("token[]", 0),
        ("()", 0),
        ("(f32[2], s4[3], token[], (u8[5], s2[3]))", 8 + 2 + 0 + 5 + 1),
    ],
)
def test_byte_size(text: str, size: int) -> None:
    assert byte_size(parse_shape(text)) == size


def test_byte_size_of_dynamic_shapes() -> None:
    """A bounded dimension counts its bound; an array with an unbounded one has no size yet."""
    assert byte_size(parse_shape("f32[<=8,2]")) == 64
    assert byte_size(parse_shape("(f32[?], s8[<=3,?], u8[2])")) == 2


# ----------------------------------------------------------------------------
# Corpus and oracle
# ----------------------------------------------------------------------------


def test_result_shape_extraction() -> None:
    text = "  ROOT %t = (f32[2], /*index=1*/b(s32[])) tuple(%a, %b)\n  x.1 = f32[] add(a, b), metadata={}"
    assert result_shapes(text) == ["(f32[2], /*index=1*/b(s32[]))", "f32[]"]


@pytest.mark.corpus
def test_every_corpus_shape_parses() -> None:
    texts: set[str] = set()
    for path in corpus_files(every=True):
        texts.update(result_shapes(path.read_text(encoding="utf-8", errors="surrogateescape")))
    assert len(texts) > 1000
    for text in sorted(texts):
        shape = parse_shape(text)
        reparsed = parse_shape(shape.to_text())  # D(...) is dropped, so compare as XLA does
        assert shapes_equal(reparsed, shape) and reparsed.to_text() == shape.to_text(), text


@given(st.lists(shapes(xla_safe=True), min_size=1, max_size=4))
def test_printing_matches_xla(xla_hlo, batch: list[Shape]) -> None:  # type: ignore[no-untyped-def]
    hlo = xla_hlo
    body = "\n".join(f"  p{i} = {s.to_text()} parameter({i})" for i, s in enumerate(batch))
    module = hlo.hlo_module_from_text(f"HloModule m\nENTRY e {{\n{body}\n  ROOT r = token[] after-all()\n}}\n")
    printed = {}
    for line in module.to_string().splitlines():
        m = re.match(r"\s*%?p(\d+) = (.*) parameter\(\d+\)", line)
        if m:
            printed[int(m.group(1))] = m.group(2)
    assert [printed[i] for i in range(len(batch))] == [s.with_default_layout().to_text() for s in batch]


@pytest.mark.corpus
def test_corpus_shapes_print_like_xla(xla_hlo) -> None:  # type: ignore[no-untyped-def]
    hlo = xla_hlo
    texts = sorted({t for p in corpus_files() for t in result_shapes(p.read_text(errors="surrogateescape"))})
    for k in range(0, len(texts), 300):
        chunk = texts[k : k + 300]
        body = "\n".join(f"  p{i} = {t} parameter({i})" for i, t in enumerate(chunk))
        out = hlo.hlo_module_from_text(f"HloModule m\nENTRY e {{\n{body}\n  ROOT r = token[] after-all()\n}}\n")
        printed = dict(
            (int(m.group(1)), m.group(2))
            for m in re.finditer(r"%?p(\d+) = (.*) parameter\(\d+\)", out.to_string())
        )
        for i, t in enumerate(chunk):
            assert parse_shape(t).with_default_layout().to_text() == printed[i], t
