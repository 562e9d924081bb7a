"""Hopper's warpgroup MMA (wgmma) for the CTA simulator (llvm_cta.py), from the PTX ISA.

- ``wgmma.mma_async.sync.aligned.m64nNkK.<d>.<a>.<b> {d}, a, b-desc, scale-d, ...``: the
  four warps of a warpgroup together; A from a matrix descriptor or from registers, B
  from a descriptor.  A descriptor (PTX ISA "Matrix Descriptor Format") holds the start
  address >> 4 (bits 0-13), the leading dimension byte offset >> 4 (16-29), the stride
  dimension byte offset >> 4 (32-45) and the swizzle mode (62-63: 1 = 128 bytes, 2 = 64,
  3 = 32, 0 = none).  The canonical layouts it describes:

  - K-major (not transposed): row ``mn`` of the operand, byte ``kb`` along K, at
    ``start + (mn // 8) * SBO + (mn % 8) * S + kb`` with a swizzle of S bytes (one
    instruction's K, 32 bytes, lies in one swizzle row); without a swizzle in 8x16-byte
    core matrices: ``start + (mn // 8) * SBO + (mn % 8) * 16 + (kb // 16) * LBO + kb % 16``;
  - MN-major (transposed, 16-bit types only): ``start + (mnb // S) * LBO + (k // 8) * SBO
    + (k % 8) * S + mnb % S`` for byte ``mnb`` along M or N;

  then, swizzled, the 16-byte chunk bits of the address XOR the bits 7 and up above them
  (``address ^ ((address >> 7) & (S / 16 - 1)) << 4``: the pattern of an atom that
  starts on a 1024-byte boundary).
- The accumulators: warp ``w`` of the warpgroup holds rows ``16w..16w+15``; within it,
  each 8-column piece ``j`` is mma.sync's m16n8 C fragment (f32: registers ``4j..4j+3`` at
  (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1); f16: two halves per register, ``2j`` row g
  and ``2j+1`` row g+8).  A from registers: mma.sync's m16n8k16 A fragment per warp.
- The accumulator registers hold the result only from the ``wgmma.wait_group`` that
  retires the instruction: until then they may be moved or chained on by the next
  wgmma, and any other read is reported (:class:`InFlightRegister`).
- The operands are read when the instruction is issued, and must be the same bytes at
  the ``wgmma.wait_group`` that retires it: an operand overwritten while the instruction
  is in flight is reported (a cp.async into its bytes already when it is issued: it may
  land at any time before its own wait, see llvm_cta_async.py), as is reading bytes another thread wrote without a barrier
  between.  Bytes written through the generic proxy (a store, a cp.async landing) must
  be followed by a ``fence.proxy.async`` of the writing thread before wgmma (the async
  proxy) reads them: reading them before is reported.  ``wgmma.fence`` and ``commit_group`` order nothing the simulation
  needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .llvm_cta import ASYNC_PROXY, CTA, SimulationError, _from_bits, _to_bits, fp8_value

_MMA_ASYNC = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k(\d+)\.(\w+)\.(\w+)\.(\w+) \{([^}]*)\}, "
                        r"(\{[^}]*\}|\$\d+), (\$\d+), p, (-?1), (-?1)((?:, \d)*);")
_WAIT = re.compile(r"wgmma\.wait_group\.sync\.aligned (\d+);")
_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}


@dataclass
class _InFlight:
    ranges: list            # (address, bytes) the instruction read
    data: list              # what they held then
    read: set = field(default_factory=set)  # every byte address of the ranges

    def __post_init__(self) -> None:
        self.read = {a for address, size in self.ranges for a in range(address, address + size)}


class InFlightRegister:
    """An accumulator register a wgmma writes until the ``wgmma.wait_group`` that retires
    it: it may be moved (phis, the tied operands of the next wgmma, which chains on it,
    and of the wait) but reading it otherwise is undefined (PTX ISA), and reported."""

    __slots__ = ("value", "instruction")

    def __init__(self, value: Any, instruction: "_InFlight"):
        self.value = value
        self.instruction = instruction

    def _read(self, *args: Any, **kwargs: Any) -> Any:
        raise SimulationError("a register of an in-flight wgmma.mma_async was read before the "
                              "wgmma.wait_group that retires it")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _read
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = _read
    __neg__ = __float__ = __int__ = __index__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _read
    __array__ = _read


def _settled(value: Any) -> Any:
    """A register's value once its wgmma chains on it or retired it."""
    return value.value if isinstance(value, InFlightRegister) else value


def in_flight_reader(cta: CTA, start: int, size: int) -> int | None:
    """The warpgroup of an in-flight wgmma that reads one of the shared bytes
    ``start .. start + size - 1``, or None."""
    state = cta.__dict__.get("wgmma")
    if state is None:
        return None
    for group in set(state.pending) | set(state.open):
        for instruction in [i for g in state.pending.get(group, []) for i in g] + state.open.get(group, []):
            if any(a in instruction.read for a in range(start, start + size)):
                return group
    return None


@dataclass
class _Warpgroups:
    #: warpgroup -> committed groups, oldest first, each the [_InFlight] of one commit_group
    pending: dict = field(default_factory=dict)
    #: warpgroup -> the [_InFlight] issued since its last commit_group
    open: dict = field(default_factory=dict)


def _state(cta: CTA) -> _Warpgroups:
    return cta.__dict__.setdefault("wgmma", _Warpgroups())


def thread_step(cta: CTA, text: str, args: list, tid: int) -> Any:
    """A per-thread wgmma instruction: fence, commit, wait (which hands its tied
    accumulator registers back unchanged, once the warpgroup's instructions are retired)."""
    wait = _WAIT.search(text)
    group = tid // (4 * cta.warp_size)
    state = _state(cta)
    if wait is not None:
        # The groups the warpgroup committed: all but the newest N retire (its first
        # thread to get here retires them for all).  The tied registers of a retired
        # wgmma hold its result from here on; those of one still in flight stay so.
        pending = state.pending.get(group, [])
        keep = int(wait.group(1))
        still = {id(i) for g in pending[max(len(pending) - keep, 0):] if keep for i in g} | \
            {id(i) for i in state.open.get(group, [])}
        while len(pending) > int(wait.group(1)):
            for retired in pending.pop(0):
                for (address, size), before in zip(retired.ranges, retired.data):
                    now = bytes(cta.memory.data[3][address:address + size])
                    if now != before:
                        raise SimulationError(f"shared bytes {address}..{address + size - 1}, an operand of a "
                                              f"wgmma.mma_async of warpgroup {group}, changed before the "
                                              "wgmma.wait_group that retires it")
        settled = [a if isinstance(a, InFlightRegister) and id(a.instruction) in still else _settled(a)
                   for a in args]
        return tuple(settled) if args else None
    if text.startswith("wgmma.commit_group"):
        if state.open.get(group):  # the first thread of the warpgroup closes the group
            state.pending.setdefault(group, []).append(state.open.pop(group))
        return None
    if text.startswith("fence.proxy.async"):
        cta.memory.fence_proxy_async(tid)
        return None
    if text.startswith("wgmma.fence"):
        # wgmma.fence may take registers in and out (pinning their definitions before
        # the wgmmas that read them): they pass unchanged.
        return tuple(args) if args else None
    raise SimulationError(f"the simulator does not know the asm '{text}'")


def _descriptor(value: int) -> tuple[int, int, int, int]:
    start = (value & 0x3FFF) << 4
    leading = ((value >> 16) & 0x3FFF) << 4
    stride = ((value >> 32) & 0x3FFF) << 4
    swizzle = {0: 0, 1: 128, 2: 64, 3: 32}[(value >> 62) & 3]
    return start, leading, stride, swizzle


def _address(desc: int, mn: int, k: int, element_bytes: int, transposed: bool) -> int:
    start, leading, stride, swizzle = _descriptor(desc)
    if transposed:
        if not swizzle:
            raise SimulationError("an MN-major wgmma operand without a swizzle is not simulated")
        mnb = mn * element_bytes
        address = start + (mnb // swizzle) * leading + (k // 8) * stride + (k % 8) * swizzle + mnb % swizzle
    else:
        kb = k * element_bytes
        if swizzle:
            if kb >= swizzle:
                raise SimulationError(f"a K-major wgmma operand row of {kb} bytes crosses its {swizzle}-byte swizzle")
            address = start + (mn // 8) * stride + (mn % 8) * swizzle + kb
        else:
            address = start + (mn // 8) * stride + (mn % 8) * 16 + (kb // 16) * leading + kb % 16
    if swizzle:
        address ^= ((address >> 7) & (swizzle // 16 - 1)) << 4
    return address


def _value(data: bytes, kind: str) -> float:
    bits = int.from_bytes(data, "little")
    if kind == "f16":
        return float(np.frombuffer(data, np.float16)[0])
    if kind == "bf16":
        return float(_from_bits("float", bits << 16))
    if kind == "tf32":
        return float(_from_bits("float", bits & 0xFFFFE000))  # the tensor cores read the top 19 bits
    if kind in ("e4m3", "e5m2"):
        return fp8_value(bits, kind)
    if kind == "s8":
        return float(bits - 256 if bits & 0x80 else bits)
    return float(bits)


def _read_operand(cta: CTA, desc: int, rows: int, depth: int, kind: str, transposed: bool,
                  ranges: list) -> np.ndarray:
    """A (rows x depth) operand: A is (M, K); B is read as (N, K) and transposed after."""
    size = _BYTES[kind]
    out = np.zeros((rows, depth))
    for mn in range(rows):
        for k in range(depth):
            address = _address(desc, mn, k, size, transposed)
            data = cta.memory.load(3, address, size, ASYNC_PROXY)
            ranges.append((address, size))
            out[mn, k] = _value(data, kind)
    return out


def _fragment_d(lane: int, warp: int, i: int, f16: bool) -> list[tuple[int, int]]:
    g, q = lane // 4, lane % 4
    if f16:  # register i: two halves
        j, half_row = i // 2, i % 2
        row = 16 * warp + g + 8 * half_row
        return [(row, 8 * j + 2 * q), (row, 8 * j + 2 * q + 1)]
    j, r = i // 4, i % 4
    return [(16 * warp + g + 8 * (r // 2), 8 * j + 2 * q + (r % 2))]


def _fragment_a(lane: int, warp: int, word: int) -> list[tuple[int, int]]:
    g, q = lane // 4, lane % 4
    row = 16 * warp + g + 8 * (word % 2)
    column = 2 * q + 8 * (word // 2)
    return [(row, column), (row, column + 1)]


def warpgroup_step(cta: CTA, text: str, inputs: list, group: int) -> list:
    """One ``wgmma.mma_async`` of warpgroup ``group``: ``inputs`` per thread (128)."""
    m = _MMA_ASYNC.search(text)
    if m is None:
        raise SimulationError(f"the simulator does not know the wgmma '{text}'")
    n, depth = int(m.group(1)), int(m.group(2))
    d_kind, a_kind, b_kind = m.group(3), m.group(4), m.group(5)
    accumulators = len(m.group(6).split(","))
    a_in_registers = m.group(7).startswith("{")
    if (m.group(9), m.group(10)) != ("1", "1"):
        raise SimulationError(f"wgmma with imm-scale-a/b {m.group(9)}, {m.group(10)} (negated operands) is not simulated")
    if a_in_registers and _BYTES[a_kind] != 2:
        raise SimulationError(f"wgmma with {a_kind} A in registers is not simulated (only 16-bit A fragments are)")
    flags = [int(x) for x in re.findall(r"\d", m.group(11))]
    if a_in_registers:
        trans_a, trans_b = 0, (flags[0] if flags else 0)
    else:
        trans_a, trans_b = (flags[0], flags[1]) if flags else (0, 0)
    f16 = d_kind == "f16"
    first = inputs[0]
    # Operands: the tied accumulators ($accumulators..), then A, then B's descriptor, then scale-d.
    extra = first[accumulators:]
    a_words = 4 if a_in_registers else 1
    for lane_inputs in inputs:
        if lane_inputs[accumulators + a_words:] != extra[a_words:] or (
                not a_in_registers and lane_inputs[accumulators] != extra[0]):
            raise SimulationError("the threads of a warpgroup give different descriptors or scale-d to one wgmma")
    b_desc, scale_d = extra[a_words], extra[a_words + 1]
    ranges: list = []
    # The async proxy reads for the whole warpgroup, whose warps issue the wgmma without
    # waiting for each other: only what every one of its threads is ordered after (a
    # write another thread made before a barrier they all passed) is ordered before it.
    from .llvm_cta_schedule import common_clock

    threads = range(group * len(inputs), (group + 1) * len(inputs))
    cta.memory.async_view = (common_clock(cta, threads), threads[0], cta.memory.clocks[list(threads)].max(axis=0))
    if a_in_registers:
        a = np.zeros((64, depth))
        for t, lane_inputs in enumerate(inputs):
            warp, lane = t // cta.warp_size, t % cta.warp_size
            for word_index, word in enumerate(lane_inputs[accumulators:accumulators + 4]):
                for (row, col), half in zip(_fragment_a(lane, warp, word_index), (word & 0xFFFF, word >> 16)):
                    a[row, col] = _value(half.to_bytes(2, "little"), a_kind)
    else:
        a = _read_operand(cta, extra[0], 64, depth, a_kind, bool(trans_a), ranges)
    b = _read_operand(cta, b_desc, n, depth, b_kind, bool(trans_b), ranges).T
    cta.memory.async_view = None
    c = np.zeros((64, n))
    if scale_d:
        for t, lane_inputs in enumerate(inputs):
            warp, lane = t // cta.warp_size, t % cta.warp_size
            for i in range(accumulators):
                value = _settled(lane_inputs[i])  # chaining on an in-flight accumulator
                places = _fragment_d(lane, warp, i, f16)
                parts = ([float(np.frombuffer((value & 0xFFFF).to_bytes(2, "little"), np.float16)[0]),
                          float(np.frombuffer((value >> 16).to_bytes(2, "little"), np.float16)[0])]
                         if f16 else [float(value)])
                for place, part in zip(places, parts):
                    c[place] = part
    d = a @ b + c
    instruction = _InFlight(sorted(set(ranges)), [bytes(cta.memory.data[3][ad:ad + s]) for ad, s in sorted(set(ranges))])
    _state(cta).open.setdefault(group, []).append(instruction)
    out = []
    for t in range(len(inputs)):
        warp, lane = t // cta.warp_size, t % cta.warp_size
        registers = []
        for i in range(accumulators):
            places = _fragment_d(lane, warp, i, f16)
            if f16:
                low, high = (_to_bits("half", np.float16(d[p])) for p in places)
                registers.append(InFlightRegister(low | high << 16, instruction))
            else:
                registers.append(InFlightRegister(np.float32(d[places[0]]), instruction))
        out.append(tuple(registers))
    return out


__all__ = ["thread_step", "warpgroup_step"]
