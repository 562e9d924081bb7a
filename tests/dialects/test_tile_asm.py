"""tile.inline_asm (polytile.dialects.tile_asm): IR text round trips and the verifier."""

from __future__ import annotations

import pytest

from polytile.dialects.tile_asm import registers_of
from polytile.ir import types as t

from ._util import assert_roundtrip, assert_verify_error, func

ROUNDTRIP = {"inline-asm": func(
    "%a: tile<128xi32>, %b: tile<128xi32>, %c: tile<512xu8>, %x: f32, %p: tile<128xptr<i8>>",
    '%0 = tile.inline_asm %a, %b {asm = "shf.l.wrap.b32 $0, $1, $2, 3;", constraints = "=r,r,r"} : tile<128xi32>',
    '%1 = tile.inline_asm %c {asm = "and.b32 $0, $1, 255;", constraints = "=r,r", pack = 4} : tile<512xi8>',
    '%2, %3 = tile.inline_asm %x {asm = "mov.b32 $0, $2; mov.b32 $1, $2;", constraints = "=r,=r,r", '
    'pure = false} : f32, f32',
    '%4 = tile.inline_asm %p {asm = "ld.global.b8 $0, [$1];", constraints = "=r,l", pure = false} : tile<128xi8>',
    "func.return",
)}


def test_roundtrip():
    assert_roundtrip(ROUNDTRIP["inline-asm"])


@pytest.mark.parametrize("element, pack, expected", [
    (t.i8, 1, (1, 1)), (t.i8, 4, (1, 4)), (t.i8, 8, (2, 4)), (t.f16, 4, (2, 2)), (t.f32, 4, (4, 1)),
    (t.i64, 2, (2, 1)), (t.i1, 4, (1, 4)),
])
def test_registers_per_instance(element, pack, expected):
    assert registers_of(element, pack) == expected


SIGNATURE = "%a: tile<128xi32>, %t: tile<64xi32>, %p: tile<128xptr<f32>>"


@pytest.mark.parametrize("line, message", [
    ('%0 = tile.inline_asm %a {asm = "", constraints = "=r,r", pack = 3} : tile<128xi32>',
     "pack must be a power of two of at least 1, got 3"),
    ('tile.inline_asm %a {asm = "", constraints = "r"}', "needs at least one result"),
    ('%0 = tile.inline_asm %a, %t {asm = "", constraints = "=r,r,r"} : tile<128xi32>',
     "operands and results must be tiles of one shape (or scalars), got shapes [(64,), (128,)]"),
    ('%0 = tile.inline_asm %a {asm = "", constraints = "=l,r"} : tile<128xptr<f32>>',
     "gives numbers, got tile<128xptr<f32>>"),
    ('%0 = tile.inline_asm %a {asm = "", constraints = "=r,r,r"} : tile<128xi32>',
     "the constraints '=r,r,r' describe 3 operands, but with pack = 1 the assembly has 1 output and 1 input "
     "registers"),
])
def test_checks(line, message):
    assert_verify_error(func(SIGNATURE, "!" + line, "func.return"), "tile.inline_asm", message)
