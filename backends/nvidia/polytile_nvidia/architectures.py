"""What polytile needs to know about each NVIDIA architecture it compiles for.

The table is the single source of truth: the backend's architecture list, the mapping
from a device's compute capability to an architecture, and the limits the memory stage
checks against all come from here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, NamedTuple


class NvidiaArchitecture(NamedTuple):
    name: str
    compute_capability: tuple[int, int]
    #: Largest dynamic shared memory a block may opt in to (cuFuncSetAttribute), bytes.
    shared_memory_per_block_optin: int
    #: Shared memory of one SM, bytes (what its resident blocks share).
    shared_memory_per_sm: int
    #: Resident threads and blocks one SM holds at most.
    max_threads_per_sm: int
    max_blocks_per_sm: int
    #: Warpgroup MMA exists only in the arch-specific sm_90a feature set, not in sm_90.
    has_wgmma: bool = False
    warp_size: int = 32
    #: 32-bit registers in one SM's register file, split evenly over its sub-partitions
    #: (a warp's registers come from one of them).
    registers_per_sm: int = 65536
    sm_sub_partitions: int = 4
    #: Shared memory the driver keeps per resident block, bytes.
    shared_memory_reserved_per_block: int = 1024


def _table(*archs: NvidiaArchitecture) -> Mapping[str, NvidiaArchitecture]:
    return MappingProxyType({a.name: a for a in archs})


# Opt-in limits are the per-SM shared memory less the 1 KB the driver reserves per block:
# 163 KB on A100 (164 KB per SM), 99 KB on consumer Ampere/Ada, 227 KB on Hopper.  They
# are what cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) reports.  Threads and
# blocks per SM are the CUDA programming guide's table of compute capabilities.
ARCHITECTURES: Mapping[str, NvidiaArchitecture] = _table(
    NvidiaArchitecture("sm_80", (8, 0), shared_memory_per_block_optin=166912, shared_memory_per_sm=167936,
                       max_threads_per_sm=2048, max_blocks_per_sm=32),
    NvidiaArchitecture("sm_86", (8, 6), shared_memory_per_block_optin=101376, shared_memory_per_sm=102400,
                       max_threads_per_sm=1536, max_blocks_per_sm=16),
    NvidiaArchitecture("sm_89", (8, 9), shared_memory_per_block_optin=101376, shared_memory_per_sm=102400,
                       max_threads_per_sm=1536, max_blocks_per_sm=24),
    NvidiaArchitecture("sm_90", (9, 0), shared_memory_per_block_optin=232448, shared_memory_per_sm=233472,
                       max_threads_per_sm=2048, max_blocks_per_sm=32),
    NvidiaArchitecture("sm_90a", (9, 0), shared_memory_per_block_optin=232448, shared_memory_per_sm=233472,
                       max_threads_per_sm=2048, max_blocks_per_sm=32, has_wgmma=True),
)


def architecture_for_compute_capability(major: int, minor: int) -> NvidiaArchitecture | None:
    """The architecture to compile for on a device, or None if polytile has none for it.

    A device runs code built for its arch-specific variant (sm_90a on a 9.0 device), and
    that variant unlocks more instructions, so it wins over the portable one.
    """
    matches = [a for a in ARCHITECTURES.values() if a.compute_capability == (major, minor)]
    if not matches:
        return None
    return max(matches, key=lambda a: a.name.endswith("a"))
