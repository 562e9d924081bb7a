"""Structured control flow as LLVM branches; a loop-carried tile is one phi per register.

Every thread runs the same loop trip and takes the same branch: conditions of
``scf.if`` / ``scf.while`` and loop bounds are scalars, the same in every thread.

The loop options of ``pl.range`` that LLVM carries out become the back edge's
``llvm.loop`` metadata: ``loop_unroll_factor=n`` (n >= 2) asks LLVM's unroller for n
copies of the body (``llvm.loop.unroll.count``; a request LLVM may decline, where it
cannot unroll the loop, as Triton's IR-level unroller would not; below 2 nothing, as in
Triton), ``disable_licm=True`` keeps LLVM's LICM out of the loop (``llvm.licm.disable``;
the tile stage's ``licm`` skips it too).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...dialects import func, scf
from ...passes.licm import DISABLE_LICM_HINT
from .context import LoweringContext, register_lowering

#: The ``scf.for`` attribute of ``pl.range(..., loop_unroll_factor=n)``.
UNROLL_HINT = "pt.loop_unroll_factor"


class _LoopID(ir.values.MDValue):
    """A loop's ``llvm.loop`` node: its first operand is itself (LangRef), so it hashes
    and compares by identity (the node's own would recurse), one per loop."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def descr(self, buf: list) -> None:
        # distinct: never merged with another loop's node of the same options (LangRef).
        buf.append("distinct ")
        super().descr(buf)


def loop_metadata(module: ir.Module, op: Any) -> ir.values.MDValue | None:
    """The ``llvm.loop`` node of ``op``'s loop options, or None where it has none."""
    options = []
    factor = op.attributes.get(UNROLL_HINT)
    if factor is not None and factor >= 2:
        options.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.count"),
                                            ir.Constant(ir.IntType(32), int(factor))]))
    if op.attributes.get(DISABLE_LICM_HINT):
        options.append(module.add_metadata([ir.MetaDataString(module, "llvm.licm.disable")]))
    if not options:
        return None
    loop_id = _LoopID(module, [], name=str(len(module.metadata)))
    loop_id.operands = (loop_id, *options)
    return loop_id


def lower_block(block: Any, ctx: LoweringContext) -> Any:
    """Lower the ops of ``block`` up to its terminator; return the terminator (unlowered)."""
    from .module import lower_op

    for op in block:
        if op is block.last_op and op.name in ("scf.yield", "scf.condition"):
            return op
        lower_op(op, ctx)
    return None


def _flatten(values: list) -> list:
    flat = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    return flat


def _unflatten(flat: list, like: list) -> list:
    result, i = [], 0
    for v in like:
        if isinstance(v, list):
            result.append(flat[i:i + len(v)])
            i += len(v)
        else:
            result.append(flat[i])
            i += 1
    return result


def _phis(ctx: LoweringContext, incoming: list, block: Any) -> list:
    phis = []
    for value in _flatten(incoming):
        phi = ctx.builder.phi(value.type)
        phi.add_incoming(value, block)
        phis.append(phi)
    return _unflatten(phis, incoming)


@register_lowering(scf.ForOp)
def _for(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    lower, upper, step, inits = operands[0], operands[1], operands[2], operands[3:]
    before = b.block
    header = b.append_basic_block("for.header")
    body = b.append_basic_block("for.body")
    exit_ = b.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lower.type)
    iv.add_incoming(lower, before)
    carried = _phis(ctx, inits, before)
    b.cbranch(b.icmp_signed("<", iv, upper), body, exit_)
    b.position_at_end(body)
    ctx.set(op.induction_variable, iv)
    for arg, value in zip(op.region_iter_args, carried):
        ctx.set(arg, value)
    yielded = lower_block(op.body.block, ctx)
    latch = b.block
    for phi, value in zip(_flatten(carried), _flatten([ctx.get(v) for v in yielded.operands])):
        phi.add_incoming(value, latch)
    iv.add_incoming(b.add(iv, step), latch)
    back = b.branch(header)
    metadata = loop_metadata(b.module, op)
    if metadata is not None:
        back.set_metadata("llvm.loop", metadata)
    b.position_at_end(exit_)
    return carried


@register_lowering(scf.IfOp)
def _if(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    then_block = b.append_basic_block("if.then")
    else_block = b.append_basic_block("if.else")
    merge = b.append_basic_block("if.end")
    b.cbranch(operands[0], then_block, else_block)
    arms = []
    for block, region in ((then_block, op.then_region), (else_block, op.else_region)):
        b.position_at_end(block)
        yielded = lower_block(region.block, ctx)
        values = [ctx.get(v) for v in yielded.operands] if yielded is not None else []
        arms.append((values, b.block))
        b.branch(merge)
    b.position_at_end(merge)
    if not op.results:
        return []
    (then_values, then_end), (else_values, else_end) = arms
    phis = _phis(ctx, then_values, then_end)
    for phi, value in zip(_flatten(phis), _flatten(else_values)):
        phi.add_incoming(value, else_end)
    return phis


@register_lowering(scf.WhileOp)
def _while(op: Any, operands: list, ctx: LoweringContext) -> list:
    b = ctx.builder
    entry = b.block
    before = b.append_basic_block("while.before")
    after = b.append_basic_block("while.after")
    exit_ = b.append_basic_block("while.exit")
    b.branch(before)
    b.position_at_end(before)
    carried = _phis(ctx, operands, entry)
    for arg, value in zip(op.before.block.arguments, carried):
        ctx.set(arg, value)
    condition = lower_block(op.before.block, ctx)
    passed = [ctx.get(v) for v in condition.operands[1:]]
    b.cbranch(ctx.get(condition.condition), after, exit_)
    b.position_at_end(after)
    for arg, value in zip(op.after.block.arguments, passed):
        ctx.set(arg, value)
    yielded = lower_block(op.after.block, ctx)
    for phi, value in zip(_flatten(carried), _flatten([ctx.get(v) for v in yielded.operands])):
        phi.add_incoming(value, b.block)
    b.branch(before)
    b.position_at_end(exit_)
    return passed


@register_lowering(func.ReturnOp)
def _return(op: Any, operands: list, ctx: LoweringContext) -> list:
    if operands:
        raise ctx.unsupported(op, "returning values from a kernel")
    ctx.builder.ret_void()
    # Ops after a return are unreachable; they land in a block nothing branches to.
    ctx.builder.position_at_end(ctx.builder.append_basic_block("unreachable"))
    return []

