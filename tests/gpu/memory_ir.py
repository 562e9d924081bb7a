"""Shared helpers of the memory-stage IR tests: a pass context, short layout names.

IR texts here write layouts as {A}, {B} (blocked), {S} (shared) and are formatted with
:data:`NAMES` before parsing."""

from __future__ import annotations

from polytile.backend import BackendOptions
from polytile.passes.pass_base import PassContext
from polytile.target import Target
from polytile.ir_testing import apply_passes, dedent

import polytile.gpu.lowering.calls  # noqa: F401  (func.call lowering; module.py imports it at integration)
import polytile.gpu.lowering.shared  # noqa: F401  (buffer ops; imported by convert.py too)

NAMES = {
    "A": "#gpu.blocked<size_per_thread = [1], threads_per_warp = [32], warps_per_cta = [2], order = [0]>",
    "B": "#gpu.blocked<size_per_thread = [2], threads_per_warp = [32], warps_per_cta = [1], order = [0]>",
    "S": "#gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [0]>",
}


def context(num_warps: int = 2, arch: str = "sm_90a") -> PassContext:
    return PassContext(target=Target("nvidia", arch), options=BackendOptions(num_warps=num_warps))


def run(text: str, *passes, num_warps: int = 2, template: bool = True) -> str:
    """``passes`` over ``text`` (layouts by short name); the output with short names back.
    ``template=False``: ``text`` is an output of :func:`run` (single braces)."""
    if template:
        text = dedent(text).format(**NAMES)
    else:
        for short, full in NAMES.items():
            text = text.replace("{" + short + "}", full)
    out = apply_passes(text, *passes, context=context(num_warps))
    for short, full in NAMES.items():
        out = out.replace(full, "{" + short + "}")
    return out
