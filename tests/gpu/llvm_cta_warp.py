"""The steps the lanes of a warp take together in the CTA simulator (llvm_cta.py), from
the PTX ISA: ``ldmatrix``, ``stmatrix``, ``mma.sync`` (with the fragment tables),
``shfl.sync``, AMD's cross-lane moves (llvm_cta_amdgpu.py) and ``bar.warp.sync`` with the
mbarrier arrival after it (llvm_cta_mbarrier.py).  Each takes the warp's lanes' inputs and
returns each lane's result."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .llvm_cta import CTA, SimulationError, _from_bits, _s, _to_bits




def _check_row(address: int, what: str, thread: int) -> None:
    if address % 16:
        raise SimulationError(f"thread {thread} gives {what} the row address {address:#x}, not 16-byte aligned "
                              "(the PTX ISA requires it)")


def _ldmatrix(cta: CTA, text: str, inputs: list, warp: int) -> list:
    count = int(re.search(r"\.x(\d)", text).group(1))
    trans = ".trans" in text
    rows = []  # rows[q][r]: the 8 halves of row r of matrix q
    for q in range(count):
        rows.append([])
        for r in range(8):
            address = inputs[q * 8 + r][0]
            _check_row(address, "ldmatrix", warp * cta.warp_size + q * 8 + r)
            data = cta.memory.load(3, address, 16, warp * cta.warp_size + q * 8 + r)
            rows[q].append([int.from_bytes(data[2 * i:2 * i + 2], "little") for i in range(8)])
    out = []
    for lane in range(32):
        words = []
        for q in range(count):
            g, t = lane // 4, lane % 4
            if trans:
                lo, hi = rows[q][2 * t][g], rows[q][2 * t + 1][g]
            else:
                lo, hi = rows[q][g][2 * t], rows[q][g][2 * t + 1]
            words.append(lo | hi << 16)
        out.append(tuple(words) if count > 1 else words[0])
    return out


def _stmatrix(cta: CTA, text: str, inputs: list, warp: int) -> list:
    count = int(re.search(r"\.x(\d)", text).group(1))
    if ".trans" in text:
        raise SimulationError(f"stmatrix.trans is not simulated: {text}")
    for q in range(count):
        for r in range(8):
            # Row r of matrix q: lane 8q + r gives the address, lanes 4r..4r+3 the words.
            row = b"".join((int(inputs[4 * r + t][1 + q]) & 0xFFFFFFFF).to_bytes(4, "little") for t in range(4))
            thread = warp * cta.warp_size + q * 8 + r
            _check_row(inputs[q * 8 + r][0], "stmatrix", thread)
            cta.memory.store(3, inputs[q * 8 + r][0], row, thread)
    return [None] * 32


#: mma kind -> (M, N, K, element bits of A/B)
_MMA = {("m16n8k16", "f16"): (16, 8, 16, 16), ("m16n8k16", "bf16"): (16, 8, 16, 16),
        ("m16n8k8", "tf32"): (16, 8, 8, 32), ("m16n8k32", "s8"): (16, 8, 32, 8), ("m8n8k4", "f64"): (8, 8, 4, 64),
        ("m16n8k32", "e4m3"): (16, 8, 32, 8), ("m16n8k32", "e5m2"): (16, 8, 32, 8)}
#: 8-bit kinds whose fragments are .s8's (the PTX ISA's m16n8k32 tables).
_BYTE_KINDS = ("s8", "e4m3", "e5m2")
#: 16-bit kinds, whose fragments are .f16's (bf16 has f16's tables).
_HALF_KINDS = ("f16", "bf16")


def _frag_a(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind in _HALF_KINDS:
        return g + 8 * ((i >> 1) & 1), q * 2 + (i & 1) + 8 * (i >> 2)
    if kind == "tf32":
        return g + 8 * (i & 1), q + 4 * (i >> 1)
    if kind in _BYTE_KINDS:
        return g + 8 * ((i >> 2) & 1), q * 4 + (i & 3) + 16 * (i >> 3)
    return g, q


def _frag_b(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind in _HALF_KINDS:
        return q * 2 + (i & 1) + 8 * (i >> 1), g
    if kind == "tf32":
        return q + 4 * i, g
    if kind in _BYTE_KINDS:
        return q * 4 + (i & 3) + 16 * (i >> 2), g
    return q, g


def _frag_c(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f64":
        return g, q * 2 + i
    return g + 8 * (i >> 1), q * 2 + (i & 1)


def _elements(word: Any, bits: int, kind: str) -> list:
    """The A/B elements a register holds, as float64 or int."""
    if bits == 64:
        return [float(word)]
    if kind == "tf32":
        return [float(_from_bits("float", word & 0xFFFFE000))]
    per = 32 // bits
    parts = [(word >> (i * bits)) & ((1 << bits) - 1) for i in range(per)]
    if kind == "f16":
        return [float(np.frombuffer(p.to_bytes(2, "little"), np.float16)[0]) for p in parts]
    if kind == "bf16":
        return [float(_from_bits("float", p << 16)) for p in parts]
    if kind in ("e4m3", "e5m2"):
        return [fp8_value(p, kind) for p in parts]
    return [_s(p, 8) for p in parts]


def fp8_bytes(values: np.ndarray, kind: str) -> np.ndarray:
    """``values`` (numbers an fp8 format holds exactly) as that format's bytes."""
    codes = {fp8_value(byte, kind): byte for byte in range(256) if fp8_value(byte, kind) == fp8_value(byte, kind)}
    return np.vectorize(lambda v: codes[float(v)])(values).astype(np.uint8)


def fp8_value(byte: int, kind: str) -> float:
    """The value of an fp8 byte: e4m3 (bias 7, no infinities, S.1111.111 NaN) or e5m2
    (bias 15, IEEE-like)."""
    exponent_bits, mantissa_bits, bias = (4, 3, 7) if kind == "e4m3" else (5, 2, 15)
    sign = -1.0 if byte & 0x80 else 1.0
    exponent = (byte >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = byte & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if kind == "e4m3" and exponent == top and mantissa == (1 << mantissa_bits) - 1:
        return float("nan")
    if kind == "e5m2" and exponent == top:
        return sign * float("inf") if mantissa == 0 else float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)


def _mma(cta: CTA, text: str, inputs: list, warp: int) -> list:
    m = re.match(r"mma\.sync\.aligned\.(\w+)\.row\.col\.(\w+)\.(\w+)\.(\w+)\.(\w+)", text)
    shape, d_type, a_type, _, c_type = m.groups()
    rows, cols, depth, bits = _MMA[(shape, a_type)]
    kind = a_type
    groups = [len(g.split(",")) for g in re.findall(r"\{([^}]*)\}", text)]
    n_d, n_a, n_b, n_c = groups
    a, b, c = np.zeros((rows, depth)), np.zeros((depth, cols)), np.zeros((rows, cols))
    per = 32 // bits if bits < 64 else 1
    for lane in range(32):
        regs = inputs[lane]
        a_words, b_words, c_regs = regs[:n_a], regs[n_a:n_a + n_b], regs[n_a + n_b:]
        for w, word in enumerate(a_words):
            for e, v in enumerate(_elements(word, bits, kind)):
                a[_frag_a(kind, lane, w * per + e)] = v
        for w, word in enumerate(b_words):
            for e, v in enumerate(_elements(word, bits, kind)):
                b[_frag_b(kind, lane, w * per + e)] = v
        if c_type == "f16":
            halves = [e for w in c_regs for e in _elements(w, 16, "f16")]
            for i, v in enumerate(halves):
                c[_frag_c(kind, lane, i)] = v
        else:
            for i, v in enumerate(c_regs):
                c[_frag_c(kind, lane, i)] = float(v) if c_type != "s32" else _s(v, 32)
    d = a @ b + c
    out = []
    for lane in range(32):
        if d_type == "f16":
            halves = [np.float16(d[_frag_c(kind, lane, i)]) for i in range(2 * n_d)]
            words = [_to_bits("half", halves[2 * i]) | _to_bits("half", halves[2 * i + 1]) << 16 for i in range(n_d)]
            out.append(tuple(words))
        elif d_type == "s32":
            out.append(tuple(int(d[_frag_c(kind, lane, i)]) & 0xFFFFFFFF for i in range(n_d)))
        else:
            dtype = np.float32 if d_type == "f32" else np.float64
            out.append(tuple(dtype(d[_frag_c(kind, lane, i)]) for i in range(n_d)))
    return out


def _shfl(cta: CTA, name: str, inputs: list, warp: int) -> list:
    mode = name.split(".")[4]
    out = []
    for lane in range(32):
        _, value, arg, clamp = inputs[lane]
        source = {"bfly": lane ^ arg, "idx": arg, "up": lane - arg, "down": lane + arg}[mode]
        if mode == "up":
            source = source if source >= (clamp >> 8 & 31) else lane
        elif not 0 <= source < 32 or (mode == "down" and source > (clamp & 31)):
            source = lane
        out.append(inputs[source % 32][1])
    return out


def _amdgpu(cta: CTA, name: str, inputs: list, warp: int) -> list:
    from .llvm_cta_amdgpu import warp_step

    return warp_step(cta, name, inputs, warp)


def _warp_sync(cta: CTA, text: str, inputs: list, warp: int) -> list:
    from .llvm_cta_mbarrier import warp_sync_step

    return warp_sync_step(cta, text, inputs, warp)


WARP_STEPS = {"ldmatrix": _ldmatrix, "stmatrix": _stmatrix, "mma": _mma, "shfl": _shfl, "amdgpu": _amdgpu,
               "warp_sync": _warp_sync}


__all__ = ["WARP_STEPS", "fp8_bytes", "fp8_value"]
