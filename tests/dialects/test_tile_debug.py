"""The tile ops of polytile.dialects.tile_debug: print, assert, barrier, assume."""

from __future__ import annotations

import pytest

from polytile.ir.opdef import Pure

from polytile.dialects.tile_debug import AssertOp, AssumeOp, BarrierOp, PrintOp

from ._util import assert_roundtrip, assert_verify_error, func

ROUNDTRIP = {
    "debug": func(
        "%x: f32, %t: tile<4xi32>, %m: tile<4xi1>, %c: i1",
        "tile.print",
        "tile.print %x, %t {hex = true, prefix = \"x, t: \"}",
        "tile.assert %m {message = \"t must be positive\"}",
        "tile.assert %c",
        "tile.barrier",
        "tile.assume %m",
        "tile.assume %c",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_debug_ops_have_side_effects():
    for op in (PrintOp, AssertOp, BarrierOp, AssumeOp):
        assert not op.has_trait(Pure)


@pytest.mark.parametrize("line, op, message", [
    ("tile.print %t, %t8", "tile.print", "prints tiles of one shape (scalars may be mixed in)"),
    ("tile.assert %t", "tile.assert", "operand 'condition' must be i1 or a tile of i1, got tile<4xi32>"),
    ("tile.assert %c {message = 3}", "tile.assert", "attribute 'message' must be a string, got 3"),
    ("tile.barrier %c", "tile.barrier", "expects 0 operands, got 1"),
    ("tile.assume %t", "tile.assume", "operand 'condition' must be i1 or a tile of i1, got tile<4xi32>"),
])
def test_debug_checks(line, op, message):
    assert_verify_error(func("%c: i1, %t: tile<4xi32>, %t8: tile<8xi32>", "!" + line, "func.return"), op, message)
