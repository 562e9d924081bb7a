"""``overlap-dots``: FlashAttention-3's intra-warpgroup overlap, for loops that ask for it.

Attention's loop issues ``qk = q @ k_j``, waits for it, computes the softmax on the CUDA
cores, then issues ``acc = p_j @ v_j`` (accumulating into ``acc`` rescaled by the
softmax's ``alpha``).  Within one warp group the tensor cores idle during the softmax.
This pass rotates the second dot by one iteration: iteration ``j`` issues ``q @ k_j``
and then ``p_{j-1} @ v_{j-1}`` (the previous iteration's, its operands carried or loaded
again one step back), so the softmax of ``j`` runs while the second dot does; the
rescale applies to its result after the softmax::

    before                                   after
    for j in [lo, hi):                       if lo < hi:
        qk = dot(q, K(j))                        qk = dot(q, K(lo)); s = softmax(qk)  (prologue)
        s = softmax(qk)        ->                a = H(acc0)                          (H: the rescale)
        acc = dot(P(s), V(j), H(acc))            for j in [lo + step, hi):
                                                     qk = dot(q, K(j))
                                                     t = dot(p, V(j - step), a)      (in flight during:)
                                                     s = softmax(qk)
                                                     a = H(t); p = P(s)
                                                 acc = dot(p, V(last), a)            (epilogue)

The result is the same sum in the same order (``acc_j = H_j(acc_{j-1}) + P_j V_j``; the
loop carries ``H_j(acc_{j-1})``); ``async-dots`` then retires the scores behind the
second dot and the second dot before the rescale reads it.

It applies to loops with ``pl.range(..., warp_specialize=True)`` (the setting
``warpspec_overlap``, on by default; ``pl.WarpSpecialize(overlap=False)`` turns it off for
one loop) on targets that split loops, at the kernel's top level,
where the body has exactly two dots, the first's result is read in the body, the
second's only accumulates into a carried value that nothing else reads, the second's B
is loaded from addresses that depend on the index and loop-invariant values only, the
body writes no memory, and the step is a positive constant.  Anything else is left
alone, and the compile metadata says why (``warp_specialize`` entries, ``overlap``).
The cost: the prologue's and epilogue's tiles are loaded outside the loop's rings (one
more tile of shared memory), and ``p`` stays in registers across iterations; where the
estimates say either would not fit (:func:`shared_estimate`, :func:`register_estimate`),
the loop is left alone too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.dialects import arith, scf, tile
from polytile.ir.builder import Builder
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses
from polytile.passes.rewrite import constant_value, is_side_effect_free
from polytile.warp_specialize import hinted_loops

#: The key of a ``warp_specialize`` metadata entry that says what became of the overlap.
OVERLAP = "overlap"


@dataclass
class OverlapDots(Pass):
    """Rotate the accumulating dot of each loop asking for it by one iteration (see the
    module docstring)."""

    name: ClassVar[str] = "overlap-dots"
    summary: ClassVar[str] = ("FlashAttention-3's overlap: a loop's second dot runs during the work between its "
                              "dots, one iteration behind")

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        from .report import _gpu_target, unsupported_reason

        missing = unsupported_reason(_gpu_target(context), getattr(context, "target", None))
        changed = False
        for function in [op for op in module.walk() if op.name == "func.func" and op.attributes.get("kernel")]:
            for loop in hinted_loops(function):
                if not wants_overlap(loop):
                    continue
                # Asked for on this loop, the metadata says why it was not done; by the
                # setting alone, only where the loop has the shape and not the room (a
                # matmul's loop, one dot, says nothing).
                asked = _asked(loop)
                if missing is not None:
                    why = missing if asked else ""
                elif not asked and isinstance(_examine(function, loop), str):
                    why = ""
                else:
                    why = overlap_loop(function, loop, _shared_limit(context), _stages(context),
                                       _consumer_registers(context, loop))
                if why != "":
                    _record(context.artifacts, loop, why)
                if why is None:
                    changed = True
                    context.count("overlap-dots.loops")
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


def _asked(loop: Any) -> bool:
    from polytile.language.loop_options import OPTION_PREFIX

    return loop.attributes.get(OPTION_PREFIX + "overlap") is not None


def wants_overlap(loop: Any) -> bool:
    """Whether the loop's options (``pl.WarpSpecialize(overlap=...)``), else the setting
    ``warpspec_overlap``, ask for the overlap."""
    from polytile import config
    from polytile.language.loop_options import OPTION_PREFIX

    asked = loop.attributes.get(OPTION_PREFIX + "overlap")
    return bool(config.get("warpspec_overlap")) if asked is None else bool(asked)


def _record(artifacts: dict, loop: Any, why: str | None) -> None:
    """What became of the overlap, in the loop's ``warp_specialize`` metadata entry (the
    entries are made by ``note-warp-specialize``, in source order)."""
    from polytile.warp_specialize import WARP_SPECIALIZE

    where = str(loop.location) if loop.location is not None else "?"
    for entry in artifacts.get(WARP_SPECIALIZE, []):
        if entry.get("loop") == where and OVERLAP not in entry:
            entry[OVERLAP] = True if why is None else f"not overlapped: {why}"
            return


@dataclass
class _Shape:
    """The pieces of a loop the rotation moves."""

    first: Any                # the dot whose result the body reads (scores)
    second: Any               # the accumulating dot, rotated
    index: int                # the position of its accumulator among the carried values
    rescale: list             # ops computing the second's accumulator from the carried one, in order
    b_slice: list             # ops computing the second's B from the index and invariants, in order
    kept: list                # the body's other ops, in order (the terminator left out)


def _examine(function: Any, loop: Any) -> "_Shape | str":
    if loop.parent_op is not function:
        return "the loop is inside another loop or a branch"
    step = constant_value(loop.step)
    if not isinstance(step, int) or step <= 0:
        return "its step is not a positive constant"
    body = loop.body.block
    ops = list(body)[:-1]
    terminator = body.last_op
    if any(isinstance(op, scf.ForOp) and any(isinstance(d, tile.DotOp) for d in op.walk()) for op in ops):
        return ("its dots are in a loop inside it (a persistent kernel's loop over tiles): the overlap rotates "
                "the hinted loop's own dots; the inner loop of a persistent kernel is not rotated yet")
    impure = sorted({op.name for op in ops if not is_side_effect_free(op)})
    if impure:
        return f"the body has effects ({', '.join(impure)}) the rotation would reorder"
    dots = [op for op in loop.walk() if isinstance(op, tile.DotOp)]
    if len(dots) != 2 or any(d.parent is not body for d in dots):
        return f"the body has {len(dots)} dot{'' if len(dots) == 1 else 's'}; the overlap needs two, at its top level"
    first, second = dots
    if not [use for use in first.result.uses if use.owner is not terminator]:
        return "the first dot's result is not read in the body"
    yielded = [use.index for use in second.result.uses if use.owner is terminator]
    if len(yielded) != 1 or len(list(second.result.uses)) != 1:
        return "the second dot's result is used besides being carried to the next iteration"
    index = yielded[0]
    carried = loop.region_iter_args[index]
    rescale = _rescale(body, carried, second)
    if isinstance(rescale, str):
        return rescale
    if not rescale:
        # Without ops between, async-dots would see the rotated dot as a carried dot whose
        # A is carried too, and wait for it in its own iteration: no overlap, a loss.
        return "the second dot accumulates into the carried value with nothing between to overlap it with"
    b_slice = _index_slice(body, second.b, loop)
    if isinstance(b_slice, str):
        return b_slice
    if any(isinstance(op, tile.DotOp) for op in (*rescale, *b_slice)):
        return "the first dot's result feeds the second dot's B or accumulator"
    # The ops that only compute the second dot's B (its addresses, the load) leave the
    # body's kept part; users come after their operands, so one pass backwards finds them.
    moved_b: set = set()
    for op in reversed(b_slice):
        if all((use.owner is second and use.index == 1) or _top(use.owner, body) in moved_b
               for r in op.results for use in r.uses):
            moved_b.add(op)
    moved = {second, *rescale, *moved_b}
    kept = [op for op in ops if op not in moved]
    if first not in kept:
        return "the first dot is needed only by the second"
    if any(use.owner in kept for r in second.results for use in r.uses):
        return "the body reads the second dot's result"
    return _Shape(first, second, index, rescale, b_slice, kept)


def _top(op: Any, body: Any) -> Any:
    """``op``, or the op of ``body`` it is nested in."""
    while op.parent is not body:
        op = op.parent_op
    return op


def _rescale(body: Any, carried: Any, second: Any) -> "list | str":
    """The ops between the carried accumulator and the second dot's (``acc * alpha``): each
    depends on the carried value, is used only by the others or as the accumulator."""
    chain: list = []
    work = [second.acc]
    while work:
        value = work.pop()
        if value is carried:
            continue
        op = value.defining_op
        if op is None or op.parent is not body:
            return "the second dot does not accumulate into the value the loop carries"
        if op in chain:
            continue
        chain.append(op)
        work.extend(v for v in op.operands if _depends_on(v, carried, body))
    allowed = set(chain) | {second}
    for op in chain:
        if any(use.owner not in allowed for r in op.results for use in r.uses):
            return "the rescaled accumulator is read besides by the second dot"
    if any(use.owner not in allowed for use in carried.uses):
        return "the carried accumulator is read besides by the second dot's rescale"
    order = {op: i for i, op in enumerate(body)}
    return sorted(chain, key=order.__getitem__)


def _depends_on(value: Any, target: Any, body: Any) -> bool:
    seen: set = set()
    work = [value]
    while work:
        v = work.pop()
        if v is target:
            return True
        op = v.defining_op
        if op is None or op.parent is not body or op in seen:
            continue
        seen.add(op)
        work.extend(op.operands)
    return False


def _index_slice(body: Any, value: Any, loop: Any) -> "list | str":
    """The body's ops computing ``value`` from the index and values made before the loop."""
    found: set = set()
    work = [value]
    while work:
        v = work.pop()
        op = v.defining_op
        if op is None:
            if v in list(loop.region_iter_args):
                return "the second dot's B depends on a value the loop carries"
            continue
        if op.parent is not body:
            if _inside(op, loop):
                return "the second dot's B is computed in a nested region"
            continue
        if op not in found:
            found.add(op)
            work.extend(op.operands)
    order = {op: i for i, op in enumerate(body)}
    return sorted(found, key=order.__getitem__)


def _inside(op: Any, loop: Any) -> bool:
    parent = op.parent_op
    while parent is not None:
        if parent is loop:
            return True
        parent = parent.parent_op
    return False


def _shared_limit(context: PassContext) -> int | None:
    from polytile.gpu.lowering.target import gpu_target_of

    return getattr(gpu_target_of(context), "max_shared_bytes", None)


def _consumer_registers(context: PassContext, loop: Any) -> "tuple[int, int] | str":
    """Registers per thread the consumer warps will have, with their thread count, as
    ``warp-specialize`` will plan them (or why it cannot split the loop)."""
    from polytile.gpu.lowering.target import gpu_target_of, num_warps_of

    from .partition import PRODUCER_WARPS, loop_options
    from .registers import plan_registers

    options = loop_options(loop)
    num_warps = num_warps_of(context)
    plan = plan_registers(gpu_target_of(context), num_warps, PRODUCER_WARPS, options.get("producer_registers") or 0,
                          options.get("consumer_registers") or 0, getattr(context.options, "maxnreg", None))
    return plan if isinstance(plan, str) else (plan.consumer, num_warps * gpu_target_of(context).warp_size)


def _stages(context: PassContext) -> int:
    return int(getattr(getattr(context, "options", None), "num_stages", 1) or 1)


#: Shared memory besides the tiles (barriers, reductions' and conversions' scratch where
#: it does not reuse the rings' bytes) that the estimate leaves room for.
SHARED_MARGIN = 4096


def shared_estimate(function: Any, loop: Any, shape: _Shape, stages: int) -> tuple[int, int]:
    """Shared memory the rotated loop's kernel takes at least, and what the rotation adds:
    a ring of ``stages`` slots for each tile the body loads for a dot, the tiles loaded
    before it for the dots once (attention's ``q``), and the first iteration's and the
    last's tiles outside the rings (one buffer: they are not live together)."""
    from polytile.gpu.pipelining import NUM_STAGES_HINT

    stages = max(int(loop.attributes.get(NUM_STAGES_HINT) or stages), 1)
    body = loop.body.block
    rings = sum(_tile_bytes(op.result.type) for op in body if _loads_for_dot(op))
    before = sum(_tile_bytes(op.result.type) for op in function.body.block
                 if _loads_for_dot(op) and list(function.body.block).index(op) < list(function.body.block).index(loop))
    operands = [v for v in (shape.first.a, shape.first.b) if _loaded_in(v, body)] + [shape.second.b]
    added = max(_tile_bytes(v.type) for v in operands)
    return stages * rings + before + added, added


def _tile_bytes(type_: Any) -> int:
    from polytile.ir import types as t

    count = 1
    for extent in getattr(type_, "shape", ()):
        count *= extent
    return count * max(t.element_type(type_).width // 8, 1)


#: Ops a dot operand may pass through from its load (transposes, layout conversions).
_PASS_THROUGH = ("tile.trans", "gpu.convert_layout")


def _loads_for_dot(op: Any) -> bool:
    """Whether ``op`` loads a tile (reads memory) that some dot takes as A or B."""
    from polytile.ir.opdef import ReadsMemory

    if not op.has_trait(ReadsMemory) or len(op.results) != 1 or not hasattr(op.result.type, "shape"):
        return False
    work = [op.result]
    while work:
        value = work.pop()
        for use in value.uses:
            if isinstance(use.owner, tile.DotOp) and use.index in (0, 1):
                return True
            if use.owner.name in _PASS_THROUGH:
                work.extend(use.owner.results)
    return False


def _loaded_in(value: Any, body: Any) -> bool:
    """Whether ``value`` is a tile loaded in ``body`` (through transposes)."""
    from polytile.ir.opdef import ReadsMemory

    op = value.defining_op
    while op is not None and op.name in _PASS_THROUGH:
        op = op.operands[0].defining_op
    return op is not None and op.parent is body and op.has_trait(ReadsMemory)


#: Registers per consumer thread besides the three tiles :func:`register_estimate` counts
#: (addresses, the softmax's row values, masks, loop control).
REGISTER_RESERVE = 40


def register_estimate(shape: _Shape, threads: int) -> int:
    """Registers per consumer thread the rotated loop keeps at the softmax: the
    accumulator, the first dot's result and the second dot's A of the previous iteration
    (carried in registers), each spread over ``threads``, plus :data:`REGISTER_RESERVE`."""
    return sum(-(-_tile_bytes(v.type) // (4 * threads)) for v in (shape.second.result, shape.first.result,
                                                                   shape.second.a)) + REGISTER_RESERVE


def overlap_loop(function: Any, loop: Any, shared_limit: int | None = None, stages: int = 1,
                 registers: "tuple[int, int] | str | None" = None) -> str | None:
    """Rotate ``loop``'s second dot (see the module docstring); None when done, else why
    not (the IR is then unchanged).  ``shared_limit``: the bytes of shared memory a block
    may take, for :func:`shared_estimate`; ``registers``: the consumers' registers per
    thread and their threads, for :func:`register_estimate` (or why the loop cannot be
    split)."""
    shape = _examine(function, loop)
    if isinstance(shape, str):
        return shape
    if isinstance(registers, str):
        return registers
    if registers is not None:
        available, threads = registers
        needed = register_estimate(shape, threads)
        if needed > available:
            return (f"the accumulator, the scores and the carried A would take about {needed} registers per "
                    f"consumer thread, more than its {available} (more warps or smaller blocks leave room)")
    if shared_limit is not None:
        needed, added = shared_estimate(function, loop, shape, stages)
        if needed + SHARED_MARGIN > shared_limit:
            return (f"the tiles it loads outside the loop's rings take {added} more bytes of shared memory: about "
                    f"{needed} with the rings, more than the {shared_limit} a block has (fewer stages or smaller "
                    "blocks leave room)")
    location = loop.location
    iv = loop.induction_variable
    args = list(loop.region_iter_args)
    inits = list(loop.init_args)
    terminator = loop.body.block.last_op
    second = shape.second

    # The prologue, under a guard (the loop may run no iteration): the kept ops of the
    # first iteration and the rescale of the initial accumulator by them.  Without an
    # iteration, the loop from lo + step runs none either, and the epilogue's guard hands
    # back the initial values; the prologue's own are then placeholders.
    before = Builder.before(loop, location)
    guard = before.create(arith.CmpIOp, loop.lower, loop.upper, predicate="slt").result
    a_type = second.a.type
    prologue = before.insert(scf.IfOp.create(guard, [a.type for a in args] + [a_type], location=location))
    then = Builder.at_end(prologue.then_region.block, location)
    mapping: dict = {iv: loop.lower, **dict(zip(args, inits))}
    for op in shape.kept:
        then.insert(op.clone(mapping))
    rescaled = _clone_rescale(then, shape.rescale, args[shape.index], inits[shape.index], mapping, second.acc)
    then.create(scf.YieldOp, [rescaled if i == shape.index else mapping.get(v, v)
                              for i, v in enumerate(terminator.operands)] + [mapping.get(second.a, second.a)])
    otherwise = Builder.at_end(prologue.else_region.block, location)
    placeholder = arith.materialize_constant(otherwise, 0.0, a_type, location).result
    otherwise.create(scf.YieldOp, inits + [placeholder])

    # The loop from the second iteration on: the carried accumulator is the rescaled one,
    # and the second dot's A of the previous iteration is carried too.  It stays at the
    # kernel's top level (warp-specialize splits only such loops).
    start = before.create(arith.AddIOp, loop.lower, loop.step).result
    rotated = before.insert(scf.ForOp.create(start, loop.upper, loop.step, list(prologue.results),
                                             location=location, iv_name=iv.name_hint))
    for name, value in loop.attributes.items():
        rotated.set_attr(name, value)
    block = rotated.body.block
    new_iv, new_args = block.arguments[0], list(block.arguments[1:])
    inner = Builder.at_end(block, location)
    mapping = {iv: new_iv, **dict(zip(args, new_args[:len(args)]))}
    previous_a, accumulated = new_args[-1], new_args[shape.index]
    for op in shape.kept:
        inner.insert(op.clone(mapping))
        if op is shape.first:
            back = inner.create(arith.SubIOp, new_iv, loop.step).result
            b = _clone_slice(inner, shape.b_slice, iv, back, second.b)
            dot = inner.insert(second.clone({second.a: previous_a, second.b: b, second.acc: accumulated}))
    rescaled = _clone_rescale(inner, shape.rescale, args[shape.index], dot.result, mapping, second.acc)
    yielded = [rescaled if i == shape.index else mapping.get(v, v) for i, v in enumerate(terminator.operands)]
    inner.create(scf.YieldOp, yielded + [mapping.get(second.a, second.a)], location=terminator.location)

    # The epilogue: the last iteration's second dot, its B loaded at the last index
    # (lo + (hi - lo - 1) // step * step), under the same guard.
    results = list(rotated.results)
    epilogue = before.insert(scf.IfOp.create(guard, [r.type for r in loop.results], location=location))
    then = Builder.at_end(epilogue.then_region.block, location)
    span = then.create(arith.SubIOp, loop.upper, loop.lower).result
    one = arith.materialize_constant(then, 1, loop.lower.type, location).result
    span = then.create(arith.SubIOp, span, one).result
    last = then.create(arith.DivSIOp, span, loop.step).result
    last = then.create(arith.MulIOp, last, loop.step).result
    last = then.create(arith.AddIOp, loop.lower, last).result
    b = _clone_slice(then, shape.b_slice, iv, last, second.b)
    final = then.insert(second.clone({second.a: results[-1], second.b: b, second.acc: results[shape.index]}))
    then.create(scf.YieldOp, [final.result if i == shape.index else r for i, r in enumerate(results[:-1])])
    Builder.at_end(epilogue.else_region.block, location).create(scf.YieldOp, inits)
    branch = epilogue

    for old, new in zip(loop.results, branch.results):
        old.replace_all_uses_with(new)
    loop.erase()
    return None


def _clone_slice(builder: Builder, ops: list, iv: Any, index: Any, value: Any) -> Any:
    """``value`` computed again by ``ops`` with ``index`` for the loop's index."""
    mapping = {iv: index}
    for op in ops:
        builder.insert(op.clone(mapping))
    return mapping.get(value, value)


def _clone_rescale(builder: Builder, ops: list, carried: Any, value: Any, mapping: dict, acc: Any) -> Any:
    """The second dot's accumulator computed by ``ops`` from ``value`` in place of the
    carried one (the other operands through ``mapping``)."""
    mapping[carried] = value
    for op in ops:
        builder.insert(op.clone(mapping))
    return mapping.get(acc, acc)


__all__ = ["OVERLAP", "OverlapDots", "overlap_loop", "wants_overlap"]
