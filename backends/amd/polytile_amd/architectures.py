"""What polytile needs to know about each AMD architecture it compiles for.

The table is the single source of truth: the backend's architecture list, the mapping
from a device's ``gcnArchName`` to an architecture, and the limits the layout and memory
stages check against all come from here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, NamedTuple


class AmdArchitecture(NamedTuple):
    name: str
    family: str
    #: Threads per wavefront: 64 on the gfx9 (CDNA) chips, 32 by default on gfx11 (RDNA3).
    wavefront_size: int
    #: LDS (shared memory) one workgroup may allocate, bytes.
    lds_bytes: int
    #: Matrix cores: MFMA on CDNA, WMMA on RDNA3.
    matrix_instructions: str
    #: The ``version`` of its ``#gpu.amd_mfma`` (the CDNA generation) or ``#gpu.amd_wmma``
    #: (1: RDNA3) accumulator layouts.
    matrix_version: int = 0
    #: Where ``tile.processor_id`` reads the compute unit from: hardware register fields
    #: ``(register, offset, bits)`` (``s_getreg_b32``), packed from the low bits up.  gfx9:
    #: HW_ID's CU, SH and SE ids (bits 8-15); with several dies (XCCs), the die's id above
    #: them; gfx11: HW_ID1's WGP, SA and SE ids (bits 10-20).  An id of the unit, not a
    #: dense index.
    processor_id_fields: tuple[tuple[int, int, int], ...] = ((4, 8, 8),)


#: HW_ID's compute-unit bits, then HW_REG_XCC_ID's die id (CDNA3 and later: several dies).
_CU_AND_XCC = ((4, 8, 8), (20, 0, 4))


def _table(*archs: AmdArchitecture) -> Mapping[str, AmdArchitecture]:
    return MappingProxyType({a.name: a for a in archs})


ARCHITECTURES: Mapping[str, AmdArchitecture] = _table(
    AmdArchitecture("gfx90a", "CDNA2", wavefront_size=64, lds_bytes=65536,
                    matrix_instructions="mfma", matrix_version=2),
    AmdArchitecture("gfx942", "CDNA3", wavefront_size=64, lds_bytes=65536,
                    matrix_instructions="mfma", matrix_version=3, processor_id_fields=_CU_AND_XCC),
    AmdArchitecture("gfx950", "CDNA4", wavefront_size=64, lds_bytes=163840,
                    matrix_instructions="mfma", matrix_version=4, processor_id_fields=_CU_AND_XCC),
    AmdArchitecture("gfx1100", "RDNA3", wavefront_size=32, lds_bytes=65536,
                    matrix_instructions="wmma", matrix_version=1, processor_id_fields=((23, 10, 11),)),
)


def architecture_for_gcn_arch_name(gcn_arch_name: str) -> AmdArchitecture | None:
    """The architecture for a device's ``gcnArchName`` ("gfx942:sramecc+:xnack-"), if any.

    The feature suffixes (sramecc, xnack) do not change what we generate, so only the
    processor name before the first ``:`` matters.
    """
    return ARCHITECTURES.get(gcn_arch_name.split(":", 1)[0].strip())
