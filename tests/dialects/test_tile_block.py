"""The block-pointer ops of polytile.dialects.tile_block: make_block_ptr, advance,
load_block and store_block (round trips and verifier messages)."""

from __future__ import annotations

import pytest

from ._util import assert_roundtrip, assert_verify_error, func

SIGNATURE = "%p: ptr<f16>, %pi: ptr<i32>, %m: i64, %n: i64, %o: i32, %b: block_ptr<16x32xf16>, %t: tile<16x32xf16>"

ROUNDTRIP = {
    "make-advance-load-store": func(
        SIGNATURE,
        "%0 = tile.make_block_ptr %p shape(%m, %n) strides(%n, %m) offsets(%o, %o) "
        "{block_shape = [16, 32], order = [1, 0]} : block_ptr<16x32xf16>",
        "%1 = tile.advance %0, %o, %o : block_ptr<16x32xf16>",
        "%2 = tile.load_block %1 : tile<16x32xf16>",
        "%3 = tile.load_block %1 {boundary_check = [0, 1], padding = \"nan\"} : tile<16x32xf16>",
        "tile.store_block %1, %3 {boundary_check = [1]}",
        "tile.store_block %b, %2",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


MAKE = "tile.make_block_ptr %p shape(%m, %n) strides(%n, %m) offsets(%o, %o)"


@pytest.mark.parametrize("line, op, message", [
    (f"%0 = {MAKE} {{block_shape = [16, 32], order = [0, 0]}} : block_ptr<16x32xf16>", "tile.make_block_ptr",
     "order [0, 0] is not a permutation of 0..1"),
    ("%0 = tile.make_block_ptr %p shape(%m) strides(%n, %m) offsets(%o, %o) "
     "{block_shape = [16, 32], order = [1, 0]} : block_ptr<16x32xf16>", "tile.make_block_ptr",
     "has 1 shape for a block of rank 2"),
    (f"%0 = {MAKE} {{block_shape = [16, 0], order = [1, 0]}} : block_ptr<16x32xf16>", "tile.make_block_ptr",
     "block_shape [16, 0] must be positive sizes"),
    (f"%0 = {MAKE} {{block_shape = [16, 32], order = [1, 0]}} : block_ptr<16x32xf32>", "tile.make_block_ptr",
     "a block of [16, 32] through ptr<f16> is block_ptr<16x32xf16>, not block_ptr<16x32xf32>"),
    ("%0 = tile.advance %b, %o : block_ptr<16x32xf16>", "tile.advance", "has 1 offsets for a block of rank 2"),
    ("%0 = tile.load_block %b : tile<32x16xf16>", "tile.load_block",
     "loading through block_ptr<16x32xf16> gives tile<16x32xf16>, not tile<32x16xf16>"),
    ("%0 = tile.load_block %b {boundary_check = [2]} : tile<16x32xf16>", "tile.load_block",
     "boundary_check dimension 2 is out of range for a block of rank 2"),
    ("%0 = tile.load_block %b {boundary_check = [0, 0]} : tile<16x32xf16>", "tile.load_block",
     "boundary_check [0, 0] must be distinct dimension numbers"),
    ("%0 = tile.load_block %b {padding = \"inf\"} : tile<16x32xf16>", "tile.load_block",
     "unknown padding 'inf'; use 'zero', 'nan' or ''"),
    ("tile.store_block %b, %t {boundary_check = [3]}", "tile.store_block",
     "boundary_check dimension 3 is out of range for a block of rank 2"),
])
def test_block_pointer_checks(line, op, message):
    assert_verify_error(func(SIGNATURE + ", %t2: tile<32x16xf16>", "!" + line, "func.return"), op, message)


def test_store_block_value_must_match_the_block():
    assert_verify_error(func(SIGNATURE + ", %t2: tile<32x16xf16>", "!tile.store_block %b, %t2", "func.return"),
                        "tile.store_block", "cannot store tile<32x16xf16> through block_ptr<16x32xf16>")


def test_nan_padding_needs_floats():
    assert_verify_error(func("%b: block_ptr<4xi32>", "!%0 = tile.load_block %b {padding = \"nan\"} : tile<4xi32>",
                             "func.return"), "tile.load_block", "padding 'nan' needs a float block, not i32")
