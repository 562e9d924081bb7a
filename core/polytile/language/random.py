"""Counter-based random numbers: ``pl.randint``, ``pl.randint4x``, ``pl.rand``, ``pl.randn``.

Philox 4x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), written
exactly as Triton's ``triton.language.random``: the counter is ``(offset, 0, 0, 0)``,
the key is the seed's low and high 32 bits, ``n_rounds`` (10 by default) rounds.  It is
plain uint32 arithmetic (``arith.mulhiui``, ``arith.muli``, ``arith.xori``,
``arith.addi``), so the same seed and offsets give the same numbers on every target.
"""

from __future__ import annotations

from typing import Any

from ..ir import types as t
from . import semantic as sem
from .core import builtin, semantic_error, tensor, unwrap
from .standard import cos, log, maximum, sin, sqrt, umulhi

PHILOX_KEY_A = 0x9E3779B9
PHILOX_KEY_B = 0xBB67AE85
PHILOX_ROUND_A = 0xD2511F53
PHILOX_ROUND_B = 0xCD9E8D57
N_ROUNDS_DEFAULT = 10


def _rounds(n_rounds: Any) -> int:
    n = unwrap(n_rounds)
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise semantic_error(f"n_rounds must be a positive compile-time integer, got {sem._describe(n)}")
    return n


@builtin
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple:
    """``n_rounds`` Philox-4x32 rounds of the counter ``(c0, c1, c2, c3)`` keyed by ``seed``."""
    n_rounds = _rounds(n_rounds)
    c0, c1, c2, c3 = (sem.to_tensor(c) for c in (c0, c1, c2, c3))
    seed = sem.to_tensor(seed)
    if not t.is_integer(seed.type) or seed.shape:
        raise semantic_error(f"the seed must be an integer scalar, got {sem._describe(seed)}")
    seed = sem.cast_type(seed, t.u64)
    k1 = sem.cast_type(sem.binary("and", sem.binary("rshift", seed, 32), 0xFFFFFFFF), t.u32)  # high half
    k0 = sem.cast_type(sem.binary("and", seed, 0xFFFFFFFF), t.u32)
    counters = []
    for c in (c0, c1, c2, c3):
        width = t.element_type(c.type).width
        if width != 32:
            raise semantic_error(f"random offsets must be 32-bit integers, got {sem.type_name(c.type)} "
                                 "(64-bit Philox is not supported yet)")
        counters.append(sem.cast_type(c, t.u32, bitcast=True))
    c0, c1, c2, c3 = counters
    for _ in range(n_rounds):
        prev0, prev2 = c0, c2
        c0 = sem.binary("xor", sem.binary("xor", umulhi(PHILOX_ROUND_B, prev2), c1), k0)
        c2 = sem.binary("xor", sem.binary("xor", umulhi(PHILOX_ROUND_A, prev0), c3), k1)
        c1 = sem.binary("mul", prev2, PHILOX_ROUND_B)
        c3 = sem.binary("mul", prev0, PHILOX_ROUND_A)
        k0 = sem.binary("add", k0, PHILOX_KEY_A)
        k1 = sem.binary("add", k1, PHILOX_KEY_B)
    return c0, c1, c2, c3


def _offsets(offset: Any) -> tensor:
    offset = sem.to_tensor(offset)
    if not t.is_integer(offset.type) or t.is_bool(offset.type):
        raise semantic_error(f"random offsets must be integers, got {sem._describe(offset)}")
    return offset


@builtin
def randint4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple:
    """Four streams of random uint32 values for each offset."""
    offset = _offsets(offset)
    zero = sem.binary("mul", offset, 0)
    return philox(seed, offset, zero, zero, zero, _rounds(n_rounds))


@builtin
def randint(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """One random uint32 per offset (the first of ``randint4x``'s four)."""
    return randint4x(seed, offset, n_rounds)[0]


def uint_to_uniform_float(x: tensor) -> tensor:
    """A uint32 as a float32 in [0, 1): read as int32, fold negatives onto the
    non-negatives, scale by the largest float32 ``s`` with ``(2**31 - 1) * s < 1``."""
    x = sem.cast_type(x, t.i32, bitcast=True)
    x = sem.where(sem.compare("lt", x, 0), sem.binary("sub", sem.negate(x), 1), x)
    return sem.binary("mul", x, 4.6566127342e-10)


@builtin
def rand(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """Uniform float32 in [0, 1) for each offset."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def pair_uniform_to_normal(u1: tensor, u2: tensor) -> tuple[tensor, tensor]:
    """Box-Muller: two uniforms to two standard normals."""
    u1 = maximum(1.0e-7, u1)
    th = sem.binary("mul", 6.283185307179586, u2)
    r = sqrt(sem.binary("mul", -2.0, log(u1)))
    return sem.binary("mul", r, cos(th)), sem.binary("mul", r, sin(th))


@builtin
def randn(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """Standard normal float32 for each offset (Box-Muller on two Philox streams)."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))[0]


@builtin
def rand4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple:
    """Four uniform float32 streams in [0, 1) for each offset."""
    return tuple(uint_to_uniform_float(i) for i in randint4x(seed, offset, n_rounds))


@builtin
def randn4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple:
    """Four standard normal float32 streams for each offset."""
    u = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u[0], u[1])
    n3, n4 = pair_uniform_to_normal(u[2], u[3])
    return n1, n2, n3, n4


__all__ = ["randint", "randint4x", "rand", "randn", "rand4x", "randn4x", "philox"]
