"""The math dialect: elementwise float functions, ``math.absi``, ``math.fma`` and ``math.div_rn``."""

from __future__ import annotations

import pytest

from polytile.dialects.math import BINARY_OPS, UNARY_FLOAT_OPS, UNARY_OPS

from ._util import assert_roundtrip, assert_verify_error, func

ROUNDTRIP = {
    "unary-float": func(
        "%x: f32, %t: tile<4x4xf16>",
        *[f"%{name} = math.{name} %x : f32" for name, *_ in UNARY_FLOAT_OPS],
        *[f"%t_{name} = math.{name} %t : tile<4x4xf16>" for name, *_ in UNARY_FLOAT_OPS],
        "func.return",
    ),
    "absi-and-fma": func(
        "%i: i8, %u: tile<8xu32>, %a: f64, %b: tile<2xbf16>",
        "%0 = math.absi %i : i8",
        "%1 = math.absi %u : tile<8xu32>",
        "%2 = math.fma %a, %a, %a : f64",
        "%3 = math.fma %b, %b, %b : tile<2xbf16>",
        "%4 = math.div_rn %a, %a : f64",
        "%5 = math.div_rn %b, %b : tile<2xbf16>",
        "func.return %2",
        results="f64",
    ),
    "bit-counts": func(
        "%i: i32, %t: tile<8xi64>",
        *[f"%{name} = math.{name} %i : i32" for name in ("ctlz", "ctpop", "bitreverse")],
        *[f"%t_{name} = math.{name} %t : tile<8xi64>" for name in ("ctlz", "ctpop", "bitreverse")],
        "func.return",
    ),
    "binary-float": func(
        "%x: f32, %t: tile<4xf64>",
        *[f"%{name} = math.{name} %x, %x : f32" for name in BINARY_OPS],
        *[f"%t_{name} = math.{name} %t, %t : tile<4xf64>" for name in BINARY_OPS],
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_every_math_op_is_in_the_round_trip_texts():
    text = "".join(ROUNDTRIP.values())
    for name in [*UNARY_OPS, *BINARY_OPS, "fma", "div_rn"]:
        assert f"math.{name} " in text


@pytest.mark.parametrize("line, op, message", [
    ("%0 = math.exp %i : i32", "math.exp", "operand 'operand' must be a float or a tile of floats, got i32"),
    ("%0 = math.sqrt %x : f16", "math.sqrt", "requires operands and results of one type, got f16, f32"),
    ("%0 = math.absi %x : f32", "math.absi", "operand 'operand' must be an integer or a tile of integers, got f32"),
    ("%0 = math.fma %x, %x, %t : f32", "math.fma", "requires operands and results of one type, got f32, tile<4xf32>"),
    ("%0 = math.fma %x, %x : f32", "math.fma", "expects 3 operands, got 2"),
    ("%0 = math.div_rn %i, %i : i32", "math.div_rn", "operand 'lhs' must be a float or a tile of floats, got i32"),
])
def test_op_checks(line, op, message):
    assert_verify_error(func("%i: i32, %x: f32, %t: tile<4xf32>", "!" + line, "func.return"), op, message)
