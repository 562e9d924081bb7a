"""Kernels with tensor maps built on the device and bulk tensor copies, run by the CTA
simulator (tests/gpu/llvm_cta_bulk.py: the maps' fields as ``tensormap.replace`` sets
them, boxes read with their bounds and fill, swizzled as wgmma reads them, completing on
mbarrier transactions), without a GPU: results against NumPy, and the simulator catching
a transaction that expects too few bytes and a bulk store of generic writes without a
proxy fence.  The same kernels run on an H100 in tests/plugins/warpspec/test_gpu_*.py and
the bench."""

from __future__ import annotations

import re

import numpy as np
import pytest

from polytile.compiler import compile_module

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_tma")
pytest.importorskip("polytile_warpspec")  # the kernels live with the warpspec tests

from tests.gpu.llvm_cta import SimulationError, run_kernel  # noqa: E402
from tests.plugins.warpspec.kernels import matmul_device_descriptors  # noqa: E402


def _matmul(m, n, k, block=(64, 64, 32), num_warps=4, num_stages=3, ws=False, edit=None):
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (n, k)).astype(np.float16)  # (N, K): used as b.T
    # C with 8 rows of canaries below it: a store past M (or past N, into the next row)
    # shows there or in C itself.
    buffer = np.full((m + 8, n), np.nan, np.float16)
    module = matmul_device_descriptors.lower(a, b, buffer, m, n, k, BLOCK_M=block[0], BLOCK_N=block[1],
                                             BLOCK_K=block[2], WS=ws)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=num_stages)
    artifacts = result.context.artifacts
    assert "cp.async.bulk.tensor.2d" in artifacts["ptx"]
    if edit is not None:
        artifacts = {**artifacts, "llvm_ir": edit(artifacts["llvm_ir"])}
    scratch = np.zeros(int(result.metadata["global_scratch_bytes"]), np.uint8)  # where the maps are written
    run_kernel(artifacts, [a, b, buffer, m, n, k, scratch], result.metadata.get("launch_warps", num_warps))
    # One program: the block at (0, 0).
    rows, cols = min(m, block[0]), min(n, block[1])
    expected = a.astype(np.float64) @ b.T.astype(np.float64)
    return buffer[:rows, :cols].astype(np.float64), expected[:rows, :cols], buffer


@pytest.mark.parametrize("num_stages", [2, 3])
def test_the_descriptor_matmul_matches_numpy(num_stages):
    got, expected, _ = _matmul(64, 64, 160, num_stages=num_stages)
    np.testing.assert_array_equal(got, expected)


def test_partial_boxes_read_zeros_and_store_only_inside():
    # M, N and K past the block's edge: the loads' boxes fill zeros beyond the tensor,
    # the store's box writes only the elements inside it.
    got, expected, buffer = _matmul(50, 48, 80)
    np.testing.assert_array_equal(got, expected)  # all of C: a column past N would land in the next row
    assert np.isnan(buffer[50:]).all()  # nothing past M


def test_a_transaction_expecting_too_few_bytes_is_caught():
    # The phase would complete before the copies have landed: the consumers read bytes
    # still being written.
    def half(text: str) -> str:
        lines = text.splitlines()
        for at in [i for i, line in enumerate(lines) if "mbarrier.arrive.expect_tx" in line]:
            expected = re.findall(r'i32 (%"?[\w.]+"?)', lines[at].split("(", 2)[-1])[1]  # $1, the bytes
            where = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{expected} = select"))
            size = re.search(r"i32 (\d+), i32 0", lines[where])
            lines[where] = lines[where].replace(size.group(0), f"i32 {int(size.group(1)) // 2}, i32 0")
        return "\n".join(lines) + "\n"
    with pytest.raises(SimulationError, match="still writing"):
        _matmul(64, 64, 160, edit=half)


def test_a_bulk_store_of_generic_writes_without_a_proxy_fence_is_caught():
    def no_fence(text: str) -> str:
        lines = text.splitlines()
        store = next(i for i, line in enumerate(lines) if "cp.async.bulk.tensor.2d.global.shared::cta" in line)
        fence = max(i for i, line in enumerate(lines[:store]) if '"fence.proxy.async.shared::cta;"' in line)
        del lines[fence]
        return "\n".join(lines) + "\n"
    with pytest.raises(SimulationError, match="the async proxy .* reads shared byte .* no fence.proxy.async"):
        _matmul(64, 64, 160, edit=no_fence)


def _without(marker: str, text: str = ""):
    """An edit that removes ``marker`` from the kernel's inline assembly (``text`` instead
    of the lines that hold it, where given)."""
    def edit(llvm_ir: str) -> str:
        assert marker in llvm_ir
        if text:
            return llvm_ir.replace(marker, text)
        return "\n".join(line for line in llvm_ir.splitlines() if marker not in line) + "\n"
    return edit


@pytest.mark.parametrize("edit, message", [
    # The epilogue's copy out must have read shared memory before the kernel moves on.
    (_without("@p cp.async.bulk.wait_group.read 0; ", " "), r"still read shared byte .* \(no cp\.async\.bulk\.wait_group\.read\)"),
    # The copy engine sees the barriers' init only after fence.mbarrier_init.
    (_without("fence.mbarrier_init"), "whose init no fence.mbarrier_init showed to the async proxy"),
    # Each thread that copies through a map acquires it after it was written.
    (_without("fence.proxy.tensormap::generic.acquire"), "with no fence.proxy.tensormap acquire"),
])
def test_ordering_the_copy_engine_needs_is_checked(edit, message):
    with pytest.raises(SimulationError, match=message):
        _matmul(64, 64, 160, edit=edit)
