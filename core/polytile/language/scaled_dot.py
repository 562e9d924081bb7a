"""``pl.dot_scaled``: the matrix product of microscaled operands (Triton's ``tl.dot_scaled``).

The operands come in the OCP microscaling (MX) formats: ``e2m1`` (fp4, two to a byte,
the first element in the low four bits), ``e4m3`` and ``e5m2`` (fp8, as their fp8 type or
as uint8 bits), and ``bf16``/``fp16`` (as their type or as uint16 bits).  A scale tensor
gives one factor per 32 elements along K: an ``e8m0`` byte (uint8) ``s`` means ``2 **
(s - 127)``, and ``s == 0xFF`` is NaN.  (``float8e4nv`` scales, one per 16 elements, are
the factors they hold.)

No target polytile runs on multiplies MX operands in hardware (Hopper, Ampere, CDNA3 have
no scaled MMA), so every target computes the product as Triton does on them, from ops
every target lowers:

1. each operand is upcast to the *compute type*, fp16 when either format is ``fp16``,
   bf16 otherwise (fp4 through its bits, fp8 through a conversion; every value of each
   format is exact in the compute type);
2. multiplied by its scales, in the compute type (a power of two: exact unless the
   product leaves the type's range, where Triton overflows and underflows the same way);
   a scale of ``0xFF`` makes its 32 products NaN unless ``fast_math=True``;
3. the two meet in ``pl.dot`` with fp32 accumulation (plus ``acc`` when given).

So the interpreter gives what the GPU gives, and both what Triton gives on Hopper.
"""

from __future__ import annotations

from typing import Any

from ..ir import types as t
from . import semantic as sem
from .core import bfloat16, builtin, float8e4nv, float8e5, float16, float32, semantic_error, tensor, unwrap
from .core import uint8, uint16, uint32
from .shape import join
from .standard import dot, expand_dims, permute, reshape, where

#: The formats an operand may have, and the type its elements take (fp4: none; its bytes
#: are unpacked here).
FORMATS = {"e2m1": None, "e4m3": float8e4nv, "e5m2": float8e5, "bf16": bfloat16, "fp16": float16}

#: The unsigned type whose bits an operand may come as instead of its format's type.
_BITS = {"e2m1": uint8, "e4m3": uint8, "e5m2": uint8, "bf16": uint16, "fp16": uint16}


#: Mantissa bits and exponent bias of the compute types (where fp4's bits go).
_LAYOUT = {"bf16": (7, 127), "fp16": (10, 15)}


@builtin
def dot_scaled(lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any, rhs_format: Any,
               acc: Any = None, fast_math: Any = False, lhs_k_pack: Any = True, rhs_k_pack: Any = True,
               out_dtype: Any = float32) -> tensor:
    """``(lhs * lhs_scale) @ (rhs * rhs_scale) (+ acc)`` in fp32, of 2-D operands (M x K by
    K x N) or 3-D ones batched along their first dimension.

    ``lhs_format``/``rhs_format``: ``"e2m1"``, ``"e4m3"``, ``"e5m2"``, ``"bf16"`` or
    ``"fp16"``.  An ``e2m1`` operand is uint8 holding two elements a byte, packed along K
    (``lhs`` is M x K/2, ``rhs`` K/2 x N), or along M (N) with ``lhs_k_pack=False``
    (``rhs_k_pack=False``).  ``lhs_scale``: None or M x K/32 (``rhs_scale``: N x K/32, not
    transposed), uint8 ``e8m0`` exponents.  ``out_dtype`` must be ``pl.float32``; ``acc``,
    when given, is an fp32 M x N tensor.  See the module's docstring for how it is computed."""
    lhs_format = _format(lhs_format, "lhs_format")
    rhs_format = _format(rhs_format, "rhs_format")
    out = unwrap(out_dtype)
    if out != float32:
        raise semantic_error(f"pl.dot_scaled: out_dtype must be pl.float32 (the only one Triton supports), "
                             f"got {sem._describe(out)}")
    a, b = sem.to_tensor(lhs), sem.to_tensor(rhs)
    if len(a.shape) not in (2, 3) or len(b.shape) != len(a.shape):
        raise semantic_error(f"pl.dot_scaled needs 2-D operands, or 3-D ones batched along the first dimension, "
                             f"got shapes {list(a.shape)} and {list(b.shape)}")
    a = _as_format(a, lhs_format, "lhs")
    b = _as_format(b, rhs_format, "rhs")
    a_k_packed = _k_pack(lhs_k_pack, lhs_format, "lhs")
    b_k_packed = _k_pack(rhs_k_pack, rhs_format, "rhs")
    # Where each operand's fp4 pairs lie: lhs is (.., M, K), rhs (.., K, N).
    a_axis = -1 if a_k_packed else -2
    b_axis = -2 if b_k_packed else -1
    a_shape, b_shape = _unpacked(a.shape, lhs_format, a_axis), _unpacked(b.shape, rhs_format, b_axis)
    (m, k), (k_rhs, n) = a_shape[-2:], b_shape[-2:]
    if k != k_rhs:
        raise semantic_error(f"pl.dot_scaled: the operands hold different numbers of elements along K: lhs "
                             f"{list(a.shape)} in {lhs_format} is {list(a_shape)}, rhs {list(b.shape)} in "
                             f"{rhs_format} is {list(b_shape)}")
    if a_shape[:-2] != b_shape[:-2]:
        raise semantic_error(f"pl.dot_scaled: the batch dimensions differ: {list(a.shape)} and {list(b.shape)}")
    compute = "fp16" if "fp16" in (lhs_format, rhs_format) else "bf16"
    a = _upcast(a, lhs_format, compute, a_axis)
    b = _upcast(b, rhs_format, compute, b_axis)
    fast = bool(unwrap(fast_math))
    if unwrap(lhs_scale) is not None:
        a = a * _scales(lhs_scale, "lhs_scale", a_shape[:-2], m, k, compute, fast, transposed=False)
    if unwrap(rhs_scale) is not None:
        b = b * _scales(rhs_scale, "rhs_scale", b_shape[:-2], n, k, compute, fast, transposed=True)
    acc = unwrap(acc)
    if acc is not None:
        acc = sem.to_tensor(acc)
        expected = (*a_shape[:-2], m, n)
        if tuple(acc.shape) != expected or acc.type.element != t.f32:
            raise semantic_error(f"pl.dot_scaled: acc must be an fp32 tensor of shape {list(expected)}, got "
                                 f"{sem._describe(acc)}")
    return dot(a, b, acc, out_dtype=float32)


def _format(value: Any, what: str) -> str:
    value = unwrap(value)
    if value not in FORMATS:
        raise semantic_error(f"pl.dot_scaled: {what} must be one of {', '.join(map(repr, FORMATS))}, "
                             f"got {value!r}")
    return value


def _as_format(x: tensor, fmt: str, what: str) -> tensor:
    """``x`` as its format's type (fp8 and 16-bit bits bitcast), fp4 as its uint8 bytes."""
    kind = FORMATS[fmt]
    if kind is not None and x.dtype == kind:
        return x
    if x.dtype == _BITS[fmt]:
        return x if kind is None else x.to(kind, bitcast=True)
    wanted = "uint8 (two elements a byte)" if kind is None else f"{kind!r} or {_BITS[fmt]!r} (its bits)"
    raise semantic_error(f"pl.dot_scaled: {what} in {fmt} must be {wanted}, got {x.dtype!r}")


def _k_pack(value: Any, fmt: str, what: str) -> bool:
    packed = bool(unwrap(value))
    if not packed and fmt != "e2m1":
        raise semantic_error(f"pl.dot_scaled: {what}_k_pack=False packs fp4 pairs along M or N; only e2m1 "
                             f"operands are packed, and {what} is {fmt}")
    return packed


def _unpacked(shape: tuple[int, ...], fmt: str, axis: int) -> tuple[int, ...]:
    """The shape of the elements ``shape`` holds: fp4 doubles ``axis``."""
    if fmt != "e2m1":
        return tuple(shape)
    dims = list(shape)
    dims[axis] *= 2
    return tuple(dims)


def _upcast(x: tensor, fmt: str, compute: str, axis: int) -> tensor:
    target = bfloat16 if compute == "bf16" else float16
    if fmt != "e2m1":
        return x if x.dtype == target else x.to(target)
    # The two elements of each byte, the first from the low bits, side by side along `axis`.
    wide = x.to(uint16)
    nibbles = _interleave(wide & 15, wide >> 4, axis)
    return _fp4_to(nibbles, compute).to(target, bitcast=True)


def _interleave(lo: tensor, hi: tensor, axis: int) -> tensor:
    """``lo`` and ``hi`` alternating along ``axis`` (-1 or -2)."""
    pairs = join(lo, hi)  # (.., R, C, 2)
    rank = len(pairs.shape)
    if axis == -2:
        pairs = permute(pairs, (*range(rank - 3), rank - 3, rank - 1, rank - 2))  # (.., R, 2, C)
    shape = list(lo.shape)
    shape[axis] *= 2
    return reshape(pairs, tuple(shape))


def _fp4_to(nibble: tensor, compute: str) -> tensor:
    """The bits (uint16) of the compute type's value of each e2m1 ``nibble`` (uint16 0..15):
    sign, then exponent (bias 1) and mantissa moved into place, the bias corrected for
    normal values; the subnormal one (0.5) is the compute type's 0.5."""
    mantissa_bits, bias = _LAYOUT[compute]
    sign = (nibble & 8) << 12
    magnitude = nibble & 7
    bits = (magnitude << (mantissa_bits - 1)) | sign
    half = (bias - 1) << mantissa_bits
    bits = where((magnitude & 6) != 0, bits + half, bits)
    return where(magnitude == 1, sign | half, bits)


def _scales(scale: Any, what: str, batch: tuple[int, ...], rows: int, k: int, compute: str, fast: bool,
            transposed: bool) -> tensor:
    """One factor per element of the operand (``rows`` x K, or K x ``rows`` when
    ``transposed``), in the compute type."""
    s = sem.to_tensor(unwrap(scale))
    # Elements per scale: 32 for e8m0 (uint8) scales, 16 for float8e4nv ones.
    group = 32 if s.dtype == uint8 else 16 if s.dtype == float8e4nv else None
    if group is None:
        raise semantic_error(f"pl.dot_scaled: {what} must be uint8 (e8m0 exponents, one per 32 elements along K) "
                             f"or float8e4nv (one per 16), got {sem._describe(s)}")
    if k % group:
        raise semantic_error(f"pl.dot_scaled: K = {k} is not a multiple of {group}, the elements one {what} "
                             f"entry scales")
    expected = (rows, k // group)
    if tuple(s.shape) not in (expected, (*batch, *expected)):
        raise semantic_error(f"pl.dot_scaled: {what} must be a tensor of shape {list(expected)}, got "
                             f"{list(s.shape)}")
    if group == 32:
        factor = _e8m0_to(s, compute)
        if not fast:
            factor = where(s == 255, float("nan"), factor)
    else:
        factor = s.to(bfloat16 if compute == "bf16" else float16)
    # (.., rows, K / group) -> (.., rows, K / group, group) -> (.., rows, K)
    spread = sem.broadcast_to_shape(expand_dims(factor, -1), (*factor.shape, group))
    spread = reshape(spread, (*factor.shape[:-1], k))
    if transposed:
        rank = len(spread.shape)
        spread = permute(spread, (*range(rank - 2), rank - 1, rank - 2))
    return spread


def _e8m0_to(s: tensor, compute: str) -> tensor:
    """``2 ** (s - 127)`` in the compute type, from the exponent's bits as Triton makes it:
    into bf16's exponent field directly, into fp16 through fp32 (out of fp16's range:
    0 or inf)."""
    if compute == "bf16":
        return (s.to(uint16) << 7).to(bfloat16, bitcast=True)
    return (s.to(uint32) << 23).to(float32, bitcast=True).to(float16)
