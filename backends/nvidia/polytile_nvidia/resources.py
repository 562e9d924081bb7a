"""The ``resources`` record of an NVIDIA kernel (see :mod:`polytile.resources`).

- ``registers``: per thread, from the cubin (its ``.nv.info`` register count), the
  number the driver allocates by; the assembler's report where the cubin has none.
- ``spills``: ``store_bytes`` and ``load_bytes``, the bytes per thread the assembler's
  verbose report ("N bytes spill stores, M bytes spill loads") gives, summed over the
  kernel and the functions it calls.
- ``stack_bytes``: the kernel's stack frame per thread (local memory: spills and arrays).
- ``shared_bytes``: the dynamic shared memory of a block (what the memory stage allocated).
- ``occupancy``: ``blocks_per_sm`` and ``warps_per_sm`` resident at once, and what limits
  them (``"registers"``, ``"shared memory"``, ``"threads"`` or ``"blocks"``, the SM's
  limit of resident blocks), by the CUDA occupancy calculator's rules: registers are
  allocated per warp in units of 256 from one of the SM's four sub-partitions, shared
  memory per block with 1 KB more for the driver; the numbers per architecture are in
  :mod:`.architectures`.
- ``notes``: the assembler's remarks about speed, word for word ("wgmma.mma_async
  instructions are serialized due to insufficient register resources ...").
"""

from __future__ import annotations

import re
from typing import Any

from .architectures import ARCHITECTURES
from .registers import REGISTER_ALLOCATION_UNIT, cubin_registers

_FUNCTION = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
#: ptxas's remarks about speed: "ptxas info : (C7511) Potential Performance Loss: ...".
_REMARK = re.compile(r"ptxas (?:info|warning)\s*:\s*(\(C\d+\) .*Performance.*)$", re.MULTILINE)
#: The function a remark is about, where it names one ("... for the function 'k'"); a
#: remark naming none ("'setmaxnreg' ignored ...", C7504) is about the whole module.
_NAMED_FUNCTION = re.compile(r"function '([^']+)'")


def assembler_report(log: str, kernel: str) -> dict[str, Any]:
    """``registers`` and ``stack_bytes`` of ``kernel``, ``spills`` summed over every function
    of the module (a ``noinline`` callee's spills slow the kernel as much), and ``notes``,
    from an assembler's verbose log (only the keys the log gives)."""
    found: dict[str, Any] = {}
    spills = {"store_bytes": 0, "load_bytes": 0}
    reported = False
    current = None
    for line in log.splitlines():
        function = _FUNCTION.search(line)
        if function:
            current = function.group(1).strip("'")
            continue
        if current is None:
            continue
        frame = _FRAME.search(line)
        if frame:
            reported = True
            spills["store_bytes"] += int(frame.group(2))
            spills["load_bytes"] += int(frame.group(3))
            if current == kernel:
                found["stack_bytes"] = int(frame.group(1))
        used = _USED.search(line)
        if used:
            if current == kernel:
                found["registers"] = int(used.group(1))
            current = None  # a function's report ends with its registers
    if reported:
        found["spills"] = spills
        found.setdefault("stack_bytes", 0)
    notes = [remark.strip() for remark in _REMARK.findall(log)
             if all(name == kernel for name in _NAMED_FUNCTION.findall(remark))]
    if notes:
        found["notes"] = notes
    return found


def occupancy(arch: str, *, registers: int, threads: int, shared_bytes: int) -> dict[str, Any]:
    """Blocks and warps of ``threads`` threads one SM holds at once, and what limits them."""
    a = ARCHITECTURES[arch]
    warps = -(-threads // a.warp_size)
    registers_per_warp = -(-registers // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT * a.warp_size
    shared_per_block = -(-(shared_bytes + a.shared_memory_reserved_per_block) // 128) * 128
    # The SM's own limits first: where a kernel's registers or shared memory allow no
    # more than they do, using fewer would not help.
    limits = {
        "threads": a.max_threads_per_sm // (warps * a.warp_size),
        "blocks": a.max_blocks_per_sm,
        # Warps are placed on the SM's sub-partitions, each with its share of the register
        # file (cudaOccMaxBlocksPerSMRegsLimit).
        "registers": ((a.registers_per_sm // a.sm_sub_partitions // registers_per_warp) * a.sm_sub_partitions
                      // warps) if registers else a.max_blocks_per_sm,
        "shared memory": a.shared_memory_per_sm // shared_per_block if shared_bytes else a.max_blocks_per_sm,
    }
    limited_by = min(limits, key=lambda name: limits[name])  # the first of equals
    blocks = limits[limited_by]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps, "limited_by": limited_by}


def kernel_resources(*, arch: str, kernel: str, cubin: bytes, log: str, threads: int | None,
                     shared_bytes: int) -> dict[str, Any]:
    """The ``resources`` record of ``kernel`` (see the module docstring)."""
    reported = assembler_report(log, kernel)
    record: dict[str, Any] = {}
    registers = cubin_registers(cubin) or reported.get("registers")
    if registers is not None:
        record["registers"] = registers
    if "spills" in reported:
        record["spills"] = reported["spills"]
        record["stack_bytes"] = reported["stack_bytes"]
    record["shared_bytes"] = shared_bytes
    if threads and arch in ARCHITECTURES:
        record["occupancy"] = occupancy(arch, registers=registers or 0, threads=threads, shared_bytes=shared_bytes)
    record["notes"] = reported.get("notes", [])
    return record


__all__ = ["assembler_report", "kernel_resources", "occupancy"]
