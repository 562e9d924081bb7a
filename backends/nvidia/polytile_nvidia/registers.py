"""How many registers a kernel may use without fewer of its blocks fitting on an SM.

ptxas keeps a kernel's registers near what its schedule needs, and without a cap it
may stop short of an occupancy cliff: a layer norm of 256 threads compiled to 104
registers (two blocks per SM) issued its eight 16-byte loads of a row three at a time,
reusing three destination quads, where 128 registers (still two blocks per SM) let it
issue all eight at once, as Triton's build of the same kernel does.  So after a first
assembly, :class:`~polytile_nvidia.codegen.PtxToCubin` reads the register count from the
cubin and, when the register file still holds as many blocks at a higher count,
assembles again with ``.maxnreg`` at that count (:func:`register_budget`).  The number
of blocks an SM holds never goes down.
"""

from __future__ import annotations

import re
import struct

#: 32-bit registers in one SM's register file (sm_80 to sm_90a).
REGISTERS_PER_SM = 65536
#: Registers are handed to a thread in multiples of this (256 per warp).
REGISTER_ALLOCATION_UNIT = 8
#: The most registers one thread can address.
MOST_REGISTERS_PER_THREAD = 255

# The cubin's .nv.info section: records of (format, attribute[, size], payload); the
# register count is attribute EIATTR_REGCOUNT, a "sized value" of (symbol, count).
_SIZED_VALUE = 0x04
_EIATTR_REGCOUNT = 0x2F


def _allocated(registers: int) -> int:
    unit = REGISTER_ALLOCATION_UNIT
    return (registers + unit - 1) // unit * unit


#: The SM's register file is split over this many sub-partitions; a warp's registers
#: come from one of them.
SUB_PARTITIONS = 4
_WARP = 32


def _blocks(registers: int, warps: int) -> int:
    """Blocks of ``warps`` warps the register file holds at ``registers`` per thread
    (the CUDA occupancy calculator's rule: whole warps per sub-partition)."""
    per_partition = REGISTERS_PER_SM // SUB_PARTITIONS // (_allocated(registers) * _WARP)
    return per_partition * SUB_PARTITIONS // warps


def register_budget(registers: int, threads: int) -> int | None:
    """The most registers per thread (a multiple of the allocation unit) at which the
    register file holds as many blocks of ``threads`` threads as at ``registers``; None
    when that is no more than ``registers`` already is."""
    warps = -(-threads // _WARP)
    blocks = _blocks(registers, warps)
    if blocks == 0:
        return None
    # The fewest warps each sub-partition must hold for that many blocks, and the most
    # registers a warp can then have.
    per_partition = -(-blocks * warps // SUB_PARTITIONS)
    budget = min(REGISTERS_PER_SM // SUB_PARTITIONS // per_partition // _WARP
                 // REGISTER_ALLOCATION_UNIT * REGISTER_ALLOCATION_UNIT, MOST_REGISTERS_PER_THREAD)
    return budget if budget > _allocated(registers) and _blocks(budget, warps) >= blocks else None


def cubin_registers(cubin: bytes) -> int | None:
    """The registers per thread of the (one) kernel in ``cubin``; None when the cubin
    does not say (not an ELF file, or no register count)."""
    if cubin[:4] != b"\x7fELF" or len(cubin) < 64:
        return None
    section_offset, = struct.unpack_from("<Q", cubin, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, section_offset + i * entry_size) for i in range(count)]
    names_start = headers[names_index][4]
    for header in headers:
        name_start = names_start + header[0]
        name = cubin[name_start:cubin.index(b"\0", name_start)]
        if name == b".nv.info":
            found = _register_count(cubin, header[4], header[5])
            if found is not None:
                return found
    return None


def _register_count(cubin: bytes, start: int, size: int) -> int | None:
    at = start
    while at + 4 <= start + size:
        form, attribute, length = cubin[at], cubin[at + 1], struct.unpack_from("<H", cubin, at + 2)[0]
        if form != _SIZED_VALUE:
            at += 4
            continue
        if attribute == _EIATTR_REGCOUNT and length == 8:
            return struct.unpack_from("<II", cubin, at + 4)[1]
        at += 4 + length
    return None


_MAX_THREADS = re.compile(r"^\.maxntid (\d+)", re.MULTILINE)


def threads_per_block(ptx: str) -> int | None:
    """The block size the kernel declares (``.maxntid``), or None."""
    found = _MAX_THREADS.search(ptx)
    return int(found.group(1)) if found else None


def with_register_cap(ptx: str, registers: int) -> str:
    """``ptx`` with ``.maxnreg registers`` after the kernel's ``.maxntid``."""
    return _MAX_THREADS.sub(lambda m: f"{m.group(0)}\n.maxnreg {registers}", ptx, count=1)
