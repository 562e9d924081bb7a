"""The workspace ops (polytile_tma.workspace) in IR text: their mutation effects, with
locations compared as byte offsets whatever pointer type computes them, the generic
lowering's record, and Hopper's real tensor maps with the checks of their rules."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.analysis.mutation import mutation_report
from polytile.compiler import compile_module
from polytile.errors import CompilationError, VerificationError
from polytile.gpu.global_scratch import BYTES_KEY
from polytile.ir import parse_module, verify
from polytile.runtime import jit
from polytile.ir_testing import apply_passes, dedent, roundtrip

from polytile_tma.lowering import LowerTensorDescriptors
from tests.gpu.ptx_assembly import assembles

KERNEL = """
func.func @k(%a: ptr<f32>, %b: ptr<f32>, %ws: ptr<i8>, %m: i32, %n: i32, %i: i32) attributes {kernel = true} {
  %c128 = arith.constant {value = 128} : i32
  %c32 = arith.constant {value = 32} : i32
  %w1 = tile.addptr %ws, %c128 : ptr<i8>
  tma.workspace_create %ws, %a, %m, %n {block_shape = [16, 16]}
  tma.workspace_create %w1, %b, %m, %n {block_shape = [16, 16]}
  %as_int = arith.ptrtoint %ws : i64
  %words = arith.inttoptr %as_int : ptr<i32>
  %w2 = tile.addptr %words, %c32 : ptr<i32>
  %v = tma.workspace_load %w2, %i, %i : tile<16x16xf32>
  tma.workspace_store %w2, %v, %i, %i
  func.return
}
"""


def test_thirty_two_words_past_the_workspace_are_its_byte_128():
    # ws + 32 i32 words is ws + 128 bytes: b's map, not a's.
    report = mutation_report(parse_module(dedent(KERNEL)))
    assert report.written == ["b", "ws"]
    assert "recorded at 'ws' + 128 bytes" in report.reasons[0]


def test_the_create_writes_a_record_of_address_rows_and_columns():
    out = apply_passes(dedent("""
        func.func @k(%a: ptr<f32>, %ws: ptr<i8>, %m: i32, %n: i32) attributes {kernel = true} {
          tma.workspace_create %ws, %a, %m, %n {block_shape = [16, 16]}
          func.return
        }
        """), LowerTensorDescriptors())
    stores = [line.strip() for line in out.splitlines() if "tile.store" in line]
    assert len(stores) == 3 and stores[1].endswith(", %m") and stores[2].endswith(", %n")
    assert "arith.ptrtoint %a : i64" in out and "{value = 8} : i64" in out and "{value = 12} : i64" in out


# -- Hopper: the workspace holds a real tensor map ----------------------------------------

HOPPER_KERNEL = """
func.func @k(%a: ptr<{element}>, %ws: ptr<i8>, %m: i32, %n: i32, %i: i32) attributes {{kernel = true, pt.divisibility = [{base}, {ws}, 1, {n}, 1]}} {{
  tma.workspace_create %ws, %a, %m, %n {{block_shape = [{block}]}}
  tma.workspace_acquire %ws
  %v = tma.workspace_load %ws, %i, %i : tile<{tile}x{element}>
  tma.workspace_store %ws, %v, %i, %i
  func.return
}}
"""


def _hopper_kernel(element="f16", base=16, ws=16, n=8, block=(64, 64)):
    return dedent(HOPPER_KERNEL.format(element=element, base=base, ws=ws, n=n, block=", ".join(map(str, block)),
                                       tile="x".join(map(str, block))))


def test_on_hopper_the_create_writes_a_tensor_map_and_accesses_copy_through_it():
    expected = """
    func.func @k(%a: ptr<f16>, %ws: ptr<i8>, %m: i32, %n: i32, %i: i32) attributes {kernel = true, pt.divisibility = [16, 16, 1, 8, 1]} {
      %0 = arith.constant {value = 0} : i32
      %1 = arith.cmpi %m, %0 {predicate = "sgt"} : i1
      tile.assert %1 {always = true, message = "experimental_device_tensormap_create2d makes a CUDA tensor map on this target: global_size[0] must be positive"}
      %2 = arith.constant {value = 0} : i32
      %3 = arith.cmpi %n, %2 {predicate = "sgt"} : i1
      tile.assert %3 {always = true, message = "experimental_device_tensormap_create2d makes a CUDA tensor map on this target: global_size[1] must be positive"}
      %4 = arith.ptrtoint %ws : i64
      %5 = arith.constant {value = 127} : i64
      %6 = arith.andi %4, %5 : i64
      %7 = arith.constant {value = 0} : i64
      %8 = arith.cmpi %6, %7 {predicate = "eq"} : i1
      tile.assert %8 {always = true, message = "experimental_device_tensormap_create2d makes a CUDA tensor map on this target: desc_ptr must be 128-byte aligned (a CUDA tensor map's alignment)"}
      %9 = arith.extsi %n : i64
      %10 = arith.constant {value = 1} : i64
      tma.write_map %ws, %a shape(%m, %n) strides(%9, %10) {block = [64, 64]}
      tma.acquire_map %ws
      %11 = tma.map_at %ws : !tma.map<>
      %12 = tma.bulk_load %11, %i, %i : tile<64x64xf16>
      %13 = tma.map_at %ws : !tma.map<>
      tma.bulk_store %13, %i, %i, %12
      func.return
    }
    """
    assert apply_passes(_hopper_kernel(), LowerTensorDescriptors(device_maps=True)) == dedent(expected)


@pytest.mark.parametrize("case, rules", [
    (dict(ws=128), []),
    (dict(base=8), ["global_address must be 16-byte aligned"]),
    (dict(n=4), ["a row (global_size[1] elements of f16) must be a multiple of 16 bytes"]),
    (dict(element="f32", n=2), ["a row (global_size[1] elements of f32) must be a multiple of 16 bytes"]),
    (dict(element="f32", n=4, ws=256), []),
])
def test_the_launch_checks_only_the_map_rules_the_specialization_does_not_prove(case, rules):
    lowered = apply_passes(_hopper_kernel(**case), LowerTensorDescriptors(device_maps=True))
    checked = re.findall(r'tile\.assert %\d+ \{always = true, message = "[^:]*: ([^"]*)"\}', lowered)
    desc_rule = "desc_ptr must be 128-byte aligned (a CUDA tensor map's alignment)"
    positive = ["global_size[0] must be positive", "global_size[1] must be positive"]
    assert checked == positive + ([] if case.get("ws", 16) % 128 == 0 else [desc_rule]) + rules


@pytest.mark.parametrize("rows, columns, message", [
    (64, 100, r"a row \(global_size\[1\] elements of f16\) must be a multiple of 16 bytes, and global_size\[1\] = 100"),
    (0, 64, r"global_size\[0\] = 0; a tensor map's dimensions are positive"),
])
def test_a_constant_size_that_breaks_a_map_rule_is_an_error_of_the_compile(rows, columns, message):
    text = dedent(f"""
    func.func @k(%a: ptr<f16>, %ws: ptr<i8>) attributes {{kernel = true, pt.divisibility = [16, 128]}} {{
      %m = arith.constant {{value = {rows}}} : i32
      %n = arith.constant {{value = {columns}}} : i32
      tma.workspace_create %ws, %a, %m, %n {{block_shape = [64, 64]}}
      func.return
    }}
    """)
    with pytest.raises(CompilationError, match=message):
        apply_passes(text, LowerTensorDescriptors(device_maps=True))
    # The same sizes in the record (other targets) are the masked accesses' business.
    assert "tile.store" in apply_passes(text, LowerTensorDescriptors())


def test_a_block_a_bulk_copy_cannot_move_keeps_the_record_on_hopper_too():
    # 2 columns of f32 are 8 bytes: no box holds them; both sides decide alike.
    lowered = apply_passes(_hopper_kernel(element="f32", block=(16, 2)), LowerTensorDescriptors(device_maps=True))
    assert "tma.write_map" not in lowered and "tma.map_at" not in lowered and "tile.assert" not in lowered
    assert lowered.count("tile.store") == 4 and "tile.load" in lowered  # the record's 3 fields, then the block
    # The acquire is still the tensor-map proxy's: the map at that address may be another kernel's.
    assert "tma.acquire_map %ws" in lowered


def test_elsewhere_the_acquire_orders_nothing_more_and_the_record_stays():
    lowered = apply_passes(_hopper_kernel(), LowerTensorDescriptors())
    assert "tma.acquire_map" not in lowered and "tma.write_map" not in lowered and "tile.assert" not in lowered


def test_the_map_ops_print_parse_and_verify():
    text = """
    func.func @k(%a: ptr<f16>, %ws: ptr<i8>, %m: i32, %s: i64) {
      %one = arith.constant {value = 1} : i64
      tma.write_map %ws, %a shape(%m, %m) strides(%s, %one) {block = [64, 64]}
      tma.acquire_map %ws
      %0 = tma.map_at %ws : !tma.map<>
      func.return
    }
    """
    assert roundtrip(dedent(text)) == dedent(text)
    with pytest.raises(VerificationError, match="cannot move blocks of"):
        verify(parse_module(dedent(text).replace("block = [64, 64]", "block = [64, 3]")))


# -- the PTX for sm_90a (kernels the GPU tests run: test_gpu_workspace.py) ---------------


@jit
def workspace_matmul(a_ptr, b_ptr, c_ptr, workspace, M, N, K, BM: pl.constexpr, BN: pl.constexpr,
                     BK: pl.constexpr):
    # Triton's first device-TMA matmul: three maps, B given as (N, K), in each program's
    # own 384 bytes of the workspace (no program rewrites a map another one reads).
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    maps = workspace + (pid_m * pl.num_programs(1) + pid_n) * 384
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=maps, global_address=a_ptr,
                                                         load_size=[BM, BK], global_size=[M, K],
                                                         element_ty=a_ptr.dtype.element_ty)
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=maps + 128, global_address=b_ptr,
                                                         load_size=[BN, BK], global_size=[N, K],
                                                         element_ty=b_ptr.dtype.element_ty)
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=maps + 256, global_address=c_ptr,
                                                         load_size=[BM, BN], global_size=[M, N],
                                                         element_ty=c_ptr.dtype.element_ty)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        a = pl._experimental_descriptor_load(maps, [pid_m * BM, k], [BM, BK], pl.float16)
        b = pl._experimental_descriptor_load(maps + 128, [pid_n * BN, k], [BN, BK], pl.float16)
        acc = pl.dot(a, b.T, acc)
    pl._experimental_descriptor_store(maps + 256, acc.to(pl.float16), [pid_m * BM, pid_n * BN])


def _workspace_ptx(target, n=256, debug=False):
    a = np.zeros((n, n), np.float16)
    module = workspace_matmul.lower_for(target, a, a, a, np.zeros(384, np.int8), n, n, n, BM=128, BN=128, BK=64)
    return compile_module(module, target, num_warps=4, num_stages=3, debug=debug).context.artifacts


def test_hopper_writes_real_maps_into_the_workspace_and_pipelines_copies_through_them():
    artifacts = _workspace_ptx("nvidia:sm_90a")
    ptx, name = artifacts["ptx"], artifacts["kernel_name"]
    # Each map: built in shared memory, copied to its place in the workspace with the
    # release to the tensor-map proxy, acquired and prefetched there; none in global scratch.
    assert ptx.count("tensormap.replace.tile.global_address") == 3 and BYTES_KEY not in artifacts
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu") == 3
    assert ptx.count("prefetch.tensormap") == 3
    # A's and B's blocks fill the rings of the wgmma pipeline (3 stages), C leaves in 2 boxes.
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 6
    assert "wgmma.mma_async" in ptx and "mbarrier.try_wait" in ptx
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 2
    # The workspace's alignment is checked (the launch knows 16 bytes, a map needs 128)
    # with a trap, not a call: a call would make ptxas serialize the wgmma.
    assert "trap;" in ptx and "__assertfail" not in ptx and "call" not in ptx
    assert "ld.global" not in ptx  # no record is read
    assembles(ptx, "sm_90a", name)


@jit
def scale_through_maps(workspace, BLOCK: pl.constexpr):
    pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(workspace)
    pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(workspace + 128)
    pm, pn = pl.program_id(0) * BLOCK, pl.program_id(1) * BLOCK
    block = pl._experimental_descriptor_load(workspace, [pm, pn], [BLOCK, BLOCK], pl.bfloat16)
    pl._experimental_descriptor_store(workspace + 128, block * 2, [pm, pn])


def test_a_kernel_that_only_reads_maps_asks_for_the_isa_of_their_acquire():
    # Only the acquire and the copies: no tensormap.replace to raise the PTX ISA to 8.7.
    module = scale_through_maps.lower_for("nvidia:sm_90a", np.zeros(256, np.int8), BLOCK=64)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2 and "tensormap.replace" not in ptx
    assert ".version 8.3" in ptx and "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])


def test_with_debug_a_broken_map_rule_prints_which():
    ptx = _workspace_ptx("nvidia:sm_90a", debug=True)["ptx"]
    assert "__assertfail" in ptx
    message = "experimental_device_tensormap_create2d makes a CUDA tensor map on this target: desc_ptr must be " \
              "128-byte aligned (a CUDA tensor map's alignment)"
    assert any(message.encode() in bytes(int(c) for c in re.findall(r"\d+", line))
               for line in ptx.splitlines() if line.lstrip().startswith(".global .align 1 .b8"))


@pytest.mark.parametrize("target", ["nvidia:sm_80", "nvidia:sm_90"])
def test_before_hopper_the_workspace_holds_the_record(target):
    artifacts = _workspace_ptx(target)
    assert "tensormap" not in artifacts["ptx"] and "trap;" not in artifacts["ptx"]
    assembles(artifacts["ptx"], target.split(":")[1], artifacts["kernel_name"])


def test_amd_compiles_the_workspace_form_to_the_record():
    a = np.zeros((256, 256), np.float16)
    module = workspace_matmul.lower_for("amd:gfx942", a, a, a, np.zeros(384, np.int8), 256, 256, 256, BM=64, BN=64,
                                        BK=32)
    artifacts = compile_module(module, "amd:gfx942", num_warps=4).context.artifacts
    assert artifacts["hsaco"][:4] == b"\x7fELF"


def test_a_kernel_that_needs_two_newer_isas_gets_the_newer():
    # The acquire asks for ISA 8.3, an fp8 mma.sync into f32 for 8.4: the kernel gets 8.4.
    from tests.gpu.test_lowering_dot_kernels import FP8_KERNEL

    text = FP8_KERNEL.format(t="f8e4m3", acc="f32")
    text = text.replace("%c: ptr<f32>) attributes {kernel = true, pt.divisibility = [16, 16, 16]}",
                        "%c: ptr<f32>, %ws: ptr<i8>) attributes {kernel = true, pt.divisibility = [16, 16, 16, 16]}")
    text = text.replace("  %ra = tile.arange", "  tma.workspace_acquire %ws\n  %ra = tile.arange", 1)
    assert "tma.workspace_acquire" in text
    artifacts = compile_module(parse_module(text), "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert ".version 8.4" in ptx and "e4m3.e4m3.f32" in ptx and "fence.proxy.tensormap" in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])


@jit
def reader_acquiring_in_its_loop(c_ptr, workspace, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(workspace)
        a = pl._experimental_descriptor_load(workspace, [0, k], [BM, BK], pl.float16)
        b = pl._experimental_descriptor_load(workspace + 128, [0, k], [BN, BK], pl.float16)
        acc = pl.dot(a, b.T, acc)
    pl.store(c_ptr + pl.arange(0, BM)[:, None] * BN + pl.arange(0, BN)[None, :], acc)


def test_no_copy_through_a_map_is_issued_ahead_of_the_acquire_before_it():
    # The acquire is a fence: pipeline-loops must not start the next iterations' copies
    # (through maps another kernel may have just written) before it.
    module = reader_acquiring_in_its_loop.lower_for("nvidia:sm_90a", np.zeros((128, 128), np.float32),
                                                    np.zeros(256, np.int8), 256, BM=128, BN=128, BK=64)
    ptx = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=3).context.artifacts["ptx"]
    assert ptx.index("fence.proxy.tensormap::generic.acquire.gpu") < ptx.index("cp.async.bulk.tensor")
