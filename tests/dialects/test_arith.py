"""The arith dialect: constants, binary ops, comparisons, select and casts."""

from __future__ import annotations

import math

import pytest

from polytile.dialects.arith import (
    BINARY_OPS,
    CAST_OPS,
    FLOAT_BINARY_OPS,
    FLOAT_PREDICATES,
    INTEGER_BINARY_OPS,
    INTEGER_PREDICATES,
)
from polytile.ir import parse_module
from polytile.ir import types as t

from ._util import assert_roundtrip, assert_verify_error, func

ROUNDTRIP = {
    "constants": func(
        "",
        "%0 = arith.constant {value = 0} : i32",
        "%1 = arith.constant {value = -128} : i8",
        "%2 = arith.constant {value = 255} : u8",
        "%3 = arith.constant {value = 18446744073709551615} : u64",
        "%4 = arith.constant {value = -9223372036854775808} : i64",
        "%5 = arith.constant {value = true} : i1",
        "%6 = arith.constant {value = false} : tile<4xi1>",
        "%7 = arith.constant {value = 1.5} : f32",
        "%8 = arith.constant {value = -0.0} : f64",
        "%9 = arith.constant {value = nan} : bf16",
        "%10 = arith.constant {value = inf} : f16",
        "%11 = arith.constant {value = -inf} : f8e4m3",
        "%12 = arith.constant {value = 5e-324} : f64",
        "%13 = arith.constant {value = 1e+20} : f32",
        "%14 = arith.constant {value = 2} : f8e5m2",
        "%15 = arith.constant {value = 0.25} : tile<16x16xf32>",
        "%16 = arith.constant {value = 1} : i1",
        "func.return",
    ),
    "integer-binary-ops": func(
        "%a: i32, %b: i32, %t: tile<8xu16>",
        *[f"%{name} = arith.{name} %a, %b : i32" for name, *_ in INTEGER_BINARY_OPS],
        *[f"%t_{name} = arith.{name} %t, %t : tile<8xu16>" for name, *_ in INTEGER_BINARY_OPS],
        "func.return",
    ),
    "float-binary-ops": func(
        "%a: f32, %b: f32, %t: tile<2x2xbf16>",
        *[f"%{name} = arith.{name} %a, %b : f32" for name, *_ in FLOAT_BINARY_OPS],
        *[f"%t_{name} = arith.{name} %t, %t : tile<2x2xbf16>" for name, *_ in FLOAT_BINARY_OPS],
        "%neg = arith.negf %a : f32",
        "%tneg = arith.negf %t : tile<2x2xbf16>",
        "func.return",
    ),
    "comparisons": func(
        "%a: i64, %b: i64, %x: f16, %p: ptr<f32>, %q: tile<4xptr<f32>>",
        *[f'%i_{p} = arith.cmpi %a, %b {{predicate = "{p}"}} : i1' for p in INTEGER_PREDICATES],
        *[f'%f_{p} = arith.cmpf %x, %x {{predicate = "{p}"}} : i1' for p in FLOAT_PREDICATES],
        '%pe = arith.cmpi %p, %p {predicate = "eq"} : i1',
        '%qe = arith.cmpi %q, %q {predicate = "ult"} : tile<4xi1>',
        "func.return",
    ),
    "select": func(
        "%c: i1, %m: tile<4xi1>, %a: tile<4xf32>, %b: tile<4xf32>, %x: i32",
        "%0 = arith.select %c, %x, %x : i32",
        "%1 = arith.select %m, %a, %b : tile<4xf32>",
        "%2 = arith.select %c, %a, %b : tile<4xf32>",
        "func.return %0, %1",
        results="(i32, tile<4xf32>)",
    ),
    "casts": func(
        "%i8: i8, %i32: i32, %u32: u32, %f16: f16, %f32: f32, %p: ptr<f32>, %t: tile<4xi16>",
        "%0 = arith.extsi %i8 : i32",
        "%1 = arith.extui %i8 : u64",
        "%2 = arith.trunci %i32 : i1",
        "%3 = arith.sitofp %i32 : f32",
        "%4 = arith.uitofp %u32 : f64",
        "%5 = arith.fptosi %f32 : i8",
        "%6 = arith.fptoui %f16 : u32",
        "%7 = arith.extf %f16 : f32",
        "%8 = arith.truncf %f32 : bf16",
        "%9 = arith.bitcast %f32 : i32",
        "%10 = arith.bitcast %t : tile<4xf16>",
        "%11 = arith.ptrtoint %p : i64",
        "%12 = arith.inttoptr %11 : ptr<f32>",
        "%13 = arith.extsi %t : tile<4xi64>",
        "%14 = arith.sitofp %t : tile<4xf8e4m3>",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_every_binary_op_and_cast_is_in_the_round_trip_texts():
    text = "".join(ROUNDTRIP.values())
    for name in BINARY_OPS:
        assert f"arith.{name} " in text
    for name, *_ in CAST_OPS:
        assert f"arith.{name} " in text


def test_constant_values_parse_exactly():
    module = parse_module(ROUNDTRIP["constants"])
    ops = module.body.block.first_op.entry_block.ops
    values = [op.value for op in ops[:-1]]
    assert values[:7] == [0, -128, 255, 2 ** 64 - 1, -(2 ** 63), True, False]
    assert values[7] == 1.5 and math.copysign(1.0, values[8]) == -1.0 and math.isnan(values[9])
    assert values[10] == math.inf and values[11] == -math.inf and values[12] == 5e-324
    assert type(values[14]) is int and ops[15].result.type == t.TileType((16, 16), t.f32)


# -- verifier checks ------------------------------------------------------------------------


@pytest.mark.parametrize("line, message", [
    ("%0 = arith.constant {value = true} : f32", "a float constant needs a number, got True"),
    ("%0 = arith.constant {value = 2} : i1", "an i1 constant is true or false, got 2"),
    ("%0 = arith.constant {value = 1.5} : i32", "an integer constant needs an integer, got 1.5"),
    ("%0 = arith.constant {value = true} : tile<4xi32>", "an integer constant needs an integer, got True"),
    ("%0 = arith.constant {value = 256} : i8", "256 does not fit in i8"),
    ("%0 = arith.constant {value = -129} : i8", "-129 does not fit in i8"),
    ("%0 = arith.constant {value = -1} : u32", "-1 does not fit in u32"),
    ("%0 = arith.constant {value = 18446744073709551616} : u64", "18446744073709551616 does not fit in u64"),
    ("%0 = arith.constant {value = 0} : ptr<f32>", "cannot make a constant of type ptr<f32>"),
    ('%0 = arith.constant {value = "1"} : i32',
     "attribute 'value' must be a boolean or an integer or a float, got '1'"),
    ("%0 = arith.constant : i32", "requires attribute 'value' (a boolean or an integer or a float)"),
])
def test_constant_checks(line, message):
    assert_verify_error(func("", "!" + line, "func.return"), "arith.constant", message)


@pytest.mark.parametrize("line, op, message", [
    ("%0 = arith.addi %i, %j : i32", "arith.addi", "requires operands and results of one type, got i32, i64"),
    ("%0 = arith.mulf %x, %x : f16", "arith.mulf", "requires operands and results of one type, got f16, f32"),
    ("%0 = arith.addf %i, %i : i32", "arith.addf", "operand 'lhs' must be a float or a tile of floats, got i32"),
    ("%0 = arith.divsi %x, %x : f32", "arith.divsi", "operand 'lhs' must be an integer or a tile of integers, got f32"),
    ("%0 = arith.negf %i : i32", "arith.negf", "operand 'operand' must be a float or a tile of floats, got i32"),
    ('%0 = arith.cmpi %i, %i {predicate = "lt"} : i1', "arith.cmpi",
     "unknown predicate 'lt'; use one of eq, ne, slt, sle, sgt, sge, ult, ule, ugt, uge"),
    ('%0 = arith.cmpf %x, %x {predicate = "lt"} : i1', "arith.cmpf",
     "unknown predicate 'lt'; use one of oeq, one, olt, ole, ogt, oge, ueq, une, ult, ule, ugt, uge, ord, uno"),
    ('%0 = arith.cmpi %i, %j {predicate = "eq"} : i1', "arith.cmpi", "requires operands of one type, got i32, i64"),
    ('%0 = arith.cmpi %t, %t {predicate = "eq"} : tile<4xi1, @blocked>', "arith.cmpi",
     "result must be tile<4xi1>, got tile<4xi1, @blocked>"),
    ('%0 = arith.cmpf %x, %x {predicate = "oeq"} : i32', "arith.cmpf", "result 'result' must be i1 or a tile of i1, "
                                                                      "got i32"),
    ('%0 = arith.cmpf %x, %x {predicate = "oeq"} : tile<4xi1>', "arith.cmpf",
     "requires operands and results of one shape, got 4, scalar"),
    ("%0 = arith.select %c, %i, %x : i32", "arith.select",
     "both choices and the result must have one type, got i32, f32 -> i32"),
    ("%0 = arith.select %m8, %t, %t : tile<4xi32>", "arith.select", "a tile condition must have the result's shape"),
    ("%0 = arith.select %i, %i, %i : i32", "arith.select", "operand 'condition' must be i1 or a tile of i1, got i32"),
    ("%0 = arith.extsi %j : i32", "arith.extsi", "must widen, but i64 -> i32 does not"),
    ("%0 = arith.extui %i : i32", "arith.extui", "must widen, but i32 -> i32 does not"),
    ("%0 = arith.trunci %i : i64", "arith.trunci", "must narrow, but i32 -> i64 does not"),
    ("%0 = arith.extf %x : f16", "arith.extf", "must widen, but f32 -> f16 does not"),
    ("%0 = arith.truncf %x : f64", "arith.truncf", "must narrow, but f32 -> f64 does not"),
    ("%0 = arith.bitcast %x : i64", "arith.bitcast", "must keep the bit width, but f32 -> i64 does not"),
    ("%0 = arith.sitofp %x : f32", "arith.sitofp", "operand 'operand' must be an integer or a tile of integers, "
                                                   "got f32"),
    ("%0 = arith.fptosi %x : f16", "arith.fptosi", "result 'result' must be an integer or a tile of integers, "
                                                   "got f16"),
    ("%0 = arith.extsi %t : tile<8xi64>", "arith.extsi", "requires operands and results of one shape, got 4, 8"),
])
def test_op_checks(line, op, message):
    signature = "%i: i32, %j: i64, %x: f32, %c: i1, %t: tile<4xi32>, %m8: tile<8xi1>"
    assert_verify_error(func(signature, "!" + line, "func.return"), op, message)
