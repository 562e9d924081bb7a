"""The passes the plugin adds to the AMD pipeline.

``lds-fit`` (after ``memory/allocate-shared``): each kernel's LDS need is the memory
stage's ``gpu.shared_bytes``.  Over the architecture's limit (64 KB on gfx90a, gfx942 and
gfx1100; 160 KB on gfx950), the remedies of :mod:`.remedies` are tried, cheapest first;
after one changes the IR, the memory stage's allocation runs again and the need is
measured anew.  When none is left, the kernel fails with an
:class:`~polytile.errors.OutOfResourcesError` naming the kernel, the need, the limit and
the remedies tried (the autotuner drops configurations that raise it).

``lds-verify`` (after ``assemble/link-hsaco``): the code object's
``.group_segment_fixed_size`` must be the allocation's size (else the kernel would
overrun or waste LDS: an internal error); it records LDS use and the occupancy it implies
in the artifact ``"lds"`` (and the plugin puts the same into the compile metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.errors import OutOfResourcesError, PolytileError
from polytile.gpu.allocation import SHARED_BYTES_ATTR, AllocateShared
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses

from .occupancy import occupancy
from .remedies import REMEDIES, in_order, lds_limit

#: Artifact key of what lds-verify records.
LDS = "lds"


def _kernels(module: Any) -> list[Any]:
    return [op for op in module.walk() if op.name == "func.func" and op.attributes.get("kernel")]


@dataclass
class LdsFit(Pass):
    """Fit each kernel's LDS into the architecture's limit, or fail naming both."""

    name: ClassVar[str] = "lds-fit"
    summary: ClassVar[str] = "check LDS against the AMD architecture's limit; try cheaper choices when over"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        arch = context.target.arch
        limit = lds_limit(arch)
        changed = False
        for kernel in _kernels(module):
            name = kernel.attributes["sym_name"]
            need = int(kernel.attributes.get(SHARED_BYTES_ATTR, 0))
            tried = []
            for remedy_name, remedy in in_order(REMEDIES):
                if need <= limit:
                    break
                tried.append(remedy_name)
                if remedy(module, kernel, context):
                    changed = True
                    context.analyses.invalidate(PreservedAnalyses.none())
                    AllocateShared().run(module, context)
                    need = int(kernel.attributes.get(SHARED_BYTES_ATTR, 0))
            if need > limit:
                raise OutOfResourcesError(
                    kernel=name, resource="LDS", need=need, limit=limit, target=arch, per="workgroup",
                    remedies_tried=tried,
                    hint="use smaller blocks or fewer warps")
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


@dataclass
class LdsVerify(Pass):
    """Check the code object's LDS against the allocation; record LDS use and occupancy."""

    name: ClassVar[str] = "lds-verify"
    summary: ClassVar[str] = "code object LDS <= allocated LDS; LDS use and occupancy into the artifacts"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from polytile_amd.assemble import CODE_OBJECT_METADATA

        info = context.artifacts.get(CODE_OBJECT_METADATA)
        kernel_name = context.artifacts.get("kernel_name")
        if info is None or kernel_name is None:
            raise PolytileError("lds-verify needs the code object metadata that link-hsaco records; put it after "
                                "link-hsaco")
        kernel = next(k for k in _kernels(module) if k.attributes["sym_name"] == kernel_name)
        allocated = int(kernel.attributes.get(SHARED_BYTES_ATTR, 0))
        declared = int(info["group_segment_fixed_size"])
        # Less is fine: LLVM drops LDS that no instruction reaches (the scratch of a scan
        # whose input it folded to a constant, say). More means code the allocation did
        # not plan for, whose LDS could overlap.
        if declared > allocated:
            raise PolytileError(f"internal error: kernel '{kernel_name}': the code object declares {declared} bytes of "
                                f"LDS but the memory stage allocated {allocated}; please report this with the IR dump "
                                "(POLYTILE_DUMP_IR=1)")
        context.artifacts[LDS] = lds_record(context.target.arch, info)
        return PreservedAnalyses.all()


def lds_record(arch: str, info: dict) -> dict:
    """LDS use, limit and occupancy of a kernel from its code object metadata entry."""
    # .vgpr_count is every vector register a lane allocates (on gfx90a and later the
    # AGPRs too: .agpr_count is the part of it they take), so it alone sets the VGPR limit.
    estimate = occupancy(arch, lds_bytes=int(info["group_segment_fixed_size"]), vgprs=int(info["vgpr_count"]),
                         workgroup_size=int(info["max_flat_workgroup_size"]), wavefront_size=int(info["wavefront_size"]))
    return {"bytes": int(info["group_segment_fixed_size"]), "limit": lds_limit(arch), **estimate.as_dict()}
