"""Attribute values: their text, parsing back, and properties over random values."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from polytile.errors import IRParseError
from polytile.ir import PointerType, SymbolRef, TileType, parse_module, print_ir
from polytile.ir import types as t
from polytile.ir.attributes import (
    format_attribute,
    format_float,
    format_string,
    format_symbol,
    is_attribute_value,
    normalize_attribute,
)
from polytile.ir.parser import Parser

from ._testdialect import DescType, LayoutAttr, SwizzleAttr


def parse_value(text: str):
    parser = Parser(text)
    value = parser.parse_attribute_value()
    assert parser.at_end(), f"trailing text after {text!r}"
    return value


def same(a, b) -> bool:
    """Equality that tells -0.0 from 0.0, NaN equal to NaN, and True from 1."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        # Bit equality: -0.0 differs from 0.0, and a NaN keeps its sign and payload.
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# -- the text of each kind -------------------------------------------------------------


@pytest.mark.parametrize("value, text", [
    (True, "true"),
    (False, "false"),
    (0, "0"),
    (-7, "-7"),
    (2 ** 100, "1267650600228229401496703205376"),
    (1.0, "1.0"),
    (-2.5, "-2.5"),
    (1e20, "1e+20"),
    (5e-324, "5e-324"),
    (-0.0, "-0.0"),
    (float("inf"), "inf"),
    (float("-inf"), "-inf"),
    (float("nan"), "nan"),
    ("", '""'),
    ("ca", '"ca"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("a\nb\tc", '"a\\nb\\tc"'),
    ("\x00\x1f\x7f\r", '"\\x00\\x1f\\x7f\\x0d"'),
    ("héllo ✓ 😀", '"héllo ✓ 😀"'),
    ((), "[]"),
    ((1, (2, ()), "x"), '[1, [2, []], "x"]'),
    (t.f32, "f32"),
    (TileType((4,), PointerType(t.f16, 3)), "tile<4xptr<f16, 3>>"),
    (t.FunctionType((t.i32,), (t.f32, t.f32)), "(i32) -> (f32, f32)"),
    (DescType((2,), t.f32), "!test.desc<[2], f32>"),
    (SymbolRef("main"), "@main"),
    (SymbolRef("a.b$c_1"), "@a.b$c_1"),
    (SymbolRef("_x"), "@_x"),
    (SymbolRef(""), '@""'),
    (SymbolRef("1st"), '@"1st"'),
    (SymbolRef(".hidden"), '@".hidden"'),
    (SymbolRef("$tmp"), '@"$tmp"'),
    (SymbolRef("with space"), '@"with space"'),
    (SymbolRef('q"uote'), '@"q\\"uote"'),
    (SymbolRef("ünï"), '@"ünï"'),
    (LayoutAttr(4), "#test.layout<warps = 4, order = [1, 0]>"),
    (SwizzleAttr(8, 2), "#test.swizzle<vec = 8, per_phase = 2>"),
])
def test_attribute_text_and_round_trip(value, text):
    assert format_attribute(value) == text
    assert same(parse_value(text), value)


def test_symbol_ref_str_is_its_text():
    assert str(SymbolRef("f")) == "@f" and format_symbol("f g") == '@"f g"'


def test_dialect_attribute_str_is_its_text():
    assert str(LayoutAttr(2, (0,))) == "#test.layout<warps = 2, order = [0]>"


def test_floats_always_read_back_as_floats():
    for value in (1.0, 100.0, 1e16, 1e-7, 123456789.0):
        text = format_float(value)
        assert any(c in text for c in ".eE") or text in ("inf", "-inf", "nan")
        assert same(parse_value(text), value)


@pytest.mark.parametrize("text, value", [
    ("0x1F", 31), ("-0x10", -16), ("007", 7), ("1.", 1.0), ("2E3", 2000.0), ("-1e-3", -0.001),
    ("[ 1 ,2 ]", (1, 2)), ('@ "x"', SymbolRef("x")), ("infinity_type_is_unknown", None),
])
def test_non_canonical_attribute_spellings(text, value):
    if value is None:
        with pytest.raises(IRParseError, match="unknown type 'infinity_type_is_unknown'"):
            parse_value(text)
    else:
        assert same(parse_value(text), value)


def test_normalize_and_is_attribute_value():
    assert normalize_attribute([1, [2, (3, [4])]]) == (1, (2, (3, (4,))))
    assert normalize_attribute("s") == "s"
    for good in (True, 1, 1.5, "s", (1, ("x",)), t.i32, SymbolRef("f"), LayoutAttr(1)):
        assert is_attribute_value(good)
    for bad in (None, [1], {1: 2}, object(), (1, None)):
        assert not is_attribute_value(bad)


def test_format_attribute_refuses_non_attributes():
    with pytest.raises(TypeError, match="NoneType None is not an IR attribute value"):
        format_attribute(None)


def test_format_string_escapes_exactly_what_the_parser_needs():
    assert format_string('"\\\n\t\x01') == '"\\"\\\\\\n\\t\\x01"'


@pytest.mark.parametrize("text, message, column", [
    ('"abc', "unterminated string", 1),
    ('"a\nb"', "unterminated string", 1),
    ('"a\\qb"', "unknown escape '\\q' in string", 3),
    ('"\\xZZ"', "bad \\x escape in string", 2),
    ("[1, 2", "expected ']' to close the list, found end of input", 6),
    ("[1 2]", "expected ']' to close the list, found '2]'", 4),
    ("@", "expected a symbol name after '@', found end of input", 2),
    ("#test.layout<warps = 1", "expected ',' or '>' in '#test.layout<', found end of input", 23),
    ("#test.layout<wraps = 1>", "'#test.layout' has no parameter 'wraps' (it has order, warps)", 14),
    ("#test.layout<order = [1]>",
     "bad parameters for '#test.layout': LayoutAttr.__init__() missing 1 required positional argument: 'warps'", 25),
    ("#test.layuot<warps = 1>", "unknown attribute 'test.layuot'; did you mean 'test.layout' or 'test.swizzle'?", 1),
    ("}", "expected an attribute value, found '}'", 1),
])
def test_attribute_parse_errors(text, message, column):
    with pytest.raises(IRParseError) as info:
        parse_value(text)
    assert info.value.message == message
    assert info.value.column == column


# -- properties ------------------------------------------------------------------------

symbols = st.builds(SymbolRef, st.text(max_size=12))
simple_types = st.sampled_from([t.i1, t.i64, t.u8, t.bf16, t.f8e4m3, PointerType(t.f32, 3),
                                TileType((4, 4), t.f16, LayoutAttr(2)), t.FunctionType((t.i32,), ()),
                                DescType((8,), t.f32)])
leaves = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2 ** 200), max_value=2 ** 200),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.text(),
    st.text(alphabet='"\\\n\t\r\x00\x7f\u2028é😀 ab'),
    symbols,
    simple_types,
    st.builds(LayoutAttr, st.integers(), st.lists(st.integers(-3, 3), max_size=3).map(tuple)),
)
attribute_values = st.recursive(leaves, lambda children: st.lists(children, max_size=4).map(tuple), max_leaves=12)


@settings(max_examples=500, deadline=None)
@given(attribute_values)
@example(-0.0)
@example(float("nan"))
@example(5e-324)
@example(-(2 ** 200))
@example('a"b\\c\nd')
@example(SymbolRef("1 needs quotes"))
@example(((((),),), ()))
def test_random_attribute_values_round_trip_exactly(value):
    text = format_attribute(value)
    parsed = parse_value(text)
    assert same(parsed, value), (text, parsed)
    assert format_attribute(parsed) == text


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r"test\.[a-z_][a-z0-9_]{0,6}", fullmatch=True), attribute_values, max_size=4))
def test_random_attributes_on_an_op_round_trip(attributes):
    from polytile.dialects.func import FuncOp, ReturnOp

    func = FuncOp.create("f", [])
    func.entry_block.append(ReturnOp.build(**attributes))
    text = print_ir(func)
    module = parse_module(text)
    assert print_ir(module) == text
    parsed = module.regions[0].block.first_op.entry_block.first_op.attributes
    assert same(tuple(sorted(parsed.items())), tuple(sorted(attributes.items())))


@pytest.mark.parametrize("bits, text", [
    (0x7FF8000000000000, "nan"),
    (0xFFF8000000000000, "nan(0xfff8000000000000)"),
    (0x7FF0000000000001, "nan(0x7ff0000000000001)"),
])
def test_nan_sign_and_payload_survive_the_text(bits, text):
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert format_float(value) == text
    assert struct.pack("<d", parse_value(text)) == struct.pack("<d", value)


def test_nan_bits_must_be_a_nan():
    with pytest.raises(IRParseError, match="0x3ff0000000000000 are not the bits of a NaN"):
        parse_value("nan(0x3ff0000000000000)")
