"""What the compile metadata says about each ``pl.range(..., warp_specialize=True)`` loop.

``warp_specialize`` (a compile artifact, so a metadata key): one entry per hinted loop in
source order, ``{"loop": "file:line:col", "specialised": bool}`` plus ``"why"`` when it
was not, and the registers per thread of each side (``"producer_registers"``,
``"consumer_registers"``) when it was.  ``note-warp-specialize`` makes the entries early in every pipeline (the
interpreter's too), saying why a target cannot split loops; ``warp-specialize`` fills in
what it did with each loop it meets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses
from polytile.warp_specialize import WARP_SPECIALIZE, hinted_loops

#: What an entry says until ``warp-specialize`` reaches its loop.
NOT_REACHED = "the loop was unrolled or removed before warp specialization"


def unsupported_reason(target: Any, name: Any = None) -> str | None:
    """Why ``target`` (a ``GpuTarget``, or None for a target without one, ``name``)
    cannot run specialised warps, or None."""
    from polytile.gpu.lowering.mbarrier import barrier_unit

    if target is None:
        return f"the target {name or '?'} runs no warps of its own (warp specialization is for NVIDIA sm_90a)"
    missing = [what for what, present in (("barriers of a group of warps", target.named_barrier is not None),
                                          ("setmaxnreg", target.set_max_registers is not None),
                                          ("mbarriers", barrier_unit(target) is not None)) if not present]
    if missing:
        return (f"{target.backend_name} {target.arch} has no {', no '.join(missing)}; warp specialization needs them "
                "(NVIDIA sm_90a)")
    return None


def _location(loop: Any) -> str:
    return str(loop.location) if loop.location is not None else "?"


def record_outcome(artifacts: dict, loop: Any, why: str | None, seen: dict, details: dict | None = None) -> None:
    """Say what became of ``loop``: it replaces the entry of its location that ``seen``
    (this pass's count of loops met at each location) says is its own, or is appended.
    ``details``: more to say of a split loop (the registers each warp group got)."""
    entries = artifacts.setdefault(WARP_SPECIALIZE, [])
    where = _location(loop)
    outcome = {"loop": where, "specialised": why is None, **({"why": why} if why is not None else {}),
               **(details or {})}
    nth = seen[where] = seen.get(where, -1) + 1
    same = [index for index, entry in enumerate(entries) if entry.get("loop") == where]
    if nth < len(same):
        # What earlier passes said of the loop (overlap-dots: "overlap") stays.
        earlier = {key: value for key, value in entries[same[nth]].items() if key not in outcome and key != "why"}
        entries[same[nth]] = {**outcome, **earlier}
    else:
        entries.append(outcome)


@dataclass
class NoteWarpSpecialize(Pass):
    """Record an entry for every loop with the ``warp_specialize`` hint (see the module
    docstring); the IR is unchanged."""

    name: ClassVar[str] = "note-warp-specialize"
    summary: ClassVar[str] = "record the loops that ask for warp specialization (compile metadata)"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        loops = hinted_loops(module)
        if loops:
            why = unsupported_reason(_gpu_target(context), getattr(context, "target", None)) or NOT_REACHED
            context.artifacts[WARP_SPECIALIZE] = [{"loop": _location(op), "specialised": False, "why": why}
                                                  for op in loops]
        return PreservedAnalyses.all()


def _gpu_target(context: Any) -> Any:
    """The context's ``GpuTarget``, or None for a target without the GPU lowering (the
    interpreter)."""
    from polytile.errors import ConfigError
    from polytile.gpu.lowering.target import gpu_target_of

    try:
        return gpu_target_of(context)
    except ConfigError:
        return None


__all__ = ["NOT_REACHED", "NoteWarpSpecialize", "record_outcome", "unsupported_reason"]
