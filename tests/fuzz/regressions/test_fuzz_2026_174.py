"""Fuzz regression fuzz_2026_174: crash in compile:nvidia:sm_90a.

Found by ``python -m polytile.fuzz --seed 2026 --start 174 --count 1`` and shrunk
to this kernel.  What was seen: CompilationError: /tmp/fz/k/fuzz_2026_174.py:21:6: error: in kernel 'fuzz_2026_174': 'tile.scan' along axis 0 of tile<32xi32, #gpu.slice<dim = 1, parent = #gpu.mma<version = 2, warps_per_cta = [2, 2], instr_shape = [16, 8]>>> (registers step along the axis between lanes or warps) is not supported by the NVIDIA backend yet v7 = pl.cumsum(v6, axis=0, reverse=True).to(pl.int32)
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

@pt.jit
def fuzz_2026_174(d3a_ptr, d3b_ptr, out9_ptr, M, N, K, trips, EMULATE: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    pid = pl.program_id(0)
    rows = pid * BM + pl.arange(0, BM)
    cols = pl.arange(0, BN)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    d3 = pl.zeros((BM, BN), dtype=pl.int32)
    for d3_kb in range(0, pl.cdiv(K, BK)):
        d3_ks = d3_kb * BK + pl.arange(0, BK)
        d3_a = pl.load(d3a_ptr + rows[:, None] * K + d3_ks[None, :], mask=rmask[:, None] & (d3_ks[None, :] < K), other=0)
        d3_b = pl.load(d3b_ptr + d3_ks[:, None] * N + cols[None, :], mask=(d3_ks[:, None] < K) & cmask[None, :], other=0)
        d3 = pl.dot(d3_a, d3_b, d3)
    v6 = pl.argmin(d3, axis=1)
    v7 = pl.cumsum(v6, axis=0, reverse=True).to(pl.int32)
    v8 = d3 >> (v7[:, None] & 31)
    pl.store(out9_ptr + rows[:, None] * N + cols[None, :], v8, mask=mask)


CASE = Case(
    kernel=fuzz_2026_174,
    family='2d',
    sizes={'M': 1, 'N': 1, 'K': 1, 'trips': 0},
    blocks={'BM': 32, 'BN': 32, 'BK': 32},
    num_warps=4,
    seed=2026,
    index=174,
    arrays=[
    ('d3a', 'i8', 'in', 'A', 0.0, 'random', False),
    ('d3b', 'i8', 'in', 'B', 0.0, 'random', False),
    ('out9', 'i32', 'out', 'T', 0.0, 'zeros', False),
    ],
)


@pytest.mark.parametrize("target", ["interp", pytest.param("compile:nvidia:sm_90a"), pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_2026_174(target):
    run_case(CASE, target)
