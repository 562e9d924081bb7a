"""Fuzz regression fuzz_11_282: crash in compile:nvidia:sm_80.

Found by ``python -m polytile.fuzz --seed 11 --start 282 --count 1`` and shrunk
to this kernel.  What was seen: CompilationError: /tmp/fz/k/fuzz_11_282.py:19:6: error: in kernel 'fuzz_11_282': internal error: operand a of 'tile.dot' has layout #gpu.blocked<size_per_thread = [1, 1], threads_per_warp = [2, 16], warps_per_cta = [4, 1], order = [1, 0]>, not the dot operand layout of the result's #gpu.mma<version 
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

@pt.jit
def fuzz_11_282(d2a_ptr, d2b_ptr, d4a_ptr, d4b_ptr, a6_ptr, a7_ptr, M, N, K, trips, EMULATE: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid = pl.program_id(0)
    rows = pid * BM + pl.arange(0, BM)
    cols = pl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    d2 = pl.zeros((BM, BN), dtype=pl.float32)
    for d2_kb in range(0, pl.cdiv(K, BK)):
        d2_ks = d2_kb * BK + pl.arange(0, BK)
        d2_a = pl.load(d2a_ptr + rows[:, None] * K + d2_ks[None, :], mask=rmask[:, None] & (d2_ks[None, :] < K), other=0)
        d2_b = pl.load(d2b_ptr + d2_ks[:, None] * N + cols[None, :], mask=(d2_ks[:, None] < K) & cmask[None, :], other=0)
        d2 = pl.dot(d2_a, d2_b, d2, input_precision="ieee")
    d4 = pl.zeros((BM, BN), dtype=pl.float32)
    for d4_kb in range(0, pl.cdiv(K, BK)):
        d4_ks = d4_kb * BK + pl.arange(0, BK)
        d4_a = pl.load(d4a_ptr + rows[:, None] * K + d4_ks[None, :], mask=rmask[:, None] & (d4_ks[None, :] < K), other=0)
        d4_b = pl.load(d4b_ptr + d4_ks[:, None] * N + cols[None, :], mask=(d4_ks[:, None] < K) & cmask[None, :], other=0)
        d4 = pl.dot(d4_a, d4_b, d4)
    pl.atomic_min(a6_ptr + (rows[:, None] + cols[None, :]) % 4, d2, mask=mask)
    pl.atomic_max(a7_ptr + (rows[:, None] + cols[None, :]) % 4, d4, mask=mask)


CASE = Case(
    kernel=fuzz_11_282,
    family='2d',
    sizes={'M': 1, 'N': 1, 'K': 1, 'trips': 0},
    blocks={'BM': 16, 'BN': 16, 'BK': 16},
    num_warps=4,
    seed=11,
    index=282,
    arrays=[
    ('d2a', 'f32', 'in', 'A', 0.0, 'random', False),
    ('d2b', 'f32', 'in', 'B', 0.0, 'random', False),
    ('d4a', 'f16', 'in', 'A', 0.0, 'random', False),
    ('d4b', 'f16', 'in', 'B', 0.0, 'random', False),
    ('a6', 'f32', 'out', 'atomic', 0.00048828125, 'zeros', True),
    ('a7', 'f32', 'out', 'atomic', 0.00048828125, 'zeros', True),
    ],
)


@pytest.mark.parametrize("target", ["interp", pytest.param("compile:nvidia:sm_80"), pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_11_282(target):
    run_case(CASE, target)
