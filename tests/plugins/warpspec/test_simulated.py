"""Warp-specialized kernels run by the CTA simulator (tests/gpu/llvm_cta.py), without a GPU.

The simulator schedules warps apart (tests/gpu/llvm_cta_schedule.py): the producer warp
group waits on the empty mbarriers and issues the copies while the consumer warps wait on
the full ones, run the wgmma and release the slots; its vector clocks order each access
after the barrier, mbarrier phase or named barrier that should order it.  So the split's
channels are checked here end to end: the results against NumPy, and a slot reused too
early, a wait taken out or a release that never comes reported where they happen."""

from __future__ import annotations

import re

import numpy as np
import pytest

from polytile import config
from polytile.compiler import compile_module

pytest.importorskip("polytile_nvidia")
pytest.importorskip("polytile_warpspec")

from tests.gpu.llvm_cta import SimulationError, run_kernel  # noqa: E402

from .kernels import matmul_pointers  # noqa: E402


def _compile(m, n, k, block, num_warps, num_stages, pingpong=False):
    rng = np.random.default_rng(m * n + k + num_stages)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (k, n)).astype(np.float16)
    module = matmul_pointers.lower(a, b, np.zeros((m, n), np.float16), m, n, k, k, n, n, BLOCK_M=block[0],
                                   BLOCK_N=block[1], BLOCK_K=block[2], WS=True)
    with config.override(warpspec_pingpong=pingpong):
        result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=num_stages)
    assert [e["specialised"] for e in result.metadata["warp_specialize"]] == [True]
    return result, a, b


def _run(result, a, b, edit=None):
    m, k = a.shape
    n = b.shape[1]
    artifacts = result.context.artifacts
    if edit is not None:
        artifacts = {**artifacts, "llvm_ir": edit(artifacts["llvm_ir"])}
    c = np.zeros((m, n), np.float16)
    run_kernel(artifacts, [a, b, c, m, n, k, k, n, n], result.metadata["launch_warps"])
    return c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_the_split_pointer_matmul_matches_numpy(num_stages):
    # A producer warp group of 4 warps copies with cp.async into a ring of num_stages
    # slots; one consumer warp group runs the wgmma: 5 K blocks, more than the ring holds.
    result, a, b = _compile(64, 64, 160, (64, 64, 32), 4, num_stages)
    got, expected = _run(result, a, b)
    np.testing.assert_array_equal(got, expected)


def test_partial_tiles():
    # M, N and K not multiples of the blocks: the producer's masked copies fill zeros.
    # Strides multiples of 16 elements, as the copies need to be 16 bytes wide (cp.async).
    result, a, b = _compile(50, 48, 112, (64, 64, 32), 4, 3)
    got, expected = _run(result, a, b)
    np.testing.assert_array_equal(got, expected)


def _keep_more_dots_in_flight(llvm_ir: str) -> str:
    # The consumers release the previous iteration's slot after a wait that leaves one
    # group of wgmma in flight; leaving two makes the release come while the wgmma still
    # reads the slot.
    assert "wgmma.wait_group.sync.aligned 1;" in llvm_ir
    return llvm_ir.replace("wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 2;")


def test_a_slot_released_while_a_wgmma_reads_it_is_caught():
    result, a, b = _compile(64, 64, 160, (64, 64, 32), 4, 3)
    with pytest.raises(SimulationError, match=r"thread 1\d\d starts a cp\.async into shared bytes .* which an "
                                              r"in-flight wgmma\.mma_async of warpgroup 0 reads"):
        _run(result, a, b, _keep_more_dots_in_flight)


def _drop_line(llvm_ir: str, marker: str, which: int = 0) -> str:
    lines = llvm_ir.splitlines()
    del lines[[i for i, line in enumerate(lines) if marker in line][which]]
    return "\n".join(lines) + "\n"


def test_a_producer_that_does_not_wait_for_an_empty_slot_is_caught():
    # The first mbarrier wait of the kernel is the producer's wait for an empty slot.
    result, a, b = _compile(64, 64, 160, (64, 64, 32), 4, 3)
    with pytest.raises(SimulationError, match="starts a cp.async into shared byte .* still writing"):
        _run(result, a, b, lambda text: _drop_line(text, "mbarrier.try_wait"))


def test_a_consumer_that_never_releases_its_slot_hangs_and_is_reported():
    result, a, b = _compile(64, 64, 160, (64, 64, 32), 4, 3)
    with pytest.raises(SimulationError, match="no warp can make progress .* can never complete"):
        _run(result, a, b, lambda text: _drop_line(text, "mbarrier.arrive.release"))


def test_a_consumer_waiting_on_the_wrong_phase_reads_a_slot_still_being_filled():
    result, a, b = _compile(64, 64, 160, (64, 64, 32), 4, 3)

    def wrong_phase(text: str) -> str:
        lines = text.splitlines()
        waits = [i for i, line in enumerate(lines) if "mbarrier.try_wait" in line]
        lines[waits[1]] = re.sub(r'i32 %"[^"]+"\)\s*$', "i32 1)", lines[waits[1]])  # the consumers' full wait
        return "\n".join(lines) + "\n"
    with pytest.raises(SimulationError, match="reads shared byte .* still writing"):
        _run(result, a, b, wrong_phase)


# --------------------------------------------------------------------------------------
# Through tensor maps made in the kernel: bulk copies by one producer thread, one or two
# consumer warp groups, ping-pong (tests/gpu/llvm_cta_bulk.py simulates the copies).

@pytest.mark.parametrize("num_warps, block", [(4, (64, 64, 32)), (8, (128, 64, 32))])
def test_the_split_descriptor_matmul_matches_numpy(num_warps, block):
    pytest.importorskip("polytile_tma")
    from .kernels import matmul_device_descriptors

    m, n, k = block[0], block[1], 5 * block[2]
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    module = matmul_device_descriptors.lower(a, b, c, m, n, k, BLOCK_M=block[0], BLOCK_N=block[1],
                                             BLOCK_K=block[2], WS=True)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=3)
    assert [e["specialised"] for e in result.metadata["warp_specialize"]] == [True]
    scratch = np.zeros(int(result.metadata["global_scratch_bytes"]), np.uint8)
    run_kernel(result.context.artifacts, [a, b, c, m, n, k, scratch], result.metadata["launch_warps"])
    np.testing.assert_array_equal(c.astype(np.float64), a.astype(np.float64) @ b.T.astype(np.float64))


@pytest.mark.parametrize("block_m, num_warps, causal, ws, pingpong", [
    (64, 4, False, False, False),   # unspecialised: P @ V in flight into the next iteration
    (64, 4, False, True, False),
    (64, 4, True, True, False),
    (128, 8, False, True, False),   # two consumer warp groups
    (128, 8, True, True, True),     # ... taking turns
])
def test_attention_through_descriptors_matches_numpy(block_m, num_warps, causal, ws, pingpong):
    pytest.importorskip("polytile_tma")
    from .kernels import attention_descriptors

    seq, head_dim = 3 * 64, 64
    rng = np.random.default_rng(block_m + causal)
    q, k, v = (rng.standard_normal((seq, head_dim)).astype(np.float16) for _ in range(3))
    out = np.full((seq, head_dim), np.nan, np.float16)
    scale = 1 / np.sqrt(head_dim)
    module = attention_descriptors.lower(q, k, v, out, scale, seq, seq, HEAD_DIM=head_dim, BLOCK_M=block_m,
                                         BLOCK_N=64, CAUSAL=causal, WS=ws)
    with config.override(warpspec_pingpong=pingpong):
        result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=2)
    assert [e["specialised"] for e in result.metadata.get("warp_specialize", [])] == ([True] if ws else [])
    assert ("ws.turn" in str(result.module)) == pingpong
    scratch = np.zeros(int(result.metadata["global_scratch_bytes"]), np.uint8)
    run_kernel(result.context.artifacts, [q, k, v, out, scale, seq, seq, scratch],
               result.metadata.get("launch_warps", num_warps))
    # One program: the first block of queries.
    scores = q[:block_m].astype(np.float64) @ k.astype(np.float64).T * scale
    if causal:
        scores[np.arange(block_m)[:, None] < np.arange(seq)[None, :]] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = weights @ v.astype(np.float64) / weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out[:block_m].astype(np.float64), expected, atol=2e-3, rtol=2e-3)


# --------------------------------------------------------------------------------------
# A persistent kernel's loop over tiles split (polytile_warpspec.persistent): one program
# walks every tile, so the ring's slot and phase run on from one tile's K loop into the
# next, the producer a tile ahead of the consumers' store.

def _persistent(m, n, k, block, num_warps, flatten, num_stages=3):
    pytest.importorskip("polytile_tma")
    from .kernels import matmul_persistent

    rng = np.random.default_rng(m + n + k)
    a = rng.integers(-2, 3, (m, k)).astype(np.float16)
    b = rng.integers(-2, 3, (n, k)).astype(np.float16)
    module = matmul_persistent.lower(a, b, np.zeros((m, n), np.float16), m, n, k, BLOCK_M=block[0],
                                     BLOCK_N=block[1], BLOCK_K=block[2], NUM_PROGRAMS=1, WS=True, FLATTEN=flatten)
    result = compile_module(module, "nvidia:sm_90a", num_warps=num_warps, num_stages=num_stages)
    assert [e["specialised"] for e in result.metadata["warp_specialize"]] == [True]
    return result, a, b


def _run_persistent(result, a, b, edit=None):
    m, k = a.shape
    n = b.shape[0]
    artifacts = result.context.artifacts
    if edit is not None:
        artifacts = {**artifacts, "llvm_ir": edit(artifacts["llvm_ir"])}
    c = np.full((m, n), np.nan, np.float16)
    scratch = np.zeros(int(result.metadata["global_scratch_bytes"]), np.uint8)
    run_kernel(artifacts, [a, b, c, m, n, k, scratch], result.metadata["launch_warps"])
    return c.astype(np.float64), a.astype(np.float64) @ b.T.astype(np.float64)


@pytest.mark.parametrize("shape, block, num_warps, flatten", [
    ((128, 128, 128), (64, 64, 32), 4, False),   # 4 tiles of 4 K steps: the ring wraps within and across tiles
    ((96, 80, 96), (64, 64, 32), 4, True),       # partial tiles; the next tile's prologue was prefetched
    ((256, 128, 96), (128, 64, 32), 8, True),    # two consumer warp groups
    ((128, 128, 32), (64, 64, 32), 4, True),     # one K step per tile: fewer than the ring's slots
])
def test_the_split_persistent_matmul_matches_numpy(shape, block, num_warps, flatten):
    result, a, b = _persistent(*shape, block, num_warps, flatten)
    got, expected = _run_persistent(result, a, b)
    np.testing.assert_array_equal(got, expected)


def test_a_k_loop_that_does_not_release_its_last_slot_hangs_the_next_tile():
    # The consumers release each K loop's last slot after it (the loop releases the one
    # before each iteration's); without that release the producer never gets the slot back.
    result, a, b = _persistent(128, 128, 64, (64, 64, 32), 4, False)  # 4 tiles of 2 K steps
    with pytest.raises(SimulationError, match="no warp can make progress .* can never complete"):
        _run_persistent(result, a, b, lambda text: _drop_line(text, "mbarrier.arrive.release", which=-1))


@pytest.mark.parametrize("causal", [True])  # (not causal: loops of one length, as the matmul's above)
def test_the_split_persistent_attention_matches_numpy(causal):
    # One program walks three query blocks; causal: K/V loops of 1, 2 and 3 blocks, so
    # each tile's loop starts wherever the last one left the ring.
    pytest.importorskip("polytile_tma")
    from .kernels import attention_persistent

    seq, head_dim = 3 * 64, 64
    rng = np.random.default_rng(10 + causal)
    q, k, v = (rng.standard_normal((seq, head_dim)).astype(np.float16) for _ in range(3))
    out = np.full((seq, head_dim), np.nan, np.float16)
    scale = 1 / np.sqrt(head_dim)
    module = attention_persistent.lower(q, k, v, out, scale, seq, HEAD_DIM=head_dim, BLOCK_M=64, BLOCK_N=64,
                                        CAUSAL=causal, NUM_PROGRAMS=1, WS=True)
    result = compile_module(module, "nvidia:sm_90a", num_warps=4, num_stages=2)
    assert [e["specialised"] for e in result.metadata["warp_specialize"]] == [True]
    scratch = np.zeros(int(result.metadata["global_scratch_bytes"]), np.uint8)
    run_kernel(result.context.artifacts, [q, k, v, out, scale, seq, scratch], result.metadata["launch_warps"])
    scores = q.astype(np.float64) @ k.astype(np.float64).T * scale
    if causal:
        scores[np.arange(seq)[:, None] < np.arange(seq)[None, :]] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = weights @ v.astype(np.float64) / weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3, rtol=2e-3)
