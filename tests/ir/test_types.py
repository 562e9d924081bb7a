"""IR types: spelling, equality, parsing, validation, helpers, and a print->parse property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polytile.errors import IRParseError, PolytileError
from polytile.ir import BlockPointerType, FloatType, FunctionType, IntType, PointerType, TileType, parse_type
from polytile.ir import types as t
from polytile.ir.attributes import SymbolRef

from ._testdialect import DescType, LayoutAttr, SwizzleAttr, TokenType

ALL_SCALARS = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
               "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"]


# -- scalars --------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ALL_SCALARS)
def test_every_scalar_prints_and_parses_to_the_interned_type(spelling):
    scalar = t.SCALAR_TYPES[spelling]
    assert str(scalar) == spelling
    assert parse_type(spelling) is scalar


def test_scalar_table_is_exactly_the_required_set():
    assert sorted(t.SCALAR_TYPES) == sorted(ALL_SCALARS)


def test_scalar_widths_and_signedness():
    assert [t.SCALAR_TYPES[s].width for s in ALL_SCALARS] == [1, 8, 16, 32, 64, 8, 16, 32, 64, 16, 16, 32, 64, 8, 8]
    assert t.i32.signed and not t.u32.signed
    assert t.f8e4m3.width == 8 and t.bf16.width == 16


def test_types_compare_and_hash_by_value():
    assert IntType(32) == t.i32 and hash(IntType(32)) == hash(t.i32)
    assert IntType(32, False) == t.u32 != t.i32
    assert FloatType("bf16") == t.bf16 != t.f16
    assert PointerType(t.f32) == PointerType(t.f32, 1) != PointerType(t.f32, 3)
    assert TileType((4, 8), t.f32) != TileType((8, 4), t.f32)
    assert TileType((4,), t.f32, LayoutAttr(4)) != TileType((4,), t.f32)
    assert len({TileType((4,), t.f32), TileType((4,), t.f32), TileType((4,), t.f16)}) == 2


@pytest.mark.parametrize("width, signed", [(7, True), (128, True), (0, True), (1, False), (24, False)])
def test_int_types_the_text_cannot_spell_are_refused(width, signed):
    with pytest.raises(ValueError, match="unsupported integer type"):
        IntType(width, signed)


def test_unknown_float_kind_is_refused():
    with pytest.raises(ValueError, match="unknown float type 'f128'"):
        FloatType("f128")


# -- pointers, tiles, block pointers, functions --------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("ptr<f32>", PointerType(t.f32)),
    ("ptr<f16, 3>", PointerType(t.f16, 3)),
    ("ptr<i8, 0>", PointerType(t.i8, 0)),
    ("ptr<ptr<f32, 3>>", PointerType(PointerType(t.f32, 3))),
    ("ptr<ptr<ptr<u8>, 5>, 7>", PointerType(PointerType(PointerType(t.u8), 5), 7)),
    ("tile<128x64xf16>", TileType((128, 64), t.f16)),
    ("tile<1xi1>", TileType((1,), t.i1)),
    ("tile<2x3x4x5xbf16>", TileType((2, 3, 4, 5), t.bf16)),
    ("tile<1024xptr<f32>>", TileType((1024,), PointerType(t.f32))),
    ("tile<16x16xptr<f16, 3>>", TileType((16, 16), PointerType(t.f16, 3))),
    ("tile<16x16xf32, #test.layout<warps = 4, order = [0, 1]>>", TileType((16, 16), t.f32, LayoutAttr(4, (0, 1)))),
    ("tile<8xptr<f32>, #test.swizzle<vec = 2, per_phase = 1>>", TileType((8,), PointerType(t.f32), SwizzleAttr(2))),
    ("tile<4xf32, @blocked>", TileType((4,), t.f32, SymbolRef("blocked"))),
    ("block_ptr<64x64xf16>", BlockPointerType(TileType((64, 64), t.f16))),
    ("block_ptr<64x64xf16, #test.layout<warps = 8, order = [1, 0]>>",
     BlockPointerType(TileType((64, 64), t.f16, LayoutAttr(8)))),
    ("ptr<block_ptr<32xf32>>", PointerType(BlockPointerType(TileType((32,), t.f32)))),
    ("(i32, f32) -> f32", FunctionType((t.i32, t.f32), (t.f32,))),
    ("() -> ()", FunctionType((), ())),
    ("(ptr<f32>) -> (f32, i1)", FunctionType((PointerType(t.f32),), (t.f32, t.i1))),
    ("((i32) -> i32) -> ((f32) -> ())",
     FunctionType((FunctionType((t.i32,), (t.i32,)),), (FunctionType((t.f32,), ()),))),
    ("!test.desc<[64, 32], f16>", DescType((64, 32), t.f16)),
    ("ptr<!test.desc<[8], tile<8xf32>>, 3>", PointerType(DescType((8,), TileType((8,), t.f32)), 3)),
    ("!test.token<3 x \"a b\">", TokenType(3, "a b")),
    ("(!test.token<0 x \"\">) -> !test.desc<[], i8>", FunctionType((TokenType(0, ""),), (DescType((), t.i8),))),
])
def test_canonical_type_text_round_trips(text, expected):
    parsed = parse_type(text)
    assert parsed == expected
    assert str(expected) == text
    assert str(parsed) == text


def test_default_address_space_is_one_and_printed_bare():
    assert PointerType(t.f32).address_space == 1
    assert parse_type("ptr<f32, 1>") == PointerType(t.f32)
    assert str(parse_type("ptr<f32, 1>")) == "ptr<f32>"


def test_whitespace_inside_types_is_free():
    assert parse_type("  tile< 4x8x f32 , #test.layout< warps=2 > >  ") == TileType((4, 8), t.f32, LayoutAttr(2))
    assert parse_type("ptr< f16 ,3 >") == PointerType(t.f16, 3)


@pytest.mark.parametrize("shape", [(), (0,), (4, 0), (-1,), (2.0,)])
def test_tile_shapes_must_be_positive_integers(shape):
    with pytest.raises(ValueError, match="tile shape must be a non-empty tuple of positive integers"):
        TileType(shape, t.f32)


@pytest.mark.parametrize("element", [TileType((2,), t.f32), BlockPointerType(TileType((2,), t.f32))])
def test_tiles_do_not_nest(element):
    with pytest.raises(ValueError, match="tile elements must be scalars or pointers"):
        TileType((4,), element)


def test_tile_helpers():
    lay = LayoutAttr(4)
    tile = TileType((4, 8), t.f32, lay)
    assert tile.rank == 2 and tile.numel == 32
    assert tile.with_element(t.f16) == TileType((4, 8), t.f16, lay)
    assert tile.with_shape((32,)) == TileType((32,), t.f32)  # a new shape drops the layout
    assert tile.without_layout() == TileType((4, 8), t.f32)
    plain = TileType((2,), t.i32)
    assert plain.without_layout() is plain


def test_element_and_shape_helpers():
    tile = TileType((4, 8), PointerType(t.f32))
    assert t.element_type(tile) == PointerType(t.f32) and t.element_type(t.i32) is t.i32
    assert t.shape_of(tile) == (4, 8) and t.shape_of(t.f32) == ()
    assert t.like(tile, t.i1) == TileType((4, 8), t.i1) and t.like(t.f32, t.i1) is t.i1
    assert t.is_pointer(tile) and not t.is_pointer(t.i64)
    assert t.is_integer(TileType((2,), t.u8)) and t.is_integer(t.i1) and not t.is_integer(t.f32)
    assert t.is_float(TileType((2,), t.bf16)) and t.is_float(t.f8e5m2) and not t.is_float(t.i8)
    assert t.is_bool(TileType((2,), t.i1)) and t.is_bool(t.i1) and not t.is_bool(t.i8)


def test_repr_shows_the_text():
    assert repr(TileType((4,), t.f32)) == "Type(tile<4xf32>)"


# -- parse errors on types -------------------------------------------------------------


@pytest.mark.parametrize("text, message, column", [
    ("i33", "unknown type 'i33'; did you mean 'i32'?", 1),
    ("tile<4xf32", "expected '>' to close 'tile<', found end of input", 11),
    ("tile<f32>", "expected the shape of the tile, like '128x64x' before the element type", 6),
    ("tile<0x4xf32>", "tile shape must be a non-empty tuple of positive integers, got (0, 4)", 1),
    ("tile<4xtile<4xf32>>", "tile elements must be scalars or pointers", 1),
    ("ptr<f32, x>", "expected an address space or 'const', found 'x>'", 10),
    ("f32 f32", "unexpected 'f32' after the type", 5),
    ("!test.nope<1>", "unknown type 'test.nope'", 1),
    ("!test.desc<[1]>", "expected ',', found '>'", 15),
    ("(i32 -> f32", "expected ')', found '-> f32'", 6),
])
def test_type_parse_errors(text, message, column):
    with pytest.raises(IRParseError) as info:
        parse_type(text)
    err = info.value
    assert isinstance(err, PolytileError)
    assert err.message.startswith(message)
    assert (err.line, err.column) == (1, column)
    assert f"\n  {text}\n  {' ' * (column - 1)}^" in str(err)


# -- property: random types print and parse back equal --------------------------------

scalars = st.sampled_from(sorted(t.SCALAR_TYPES.values(), key=str))
address_spaces = st.integers(min_value=0, max_value=2 ** 20)
shapes = st.lists(st.integers(min_value=1, max_value=4096), min_size=1, max_size=4).map(tuple)
layouts = st.one_of(
    st.none(),
    st.builds(LayoutAttr, st.integers(-8, 64), st.lists(st.integers(0, 3), max_size=4).map(tuple)),
    st.builds(SwizzleAttr, st.integers(0, 16), st.integers(1, 8)),
    st.builds(SymbolRef, st.text(min_size=0, max_size=8)),
    st.integers(),
)


def _extend(children):
    pointers = st.builds(PointerType, children, address_spaces)
    tile_elements = st.one_of(scalars, st.builds(PointerType, children, address_spaces))
    tiles = st.builds(TileType, shapes, tile_elements, layouts)
    block_pointers = st.builds(BlockPointerType, st.builds(TileType, shapes, scalars, layouts))
    functions = st.builds(FunctionType, st.lists(children, max_size=3).map(tuple),
                          st.lists(children, max_size=3).map(tuple))
    descs = st.builds(DescType, shapes, children)
    tokens = st.builds(TokenType, st.integers(-5, 5), st.text(max_size=6))
    return st.one_of(pointers, tiles, block_pointers, functions, descs, tokens)


any_type = st.recursive(scalars, _extend, max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(any_type)
def test_random_types_print_then_parse_equal(type_):
    text = str(type_)
    parsed = parse_type(text)
    assert parsed == type_
    assert str(parsed) == text
