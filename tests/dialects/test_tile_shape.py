"""The tile ops of polytile.dialects.tile_shape: scans, join, split, cat and gather."""

from __future__ import annotations

import pytest

from ._util import assert_roundtrip, assert_verify_error, func, ir

ROUNDTRIP = {
    "scans": ir("""
        func.func @f(%t: tile<4x8xf32>, %idx: tile<4x8xi32>) -> (tile<4x8xf32>, tile<4x8xi32>, tile<4x8xf32>) {
          %0, %1 = tile.scan %t, %idx {axis = 1} : tile<4x8xf32>, tile<4x8xi32> {
          ^bb0(%va: f32, %ia: i32, %vb: f32, %ib: i32):
            %2 = arith.addf %va, %vb : f32
            %3 = arith.muli %ia, %ib : i32
            tile.scan_return %2, %3
          }
          %4 = tile.scan %0 {axis = 0, reverse = true} : tile<4x8xf32> {
          ^bb0(%a: f32, %b: f32):
            %5 = arith.maximumf %a, %b : f32
            tile.scan_return %5
          }
          func.return %0, %1, %4
        }
    """),
    "join-split-cat": func(
        "%a: tile<4x8xf32>, %v: tile<8xi32>, %p: tile<2xptr<f16>>",
        "%0 = tile.join %a, %a : tile<4x8x2xf32>",
        "%1, %2 = tile.split %0 : tile<4x8xf32>, tile<4x8xf32>",
        "%3 = tile.cat %v, %v : tile<16xi32>",
        "%4, %5 = tile.split %p : ptr<f16>, ptr<f16>",
        "func.return",
    ),
    "gather": func(
        "%src: tile<16x8xf32>, %rows: tile<32x8xi32>, %cols: tile<16x4xi64>",
        "%0 = tile.gather %src, %rows {axis = 0} : tile<32x8xf32>",
        "%1 = tile.gather %src, %cols {axis = 1} : tile<16x4xf32>",
        "func.return",
    ),
    "histogram": func(
        "%v: tile<256xi32>, %u: tile<64xu8>, %m: tile<64xi1>",
        "%0 = tile.histogram %v {num_bins = 32} : tile<32xi32>",
        "%1 = tile.histogram %u mask(%m) {num_bins = 256} : tile<256xi32>",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


SIGNATURE = "%x: f32, %t: tile<4xf32>, %t2: tile<4x8xf32>, %ti: tile<4x8xi32>"


@pytest.mark.parametrize("lines, op, message", [
    (["%0 = tile.scan {axis = 0} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.scan_return %a", "!}"],
     "tile.scan", "needs at least one operand"),
    (["%0, %1 = tile.scan %t, %t2 {axis = 0} : tile<4xf32>, tile<4x8xf32> {",
      "^bb0(%a: f32, %b: f32, %c: f32, %d: f32):", "  tile.scan_return %a, %b", "!}"],
     "tile.scan", "operands must have one shape"),
    (["%0 = tile.scan %t2 {axis = 2} : tile<4x8xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.scan_return %a", "!}"],
     "tile.scan", "axis 2 is out of range for rank 2"),
    (["%0 = tile.scan %t2 {axis = 1} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.scan_return %a", "!}"],
     "tile.scan", "scanning tile<4x8xf32> gives tile<4x8xf32>, not tile<4xf32>"),
    (["%0, %1 = tile.scan %t {axis = 0} : tile<4xf32>, tile<4xf32> {", "^bb0(%a: f32, %b: f32):",
      "  tile.scan_return %a", "!}"], "tile.scan", "scans 1 operands but has 2 results"),
    (["%0 = tile.scan %t {axis = 0} : tile<4xf32> {", "^bb0(%a: f32):", "  tile.scan_return %a", "!}"],
     "tile.scan", "the combine region must take two scalars per operand: (f32, f32)"),
    (["%0 = tile.scan %t {axis = 0} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):",
      "  %c = arith.cmpf %a, %b {predicate = \"olt\"} : i1", "  !tile.scan_return %c", "}"],
     "tile.scan_return", "returns (i1) but the scan combines (f32)"),
    (["%0 = tile.scan %t {axis = 0} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.reduce_return %a", "!}"],
     "tile.scan", "region 'combine' must end with 'tile.scan_return', found 'tile.reduce_return'"),
    (["%0 = tile.scan %x {axis = 0} : tile<4xf32> {", "^bb0(%a: f32, %b: f32):", "  tile.scan_return %a", "!}"],
     "tile.scan", "operand 'sources' must be a tile, got f32"),
])
def test_scan_checks(lines, op, message):
    assert_verify_error(func(SIGNATURE, *lines, "func.return"), op, message)


def test_scan_return_must_be_inside_a_scan():
    assert_verify_error("!tile.scan_return\n", "tile.scan_return",
                        "must be inside 'tile.scan', found in 'builtin.module'")


@pytest.mark.parametrize("line, op, message", [
    ("%0 = tile.join %t2, %ti : tile<4x8x2xf32>", "tile.join",
     "joins tiles of one type, got tile<4x8xf32> and tile<4x8xi32>"),
    ("%0 = tile.join %t, %t : tile<2x4xf32>", "tile.join", "joining two tile<4xf32> gives tile<4x2xf32>, not tile<2x4xf32>"),
    ("%0 = tile.join %x, %x : tile<2xf32>", "tile.join", "operand 'lhs' must be a tile, got f32"),
    ("%0, %1 = tile.split %t2 : tile<4xf32>, tile<4xf32>", "tile.split",
     "splits a tile whose last dimension is 2, got tile<4x8xf32>"),
    ("%0, %1 = tile.split %t42 : tile<4xf32>, tile<4x2xf32>", "tile.split",
     "splitting tile<4x2xf32> gives two tile<4xf32>, not tile<4x2xf32>"),
    ("%0, %1 = tile.split %t2p : f32, f16", "tile.split", "splitting tile<2xf32> gives two f32, not f16"),
    ("%0 = tile.cat %t2, %t2 : tile<8x8xf32>", "tile.cat",
     "concatenates 1-D tiles of one element type, got tile<4x8xf32> and tile<4x8xf32>"),
    ("%0 = tile.cat %t, %t8i : tile<12xf32>", "tile.cat",
     "concatenates 1-D tiles of one element type, got tile<4xf32> and tile<8xi32>"),
    ("%0 = tile.cat %t, %t : tile<4xf32>", "tile.cat", "concatenating tile<4xf32> and tile<4xf32> gives tile<8xf32>, "
                                                        "not tile<4xf32>"),
])
def test_join_split_cat_checks(line, op, message):
    signature = SIGNATURE + ", %t42: tile<4x2xf32>, %t2p: tile<2xf32>, %t8i: tile<8xi32>"
    assert_verify_error(func(signature, "!" + line, "func.return"), op, message)


@pytest.mark.parametrize("line, message", [
    ("%0 = tile.gather %t2, %t2 {axis = 0} : tile<4x8xf32>", "needs an integer index tile, got tile<4x8xf32>"),
    ("%0 = tile.gather %t2, %t8i {axis = 0} : tile<8xf32>", "needs an index of the source's rank 2, got tile<8xi32>"),
    ("%0 = tile.gather %t2, %ti {axis = 2} : tile<4x8xf32>", "axis 2 is out of range for a tile of rank 2"),
    ("%0 = tile.gather %t2, %i48 {axis = 0} : tile<4x8xf32>",
     "the index's dimension 1 is 16, but the source's is 8: every dimension but the axis must match"),
    ("%0 = tile.gather %t2, %ti {axis = 0} : tile<4x8xi32>",
     "gathering from tile<4x8xf32> by tile<4x8xi32> gives tile<4x8xf32>, not tile<4x8xi32>"),
])
def test_gather_checks(line, message):
    signature = SIGNATURE + ", %t8i: tile<8xi32>, %i48: tile<4x16xi32>"
    assert_verify_error(func(signature, "!" + line, "func.return"), "tile.gather", message)


@pytest.mark.parametrize("line, message", [
    ("%0 = tile.histogram %t2 {num_bins = 8} : tile<8xi32>", "counts the values of a 1-D integer tile, got tile<4x8xf32>"),
    ("%0 = tile.histogram %t8i {num_bins = 6} : tile<6xi32>", "num_bins must be a power of two (a tile's size), got 6"),
    ("%0 = tile.histogram %t8i mask(%t8i) {num_bins = 8} : tile<8xi32>",
     "the mask must be an i1 tile of the input's shape [8], got tile<8xi32>"),
    ("%0 = tile.histogram %t8i {num_bins = 8} : tile<16xi32>", "counts into tile<8xi32>, not tile<16xi32>"),
])
def test_histogram_checks(line, message):
    signature = SIGNATURE + ", %t8i: tile<8xi32>"
    assert_verify_error(func(signature, "!" + line, "func.return"), "tile.histogram", message)
