"""The resources record (polytile.resources): how it reads, and the spill warning."""

from __future__ import annotations

import io
import warnings

import pytest

from polytile.passes.instrumentation import IRPrinter
from polytile.resources import RESOURCES, SpillWarning, describe, spills, warn_if_spilling

NVIDIA = {"registers": 255, "spills": {"store_bytes": 3618, "load_bytes": 3616}, "stack_bytes": 2176,
          "shared_bytes": 67584, "occupancy": {"blocks_per_sm": 2, "warps_per_sm": 8, "limited_by": "registers"},
          "notes": []}
AMD = {"registers": 256, "sgprs": 40, "agprs": 0, "spills": {"vgprs": 37, "sgprs": 0}, "stack_bytes": 152,
       "shared_bytes": 16640, "occupancy": {"waves_per_simd": 5, "limited_by": "vgprs"}, "notes": []}
CLEAN = {"registers": 40, "spills": {"store_bytes": 0, "load_bytes": 0}, "stack_bytes": 0, "shared_bytes": 0,
         "occupancy": {"blocks_per_sm": 8, "warps_per_sm": 64, "limited_by": "threads"},
         "notes": ["(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized"]}


def test_a_record_reads_as_one_line():
    assert describe(NVIDIA) == ("255 registers, spills: 3618 bytes of spill stores, 3616 bytes of spill loads, "
                                "2176 bytes stack, 67584 bytes shared memory; occupancy: 2 blocks per SM, "
                                "8 warps per SM, limited by registers")
    assert describe(AMD) == ("256 registers, spills: 37 VGPRs, 152 bytes stack, 16640 bytes shared memory; "
                             "occupancy: 5 waves per SIMD, limited by vgprs")
    assert describe(CLEAN) == ("40 registers, no spills, 0 bytes shared memory; occupancy: 8 blocks per SM, "
                               "64 warps per SM, limited by threads; assembler: (C7511) Potential Performance "
                               "Loss: wgmma.mma_async instructions are serialized")
    assert describe(None) == "not reported by this backend"


def test_only_what_spilled_counts():
    assert spills(NVIDIA) == {"store_bytes": 3618, "load_bytes": 3616}
    assert spills(AMD) == {"vgprs": 37}
    assert spills(CLEAN) == {} and spills(None) == {} and spills({"registers": 8}) == {}


def test_a_spilling_kernel_is_named_with_its_specialization_and_what_to_try():
    with pytest.warns(SpillWarning) as caught:
        warn_if_spilling("matmul", "nvidia:sm_90a", NVIDIA, "BLOCK_M=128, num_warps=4")
    message = str(caught[0].message)
    assert message.startswith("kernel 'matmul' (BLOCK_M=128, num_warps=4) spills registers on "
                              "nvidia:sm_90a: 3618 bytes of spill stores, 3616 bytes of spill loads "
                              "(255 registers per thread)")
    assert "num_warps" in message and "num_stages" in message
    assert caught[0].filename == __file__  # shown at the caller outside polytile


def test_no_warning_without_spills():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_spilling("k", "nvidia:sm_90a", CLEAN, "")
        warn_if_spilling("k", "interp", None, "")


@pytest.mark.parametrize("to_directory", [False, True])
def test_the_ir_dump_ends_with_the_resources(tmp_path, to_directory):
    stream = io.StringIO()
    artifacts = {RESOURCES: NVIDIA}
    printer = IRPrinter(after={"all"}, stream=stream, directory=tmp_path if to_directory else None,
                        artifacts=artifacts)
    printer.before_pipeline(None, "matmul")
    printer.after_pipeline(None, "matmul")
    line = f"resources of matmul: {describe(NVIDIA)}\n"
    if to_directory:
        (written,) = (tmp_path / "matmul").glob("*-resources.txt")
        assert written.read_text() == line
    else:
        assert stream.getvalue() == f"// -----// {line}"


def test_the_ir_dump_says_nothing_of_resources_a_backend_did_not_record():
    stream = io.StringIO()
    printer = IRPrinter(after={"all"}, stream=stream, artifacts={})
    printer.after_pipeline(None, "k")
    assert stream.getvalue() == ""
