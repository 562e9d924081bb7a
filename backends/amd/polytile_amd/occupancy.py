"""How many waves of a kernel one SIMD can hold, from its LDS and VGPR use.

A compute unit (CU) has a fixed LDS and a fixed register file per SIMD; a workgroup's
waves are spread over the CU's SIMDs.  The waves a SIMD holds are the smallest of:

- the hardware's limit of waves per SIMD;
- the VGPRs: a SIMD's register file divided by what one wave allocates (the kernel's
  vector registers, rounded up to the allocation granule; on CDNA's unified register
  file the code object's ``.vgpr_count`` already holds the AGPRs too: 256 VGPRs and 256
  AGPRs are a ``.vgpr_count`` of 512);
- the LDS: the workgroups whose LDS fits in the CU at once, times their waves, over the
  SIMDs of the CU (rounded up: the busiest SIMD's share).

The numbers per family are AMD's published ones (CDNA3 ISA guide, RDNA3 ISA guide); the
result is the same estimate the AMD occupancy calculators make, not a measurement.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ComputeUnit:
    simds: int
    max_waves_per_simd: int
    #: VGPRs per lane of one SIMD's register file (CDNA: arch VGPRs and AGPRs together).
    vgprs_per_simd: int
    vgpr_granule: int
    #: LDS the workgroups resident on one CU share, bytes.
    lds_bytes: int


#: By architecture.  gfx1100 counts in CU mode (the compiler's default): 2 SIMDs, 64 KB.
COMPUTE_UNITS = {
    "gfx90a": ComputeUnit(simds=4, max_waves_per_simd=8, vgprs_per_simd=512, vgpr_granule=8, lds_bytes=65536),
    "gfx942": ComputeUnit(simds=4, max_waves_per_simd=8, vgprs_per_simd=512, vgpr_granule=8, lds_bytes=65536),
    "gfx950": ComputeUnit(simds=4, max_waves_per_simd=8, vgprs_per_simd=512, vgpr_granule=8, lds_bytes=163840),
    "gfx1100": ComputeUnit(simds=2, max_waves_per_simd=16, vgprs_per_simd=1536, vgpr_granule=24, lds_bytes=65536),
}


@dataclass(frozen=True)
class Occupancy:
    waves_per_simd: int
    by_lds: int
    by_vgprs: int
    #: "lds", "vgprs" or "hardware": what sets ``waves_per_simd``.
    limited_by: str

    def as_dict(self) -> dict:
        return asdict(self)


def _round_up(n: int, granule: int) -> int:
    return -(-n // granule) * granule


def occupancy(arch: str, *, lds_bytes: int, vgprs: int, workgroup_size: int, wavefront_size: int) -> Occupancy:
    """Waves per SIMD of a kernel using ``lds_bytes`` of LDS per workgroup and ``vgprs``
    vector registers per lane (the code object's ``.vgpr_count``: AGPRs included on
    CDNA), launched in workgroups of ``workgroup_size`` work-items."""
    cu = COMPUTE_UNITS[arch]
    by_vgprs = min(cu.max_waves_per_simd, cu.vgprs_per_simd // max(_round_up(max(vgprs, 1), cu.vgpr_granule), 1))
    waves_per_group = -(-workgroup_size // wavefront_size)
    if lds_bytes:
        groups = cu.lds_bytes // lds_bytes
        # The busiest SIMD's share, rounded up as LLVM's occupancy model does: one
        # workgroup of one wave still puts a wave on a SIMD.
        by_lds = min(cu.max_waves_per_simd, -(-groups * waves_per_group // cu.simds))
    else:
        by_lds = cu.max_waves_per_simd
    waves = min(by_lds, by_vgprs)
    limited_by = "hardware" if waves == cu.max_waves_per_simd else "lds" if by_lds <= by_vgprs else "vgprs"
    return Occupancy(waves, by_lds, by_vgprs, limited_by)


def kernel_resources(arch: str, info: Any) -> dict[str, Any]:
    """The ``resources`` record (:mod:`polytile.resources`) of a kernel from its entry of
    the code object's metadata (:class:`~polytile_amd.codeobject.KernelInfo`):

    - ``registers``: the VGPRs a lane allocates (``.vgpr_count``, AGPRs included on CDNA);
      ``sgprs`` and ``agprs`` beside it;
    - ``spills``: ``vgprs`` and ``sgprs``, the registers LLVM spilled (AMD counts
      registers, not bytes);
    - ``stack_bytes``: private (scratch) memory per work-item;
    - ``shared_bytes``: the LDS of a workgroup;
    - ``occupancy``: ``waves_per_simd``, and what limits it (``"lds"``, ``"vgprs"`` or
      ``"hardware"``), by :func:`occupancy`; absent for an architecture it has no numbers for.
    """
    record: dict[str, Any] = {
        "registers": int(info.vgpr_count), "sgprs": int(info.sgpr_count), "agprs": int(info.agpr_count),
        "spills": {"vgprs": int(info.vgpr_spill_count), "sgprs": int(info.sgpr_spill_count)},
        "stack_bytes": int(info.private_segment_fixed_size), "shared_bytes": int(info.group_segment_fixed_size),
    }
    if arch in COMPUTE_UNITS:
        estimate = occupancy(arch, lds_bytes=record["shared_bytes"], vgprs=record["registers"],
                             workgroup_size=int(info.max_flat_workgroup_size), wavefront_size=int(info.wavefront_size))
        record["occupancy"] = {"waves_per_simd": estimate.waves_per_simd, "limited_by": estimate.limited_by}
    record["notes"] = []
    return record
