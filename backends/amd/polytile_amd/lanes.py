"""Butterfly lane exchanges (``shuffle_xor``) without LDS traffic where the hardware has
a fixed pattern for them.

``ds_bpermute`` reaches any lane but goes through the LDS crossbar (an LDS instruction,
waited on with ``s_waitcnt lgkmcnt``).  The short steps of a butterfly reduction stay
inside a quad or a row of 16 lanes, where the VALU moves lanes itself:

============  =================================  =============================
lane mask     gfx9 (CDNA, wave64)                gfx11 (RDNA3, wave32)
============  =================================  =============================
1, 2, 3       DPP ``quad_perm``                  DPP ``quad_perm``
4 .. 15       ``ds_swizzle`` (bitmask mode)      DPP ``row_xmask`` (gfx10+)
16 .. 31      ``ds_swizzle`` (bitmask mode)      ``ds_swizzle`` (bitmask mode)
32            ``ds_bpermute``                    (no such lane)
============  =================================  =============================

Scans shift instead (``shuffle_up``, lane ``l - 2^s``): DPP ``row_shr`` when the lanes along
the axis fit in a row of 16, ``wave_shr:1`` for the first step on gfx9, ``ds_bpermute``
for the rest.

``ds_swizzle`` is still an LDS-pipe instruction, but needs no address computation and
no lane id.  Its bitmask mode works on groups of 32 lanes, so masks up to 31 are exact on
wave64 too.  Values wider than 32 bits move as 32-bit words.
"""

from __future__ import annotations

from typing import Any, Callable

from llvmlite import ir
from polytile.gpu.lowering.types import bit_width

from .architectures import ARCHITECTURES

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

#: DPP controls (the ``dpp_ctrl`` operand of ``llvm.amdgcn.update.dpp``).
DPP_ROW_XMASK = 0x160
#: ``row_shr:n`` (n = 1..15): lane ``l`` reads ``l - n`` within its row of 16 lanes.
DPP_ROW_SHR = 0x110
#: ``wave_shr:1`` (gfx8/gfx9 only): lane ``l`` reads ``l - 1`` across the whole wavefront.
DPP_WAVE_SHR1 = 0x138
#: All four rows and banks of a wavefront take part in the move.
DPP_ALL_ROWS = 0xF
#: ``ds_swizzle`` bitmask mode: lane ``((l & and) | or) ^ xor`` within 32 lanes.
SWIZZLE_KEEP_ALL = 0x1F


Move32 = Callable[[ir.IRBuilder, Any], Any]


def quad_perm(lane_mask: int) -> int:
    """The ``quad_perm`` control that gives lane ``i`` of each quad lane ``i ^ lane_mask``."""
    return sum(((i ^ lane_mask) & 3) << (2 * i) for i in range(4))


def swizzle_xor(lane_mask: int) -> int:
    """The ``ds_swizzle`` offset (bitmask mode) that reads lane ``lane ^ lane_mask``."""
    return SWIZZLE_KEEP_ALL | (lane_mask << 10)


def has_row_xmask(arch: str) -> bool:
    """DPP ``row_xmask`` / ``row_share`` came with GFX10 (RDNA); CDNA's gfx9 lacks them."""
    return ARCHITECTURES[arch].family.startswith("RDNA")


def _declare(module: ir.Module, name: str, return_type: ir.Type, argument_types: list) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(return_type, argument_types), name)


def _dpp(control: int) -> Move32:
    def move(builder: ir.IRBuilder, word: Any) -> Any:
        function = _declare(builder.module, "llvm.amdgcn.update.dpp.i32", _I32,
                            [_I32, _I32, _I32, _I32, _I32, ir.IntType(1)])
        return builder.call(function, [word, word, ir.Constant(_I32, control), ir.Constant(_I32, DPP_ALL_ROWS),
                                       ir.Constant(_I32, DPP_ALL_ROWS), ir.Constant(ir.IntType(1), 0)])
    return move


def _swizzle(offset: int) -> Move32:
    def move(builder: ir.IRBuilder, word: Any) -> Any:
        function = _declare(builder.module, "llvm.amdgcn.ds.swizzle", _I32, [_I32, _I32])
        return builder.call(function, [word, ir.Constant(_I32, offset)])
    return move


def xor_move(arch: str, lane_mask: int) -> Move32 | None:
    """The fixed-pattern move for ``lane ^ lane_mask`` on ``arch``, or None (ds_bpermute)."""
    if 0 < lane_mask < 4:
        return _dpp(quad_perm(lane_mask))
    if lane_mask < 16 and has_row_xmask(arch):
        return _dpp(DPP_ROW_XMASK | lane_mask)
    if 0 < lane_mask < 32:
        return _swizzle(swizzle_xor(lane_mask))
    return None


def move_words(builder: ir.IRBuilder, value: Any, move: Move32) -> Any:
    """``move`` applied to ``value`` (up to 64 bits) one 32-bit word at a time."""
    width = bit_width(value.type)
    is_int = isinstance(value.type, ir.IntType)
    bits = value if is_int else builder.bitcast(value, ir.IntType(width))
    if width == 64:
        halves = [move(builder, builder.trunc(builder.lshr(bits, ir.Constant(_I64, s)), _I32)) for s in (0, 32)]
        out = builder.or_(builder.zext(halves[0], _I64), builder.shl(builder.zext(halves[1], _I64),
                                                                     ir.Constant(_I64, 32)))
    elif width < 32:
        out = builder.trunc(move(builder, builder.zext(bits, _I32)), ir.IntType(width))
    else:
        out = move(builder, bits)
    return out if is_int else builder.bitcast(out, value.type)


def up_move(arch: str, delta: int, span: int) -> Move32 | None:
    """A DPP move giving each lane at least ``delta`` into its group of ``span`` lanes the
    value of lane ``lane - delta``, or None (ds_bpermute then)."""
    if span <= 16 and delta < 16:
        return _dpp(DPP_ROW_SHR | delta)  # the span lies inside a row: no lane crosses one
    if delta == 1 and not has_row_xmask(arch):
        return _dpp(DPP_WAVE_SHR1)  # wave shifts exist on gfx9 (CDNA), not on gfx10+
    return None


def shuffle_up_hook(arch: str, fallback: Callable[[Any, Any, int, int], Any]) -> Callable[[Any, Any, int, int], Any]:
    """``GpuTarget.shuffle_up`` for ``arch``: a DPP shift where one reaches, ``fallback``
    (ds_bpermute of ``lane - delta``) for the rest."""
    def shuffle_up(builder: ir.IRBuilder, value: Any, delta: int, span: int) -> Any:
        move = up_move(arch, delta, span)
        if move is None:
            return fallback(builder, value, delta, span)
        return move_words(builder, value, move)
    return shuffle_up


def shuffle_xor_hook(arch: str, fallback: Callable[[Any, Any, int], Any]) -> Callable[[Any, Any, int], Any]:
    """``GpuTarget.shuffle_xor`` for ``arch``: the fixed-pattern moves above, ``fallback``
    (ds_bpermute) for the rest."""
    def shuffle_xor(builder: ir.IRBuilder, value: Any, lane_mask: int) -> Any:
        move = xor_move(arch, lane_mask)
        if move is None:
            return fallback(builder, value, lane_mask)
        return move_words(builder, value, move)
    return shuffle_xor


__all__ = ["has_row_xmask", "move_words", "quad_perm", "shuffle_up_hook", "shuffle_xor_hook", "swizzle_xor", "up_move",
           "xor_move"]
