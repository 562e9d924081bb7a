"""allocate-shared: offsets by lifetime (scratch of an op, buffers, callees), totals
over the call graph, and the per-block limit.  IR text in, IR text out."""

from __future__ import annotations

import pytest

from polytile.errors import CompilationError, OutOfResourcesError
from polytile.gpu.allocation import AllocateShared, Piece, place
from polytile.ir_testing import dedent

from .memory_ir import run

# A 64 x f32 conversion between {A} and {B} needs the whole tile: 256 bytes.
TWO_CONVERSIONS = """
func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
  %0 = gpu.convert_layout %a : tile<64xf32, {B}>
  %1 = gpu.convert_layout %0 : tile<64xf32, {A}>
  func.return
}}
"""


def test_scratch_of_ops_that_run_one_after_the_other_shares_bytes():
    assert run(TWO_CONVERSIONS, AllocateShared()) == dedent("""
    func.func @k(%a: tile<64xf32, {A}>) attributes {gpu.shared_bytes = 256, kernel = true} {
      %0 = gpu.convert_layout %a {gpu.scratch_offset = 0} : tile<64xf32, {B}>
      %1 = gpu.convert_layout %0 {gpu.scratch_offset = 0} : tile<64xf32, {A}>
      func.return
    }
    """)


def test_conversions_in_registers_need_no_scratch():
    text = """
    func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
      %0 = gpu.convert_layout %a : tile<64xf32, {A}>
      func.return
    }}
    """
    out = run(text, AllocateShared())
    assert "gpu.scratch_offset" not in out and "gpu.shared_bytes = 0" in out


BUFFERS = """
func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
  %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
  %1 = gpu.convert_layout %a : tile<64xf32, {B}>
  %2 = gpu.local_load %0 : tile<64xf32, {A}>
  %3 = gpu.local_alloc source(%2) : !gpu.buffer<64xf32, {S}>
  %4 = gpu.local_load %3 : tile<64xf32, {A}>
  func.return
}}
"""


def test_a_buffer_holds_its_bytes_until_its_last_use_and_then_they_are_reused():
    # %0 lives until %2: the conversion between takes other bytes; %3 starts after %0's
    # last use, so it reuses offset 0.
    assert run(BUFFERS, AllocateShared()) == dedent("""
    func.func @k(%a: tile<64xf32, {A}>) attributes {gpu.shared_bytes = 512, kernel = true} {
      %0 = gpu.local_alloc source(%a) {gpu.buffer_offset = 0} : !gpu.buffer<64xf32, {S}>
      %1 = gpu.convert_layout %a {gpu.scratch_offset = 256} : tile<64xf32, {B}>
      %2 = gpu.local_load %0 : tile<64xf32, {A}>
      %3 = gpu.local_alloc source(%2) {gpu.buffer_offset = 0} : !gpu.buffer<64xf32, {S}>
      %4 = gpu.local_load %3 : tile<64xf32, {A}>
      func.return
    }
    """)


def test_a_buffer_used_in_a_loop_lives_for_the_whole_loop():
    text = """
    func.func @k(%a: tile<64xf32, {A}>, %n: i32) attributes {{kernel = true}} {{
      %c0 = arith.constant {{value = 0}} : i32
      %c1 = arith.constant {{value = 1}} : i32
      %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
      %1 = scf.for %c0, %n, %c1, %a : tile<64xf32, {A}> {{
      ^bb0(%i: i32, %x: tile<64xf32, {A}>):
        %2 = gpu.local_load %0 : tile<64xf32, {A}>
        %3 = gpu.convert_layout %2 : tile<64xf32, {B}>
        %4 = gpu.convert_layout %3 : tile<64xf32, {A}>
        scf.yield %4
      }}
      %5 = gpu.convert_layout %1 : tile<64xf32, {B}>
      func.return
    }}
    """
    out = run(text, AllocateShared())
    # The conversions in the loop overlap the buffer's lifetime (the load comes again in
    # the next iteration); the one after the loop does not.
    assert out.count("gpu.scratch_offset = 256") == 2
    assert "%5 = gpu.convert_layout %1 {gpu.scratch_offset = 0}" in out
    assert "gpu.shared_bytes = 512" in out


CALLS = """
func.func @helper(%a: tile<64xf32, {A}>) -> tile<64xf32, {A}> attributes {{noinline = true}} {{
  %0 = gpu.convert_layout %a : tile<64xf32, {B}>
  %1 = gpu.convert_layout %0 : tile<64xf32, {A}>
  func.return %1
}}
func.func @k(%a: tile<64xf32, {A}>) attributes {{kernel = true}} {{
  %0 = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {S}>
  %1 = func.call %a {{callee = @helper}} : tile<64xf32, {A}>
  %2 = gpu.local_load %0 : tile<64xf32, {A}>
  %3 = func.call %2 {{callee = @helper}} : tile<64xf32, {A}>
  func.return
}}
"""


def test_a_callee_is_placed_per_call_site_and_counts_in_the_kernel_total():
    out = run(CALLS, AllocateShared())
    assert "func.func @helper(%a: tile<64xf32, {A}>) -> tile<64xf32, {A}> attributes {gpu.shared_bytes = 256, " \
           "noinline = true}" in out
    # While the buffer lives the callee gets the bytes after it; afterwards, offset 0.
    assert "%1 = func.call %a {callee = @helper, gpu.scratch_offset = 256}" in out
    assert "%3 = func.call %2 {callee = @helper, gpu.scratch_offset = 0}" in out
    assert "attributes {gpu.shared_bytes = 512, kernel = true}" in out


def test_more_than_the_block_allows_names_kernel_need_and_limit():
    with pytest.raises(OutOfResourcesError) as info:
        run(BUFFERS, AllocateShared(max_shared_bytes=300, split_scratch_over_limit=False))
    error = info.value
    assert isinstance(error, CompilationError)
    assert (error.kernel, error.resource, error.need, error.limit, error.remedies_tried) == \
        ("k", "shared memory", 512, 300, ())
    assert "kernel 'k' needs 512 bytes of shared memory, more than the 300 bytes sm_90a gives a block" in str(error)
    assert "256 bytes for 'gpu.local_alloc'" in str(error)


def test_over_the_limit_the_conversions_go_in_rounds_until_the_kernel_fits():
    # 256 bytes of buffer live across the conversion: it may keep 44 of its 256 bytes,
    # so it goes in 8 rounds of 32 bytes.
    out = run(BUFFERS, AllocateShared(max_shared_bytes=300))
    assert "%1 = gpu.convert_layout %a {gpu.scratch_offset = 256, gpu.scratch_rounds = 8}" in out
    assert "gpu.shared_bytes = 288" in out


def test_when_rounds_are_not_enough_the_error_says_they_were_tried():
    # The two buffers alone need 256 bytes each at different times: 256 is the floor.
    with pytest.raises(OutOfResourcesError) as info:
        run(BUFFERS, AllocateShared(max_shared_bytes=200))
    assert info.value.remedies_tried == ("conversions-in-rounds",)
    assert "(after trying: conversions-in-rounds)" in str(info.value)


def test_max_scratch_bytes_caps_every_conversion():
    out = run(BUFFERS, AllocateShared(max_scratch_bytes=64))
    assert "gpu.scratch_rounds = 4}" in out and "gpu.shared_bytes = 320" in out


def test_recursive_noinline_functions_are_refused():
    text = """
    func.func @f(%x: i32) attributes {{noinline = true}} {{
      func.call %x {{callee = @f}}
      func.return
    }}
    """
    with pytest.raises(CompilationError, match="call each other in a cycle"):
        run(text, AllocateShared())


def test_first_fit_by_size_reuses_holes():
    pieces = [Piece("a", "x", 64, 0, 1), Piece("b", "x", 32, 2, 3), Piece("c", "x", 32, 0, 3), Piece("d", "x", 16, 2, 2)]
    assert place(pieces) == 96
    assert [p.offset for p in pieces] == [0, 0, 64, 32]
