"""The memory stage around ``ws.warp_specialize`` (a RunsInWarpGroups op): insert-barriers
synchronizes everything pending before it (all warps are there), each region on its own
after; allocate-shared keeps what a region uses for the whole op."""

from __future__ import annotations

import pytest

from polytile.gpu.allocation import AllocateShared
from polytile.gpu.membar import InsertBarriers
from polytile.ir_testing import dedent

from tests.gpu.memory_ir import run

pytest.importorskip("polytile_warpspec")

OP = "ws.warp_specialize {{consumer_registers = 240, kernel_registers = 240, producer_registers = 40, producer_warps = 4}}"


def test_a_barrier_before_the_split_and_none_between_the_groups():
    text = f"""
    func.func @k(%a: tile<64xf32, {{A}}>, %slot: i32, %phase: i32) attributes {{{{kernel = true}}}} {{{{
      %ring = gpu.local_alloc : !gpu.buffer<2x64xf32, {{S}}>
      %full = gpu.local_alloc : !gpu.buffer<2xi64, {{S}}>
      gpu.mbarrier_init %full {{{{count = 1}}}}
      %empty = gpu.local_alloc : !gpu.buffer<2xi64, {{S}}>
      gpu.mbarrier_init %empty {{{{count = 2}}}}
      %t = arith.constant {{{{value = true}}}} : i1
      %r = {OP} : tile<64xf32, {{A}}> {{{{
        gpu.mbarrier_wait %full, %slot, %phase
        %x = gpu.local_load_slot %ring, %slot : tile<64xf32, {{A}}>
        gpu.mbarrier_arrive %empty, %slot, %t
        ws.yield %x
      }}}} {{{{
        gpu.mbarrier_wait %empty, %slot, %phase
        ws.yield
      }}}}
      %out = gpu.local_alloc source(%r) : !gpu.buffer<64xf32, {{S}}>
      func.return
    }}}}
    """
    out = run(text, AllocateShared(), InsertBarriers())
    lines = [line.strip() for line in out.splitlines()]
    split = next(i for i, line in enumerate(lines) if "ws.warp_specialize" in line)
    # The barriers' initialization is shown to every warp before the groups start.
    assert lines[split - 1] == "gpu.barrier"
    end = next(i for i, line in enumerate(lines) if line.startswith("%out ="))
    inside = lines[split + 1:end]
    assert "gpu.barrier" not in inside[:-1], out
    # After the op (the consumers alone), a buffer over the ring's bytes is written: a
    # barrier first (the consumers' own, when lowered).
    assert inside[-1] == "gpu.barrier" and "gpu.buffer_offset = 0" in lines[end], out


def test_what_a_region_uses_lives_for_the_whole_op():
    text = f"""
    func.func @k(%a: tile<64xf32, {{A}}>) attributes {{{{kernel = true}}}} {{{{
      {OP} {{{{
        %x = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {{S}}>
        %y = gpu.local_load %x : tile<64xf32, {{A}}>
        ws.yield
      }}}} {{{{
        %z = gpu.local_alloc source(%a) : !gpu.buffer<64xf32, {{S}}>
        %w = gpu.local_load %z : tile<64xf32, {{A}}>
        ws.yield
      }}}}
      func.return
    }}}}
    """
    out = run(text, AllocateShared())
    offsets = [line.split("gpu.buffer_offset = ")[1].split("}")[0] for line in out.splitlines()
               if "gpu.buffer_offset" in line]
    # One after the other in program order, but at the same time: not the same bytes.
    assert len(offsets) == 2 and offsets[0] != offsets[1], out
