"""device_print and device_assert through the NVIDIA pipeline: vprintf with the
interpreter's line format, one line per element, and assertions only with debug=True."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import CompilationError
from polytile.gpu.lowering import debug  # noqa: F401  (registers the lowerings; see module.py)
from polytile.gpu.lowering.module import lower_module
from polytile_nvidia.codegen import nvidia_gpu_target


def compile_artifacts(kernel, *args, arch="sm_90a", debug=False, **meta):
    return compile_module(kernel.lower(*args, **meta), f"nvidia:{arch}", debug=debug).context.artifacts


@pt.jit
def print_kernel(x_ptr, BLOCK: pl.constexpr, HEX: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.device_print("x", x, pl.program_id(0), x > 2, x.to(pl.float32), hex=HEX)
    pl.device_print("once", pl.program_id(0))


def _strings(llvm_ir: str) -> list[str]:
    return [line for line in llvm_ir.splitlines() if "private" in line and "constant" in line]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_print_formats_lines_as_the_interpreter(arch):
    artifacts = compile_artifacts(print_kernel, np.zeros(256, np.int32), BLOCK=256, HEX=False, arch=arch)
    strings = "\n".join(_strings(artifacts["llvm_ir"]))
    assert 'c"pid (%d, %d, %d) idx (%d) x %d, %d, %s, %f\\0a\\00"' in strings
    assert 'c"pid (%d, %d, %d) once %d\\0a\\00"' in strings
    assert "call.uni" in artifacts["ptx"] and "vprintf" in artifacts["ptx"]
    # 256 elements over 128 threads: two lines per thread for the tile, one for the scalar.
    assert artifacts["llvm_ir"].count("call i32 @\"vprintf\"") == 3


def test_hex_prints_the_bits_padded():
    llvm_ir = compile_artifacts(print_kernel, np.zeros(128, np.int32), BLOCK=128, HEX=True)["llvm_ir"]
    assert 'x 0x%08x, 0x%08x, 0x%02x, %f' in llvm_ir  # booleans as 8 bits, as the interpreter


@pt.jit
def assert_kernel(x_ptr, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask, other=0)
    pl.device_assert(x > 0, "x must be positive", mask=mask)


def test_assert_is_compiled_only_with_debug():
    checked = compile_artifacts(assert_kernel, np.zeros(128, np.int32), 4, BLOCK=128, debug=True)
    assert "__assertfail" in checked["ptx"] and 'c"x must be positive\\00"' in checked["llvm_ir"]
    assert "test_lowering_debug.py" in checked["llvm_ir"] and 'c"assert_kernel\\00"' in checked["llvm_ir"]
    assert "__assertfail" not in compile_artifacts(assert_kernel, np.zeros(128, np.int32), 4, BLOCK=128)["ptx"]


def _mark_always(module):
    for op in module.walk():
        if op.name == "tile.assert":
            op.attributes["always"] = True
    return module


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "amd:gfx942"])
def test_an_assertion_a_lowering_asks_for_always_traps_without_debug(target):
    # Such checks (a rule whose breaking would hang or corrupt memory, say) hold in every
    # build: without debug they stop the kernel with the target's trap, with no call (a
    # call would make ptxas serialize a kernel's wgmma); with debug, as any assertion.
    module = _mark_always(assert_kernel.lower_for(target, np.zeros(128, np.int32), 4, BLOCK=128))
    artifacts = compile_module(module, target).context.artifacts
    assert "llvm.trap" in artifacts["llvm_ir"] and "__assertfail" not in artifacts["llvm_ir"]
    if target.startswith("nvidia"):
        assert "trap;" in artifacts["ptx"] and "call" not in artifacts["ptx"]
    module = _mark_always(assert_kernel.lower_for(target, np.zeros(128, np.int32), 4, BLOCK=128))
    if target.startswith("nvidia"):
        checked = compile_module(module, target, debug=True).context.artifacts
        assert "__assertfail" in checked["ptx"] and "llvm.trap" not in checked["llvm_ir"]


def test_a_target_without_printf_names_the_kernel():
    module = print_kernel.lower(np.zeros(128, np.int32), BLOCK=128, HEX=False)
    compile_module(module, "nvidia:sm_90a")
    target = dataclasses.replace(nvidia_gpu_target("sm_90a"), printf=None)
    with pytest.raises(CompilationError, match="kernel 'print_kernel'.*device_print is not supported"):
        lower_module(module, target)
