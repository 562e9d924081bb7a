"""The target-neutral lowering of laid-out tile IR to LLVM IR (llvmlite), shared by the
GPU backends.  See docs/gpu-lowering.md.

- :class:`GpuTarget`: the data and hooks a backend supplies;
- :data:`LOWERINGS` / :func:`register_lowering`: op class -> ``fn(op, operands, ctx)``;
- :data:`ELEMENTWISE` / :func:`register_elementwise`: op class -> per-element emitter;
- :class:`LowerToLLVM`: the ``lower-to-llvm`` pass; :func:`lower_module` does its work.
"""

from .context import LOWERINGS, LoweringContext, register_lowering
from .elementwise import ELEMENTWISE, LLVM_MATH, MATH_FUNCTIONS, register_elementwise
from .convert import CONVERSIONS, register_conversion
from .module import KERNEL_NAME, LLVM_IR, LLVM_MODULE, NUM_WARPS, SHARED_BYTES, LowerToLLVM, lower_module
from .target import GpuTarget, gpu_target_of

__all__ = [
    "CONVERSIONS", "SHARED_BYTES", "register_conversion", "ELEMENTWISE", "GpuTarget", "KERNEL_NAME", "LLVM_IR", "LLVM_MATH", "LLVM_MODULE", "LOWERINGS", "LoweringContext",
    "LowerToLLVM", "MATH_FUNCTIONS", "NUM_WARPS", "gpu_target_of", "lower_module", "register_elementwise",
    "register_lowering",
]
