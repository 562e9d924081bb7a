"""The CTA simulator's scheduling and happens-before (tests/gpu/llvm_cta_schedule.py) on
small hand-written kernels: warps that meet only at a named barrier, a round that every
thread only arrives at, a proxy fence that is or is not on the path from a write to the
async proxy's read, and a kernel that ends with a copy in flight."""

from __future__ import annotations

import numpy as np
import pytest

from .llvm_cta import SimulationError, run_kernel

_HEADER = """
target triple = "nvptx64-nvidia-cuda"
@smem = external addrspace(3) global [0 x i8], align 1024
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()
"""


def _run(body: str, args: list, num_warps: int = 2) -> None:
    run_kernel({"llvm_ir": _HEADER + body, "kernel_name": "k", "shared_bytes": 2048}, args, num_warps)


def _handoff(consumer_sync: str) -> str:
    # Warp 0 writes shared memory and arrives at barrier 1; warp 1 waits there, then reads.
    return f"""
define void @k(ptr addrspace(1) %out) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %first = icmp ult i32 %tid, 32
  br i1 %first, label %producer, label %consumer
producer:
  %p = getelementptr i32, ptr addrspace(3) @smem, i32 %tid
  %v0 = add i32 %tid, 100
  store i32 %v0, ptr addrspace(3) %p, align 4
  call void asm sideeffect "bar.arrive 1, 64;", "~{{memory}}"()
  br label %done
consumer:
  {consumer_sync}
  %lane = sub i32 %tid, 32
  %q = getelementptr i32, ptr addrspace(3) @smem, i32 %lane
  %v = load i32, ptr addrspace(3) %q, align 4
  %o = getelementptr i32, ptr addrspace(1) %out, i32 %lane
  store i32 %v, ptr addrspace(1) %o, align 4
  br label %done
done:
  ret void
}}
"""


def test_warps_that_meet_only_at_a_named_barrier():
    out = np.zeros(32, np.int32)
    _run(_handoff('call void asm sideeffect "bar.sync 1, 64;", "~{memory}"()'), [out])
    np.testing.assert_array_equal(out, np.arange(32) + 100)


def test_a_read_no_barrier_orders_after_the_write_is_a_race():
    # Warp 1 waits at barrier 2, which warp 0 never reaches: the kernel would hang.
    with pytest.raises(SimulationError, match="no warp can make progress .* barrier 2"):
        _run(_handoff('call void asm sideeffect "bar.sync 2, 64;", "~{memory}"()'), [np.zeros(32, np.int32)])
    # Without any barrier the read races with the write (whichever warp runs first).
    with pytest.raises(SimulationError, match="thread 3[2-9] reads shared byte .* that thread . wrote"):
        _run(_handoff(""), [np.zeros(32, np.int32)])


def test_a_round_every_thread_only_arrives_at():
    body = """
define void @k(ptr addrspace(1) %out) {
entry:
  call void asm sideeffect "bar.arrive 1, 64;", "~{memory}"()
  ret void
}
"""
    _run(body, [np.zeros(1, np.int32)])


def test_named_barrier_counts_are_whole_warps():
    body = """
define void @k(ptr addrspace(1) %out) {
entry:
  call void asm sideeffect "bar.sync 1, 48;", "~{memory}"()
  ret void
}
"""
    with pytest.raises(SimulationError, match="counts 48 threads, not a multiple of the warp size"):
        _run(body, [np.zeros(1, np.int32)])


def _fenced_bulk_store(fence_condition: str) -> str:
    # Thread 0 writes 16 bytes of shared memory, all threads pass a barrier, the thread
    # of ``fence_condition`` fences the proxies, and thread 32 stores the bytes to global
    # memory with a bulk copy (through a one-dimensional tensor map thread 0 built).
    return f"""
define void @k(ptr addrspace(1) %out, ptr addrspace(1) %scratch) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %is0 = icmp eq i32 %tid, 0
  %is32 = icmp eq i32 %tid, 32
  %p0 = zext i1 %is0 to i32
  %p32 = zext i1 %is32 to i32
  %base = ptrtoint ptr addrspace(3) @smem to i32
  %map = add i32 %base, 1024
  %outi = ptrtoint ptr addrspace(1) %out to i64
  %scri = ptrtoint ptr addrspace(1) %scratch to i64
  call void asm sideeffect "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [$0], $2;", "r,r,l"(i32 %map, i32 %p0, i64 %outi)
  call void asm sideeffect "tensormap.replace.tile.rank.shared::cta.b1024.b32 [$0], 0;", "r,r"(i32 %map, i32 %p0)
  call void asm sideeffect "tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [$0], 2;", "r,r"(i32 %map, i32 %p0)
  call void asm sideeffect "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [$0], 0, 4;", "r,r"(i32 %map, i32 %p0)
  call void asm sideeffect "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [$0], 0, 4;", "r,r"(i32 %map, i32 %p0)
  call void asm sideeffect "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [$0], 0;", "r,r"(i32 %map, i32 %p0)
  call void asm sideeffect "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;", "l,r,r"(i64 %scri, i32 %map, i32 %p0)
  br i1 %is0, label %write, label %sync
write:
  store <4 x i32> <i32 1, i32 2, i32 3, i32 4>, ptr addrspace(3) @smem, align 16
  br label %sync
sync:
  call void @llvm.nvvm.barrier0()
  call void asm sideeffect "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;", "l"(i64 %scri)
  br i1 {fence_condition}, label %fence, label %after
fence:
  call void asm sideeffect "fence.proxy.async.shared::cta;", ""()
  br label %after
after:
  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $3, 0; @p cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [$0, {{$1}}], [$2]; }}", "l,r,r,r"(i64 %scri, i32 0, i32 %base, i32 %p32)
  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; @p cp.async.bulk.commit_group; @p cp.async.bulk.wait_group.read 0; }}", "r"(i32 %p32)
  ret void
}}
"""


@pytest.mark.parametrize("fencer, fenced", [("%is32", True), ("%is0", False), ("false", False)])
def test_a_proxy_fence_counts_only_on_the_path_to_the_async_read(fencer, fenced):
    # Thread 0's fence after the barrier is not ordered before thread 32's copy (the PTX
    # memory model's causality order); thread 32's own fence is.
    out = np.zeros(4, np.uint32)
    if fenced:
        _run(_fenced_bulk_store(fencer), [out, np.zeros(128, np.uint8)])
        np.testing.assert_array_equal(out, [1, 2, 3, 4])
    else:
        with pytest.raises(SimulationError, match="no fence.proxy.async after the write by a thread the read is "):
            _run(_fenced_bulk_store(fencer), [out, np.zeros(128, np.uint8)])


def test_a_kernel_that_ends_with_a_copy_in_flight_is_reported():
    body = """
define void @k(ptr addrspace(1) %src) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %offset = mul i32 %tid, 16
  %base = ptrtoint ptr addrspace(3) @smem to i32
  %to = add i32 %base, %offset
  %from = getelementptr i8, ptr addrspace(1) %src, i32 %offset
  call void asm sideeffect "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r"(i32 %to, ptr addrspace(1) %from, i32 16)
  call void asm sideeffect "cp.async.commit_group;", ""()
  ret void
}
"""
    with pytest.raises(SimulationError, match="ended with a copy of thread . into shared byte .* still in flight"):
        _run(body, [np.zeros(4 * 32, np.uint32)], num_warps=1)
