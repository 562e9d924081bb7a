"""Warp-specialised flash attention (descriptors made in the kernel) on a Hopper GPU against
torch, causal and not, head dims 64 and 128, one and two consumer warp groups, and its
persistent form (the hint on the loop over query blocks)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the GPU attention tests hold their arrays in torch tensors")

import polytile  # noqa: E402

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: E402, F401  (a fixture)
from tests.plugins.tma.test_gpu_bulk import hopper  # noqa: E402, F401  (a fixture)

from .kernels import attention_descriptors, attention_persistent  # noqa: E402

pytestmark = pytest.mark.gpu


def _assert_split(compiled, overlap: bool = False):
    """The launch ran the loop warp-specialised (not merely right, unspecialised), and
    with its second dot one iteration behind where asked."""
    entries = compiled.metadata["warp_specialize"]
    assert [entry["specialised"] for entry in entries] == [True], entries
    if overlap:
        assert [entry.get("overlap") for entry in entries] == [True], entries


def _specialised_attention_matches_torch(shape, seed, causal, block_m, block_n, warps, stages, **meta):
    """Runs the warp-specialised descriptor attention on torch data of ``shape`` (batch,
    heads, seq_len, head_dim) and checks it split the loop and matches SDPA."""
    batch, heads, seq_len, head_dim = shape
    polytile.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
    rows = batch * heads * seq_len
    out = torch.empty(rows, head_dim, device="cuda", dtype=torch.float16)
    grid = ((seq_len + block_m - 1) // block_m, batch * heads)
    compiled = attention_descriptors[grid](q.reshape(rows, head_dim), k.reshape(rows, head_dim),
                                           v.reshape(rows, head_dim), out, 1.0 / math.sqrt(head_dim), rows, seq_len,
                                           HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
                                           num_warps=warps, num_stages=stages, **{"WS": True, **meta})
    torch.cuda.synchronize()
    _assert_split(compiled, overlap=bool(getattr(meta.get("WS"), "overlap", False)))
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.reshape(batch, heads, seq_len, head_dim).float(), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape, block_m, warps", [((1, 2, 256, 64), 64, 4), ((2, 2, 384, 128), 128, 8),
                                                   ((1, 1, 1024, 128), 128, 8), ((1, 3, 200, 64), 64, 4),
                                                   ((2, 1, 300, 128), 128, 8)])
def test_specialised_attention_matches_torch(hopper, causal, shape, block_m, warps):
    # seq_len 200: the last query and key blocks partial
    _specialised_attention_matches_torch(shape, 3, causal, block_m, 64, warps, 3)


@pytest.mark.parametrize("q_pointers, block_n, stages", [(False, 128, 3), (True, 64, 3), (True, 128, 2)],
                         ids=["q-in-its-slot-128x128x3", "q-stored-128x64x3", "q-stored-128x128x2"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_specialised_attention_wide_key_blocks_and_q_read_where_it_lies(hopper, causal, q_pointers, block_n, stages):
    # Q through its descriptor is read by wgmma in its own ring slot (which lets 128 x 128
    # blocks take three stages); Q through pointers is stored in shared memory by the
    # consumers first.  seq_len 448: partial key blocks at 128.
    _specialised_attention_matches_torch((1, 2, 448, 128), 7, causal, 128, block_n, 8, stages, Q_POINTERS=q_pointers)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_pingpong_attention_matches_torch(hopper, causal):
    # Two consumer warp groups taking turns (the setting warpspec_pingpong): same results.
    from polytile import config

    # seq_len 320: a specialization no other test compiles (the setting is in the disk
    # cache's key; a specialization this process compiled before would be reused).
    with config.override(warpspec_pingpong=True):
        _specialised_attention_matches_torch((1, 2, 320, 128), 5, causal, 128, 64, 8, 3)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape, block_n, stages", [((2, 2, 384, 128), 128, 2), ((1, 1, 1024, 128), 128, 2),
                                                    ((1, 3, 200, 64), 64, 3), ((2, 1, 300, 128), 64, 3),
                                                    ((1, 2, 100, 128), 128, 2)],
                         ids=["384-d128", "1024-d128", "200-d64", "300-d128-bn64", "100-one-key-block"])
def test_overlapped_attention_matches_torch(hopper, causal, shape, block_n, stages):
    # pl.WarpSpecialize(overlap=True): p_{j-1} @ v_{j-1} runs during the softmax of j.
    # seq_len 100 with 128-key blocks: one iteration, run by the prologue and the
    # epilogue alone; 200 and 300: partial blocks.
    import polytile.language as pl

    warps = 8 if shape[3] == 128 else 4
    block_m = 128 if shape[3] == 128 else 64
    _specialised_attention_matches_torch(shape, 11, causal, block_m, block_n, warps, stages,
                                         WS=pl.WarpSpecialize(overlap=True))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq_len, head_dim, block_m, warps, programs", [(1000, 64, 64, 4, 3), (1024, 128, 128, 8, 2),
                                                                          (384, 128, 128, 8, 5)])
def test_specialised_persistent_attention_matches_torch(hopper, causal, seq_len, head_dim, block_m, warps, programs):
    # One head; a few programs walk its query blocks (more programs than blocks too), the
    # K/V loops of one tile starting where the last left the ring.
    polytile.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(seq_len + causal)
    q, k, v = (torch.randn(seq_len, head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.full((seq_len, head_dim), float("nan"), device="cuda", dtype=torch.float16)
    compiled = attention_persistent[(programs,)](q, k, v, out, 1 / math.sqrt(head_dim), seq_len, HEAD_DIM=head_dim,
                                                 BLOCK_M=block_m, BLOCK_N=64, CAUSAL=causal, NUM_PROGRAMS=programs,
                                                 WS=True, num_warps=warps, num_stages=2)
    torch.cuda.synchronize()
    _assert_split(compiled)
    expected = torch.nn.functional.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None],
                                                                is_causal=causal)[0, 0]
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)
