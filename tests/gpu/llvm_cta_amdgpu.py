"""AMDGPU semantics for the CTA simulator (tests/gpu/llvm_cta.py): work-item ids, lane
counts, ``s_barrier``, the cross-lane moves (``ds_bpermute``, DPP, ``ds_swizzle``) and
the matrix instructions (MFMA on CDNA, WMMA on RDNA3), done per wavefront.

The lane tables here are written from AMD's documentation (the CDNA3 ISA guide's
"Matrix Arithmetic" chapter, the AMD Matrix Instruction Calculator's register tables and
the RDNA3 ISA guide's WMMA section) as plain formulas, not from polytile's layouts, so
that a layout that disagrees with the hardware makes a dot kernel's result wrong here.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .llvm_cta import Collective, SimulationError, _from_bits, _s

# --------------------------------------------------------------------------------------
# Per-thread calls


def _lane(cta: Any, tid: int) -> int:
    return tid % cta.warp_size


def amdgpu_call(cta: Any, op: Any, name: str, args: list, tid: int):
    """A call to an ``llvm.amdgcn.*`` intrinsic by thread ``tid`` (a generator: warp-wide
    intrinsics wait for the whole wavefront)."""
    if name == "llvm.amdgcn.workitem.id.x":
        return tid
    if name.startswith(("llvm.amdgcn.workitem.id.", "llvm.amdgcn.workgroup.id.")):
        return 0  # one workgroup of one dimension
    if name == "llvm.amdgcn.mbcnt.lo":  # mask's set bits among lanes 0..31 below this one
        mask, acc = args
        below = min(_lane(cta, tid), 32)
        return (acc + bin(mask & ((1 << below) - 1)).count("1")) & 0xFFFFFFFF
    if name == "llvm.amdgcn.mbcnt.hi":  # the same among lanes 32..63
        mask, acc = args
        below = max(_lane(cta, tid) - 32, 0)
        return (acc + bin(mask & ((1 << below) - 1)).count("1")) & 0xFFFFFFFF
    if name == "llvm.amdgcn.s.barrier":
        yield Collective("barrier", [0, None, False])
        return None
    if _warp_intrinsic(name) is not None:
        result = yield Collective(name, args)
        return result
    raise SimulationError(f"the simulator does not know the AMDGPU intrinsic in '{op.text}'")


# --------------------------------------------------------------------------------------
# Cross-lane moves


def _bpermute(cta: Any, name: str, inputs: list, warp: int) -> list:
    # ds_bpermute_b32: lane l reads lane (addr[l] / 4) of the wavefront; the address wraps.
    return [inputs[(address >> 2) % cta.warp_size][1] for address, _ in inputs]


def _readfirstlane(cta: Any, name: str, inputs: list, warp: int) -> list:
    # Every lane gets the first active lane's value (all lanes run here: lane 0's).
    return [inputs[0][0]] * len(inputs)


def dpp_source(ctrl: int, lane: int, warp_size: int) -> int | None:
    """The lane a DPP move reads for ``lane``, or None where it reads nothing (the lane
    keeps ``old``).  Rows are 16 lanes."""
    base, in_row = lane & ~15, lane & 15
    if ctrl <= 0xFF:  # quad_perm
        return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3)
    if 0x101 <= ctrl <= 0x10F:  # row_shl
        n = ctrl & 15
        return lane + n if in_row + n < 16 else None
    if 0x111 <= ctrl <= 0x11F:  # row_shr
        n = ctrl & 15
        return lane - n if in_row >= n else None
    if 0x121 <= ctrl <= 0x12F:  # row_ror
        return base + ((in_row - (ctrl & 15)) & 15)
    if ctrl == 0x138:  # wave_shr:1 (gfx8/gfx9)
        return lane - 1 if lane >= 1 else None
    if ctrl == 0x140:  # row_mirror
        return base + 15 - in_row
    if ctrl == 0x141:  # row_half_mirror
        return (lane & ~7) + 7 - (lane & 7)
    if 0x150 <= ctrl <= 0x15F:  # row_share (gfx10+)
        return base + (ctrl & 15)
    if 0x160 <= ctrl <= 0x16F:  # row_xmask (gfx10+)
        return base + (in_row ^ (ctrl & 15))
    raise SimulationError(f"the simulator does not know DPP control {ctrl:#x}")


def _update_dpp(cta: Any, name: str, inputs: list, warp: int) -> list:
    out = []
    for lane, (old, _, ctrl, row_mask, bank_mask, bound_ctrl) in enumerate(inputs):
        row, bank = (lane >> 4) & 3, (lane >> 2) & 3
        if not (row_mask >> row) & 1 or not (bank_mask >> bank) & 1:
            out.append(old)  # the lane is not written
            continue
        source = dpp_source(ctrl, lane, cta.warp_size)
        if source is None or not 0 <= source < cta.warp_size:
            out.append(0 if bound_ctrl else old)
        else:
            out.append(inputs[source][1])
    return out


def swizzle_source(offset: int, lane: int) -> int:
    if offset & 0x8000:  # quad-permute mode
        return (lane & ~3) | ((offset >> (2 * (lane & 3))) & 3)
    and_mask, or_mask, xor_mask = offset & 31, (offset >> 5) & 31, (offset >> 10) & 31
    return (lane & ~31) | (((lane & 31 & and_mask) | or_mask) ^ xor_mask)


def _ds_swizzle(cta: Any, name: str, inputs: list, warp: int) -> list:
    return [inputs[swizzle_source(offset, lane)][0] for lane, (_, offset) in enumerate(inputs)]


# --------------------------------------------------------------------------------------
# Matrix instructions


def _values(value: Any, kind: str, count: int) -> list[float | int]:
    """A lane's ``count`` A or B elements in one intrinsic operand, as Python numbers."""
    if kind == "i8":  # packed in one integer or in 32-bit words, the first in the low byte
        word = sum(w << (32 * i) for i, w in enumerate(value)) if isinstance(value, list) else value
        return [_s((word >> (8 * i)) & 0xFF, 8) for i in range(count)]
    items = value if isinstance(value, list) else [value]
    if len(items) != count:
        raise SimulationError(f"a lane passes {len(items)} elements where the instruction takes {count}")
    if kind == "bf16":  # bfloat values and i16 bits alike are the 16 bits here
        return [float(_from_bits("float", (int(v) & 0xFFFF) << 16)) for v in items]
    return [float(v) for v in items]


def _mfma_kind(name: str) -> str:
    """The operand type written after the shape: "32x32x8f16", "32x32x16.i8", "32x32x8bf16.1k"."""
    return re.search(r"\d+x\d+x\d+\.?([a-z]+\d+)", name).group(1)


def mfma_operand_element(m: int, k: int, lane: int, item: int) -> tuple[int, int]:
    """The element of A ([M, K]) in ``item`` of ``lane`` (B: the same with B's columns as
    A's rows, returned as (column, k))."""
    # CDNA3 ISA 7.1: lanes walk the rows of A; each group of M lanes holds the next
    # K/(64/M) columns, one per register item.
    per_lane = k * m // 64
    return lane % m, (lane // m) * per_lane + item


def mfma_result_element(m: int, n: int, lane: int, item: int, f64: bool) -> tuple[int, int]:
    """The element of D ([M, N]) in accumulator ``item`` of ``lane``."""
    if f64:  # v_mfma_f64_16x16x4f64: item r of lane l is row l/16 + 4r
        return lane // n + 4 * item, lane % n
    # Items come in groups of 4 rows; lanes above N take the next 4 rows; the next group
    # of items starts 4 * 64/N rows further down.
    return item % 4 + 4 * (lane // n) + (item // 4) * (4 * 64 // n), lane % n


def _mfma(cta: Any, name: str, inputs: list, warp: int) -> list:
    if cta.warp_size != 64:
        raise SimulationError(f"{name} needs 64-lane wavefronts; the kernel runs with {cta.warp_size}")
    m, n, k = (int(x) for x in re.search(r"(\d+)x(\d+)x(\d+)", name).groups())
    kind = _mfma_kind(name)
    if any(list(inp[3:]) != [0, 0, 0] for inp in inputs):
        raise SimulationError(f"{name}: the simulator knows cbsz = abid = blgp = 0 only")
    a, b, c = np.zeros((m, k)), np.zeros((k, n)), np.zeros((m, n))
    f64, per_lane = kind == "f64", k * m // 64
    for lane, (a_in, b_in, c_in, *_) in enumerate(inputs):
        for item, v in enumerate(_values(a_in, kind, per_lane)):
            a[mfma_operand_element(m, k, lane, item)] = v
        for item, v in enumerate(_values(b_in, kind, per_lane)):
            column, kk = mfma_operand_element(n, k, lane, item)  # B's columns are laid out as A's rows
            b[kk, column] = v
        for item, v in enumerate(c_in):
            c[mfma_result_element(m, n, lane, item, f64)] = _s(v, 32) if kind == "i8" else float(v)
    return _matrix_result(a @ b + c, inputs, lambda lane, item: mfma_result_element(m, n, lane, item, f64), kind)


def _matrix_result(d: np.ndarray, inputs: list, where: Any, kind: str) -> list:
    out = []
    for lane, (_, _, c_in, *_) in enumerate(inputs):
        if kind == "i8":
            out.append([int(d[where(lane, i)]) & 0xFFFFFFFF for i in range(len(c_in))])
        else:
            dtype = np.float64 if kind == "f64" else np.float32
            out.append([dtype(d[where(lane, i)]) for i in range(len(c_in))])
    return out


def wmma_result_element(lane: int, item: int) -> tuple[int, int]:
    """The element of D in accumulator ``item`` of ``lane`` (f32 results, wave32)."""
    return 2 * item + lane // 16, lane % 16


def _wmma(cta: Any, name: str, inputs: list, warp: int) -> list:
    # RDNA3 ISA 7.9: wave32; lane l holds row l % 16 of A (column l % 16 of B), all 16 K
    # elements, and lanes 16..31 must hold the same as lanes 0..15.  Result item r of
    # lane l is row 2r + l / 16.  The iu8 form takes (A signed, A, B signed, B, C, clamp).
    if cta.warp_size != 32:
        raise SimulationError(f"{name} is simulated for 32-lane wavefronts; the kernel runs with {cta.warp_size}")
    kind = next(k for k in ("bf16", "f16", "iu8") if f".{k}" in name)  # parsing may append overload types
    if kind == "iu8":
        if any(inp[0] != 1 or inp[2] != 1 or inp[5] != 0 for inp in inputs):
            raise SimulationError(f"{name}: the simulator knows signed A and B without clamping only")
        inputs = [(inp[1], inp[3], inp[4]) for inp in inputs]
        kind = "i8"
    a, b, c = np.zeros((16, 16)), np.zeros((16, 16)), np.zeros((16, 16))
    for lane, (a_in, b_in, c_in) in enumerate(inputs):
        if lane >= 16 and (a_in != inputs[lane - 16][0] or b_in != inputs[lane - 16][1]):
            raise SimulationError(f"{name}: lane {lane} does not repeat lane {lane - 16}'s A and B, as RDNA3 needs")
        for kk, v in enumerate(_values(a_in, kind, 16)):
            a[lane % 16, kk] = v
        for kk, v in enumerate(_values(b_in, kind, 16)):
            b[kk, lane % 16] = v
        for item, v in enumerate(c_in):
            c[wmma_result_element(lane, item)] = _s(v, 32) if kind == "i8" else float(v)
    return _matrix_result(a @ b + c, inputs, wmma_result_element, kind)


#: Intrinsic name prefix -> the wavefront step.
_WARP_INTRINSICS = {"llvm.amdgcn.ds.bpermute": _bpermute, "llvm.amdgcn.ds.swizzle": _ds_swizzle,
                    "llvm.amdgcn.update.dpp": _update_dpp, "llvm.amdgcn.readfirstlane": _readfirstlane,
                    "llvm.amdgcn.mfma.": _mfma, "llvm.amdgcn.wmma.": _wmma}


def _warp_intrinsic(name: str) -> Any:
    return next((step for prefix, step in _WARP_INTRINSICS.items() if name.startswith(prefix)), None)


def warp_step(cta: Any, name: str, inputs: list, warp: int) -> list:
    """One wavefront's step of the warp-wide intrinsic ``name``; ``inputs[lane]`` are the
    call's arguments."""
    return _warp_intrinsic(name)(cta, name, inputs, warp)


__all__ = ["amdgpu_call", "dpp_source", "mfma_operand_element", "mfma_result_element", "swizzle_source",
           "warp_step", "wmma_result_element"]
