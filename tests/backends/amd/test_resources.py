"""The resources record of AMD kernels, from the code object's metadata (compiled to
HSACO here; no AMD GPU ran them)."""

from __future__ import annotations

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile.resources import RESOURCES, describe
from polytile_amd.occupancy import kernel_resources, occupancy

from .kernels import ARCHS, add, compile_amd, f32


@pt.jit
def square(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    a = pl.load(x + offs[:, None] * BLOCK + offs[None, :])
    pl.store(out + offs[:, None] * BLOCK + offs[None, :], pl.dot(a, a))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_arch_records_registers_spills_lds_and_occupancy(arch):
    artifacts = compile_amd(add, f32(), f32(), f32(), 8192, arch=arch, BLOCK=1024)
    record, info = artifacts[RESOURCES], artifacts["amd_code_object"]
    assert record["registers"] == info["vgpr_count"] and record["sgprs"] == info["sgpr_count"]
    assert record["spills"] == {"vgprs": 0, "sgprs": 0} and record["stack_bytes"] == 0
    assert record["shared_bytes"] == info["group_segment_fixed_size"]
    expected = occupancy(arch, lds_bytes=record["shared_bytes"], vgprs=record["registers"],
                         workgroup_size=info["max_flat_workgroup_size"], wavefront_size=info["wavefront_size"])
    assert record["occupancy"] == {"waves_per_simd": expected.waves_per_simd, "limited_by": expected.limited_by}


def test_the_lds_plugins_occupancy_is_the_backends():
    artifacts = compile_amd(square, np.zeros(64 * 64, np.float16), np.zeros(64 * 64, np.float32), BLOCK=64)
    if "lds" not in artifacts:
        pytest.skip("polytile-lds is not installed")
    assert artifacts["lds"]["waves_per_simd"] == artifacts[RESOURCES]["occupancy"]["waves_per_simd"]
    assert artifacts["lds"]["limited_by"] == artifacts[RESOURCES]["occupancy"]["limited_by"]


def test_spilled_registers_are_counted_as_registers():
    class Info:  # a code object entry that spilled, as LLVM writes one when VGPRs run out
        vgpr_count, sgpr_count, agpr_count = 256, 40, 0
        vgpr_spill_count, sgpr_spill_count = 37, 2
        private_segment_fixed_size, group_segment_fixed_size = 152, 16640
        max_flat_workgroup_size, wavefront_size = 128, 32

    record = kernel_resources("gfx1100", Info())
    assert record["spills"] == {"vgprs": 37, "sgprs": 2}
    assert describe(record).startswith("256 registers, spills: 37 VGPRs, 2 SGPRs, 152 bytes stack")


def test_every_key_of_the_record_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "resources.md").read_text()
    record = compile_amd(add, f32(), f32(), f32(), 8192, BLOCK=1024)[RESOURCES]
    keys = [*record, *record["spills"], *record["occupancy"]]
    assert [key for key in keys if f"`{key}`" not in doc] == []
