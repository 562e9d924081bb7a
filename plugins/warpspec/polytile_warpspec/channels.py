"""The two sides of a split loop: the producer's loop of fills, and what the consumers
do instead of filling (release slots, retire register-operand dots, take turns).

See :mod:`.partition` for the shape of the loop these work on.
"""

from __future__ import annotations

from typing import Any

from polytile.dialects import arith, scf
from polytile.dialects.gpu import MBarrierArriveOp, MBarrierWaitOp
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.ir.opdef import Pure


def touches_tiles(op: Any) -> bool:
    """Whether ``op`` or an op in its regions reads or makes a tile."""
    return any(isinstance(v.type, t.TileType) for inner in op.walk() for v in (*inner.operands, *inner.results))


def build_producer(block: Any, found: Any, empty: Any, location: Any, mapping: dict | None = None,
                   start: tuple | None = None) -> Any:
    """The producer's loop, at the end of ``block`` (returned): it issues the fills of
    ``found.loop`` in order, each once its slot is free (the wait on ``empty`` for the
    phase of the other parity: a fresh barrier counts as released).  ``mapping``: the
    producer's own values for values the loop reads from outside it (a nested loop's
    bounds, say); ``start``: the slot and phase its first fill takes (bulk copies; by
    default slot 0 of a fresh ring), the loop's results being where the next one goes.

    Bulk copies (one thread): every fill, iteration ``i``'s being the body's fill at
    ``i - (S - 1)`` (the body issues the one ``S - 1`` ahead), into slots from 0.  Per-thread
    copies (``found.per_thread``, cp.async): the prologue's fills stay with the consumers
    (their pointers are made there); the producer issues the body's fills of the
    iterations that have one ahead, into slots from ``S - 1``, carrying the values the
    fills' addresses advance (``a_ptrs += BLOCK_K``) from where the loop starts them."""
    loop = found.loop
    stages = found.full.type.shape[0]
    b = Builder.at_end(block, location)
    # The tiles the fills start from, made by the producer's warps for their own threads.
    made: dict = dict(mapping or {})
    lower, upper, step = (made.get(v, v) for v in (loop.lower, loop.upper, loop.step))
    for op in found.producer_copies:
        b.insert(op.clone(made))
    i32 = t.i32
    zero = arith.materialize_constant(b, 0, i32).result
    one = arith.materialize_constant(b, 1, i32).result
    count = arith.materialize_constant(b, stages, i32).result
    ahead = b.create(arith.BINARY_OPS["muli"], step,
                     arith.materialize_constant(b, stages - 1, loop.induction_variable.type).result).result
    carried_index = [list(loop.region_iter_args).index(arg) for arg in found.carried]
    if found.per_thread:
        upper = b.create(arith.BINARY_OPS["subi"], upper, ahead).result
        first_slot = arith.materialize_constant(b, stages - 1, i32).result
        inits = [first_slot, zero, *(made.get(loop.init_args[i], loop.init_args[i]) for i in carried_index)]
    else:
        inits = list(start) if start is not None else [zero, zero]
    producer = b.insert(scf.ForOp.create(lower, upper, step, inits, location=location, iv_name="fill"))
    i = producer.induction_variable
    slot, phase, *carried = producer.region_iter_args
    slot.name_hint, phase.name_hint = "slot", "phase"
    inner = Builder.at_end(producer.body.block, location)
    free_phase = inner.create(arith.BINARY_OPS["xori"], phase, one).result
    inner.create(MBarrierWaitOp, empty, slot, free_phase)
    if found.per_thread:
        k = i
    else:
        k = inner.create(arith.BINARY_OPS["subi"], i, ahead).result
    inside = {**made, loop.induction_variable: k, found.write_slot: slot, **dict(zip(found.carried, carried))}
    wanted = set(found.fills) | set(found.slice)
    for op in loop.body.block:
        if op in wanted:
            inner.insert(op.clone(inside))
    bumped = inner.create(arith.BINARY_OPS["addi"], slot, one).result
    wraps = inner.create(arith.CmpIOp, bumped, count, predicate="eq").result
    next_slot = inner.create(arith.SelectOp, wraps, zero, bumped).result
    flipped = inner.create(arith.BINARY_OPS["xori"], phase, one).result
    next_phase = inner.create(arith.SelectOp, wraps, flipped, phase).result
    yielded = loop.body.block.last_op.operands
    advanced = [inside.get(yielded[index], yielded[index]) for index in carried_index]
    inner.create(scf.YieldOp, [next_slot, next_phase, *advanced])
    return producer


def drop_unused_carried(loop: Any, values: list) -> Any:
    """``loop`` without the carried ``values`` (block arguments) that only feed their
    own next value (the fills' pointers, once the fills are gone), and without the ops
    that compute it; returns the loop (a new op when something was dropped)."""
    body = loop.body.block
    terminator = body.last_op
    args = list(loop.region_iter_args)
    drop = []
    for arg in values:
        index = args.index(arg)
        chain = _only_feeding(arg, terminator.operands[index], body)
        if chain is not None and not loop.results[index].uses:
            drop.append((index, chain))
    if not drop:
        return loop
    indices = {index for index, _ in drop}
    terminator.set_operands([v for j, v in enumerate(terminator.operands) if j not in indices])
    for _, chain in drop:
        for op in reversed(chain):
            op.erase()
    for index in sorted(indices, reverse=True):
        body.erase_argument(index + 1)
    kept = [j for j in range(len(args)) if j not in indices]
    new = scf.ForOp([loop.lower, loop.upper, loop.step, *(loop.init_args[j] for j in kept)],
                    [loop.results[j].type for j in kept], dict(loop.attributes), [], loop.location,
                    None if loop.operand_segments is None else (*loop.operand_segments[:-1], len(kept)))
    new.regions = (loop.body,)
    loop.body.parent = new
    loop.regions = ()
    loop.parent.insert_before(new, loop)
    for j, fresh in zip(kept, new.results):
        loop.results[j].replace_all_uses_with(fresh)
    loop.erase()
    return new


def _only_feeding(arg: Any, yielded: Any, body: Any) -> list | None:
    """The body's ops from ``arg`` to ``yielded`` (in order) when they and ``arg`` are
    used by nothing else; None otherwise."""
    chain: list = []
    value = yielded
    while value is not arg:
        op = value.defining_op
        if op is None or op.parent is not body or not op.has_trait(Pure) or len(op.results) != 1:
            return None
        chain.append(op)
        sources = [v for v in op.operands if v is arg or (v.defining_op is not None and v.defining_op.parent is body)]
        if len(sources) != 1:
            return None
        value = sources[0]
    chain.reverse()
    members = set(chain) | {body.last_op}
    for op in chain:
        if any(use.owner not in members for r in op.results for use in r.uses):
            return None
    if any(use.owner not in members for use in arg.uses):
        return None
    return chain


def release_instead_of_fills(found: Any, empty: Any) -> bool:
    """Release each slot to the producer where the consumers are done with it; True
    where the slot of the loop's last iteration is left to release after the loop (see
    below), False where every iteration releases its own.

    Dots that read A from registers (attention's ``p @ v``) are retired in their own
    iteration: left in flight across the back edge, ptxas
    may give their A registers to the next iteration's dot and then serialize every
    wgmma of the kernel (C7514); measured on an H100, the in-iteration wait is faster in
    the specialised loop.  Where then nothing is in flight at the end of an iteration,
    each warp releases the iteration's own slot there, one iteration earlier; otherwise
    it releases the previous iteration's slot where the body issued its fill (the wait
    before it retired that iteration's dots), from the second iteration on."""
    loop = found.loop
    body = loop.body.block
    _retire_register_dots(body)
    wait = body.first_op
    previous = not _nothing_in_flight_at_end(body)
    if not previous:
        at = Builder.before(body.last_op, loop.location)
        always = arith.materialize_constant(at, True, t.i1).result
        at.create(MBarrierArriveOp, empty, wait.index, always)
    else:
        first = found.fills[0]
        at = Builder.before(first, first.location)
        later = at.create(arith.CmpIOp, loop.induction_variable, loop.lower, predicate="ne").result
        at.create(MBarrierArriveOp, empty, found.write_slot, later)
    for op in reversed(found.fills):
        op.erase()
    return previous


def take_turns(loop: Any) -> None:
    """Where the body has work between its dots (two dots or more, and an op with an
    effect between them: attention's softmax waits for the first), the consumer warp
    groups take turns issuing each run of dots (``ws.turn``): one group's dots run on
    the tensor cores while the others compute, instead of all issuing at once and then
    all computing (FlashAttention-3's ping-pong)."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR

    from .ops import TurnOp

    body = loop.body.block
    ops = list(body)
    dots = [i for i, op in enumerate(ops) if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)]
    if len(dots) < 2:
        return
    # A turn must not hold a barrier of all the consumers (the other groups wait for their
    # turn): only dots that read their operands in place or from registers (no scratch
    # for their operands) take turns, and only slot reads and scalar arithmetic join runs.
    if any(not _in_place(ops[i]) for i in dots):
        return
    runs: list = [[dots[0]]]
    for i in dots[1:]:
        between = ops[runs[-1][-1] + 1:i]
        if all(op.name.startswith("gpu.local_load") or (op.has_trait(Pure) and not touches_tiles(op))
               for op in between):
            runs[-1].append(i)
        else:
            runs.append([i])
    if len(runs) < 2:
        return
    for run in runs:
        first, last = ops[run[0]], ops[run[-1]]
        Builder.before(first, first.location).create(TurnOp, step="wait")
        Builder.after(last, last.location).create(TurnOp, step="pass")
    Builder.before(loop, loop.location).create(TurnOp, step="start")
    Builder.after(loop, loop.location).create(TurnOp, step="end")


def _in_place(dot: Any) -> bool:
    """Whether ``dot`` reads each operand in place from shared memory (a ring slot, a
    stored operand) or, for A, from registers in a dot operand layout."""
    from polytile.dialects.gpu import LocalLoadOp, LocalLoadSlotOp
    from polytile.gpu.layouts import DotOperandLayout

    def read_in_place(operand: Any) -> bool:
        return isinstance(operand.defining_op, (LocalLoadSlotOp, LocalLoadOp))

    a_in_registers = isinstance(getattr(dot.a.type, "layout", None), DotOperandLayout)
    return (a_in_registers or read_in_place(dot.a)) and read_in_place(dot.b)


def _retire_register_dots(body: Any) -> None:
    """A wait right after each asynchronous dot of ``body`` that reads A from registers,
    unless the body already retires it (a dot whose result the body reads, retired
    before the reader: FlashAttention-3's order, ``p_prev @ v_prev`` running during the
    softmax)."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR, DotWaitOp
    from polytile.gpu.async_dots import dot_buffers
    from polytile.gpu.layouts import DotOperandLayout

    def retired_in_body(dot: Any) -> bool:
        return any(isinstance(use.owner, DotWaitOp) and use.owner.parent is body for use in dot.result.uses)

    for dot in [op for op in body if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)
                and isinstance(getattr(op.a.type, "layout", None), DotOperandLayout)
                and not retired_in_body(op)]:
        retire = Builder.after(dot, dot.location).create(DotWaitOp, [dot.result], dot_buffers(dot), pending=0,
                                                         result_types=[dot.result.type])
        dot.result.replace_uses_if(retire.results[0], lambda use: use.owner is not retire)


def _nothing_in_flight_at_end(body: Any) -> bool:
    """Whether every asynchronous dot of ``body`` is retired by a later wait for all."""
    from polytile.dialects import tile
    from polytile.dialects.gpu import ASYNC_DOT_ATTR, DotWaitOp

    ops = list(body)
    issued = [i for i, op in enumerate(ops) if isinstance(op, tile.DotOp) and op.attributes.get(ASYNC_DOT_ATTR)]
    if not issued:
        return True
    return any(isinstance(op, DotWaitOp) and op.pending == 0 for op in ops[issued[-1] + 1:])


__all__ = ["build_producer", "drop_unused_carried", "release_instead_of_fills", "take_turns", "touches_tiles"]
