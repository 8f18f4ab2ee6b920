"""Shapes, layouts, tiles and split configs are immutable values: equal and hashed by their
fields, never changed in place (the reader shares one object among every instruction that
writes the same shape), copied with changes through their checks, and picklable (batch
workers send results back)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from test_shape import shapes

from hlo_dedup.ir.shape import Layout, PrimitiveType, Shape, SplitConfig, Tile
from hlo_dedup.ir.shape_reader import parse_shape


@given(shapes())
def test_equal_values_hash_alike_and_survive_pickling(shape: Shape) -> None:
    twin = parse_shape(shape.to_text())
    assert twin == shape and hash(twin) == hash(shape)
    restored = pickle.loads(pickle.dumps(shape))
    assert restored == shape and restored.to_text() == shape.to_text()


def test_fields_tell_values_apart() -> None:
    a = Layout((1, 0), tiles=(Tile((8, 128)),), split_configs=(SplitConfig(0, (4,)),))
    assert a == Layout((1, 0), tiles=(Tile((8, 128)),), split_configs=(SplitConfig(0, (4,)),))
    assert a != Layout((1, 0), tiles=(Tile((8, 64)),), split_configs=(SplitConfig(0, (4,)),))
    assert a != Layout((0, 1), tiles=(Tile((8, 128)),), split_configs=(SplitConfig(0, (4,)),))
    # A missing layout is not the default one: the text tells them apart.
    assert Shape(PrimitiveType.F32, (2,)) != Shape(PrimitiveType.F32, (2,), layout=Layout((0,)))
    assert Shape(PrimitiveType.F32, (2,)) != (PrimitiveType.F32, (2,))
    assert len({Tile((1,)), Tile((1,)), Tile((2,))}) == 2


def test_values_are_immutable() -> None:
    shape = parse_shape("f32[2,3]{1,0}")
    with pytest.raises(AttributeError):
        shape.dimensions = (3, 2)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del shape.layout
    with pytest.raises(AttributeError):
        shape.layout.minor_to_major = (0, 1)  # type: ignore[union-attr, misc]
    assert shape.to_text() == "f32[2,3]{1,0}"


def test_replaced_copies_through_the_checks() -> None:
    shape = parse_shape("f32[2,3]")
    assert shape.replaced(layout=Layout((0, 1))).to_text() == "f32[2,3]{0,1}"
    assert shape.to_text() == "f32[2,3]"
    assert shape.replaced(dimensions=(4,), dynamic=()).dynamic == (False,)  # filled in as on creation
    with pytest.raises(ValueError, match="tuple shape has only tuple_shapes"):
        shape.replaced(tuple_shapes=())
    with pytest.raises(ValueError, match="no dimensions or layout"):
        Shape(PrimitiveType.TOKEN).replaced(dimensions=(1,), dynamic=(False,))
    with pytest.raises(TypeError, match="no field 'rank'"):
        shape.replaced(rank=3)
