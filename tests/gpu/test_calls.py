"""noinline functions as PTX .func: per-register arguments, a shared-memory base per
call site, results as a struct; ptxas accepts them for sm_80 and sm_90a."""

from __future__ import annotations

import re

import numpy as np

import polytile as pt
import polytile.language as pl
from polytile.gpu.allocation import AllocateShared
from polytile.gpu.lowering import lower_module
from polytile.gpu.membar import InsertBarriers
from polytile.ir import parse_module
from polytile.passes.manager import PassManager
from polytile.passes.pipeline import Pipeline
from polytile_nvidia.codegen import emit_ptx, nvidia_gpu_target

from .memory_ir import NAMES, context
from .test_convert_layout import assembles

# A callee with a tile argument and two results (a tile and a scalar), converting through
# shared memory, called twice from a kernel.
MODULE = """
func.func @helper(%a: tile<64xf32, {A}>, %s: f32) -> (tile<64xf32, {A}>, f32) attributes {{gpu.num_warps = 2, noinline = true}} {{
  %0 = gpu.convert_layout %a : tile<64xf32, {B}>
  %1 = tile.splat %s : tile<64xf32, {B}>
  %2 = arith.addf %0, %1 : tile<64xf32, {B}>
  %3 = gpu.convert_layout %2 : tile<64xf32, {A}>
  %4 = arith.mulf %s, %s : f32
  func.return %3, %4
}}
func.func @k(%p: ptr<f32>, %s: f32) attributes {{gpu.num_warps = 2, kernel = true}} {{
  %0 = tile.splat %s : tile<64xf32, {A}>
  %1 = gpu.local_alloc source(%0) : !gpu.buffer<64xf32, {S}>
  %2, %3 = func.call %0, %s {{callee = @helper}} : tile<64xf32, {A}>, f32
  %4 = gpu.local_load %1 : tile<64xf32, {A}>
  %5, %6 = func.call %4, %3 {{callee = @helper}} : tile<64xf32, {A}>, f32
  %7 = tile.splat %p : tile<64xptr<f32>, {A}>
  tile.store %7, %5
  func.return
}}
"""


def lowered(arch: str = "sm_90a"):
    module = parse_module(MODULE.format(**NAMES))
    pipeline = Pipeline()
    pipeline.add_stage("memory", [AllocateShared(), InsertBarriers()])
    PassManager(pipeline).run(module, context(2, arch))
    return module, str(lower_module(module, nvidia_gpu_target(arch), num_warps=2))


def test_callee_is_an_internal_noinline_function_with_registers_and_a_base():
    module, llvm_ir = lowered()
    # Two registers of the tile ({A}: 64 elements over 64 threads is 1 register), the
    # scalar, then the i32 base; a struct of the tile's register and the scalar back.
    assert 'define internal {float, float} @"helper"(float %".1", float %".2", i32 %"shared_base") noinline' in llvm_ir
    calls = [line for line in llvm_ir.splitlines() if 'call {float, float} @"helper"' in line]
    # The buffer lives across the first call: the callee's 256 bytes go after it.
    assert len(calls) == 2 and calls[0].endswith("i32 256)") and calls[1].endswith("i32 0)")
    kernel = next(op for op in module.walk() if op.attributes.get("sym_name") == "k")
    assert kernel.attributes["gpu.shared_bytes"] == 512


def test_ptx_has_a_func_and_assembles():
    for arch in ("sm_80", "sm_90a"):
        _, llvm_ir = lowered(arch)
        ptx = emit_ptx(llvm_ir, arch, "k")
        assert ".func" in ptx and "call" in ptx and "bar.sync" in ptx
        # The shared-memory base is the .func's last parameter, passed per call site.
        assert re.search(r"\.func\s.*?helper\s*\(\s*(\.param \.b32 helper_param_\d,\s*){2}"
                         r"\.param \.b32 helper_param_2\s*\)", ptx, re.S)
        bases = re.findall(r"st\.param\.b32\s+\[param2\],\s*(\d+);", ptx)
        assert bases == ["256", "0"]
        assert re.search(r"ld\.param\.\w+\s+%\w+,\s*\[helper_param_2\]", ptx)
        assembles(ptx, arch)


def test_language_noinline_call_compiles():
    import sys
    from pathlib import Path

    from polytile.compiler import compile_module

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from language.test_control_flow import calls_kernel

    x = np.arange(64, dtype=np.int32)
    result = compile_module(calls_kernel.lower(x, np.zeros(68, np.int32), 64, BLOCK=16), "nvidia:sm_90a")
    ptx = result.context.artifacts["ptx"]
    assert ".func" in ptx and "clamp_scalar" in ptx
    assembles(ptx, "sm_90a")


@pt.jit(noinline=True)
def block_total(x_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    return pl.sum(pl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)


@pt.jit
def totals_around_a_max(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    first = block_total(x_ptr, n, BLOCK)
    offs = pl.arange(0, BLOCK)
    largest = pl.max(pl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    second = block_total(x_ptr + BLOCK, n, BLOCK)
    pl.store(out_ptr, first + largest + second)


def test_a_callee_using_shared_memory_is_synchronized_by_its_caller():
    """The callee's reduction leaves its reads of the scratch pending at its return; the
    kernel's own reduction writes the same bytes after the first call, and the second call
    writes them after the kernel's reads: one barrier before each, none elsewhere."""
    from polytile.compiler import compile_module

    x = np.zeros(2048, np.float32)
    module = totals_around_a_max.lower(x, np.zeros(1, np.float32), 1024, BLOCK=1024)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, record_stages=True)
    memory = next(stage.ir for stage in result.stages if stage.name == "memory")
    callee = next(line for line in memory.splitlines() if line.startswith("func.func @block_total"))
    assert 'gpu.pending_at_return = [[0, 16, "r"]]' in callee and "gpu.always_synchronizes = true" in callee
    kernel = memory[memory.index("func.func @totals_around_a_max"):]
    order = [word for line in kernel.splitlines() for word in ("func.call", "gpu.barrier", "tile.reduce")
             if word in line.split()]
    assert order == ["func.call", "gpu.barrier", "tile.reduce", "gpu.barrier", "func.call"]
    ptx = result.context.artifacts["ptx"]
    assert re.search(r"\.func\s+\(.*?\)\s*block_total", ptx, re.S)
    assert len(re.findall(r"call\.uni\s.*block_total", ptx)) == 2
    assembles(ptx, "sm_90a")
