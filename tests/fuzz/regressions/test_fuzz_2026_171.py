"""Fuzz regression fuzz_2026_171: crash in compile:amd:gfx90a.

Found by ``python -m polytile.fuzz --seed 2026 --start 171 --count 1`` and shrunk
to this kernel.  What was seen: PolytileError: internal error: kernel 'fuzz_2026_171': the code object declares 0 bytes of LDS but the memory stage allocated 16; please report this with the IR dump (POLYTILE_DUMP_IR=1)
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

#: It failed with the LDS plugin installed: lds-verify demanded that the code object's LDS
#: equal the allocation, and LLVM drops the LDS of a scan of a constant (0 of 16 bytes).


@pt.jit
def fuzz_2026_171(x1_ptr, a6_ptr, n, trips, EMULATE: pl.constexpr, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    x1 = pl.load(x1_ptr + offs, mask=mask, other=0)
    v2 = x1 ^ x1
    v3 = pl.cumprod(v2, axis=0).to(pl.int32)
    pl.atomic_xor(a6_ptr + offs % 4, v3, mask=mask)


CASE = Case(
    kernel=fuzz_2026_171,
    family='1d',
    sizes={'n': 1, 'trips': 0},
    blocks={'BLOCK': 256},
    num_warps=8,
    seed=2026,
    index=171,
    arrays=[
    ('x1', 'i32', 'in', 'V', 0.0, 'random', False),
    ('a6', 'i32', 'out', 'atomic', 0.0, 'zeros', True),
    ],
)


@pytest.mark.parametrize("target", ["interp", "compile:amd:gfx90a", pytest.param("nvidia", marks=[pytest.mark.gpu])])
def test_fuzz_2026_171(target):
    run_case(CASE, target)
