"""tile.read_clock and tile.processor_id (polytile.dialects.tile_clock): IR text round
trips, the verifier, and what the generic passes may do with them (a clock reading is
never merged, hoisted or deleted; the processor id is pure)."""

from __future__ import annotations

import pytest

from polytile.ir_testing import apply_passes, dedent
from polytile.passes.cse import CommonSubexpressionElimination
from polytile.passes.dce import DeadCodeElimination

from ._util import assert_roundtrip, assert_verify_error, func


ROUNDTRIP = {"clock": func(
    "",
    '%0 = tile.read_clock {clock = "global"} : i64',
    '%1 = tile.read_clock {clock = "cycles"} : i64',
    "%2 = tile.processor_id : i32",
    "func.return",
)}


def test_roundtrip():
    assert_roundtrip(ROUNDTRIP["clock"])


@pytest.mark.parametrize("line, op, message", [
    ('%0 = tile.read_clock {clock = "wall"} : i64', "tile.read_clock", "clock must be one of global, cycles, got 'wall'"),
    ('%0 = tile.read_clock {clock = "global"} : i32', "tile.read_clock", "result must be i64, got i32"),
    ("%0 = tile.processor_id : i64", "tile.processor_id", "result must be i32, got i64"),
])
def test_checks(line, op, message):
    assert_verify_error(func("", "!" + line, "func.return"), op, message)


def test_two_readings_stay_two_and_an_unused_one_stays_but_processor_ids_merge():
    text = """
    func.func @f(%p: ptr<i64>, %q: ptr<i32>) {
      %0 = tile.read_clock {clock = "global"} : i64
      %1 = tile.read_clock {clock = "global"} : i64
      %2 = tile.read_clock {clock = "cycles"} : i64
      %3 = arith.subi %1, %0 : i64
      tile.store %p, %3
      %4 = tile.processor_id : i32
      %5 = tile.processor_id : i32
      %6 = arith.addi %4, %5 : i32
      tile.store %q, %6
      %7 = tile.processor_id : i32
      func.return
    }
    """
    expected = """
    func.func @f(%p: ptr<i64>, %q: ptr<i32>) {
      %0 = tile.read_clock {clock = "global"} : i64
      %1 = tile.read_clock {clock = "global"} : i64
      %2 = tile.read_clock {clock = "cycles"} : i64
      %3 = arith.subi %1, %0 : i64
      tile.store %p, %3
      %4 = tile.processor_id : i32
      %5 = arith.addi %4, %4 : i32
      tile.store %q, %5
      func.return
    }
    """
    assert apply_passes(text, CommonSubexpressionElimination(), DeadCodeElimination()) == dedent(expected)
