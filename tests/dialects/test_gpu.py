"""The ops of polytile.dialects.gpu (layout conversions) and the layouts as attributes."""

from __future__ import annotations

import numpy as np
import pytest

from polytile.dialects.gpu import ConvertLayoutOp
from polytile.ir.opdef import Pure

from ._util import assert_roundtrip, assert_verify_error, func

BLOCKED_1 = "#gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [2], order = [0]>"
BLOCKED_2 = "#gpu.blocked<size_per_thread = [2], threads_per_warp = [32], warps_per_cta = [1], order = [0]>"

SHARED = "#gpu.shared<vector = 2, per_phase = 1, max_phase = 4, order = [0]>"
BUFFER = f"!gpu.buffer<64xi32, {SHARED}>"
BARRIERS = "!gpu.buffer<3xi64, #gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>>"
RING = "!gpu.buffer<3x64xi32, #gpu.shared<vector = 2, per_phase = 1, max_phase = 4, order = [1, 0]>>"

ROUNDTRIP = {
    "buffers_and_barrier": func(
        f"%a: tile<64xi32, {BLOCKED_1}>",
        f"%0 = gpu.local_alloc source(%a) {{gpu.buffer_offset = 0}} : {BUFFER}",
        f"%1 = gpu.local_alloc : {BUFFER}",
        "gpu.local_store %a, %1",
        f"%2 = gpu.local_load %0 : tile<64xi32, {BLOCKED_2}>",
        "gpu.barrier",
        "func.return",
    ),
    "convert_layout": func(
        f"%a: tile<64xi32, {BLOCKED_1}>",
        f"%0 = gpu.convert_layout %a : tile<64xi32, {BLOCKED_2}>",
        f"%1 = gpu.convert_layout %0 : tile<64xi32, {BLOCKED_1}>",
        "func.return",
    ),
    "async_copies_into_a_ring": func(
        f"%p: tile<64xptr<i32>, {BLOCKED_1}>, %m: tile<64xi1, {BLOCKED_1}>, %slot: i32",
        f"%0 = gpu.local_alloc : {RING}",
        "gpu.async_copy %p, %0, %slot mask(%m)",
        "gpu.async_copy %p, %0, %slot",
        "gpu.async_commit_group",
        "gpu.async_wait {pending = 1}",
        f"%1 = gpu.local_load_slot %0, %slot : tile<64xi32, {BLOCKED_2}>",
        f"%2 = gpu.local_load_slot %0, %slot {{offsets = [32]}} : tile<32xi32, {BLOCKED_2}>",
        "func.return",
    ),
    "a_ring_completing_on_mbarriers": func(
        f"%p: tile<64xptr<i32>, {BLOCKED_1}>, %slot: i32, %phase: i32",
        f"%0 = gpu.local_alloc : {RING}",
        f"%1 = gpu.local_alloc : {BARRIERS}",
        "gpu.mbarrier_init %1 {count = 64}",
        "gpu.async_copy %p, %0, %slot",
        "gpu.async_copy_arrive %1, %slot",
        "gpu.mbarrier_wait %1, %slot, %phase",
        "%2 = arith.constant {value = true} : i1",
        "gpu.mbarrier_arrive %1, %slot, %2",
        "gpu.mbarrier_inval %1",
        "gpu.fence_async_shared",
        "func.return",
    ),
    "asynchronous_dots_and_their_wait": func(
        f"%a: tile<64xi32, {BLOCKED_1}>, %b: tile<64xi32, {BLOCKED_1}>",
        f"%0 = gpu.local_alloc : {RING}",
        f"%1, %2 = gpu.dot_wait values(%a, %b) buffers(%0) {{pending = 1}} : tile<64xi32, {BLOCKED_1}>, "
        f"tile<64xi32, {BLOCKED_1}>",
        f"%3 = gpu.dot_wait values(%1) {{pending = 0}} : tile<64xi32, {BLOCKED_1}>",
        "func.return",
    ),
}


@pytest.mark.parametrize("name", sorted(ROUNDTRIP))
def test_roundtrip(name):
    assert_roundtrip(ROUNDTRIP[name])


def test_convert_layout_is_pure_and_keeps_the_values():
    assert ConvertLayoutOp.has_trait(Pure)
    x = np.arange(4)
    assert ConvertLayoutOp.semantics(x) is x


def test_convert_layout_cannot_change_shape_or_element():
    assert_verify_error(
        func(f"%a: tile<64xi32, {BLOCKED_1}>", f"!%0 = gpu.convert_layout %a : tile<64xf32, {BLOCKED_2}>",
             "func.return"),
        "gpu.convert_layout",
        f"converts the layout only; tile<64xi32, {BLOCKED_1}> and tile<64xf32, {BLOCKED_2}> differ in shape or "
        "element type",
    )


def test_buffer_ops_check_shape_and_element():
    assert_verify_error(
        func(f"%a: tile<64xi32, {BLOCKED_1}>", f"%0 = gpu.local_alloc : {BUFFER}",
             f"!%1 = gpu.local_load %0 : tile<64xf32, {BLOCKED_1}>", "func.return"),
        "gpu.local_load",
        f"tile<64xf32, {BLOCKED_1}> and {BUFFER} differ in shape or element type",
    )


def test_a_buffer_needs_a_shared_layout():
    from polytile.errors import IRParseError
    from polytile.ir import parse_module

    with pytest.raises(IRParseError, match="a buffer's layout must be a shared layout"):
        parse_module(func("", f"%0 = gpu.local_alloc : !gpu.buffer<64xi32, {BLOCKED_1}>", "func.return"))


def test_a_ring_slot_must_hold_the_tile():
    assert_verify_error(
        func(f"%p: tile<64xptr<i32>, {BLOCKED_1}>, %slot: i32", f"%0 = gpu.local_alloc : {RING}",
             f"!%1 = gpu.local_load_slot %0, %slot {{offsets = [48]}} : tile<32xi32, {BLOCKED_2}>", "func.return"),
        "gpu.local_load_slot",
        f"tile<32xi32, {BLOCKED_2}> at offsets [48] is not inside a slot of {RING}",
    )
    assert_verify_error(
        func(f"%p: tile<32xptr<i32>, {BLOCKED_1}>, %slot: i32", f"%0 = gpu.local_alloc : {RING}",
             "!gpu.async_copy %p, %0, %slot", "func.return"),
        "gpu.async_copy",
        f"{RING} is not a ring of tile<32xi32, {BLOCKED_1}> (a leading dimension of slots, then the tile's shape)",
    )


def test_a_dot_wait_gives_back_each_value_it_waits_for():
    assert_verify_error(
        func(f"%a: tile<64xi32, {BLOCKED_1}>",
             f"!%0 = gpu.dot_wait values(%a) buffers() {{pending = 1}} : tile<64xi32, {BLOCKED_2}>", "func.return"),
        "gpu.dot_wait", "the outputs are the waited values: one of the same type for each")
    assert_verify_error(
        func(f"%a: tile<64xi32, {BLOCKED_1}>",
             f"!%0 = gpu.dot_wait values(%a) buffers() {{pending = -1}} : tile<64xi32, {BLOCKED_1}>", "func.return"),
        "gpu.dot_wait", "pending must be >= 0, got -1")


def test_mbarriers_live_in_a_buffer_of_i64_and_expect_a_count_that_fits():
    assert_verify_error(
        func("", f"%0 = gpu.local_alloc : {BUFFER}", "!gpu.mbarrier_init %0 {count = 4}", "func.return"),
        "gpu.mbarrier_init", f"operand 'barriers' must be a buffer of mbarriers (!gpu.buffer<Nxi64, ...>), got {BUFFER}")
    assert_verify_error(
        func("", f"%0 = gpu.local_alloc : {BARRIERS}", "!gpu.mbarrier_init %0 {count = 0}", "func.return"),
        "gpu.mbarrier_init", "an mbarrier expects between 1 and 2^20 - 1 arrivals per phase, got 0")
    assert_verify_error(
        func("%slot: i32", f"%0 = gpu.local_alloc : {RING}", "!gpu.async_copy_arrive %0, %slot", "func.return"),
        "gpu.async_copy_arrive",
        f"operand 'barriers' must be a buffer of mbarriers (!gpu.buffer<Nxi64, ...>), got {RING}")
