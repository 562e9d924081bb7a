"""unbatch-dots: a batched (3-D) tile.dot as 2-D dots through shape ops.  IR text in, IR
text out; the kernels run on the CTA simulator in test_lowering_dot_kernels.py and on the
GPU in tests/language/test_dot.py (test_batched_dot)."""

from __future__ import annotations

import pytest

from polytile.errors import CompilationError
from polytile.gpu.unbatch_dots import UnbatchDots
from polytile.ir_testing import apply_passes, dedent

def batched(batch: str) -> str:
    """The kernel with batch ``batch`` ("2x"; "" for a 2-D dot)."""
    return """
func.func @k(%a: tile<BATCH16x8xf16>, %b: tile<BATCH8x32xf16>, %c: tile<BATCH16x32xf32>) -> tile<BATCH16x32xf32> attributes {kernel = true} {
  %d = tile.dot %a, %b, %c {input_precision = "ieee"} : tile<BATCH16x32xf32>
  func.return %d
}
""".replace("BATCH", batch)


BATCH_OF_TWO = batched("2x")


def test_a_batch_of_two_is_split_into_even_and_odd_entries_and_stacked_back():
    assert apply_passes(BATCH_OF_TWO, UnbatchDots()) == dedent("""
    func.func @k(%a: tile<2x16x8xf16>, %b: tile<2x8x32xf16>, %c: tile<2x16x32xf32>) -> tile<2x16x32xf32> attributes {kernel = true} {
      %0 = tile.trans %a {order = [1, 2, 0]} : tile<16x8x2xf16>
      %1 = tile.reshape %0 : tile<16x8x1x2xf16>
      %2, %3 = tile.split %1 : tile<16x8x1xf16>, tile<16x8x1xf16>
      %4 = tile.trans %2 {order = [2, 0, 1]} : tile<1x16x8xf16>
      %5 = tile.trans %3 {order = [2, 0, 1]} : tile<1x16x8xf16>
      %6 = tile.trans %b {order = [1, 2, 0]} : tile<8x32x2xf16>
      %7 = tile.reshape %6 : tile<8x32x1x2xf16>
      %8, %9 = tile.split %7 : tile<8x32x1xf16>, tile<8x32x1xf16>
      %10 = tile.trans %8 {order = [2, 0, 1]} : tile<1x8x32xf16>
      %11 = tile.trans %9 {order = [2, 0, 1]} : tile<1x8x32xf16>
      %12 = tile.trans %c {order = [1, 2, 0]} : tile<16x32x2xf32>
      %13 = tile.reshape %12 : tile<16x32x1x2xf32>
      %14, %15 = tile.split %13 : tile<16x32x1xf32>, tile<16x32x1xf32>
      %16 = tile.trans %14 {order = [2, 0, 1]} : tile<1x16x32xf32>
      %17 = tile.trans %15 {order = [2, 0, 1]} : tile<1x16x32xf32>
      %18 = tile.reshape %4 : tile<16x8xf16>
      %19 = tile.reshape %10 : tile<8x32xf16>
      %20 = tile.reshape %16 : tile<16x32xf32>
      %21 = tile.dot %18, %19, %20 {input_precision = "ieee"} : tile<16x32xf32>
      %22 = tile.reshape %21 : tile<1x16x32xf32>
      %23 = tile.reshape %5 : tile<16x8xf16>
      %24 = tile.reshape %11 : tile<8x32xf16>
      %25 = tile.reshape %17 : tile<16x32xf32>
      %26 = tile.dot %23, %24, %25 {input_precision = "ieee"} : tile<16x32xf32>
      %27 = tile.reshape %26 : tile<1x16x32xf32>
      %28 = tile.trans %22 {order = [1, 2, 0]} : tile<16x32x1xf32>
      %29 = tile.trans %27 {order = [1, 2, 0]} : tile<16x32x1xf32>
      %30 = tile.join %28, %29 : tile<16x32x1x2xf32>
      %31 = tile.reshape %30 : tile<16x32x2xf32>
      %32 = tile.trans %31 {order = [2, 0, 1]} : tile<2x16x32xf32>
      func.return %32
    }
    """)


def test_a_batch_of_one_is_a_reshape_to_two_dimensions_and_back():
    text = batched("1x")
    assert apply_passes(text, UnbatchDots()) == dedent("""
    func.func @k(%a: tile<1x16x8xf16>, %b: tile<1x8x32xf16>, %c: tile<1x16x32xf32>) -> tile<1x16x32xf32> attributes {kernel = true} {
      %0 = tile.reshape %a : tile<16x8xf16>
      %1 = tile.reshape %b : tile<8x32xf16>
      %2 = tile.reshape %c : tile<16x32xf32>
      %3 = tile.dot %0, %1, %2 {input_precision = "ieee"} : tile<16x32xf32>
      %4 = tile.reshape %3 : tile<1x16x32xf32>
      func.return %4
    }
    """)


def test_deeper_batches_halve_once_per_level():
    out = apply_passes(batched("8x"), UnbatchDots())
    assert out.count("tile.dot") == 8 and out.count("tile.join") == 4 + 2 + 1
    assert out.count("tile.split") == 3 * (1 + 2 + 4)  # a, b and acc at each level


def test_two_dimensional_dots_are_left_alone():
    text = batched("")
    assert apply_passes(text, UnbatchDots()) == apply_passes(text)


def test_a_batch_that_is_no_power_of_two_is_an_error():
    with pytest.raises(CompilationError, match="a batched pl.dot needs a power-of-two batch, got 3"):
        apply_passes(batched("3x"), UnbatchDots())
