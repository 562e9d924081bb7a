"""The kernel language: ``import polytile.language as pl``.

The names mirror ``triton.language``: dtypes (``pl.float32`` ...), ``pl.constexpr``,
``pl.tensor``, and builtins (``pl.program_id``, ``pl.load``, ``pl.sum``, ``pl.dot`` ...)
that a ``@jit`` kernel calls.  See docs/language.md for what works today.
"""

from .core import (
    bfloat16,
    constexpr,
    dtype,
    float8e4nv,
    float8e5,
    float16,
    float32,
    float64,
    int1,
    int8,
    int16,
    int32,
    int64,
    pointer_type,
    tensor,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .atomic import atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor
from .block import advance, make_block_ptr
from .debug import debug_barrier, device_assert, device_print
from .random import philox, rand, rand4x, randint, randint4x, randn, randn4x
from .reductions import argmax, argmin
from .shape import cat, join, split
from .scan import associative_scan, cumprod, cumsum
from .standard import (
    abs,
    arange,
    broadcast,
    broadcast_to,
    cast,
    cdiv,
    ceil,
    clamp,
    cos,
    div_rn,
    dot,
    erf,
    exp,
    exp2,
    expand_dims,
    fdiv,
    floor,
    fma,
    full,
    full_like,
    log,
    log2,
    max,
    max_constancy,
    max_contiguous,
    maximum,
    min,
    minimum,
    multiple_of,
    num_programs,
    permute,
    program_id,
    range,
    reduce,
    reshape,
    rsqrt,
    sigmoid,
    sin,
    softmax,
    sqrt,
    sqrt_rn,
    static_assert,
    static_print,
    static_range,
    store,
    load,
    sum,
    trans,
    umulhi,
    view,
    where,
    xor_sum,
    zeros,
    zeros_like,
)

# Triton spells the fp8 types several ways; these are the ones the IR has.
float8e4m3 = float8e4nv
float8e5m2 = float8e5
bool_ = int1

__all__ = [name for name in dir() if not name.startswith("_")]
