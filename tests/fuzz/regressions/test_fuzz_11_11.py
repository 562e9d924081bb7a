"""Fuzz regression fuzz_11_11: crash in compile:amd:gfx90a.

Found by ``python -m polytile.fuzz --seed 11 --start 11 --count 1`` and shrunk
to this kernel.  What was seen: PassFailure: internal compiler error in pass 'assign-layouts': KeyError: <result 0 of gpu.convert_layout: tile<16x32xi16>> It was raised at /work/main/core/polytile/gpu/distribute.py:80, in find: while self.parent[root] is not root: This is a bug in polytile or in the plugin that provides pass 'assi
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

@pt.jit
def fuzz_11_11(x1_ptr, d6a_ptr, d6b_ptr, out7_ptr, out8_ptr, M, N, K, trips, EMULATE: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid = pl.program_id(0)
    rows = pid * BM + pl.arange(0, BM)
    cols = pl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    x1 = pl.load(x1_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0)
    v2 = pl.minimum(x1, x1)
    d6 = pl.zeros((BM, BN), dtype=pl.int32)
    for d6_kb in range(0, pl.cdiv(K, BK)):
        d6_ks = d6_kb * BK + pl.arange(0, BK)
        d6_a = pl.load(d6a_ptr + rows[:, None] * K + d6_ks[None, :], mask=rmask[:, None] & (d6_ks[None, :] < K), other=0)
        d6_b = pl.load(d6b_ptr + d6_ks[:, None] * N + cols[None, :], mask=(d6_ks[:, None] < K) & cmask[None, :], other=0)
        d6 = pl.dot(d6_a, d6_b, d6)
    pl.store(out7_ptr + rows[:, None] * N + cols[None, :], d6, mask=mask)
    pl.store(out8_ptr + rows[:, None] * N + cols[None, :], v2, mask=mask)


CASE = Case(
    kernel=fuzz_11_11,
    family='2d',
    sizes={'M': 1, 'N': 1, 'K': 1, 'trips': 0},
    blocks={'BM': 16, 'BN': 32, 'BK': 16},
    num_warps=1,
    seed=11,
    index=11,
    arrays=[
    ('x1', 'i16', 'in', 'T', 0.0, 'random', False),
    ('d6a', 'i8', 'in', 'A', 0.0, 'random', False),
    ('d6b', 'i8', 'in', 'B', 0.0, 'random', False),
    ('out7', 'i32', 'out', 'T', 0.0, 'zeros', False),
    ('out8', 'i16', 'out', 'T', 0.0, 'zeros', False),
    ],
)


@pytest.mark.parametrize("target", ["interp", pytest.param("compile:amd:gfx90a"), pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_11_11(target):
    run_case(CASE, target)
