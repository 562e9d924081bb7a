"""Kernels the AMD tests compile, and a helper that compiles one to an HSACO."""

from __future__ import annotations

import numpy as np

import polytile as pt
import polytile.language as pl
from polytile.compiler import compile_module

ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100")
WAVEFRONT = {"gfx90a": 64, "gfx942": 64, "gfx950": 64, "gfx1100": 32}


def compile_amd(kernel, *args, arch="gfx942", num_warps=4, options=None, **meta):
    """The artifacts of compiling ``kernel`` for ``amd:<arch>`` (``options``: more backend
    options, such as ``{"matrix_instr_nonkdim": 16}``)."""
    result = compile_module(kernel.lower(*args, **meta), f"amd:{arch}", num_warps=num_warps, **(options or {}))
    return result.artifacts  # AMDGCN assembly, made only when read, is made when a test reads it


def f32(n=8192):
    return np.zeros(n, np.float32)


@pt.jit
def add(x, y, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


@pt.jit
def math_kernel(x, out, n, scale, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    v = pl.load(x + offs, mask=mask, other=1.0)
    y = pl.exp(v) * scale + pl.where(v > 0.0, pl.sqrt(v), -v) + pl.log2(pl.abs(v) + 1.0)
    pl.store(out + offs, y.to(pl.float16).to(pl.float32), mask=mask)


@pt.jit
def scalars(out, a, b, c, d, BLOCK: pl.constexpr):
    # i8, i64, f16 and f64 parameters: the kernarg layout pads each to its alignment.
    offs = pl.arange(0, BLOCK)
    v = a.to(pl.float32) + b.to(pl.float32) + c.to(pl.float32) + d.to(pl.float32)
    pl.store(out + offs, pl.full((BLOCK,), 0.0, pl.float32) + v)


@pt.jit
def grid_size(out):
    pl.store(out + pl.program_id(0), pl.num_programs(0))


@pt.jit
def rowsum(x, out, n, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    v = pl.load(x + pl.program_id(0) * n + offs, mask=offs < n, other=0.0)
    pl.store(out + pl.program_id(0), pl.sum(v, axis=0))


@pt.jit
def sine(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.sin(pl.load(x + offs)))


@pt.jit
def erf(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.erf(pl.load(x + offs)))
