"""Laid-out core IR to an llvmlite module, and the ``lower-to-llvm`` pass.

Every kernel (``func.func`` with ``kernel = true``) becomes an LLVM function with the
target's kernel calling convention; its scalar arguments become parameters (pointers in
their address space).  The thread, lane and warp ids are read once at the entry; the ops
are lowered in order through :data:`~.context.LOWERINGS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from llvmlite import ir

from ...analysis.axis_info import AxisInfoAnalysis
from ...ir import types as t
from ...passes.pass_base import Pass, PassContext, PreservedAnalyses
from ..allocation import SHARED_BYTES_ATTR
from ..global_scratch import PARAMETER_NAME as GLOBAL_SCRATCH_PARAMETER
from ..global_scratch import GlobalScratchPlan, plan_global_scratch
from .context import LOWERINGS, LoweringContext, op_error
from .target import NUM_WARPS_ATTR, WORKER_WARPS_ATTR, GpuTarget, gpu_target_of, num_warps_of, warp_index
from .types import UnsupportedType, llvm_type

#: Artifact keys the GPU stages leave in ``PassContext.artifacts``.
LLVM_MODULE = "llvm_module"
LLVM_IR = "llvm_ir"
KERNEL_NAME = "kernel_name"
NUM_WARPS = "num_warps"
#: Artifact: the warps a launch starts (``num_warps`` plus the kernel's worker warps).
LAUNCH_WARPS = "launch_warps"
#: Artifact: the registers per thread the kernel's code is built for, where its lowering
#: fixed them (warp groups that move registers with ``set_max_registers``); the
#: backend's assembler caps the kernel there.  Absent: the assembler chooses.
REGISTER_CAP = "register_cap"
#: Bytes of dynamic shared memory the kernel needs (from the memory stage; 0 without it).
SHARED_BYTES = "shared_bytes"


def lower_op(op: Any, ctx: LoweringContext) -> None:
    lowering = LOWERINGS.get(type(op))
    if lowering is None:
        raise ctx.unsupported(op)
    operands = [ctx.get(v) for v in op.operands]
    results = lowering(op, operands, ctx)
    for value, lowered in zip(op.results, results):
        ctx.set(value, lowered)


def lower_module(module: Any, target: GpuTarget, analyses: Any = None, num_warps: int = 4,
                 global_scratch: dict[str, GlobalScratchPlan] | None = None,
                 launch: dict[str, dict] | None = None) -> ir.Module:
    """The LLVM module of every kernel in ``module`` (whose tiles have layouts).
    ``global_scratch``: filled with each kernel's global scratch plan, by name;
    ``launch``: with what its launch needs (:data:`LAUNCH_WARPS`, :data:`REGISTER_CAP`)."""
    llvm_module = ir.Module(name="polytile")
    llvm_module.triple = target.triple
    llvm_module.data_layout = target.data_layout
    axis_info = analyses.get(AxisInfoAnalysis, module) if analyses is not None else AxisInfoAnalysis(module)
    for function in [op for op in module.walk() if op.name == "func.func"]:
        if not function.attributes.get("kernel"):
            continue  # a noinline callee: its calls fail to lower, naming the call
        plan, ctx = _lower_kernel(function, llvm_module, target, axis_info,
                                  function.attributes.get(NUM_WARPS_ATTR, num_warps))
        if global_scratch is not None:
            global_scratch[function.attributes["sym_name"]] = plan
        if launch is not None:
            facts = {LAUNCH_WARPS: ctx.launch_warps}
            if ctx.register_cap is not None:
                facts[REGISTER_CAP] = ctx.register_cap
            launch[function.attributes["sym_name"]] = facts
    return llvm_module


def _lower_kernel(function: Any, llvm_module: ir.Module, target: GpuTarget, axis_info: Any,
                  num_warps: int) -> tuple[GlobalScratchPlan, LoweringContext]:
    name = function.attributes["sym_name"]
    parameters = []
    by_value: dict[int, tuple[int, int]] = {}
    for index, arg in enumerate(function.arguments):
        if isinstance(arg.type, t.TileType):
            raise op_error(function, name, f"kernel argument of type {arg.type}: kernels take scalars and pointers")
        passed = getattr(arg.type, "by_value", None)
        if passed is not None:
            if target.by_value_parameter is None:
                raise op_error(function, name, f"kernel parameter '{arg.name_hint}' of type {arg.type} is passed by "
                                               f"value, which the {target.backend_name} backend does not support")
            by_value[index] = passed
            parameters.append(ir.PointerType(ir.ArrayType(ir.IntType(8), passed[0])))
            continue
        try:
            parameters.append(llvm_type(arg.type))
        except UnsupportedType as exc:
            raise op_error(function, name, f"kernel arguments of {exc} are not supported by the "
                                           f"{target.backend_name} backend yet") from None
    scratch = plan_global_scratch(function, target)
    if scratch.bytes:
        # The hidden last parameter: the launch's global scratch (polytile.set_allocator).
        parameters.append(llvm_type(t.PointerType(t.i8)))
    fn = ir.Function(llvm_module, ir.FunctionType(ir.VoidType(), parameters), name)
    fn.calling_convention = target.kernel_calling_convention
    launch_warps = num_warps + int(function.attributes.get(WORKER_WARPS_ATTR, 0))
    target.annotate_kernel(fn, launch_warps * target.warp_size)
    for index, (_, alignment) in by_value.items():
        # The bytes themselves are the parameter: a byval pointer, read in place.
        fn.args[index].add_attribute("byval")
        fn.args[index].attributes.align = alignment
        target.by_value_parameter(fn, index)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = LoweringContext(llvm_module, fn, builder, target, name, num_warps, axis_info)
    ctx.launch_warps = launch_warps
    for arg, param in zip(function.arguments, fn.args):
        param.name = arg.name_hint or ""
        ctx.set(arg, param)
    ctx.global_scratch_plan = scratch
    if scratch.bytes:
        ctx.global_scratch_base = fn.args[-1]
        ctx.global_scratch_base.name = GLOBAL_SCRATCH_PARAMETER
        ctx.global_scratch_base.attributes.align = scratch.alignment
    ctx.thread_id = target.read_id(builder, "thread_id", 0)
    ctx.lane_id = builder.and_(ctx.thread_id, ctx.i32(target.warp_size - 1))
    ctx.warp_id = warp_index(target, builder, ctx.thread_id)
    for op in function.entry_block:
        lower_op(op, ctx)
    if not builder.block.is_terminated:
        builder.ret_void()
    return scratch, ctx


@dataclass
class LowerToLLVM(Pass):
    """Lower the laid-out GPU IR to LLVM IR (an llvmlite module in the artifacts)."""

    name: ClassVar[str] = "lower-to-llvm"
    summary: ClassVar[str] = "laid-out tiles to per-thread LLVM IR (artifacts 'llvm_module', 'llvm_ir')"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        target = gpu_target_of(context)
        scratch: dict[str, GlobalScratchPlan] = {}
        launch: dict[str, dict] = {}
        llvm_module = lower_module(module, target, context.analyses, num_warps_of(context), scratch, launch)
        text = str(llvm_module)
        _verify(text)
        kernels = [f.name for f in llvm_module.functions if not f.is_declaration]
        context.artifacts[LLVM_MODULE] = llvm_module
        context.artifacts[LLVM_IR] = text
        if kernels:
            context.artifacts[KERNEL_NAME] = kernels[0]
            kernel = next(op for op in module.walk() if op.name == "func.func"
                          and op.attributes.get("sym_name") == kernels[0])
            context.artifacts[SHARED_BYTES] = int(kernel.attributes.get(SHARED_BYTES_ATTR, 0))
            context.artifacts.update(scratch[kernels[0]].metadata())
        context.artifacts[NUM_WARPS] = num_warps_of(context)
        if kernels:  # the launch's warps only where they differ from num_warps
            context.artifacts.update({key: value for key, value in launch[kernels[0]].items()
                                      if key != LAUNCH_WARPS or value != context.artifacts[NUM_WARPS]})
        return PreservedAnalyses.all()


def _verify(text: str) -> None:
    """Parse and verify the text now, so a lowering bug is reported by this pass and not
    later by the assembler."""
    import llvmlite.binding as llvm

    llvm.parse_assembly(text).verify()
