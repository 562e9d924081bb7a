"""Fuzz regression fuzz_12_137: crash in compile:amd:gfx942.

Found by ``python -m polytile.fuzz --seed 12 --start 137 --count 1`` and shrunk
to this kernel.  What was seen: InvalidIRError: internal compiler error: pass 'assign-layouts' (stage 'distribute') of polytile itself (distribution 'polytile') left invalid IR: 'gpu.convert_layout' op: operand #0 does not dominate this use (it is defined later, in another region, or outside an isolated function) (the IR became in
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

@pt.jit
def fuzz_12_137(d2a_ptr, d2b_ptr, out7_ptr, out8_ptr, M, N, K, trips, EMULATE: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
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
    v4 = pl.max(d2, axis=1)
    v5 = pl.broadcast_to(pl.expand_dims(v4, 1), [BM, BN])
    v6 = v5 * v5
    pl.store(out7_ptr + rows[:, None] * N + cols[None, :], v6, mask=mask)
    pl.store(out8_ptr + rows, v4, mask=rmask)


CASE = Case(
    kernel=fuzz_12_137,
    family='2d',
    sizes={'M': 1, 'N': 1, 'K': 1, 'trips': 0},
    blocks={'BM': 16, 'BN': 64, 'BK': 32},
    num_warps=1,
    seed=12,
    index=137,
    arrays=[
    ('d2a', 'f32', 'in', 'A', 0.0, 'random', False),
    ('d2b', 'f32', 'in', 'B', 0.0, 'random', False),
    ('out7', 'f32', 'out', 'T', 1.0078125, 'zeros', False),
    ('out8', 'f32', 'out', 'R', 0.001953125, 'zeros', False),
    ],
)


@pytest.mark.parametrize("target", ["interp", pytest.param("compile:amd:gfx942"), pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_12_137(target):
    run_case(CASE, target)
