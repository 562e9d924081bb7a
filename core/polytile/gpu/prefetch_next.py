"""The next outer iteration's first loads during this one's epilogue (``flatten=True``).

A persistent kernel's outer loop walks output tiles (``for tile in pl.range(pid,
num_tiles, NUM_PROGRAMS, flatten=True)``): its body computes the tile's offsets, runs the
K loop and stores the tile (the epilogue).  Pipelined on its own, each K loop fills its
ring first (the prologue: the copies of its first ``num_stages - 1`` iterations) and
drains it at the end, so the next tile's first loads would wait behind this tile's
epilogue.  Here the prologue of the next tile moves to the end of this one, right after
the drain and before the epilogue: its copies are in flight while the epilogue converts
and stores the accumulator, and the next K loop starts on slots already filling.  The
first tile's prologue goes before the outer loop.  Triton gets this overlap by fusing
the two loops into one (its ``flatten``); the copies issued are the same.

``pipeline-loops`` calls :func:`prefetch_next_iteration` after pipelining a K loop that
sits directly in the body of an ``scf.for`` with the ``pt.flatten`` hint.  The move is
made only where it keeps the program's meaning:

- what the prologue reads from the outer body (the tile's offsets, its pointers) is pure
  arithmetic on the outer induction variable and values from before the loop, so it can
  be computed again for the next tile (not from values the outer loop carries);
- nothing in the outer body writes memory the copies read: every store writes through a
  pointer argument of the kernel other than the ones the copies read from (distinct
  pointer arguments are taken not to overlap, as Triton takes them: an output that is
  also an input, in place, gives other results with ``flatten=True``); and it has no
  atomics (an acquire could make another program's bytes visible only after the copies
  read them), no volatile loads, no calls and no other ops with side effects (plain
  loads, a bias say, are fine).  A plugin's ops that read or write global memory
  through something other than a ``ptr`` operand (a tensor map) say so with
  :func:`register_global_access`, and ops that carry a pointer on (a map built from a
  base pointer) with :func:`register_pointer_path`; a copy engine whose copies read
  through a value neither traces is not traced, so its loops are left alone.

Otherwise the loop stays as ``pipeline-loops`` left it (correct, without the overlap).
The next tile's copies are issued only where that tile exists.  Its address values
are computed twice, for the copies here and at the start of its own iteration for its K
loop, rather than carried through the epilogue: tiles of pointers held across the store
would take registers the accumulator needs.  What does not depend on the tile (the
prologue's K masks, say) is taken from this iteration's prologue, so it stays live
through the K loop and the epilogue; and the rings stay allocated for the whole outer
loop, so the epilogue's conversion scratch no longer shares their bytes.
"""

from __future__ import annotations

from typing import Any

from ..dialects import arith, func, scf, tile
from ..dialects.gpu import (AsyncWaitOp, ConvertLayoutOp, IssuesIntoRing, LocalAllocOp, MBarrierInvalOp,
                            MBarrierWaitOp)
from ..ir.builder import Builder
from ..ir.opdef import Pure, WritesMemory
from ..plugins.tables import OwnedTable

#: Loop hint (``pl.range(..., flatten=True)``) that asks for it.
FLATTEN_HINT = "pt.flatten"

#: Ops that pass a pointer on from their first operand: a pointer's root argument is the
#: root of that operand.
_POINTER_PATH = (tile.AddPtrOp, tile.SplatOp, tile.BroadcastOp, tile.ExpandDimsOp, tile.ReshapeOp, ConvertLayoutOp)
#: Ops of the outer body, outside the K loop, that write memory through their ``ptr``.
_WRITES = (tile.StoreOp,)
#: Ops that order this program's memory against other programs' (an acquire can make
#: bytes another program wrote visible: copies issued before it could read stale ones).
_SYNCHRONIZES = (tile.AtomicRMWOp, tile.AtomicCASOp)
#: Other side effects the outer body may have: the K loop's drain.
_RING_ENDS = (MBarrierWaitOp, MBarrierInvalOp, AsyncWaitOp)


#: Op class -> ``fn(op) -> [(value, "r" | "w"), ...]``: the global memory an op reads or
#: writes through values other than a ``ptr`` operand, each named by the kernel argument
#: the value comes from (a plugin's bulk copy through a tensor map, say).
GLOBAL_ACCESSES: OwnedTable[Any] = OwnedTable("global memory access")
#: Op class -> the name of the operand whose root the op's result has (a plugin's op that
#: wraps a pointer: a tensor map built from a base pointer).
POINTER_PATHS: OwnedTable[str] = OwnedTable("pointer path")


def register_global_access(*op_classes: type) -> Any:
    """Decorator: ``@register_global_access(MyOp)`` says which global memory an op reads
    and writes, as ``[(value, "r" | "w"), ...]``, the memory named by the kernel argument
    ``value`` is computed from (through ``tile.addptr`` and the like, and the ops of
    :func:`register_pointer_path`).  An op of the outer loop's body that writes where the
    next tile's copies read, or whose effects are not known, keeps the prologue in its
    tile."""
    def register(fn: Any) -> Any:
        for cls in op_classes:
            GLOBAL_ACCESSES.add(cls, fn)
        return fn
    return register


def register_pointer_path(op_class: type, operand: str) -> None:
    """Say that ``op_class``'s result points into the memory its operand ``operand`` does
    (a tensor map made from a base pointer, say)."""
    POINTER_PATHS.add(op_class, operand)


def wants_prefetch(loop: Any) -> Any:
    """The outer ``scf.for`` with the flatten hint whose body holds ``loop``, or None."""
    outer = loop.parent_op
    if isinstance(outer, scf.ForOp) and outer.attributes.get(FLATTEN_HINT) and loop.parent is outer.body.block:
        return outer
    return None


def prefetch_next_iteration(outer: Any, inner: Any, setup: list, drain: list) -> bool:
    """Move the prologue ``setup`` (the ops pipeline-loops put before the K loop
    ``inner``, in order) of ``outer``'s next iteration after ``drain`` (the ops it put
    after the loop), and the first iteration's before ``outer``.  False (nothing
    changed) where that would change what the program computes (module docstring)."""
    body = outer.body.block
    iv = outer.induction_variable
    allocs = [op for op in setup if isinstance(op, LocalAllocOp)]
    work = [op for op in setup if not isinstance(op, LocalAllocOp)]
    needed = _inputs(work, body, set(setup))
    if needed is None or not _writes_elsewhere(outer, inner, set(setup), _roots_read(work)):
        return False
    recomputed = needed + work
    if any(not op.has_trait(Pure) and any(r.has_uses for r in op.results) for op in work):
        return False  # a side effect whose result the K loop reads: it cannot go into the guard
    for op in allocs:  # one ring for every tile: allocated once, before the outer loop
        op.move_before(outer)
    before = Builder.before(outer, outer.location)
    exists = before.create(arith.CmpIOp, outer.lower, outer.upper, predicate="slt").result
    _emit(before, recomputed, {iv: outer.lower}, exists, None, outer.location)
    at = Builder.after(drain[-1] if drain else inner, outer.location)
    next_iv = at.create(arith.BINARY_OPS["addi"], iv, outer.step).result
    exists_next = at.create(arith.CmpIOp, next_iv, outer.upper, predicate="slt").result
    _emit(at, recomputed, {iv: next_iv}, exists_next, _varying(recomputed, iv), outer.location)
    # The body's own prologue keeps its values (the K loop starts from the pointers it
    # computes: recomputing them costs less than carrying tiles of pointers through the
    # epilogue in registers); its effects are the ones issued above.
    for op in reversed(work):
        if not op.has_trait(Pure) or not any(r.has_uses for r in op.results):
            op.erase()
    return True


def _inputs(work: list, body: Any, setup: set) -> list | None:
    """The ops of ``body`` (outside ``setup``) that ``work`` reads, transitively, in
    body order; None where one cannot be computed again for another iteration."""
    found: set = set()
    pending = [v for op in work for v in _operands(op)]
    carried = set(body.arguments[1:])
    while pending:
        value = pending.pop()
        if value in carried:
            return None  # a value the outer loop carries: the next iteration's is not known yet
        op = value.defining_op
        if op is None or op in found or op in setup:
            continue
        if op.parent is not body:
            if _inside(op, body):
                return None
            continue  # defined before the outer loop
        if not op.has_trait(Pure) or op.regions:
            return None
        found.add(op)
        pending.extend(op.operands)
    return [op for op in body if op in found]


def _operands(op: Any) -> list:
    return [v for nested in op.walk() for v in nested.operands]


def _inside(op: Any, block: Any) -> bool:
    return op.parent is block or any(a.parent is block for a in op.ancestors())


def _varying(ops: list, iv: Any) -> set:
    """The ops of ``ops`` whose results depend on ``iv`` (or that have side effects)."""
    varying: set = set()
    for op in ops:
        values = _operands(op)
        if not op.has_trait(Pure) or any(v is iv or (v.defining_op in varying) for v in values):
            varying.add(op)
    return varying


def _emit(builder: Builder, ops: list, mapping: dict, guard: Any, varying: set | None, location: Any) -> None:
    """``ops`` again, with ``mapping``, inside ``scf.if guard`` at ``builder``: what they
    compute is needed only there, by the copies.  With ``varying``, only those ops are
    computed again; the others' values are used as they are."""
    used: set = set()
    for op in reversed(ops):  # what the effects need, and the effects
        if not op.has_trait(Pure) or any(r.has_uses and any(u.owner in used for u in r.uses) for r in op.results):
            used.add(op)
    guarded = builder.insert(scf.IfOp.create(guard, location=location))
    inside = Builder.at_end(guarded.then_region.block, location)
    for op in ops:
        if op in used and (varying is None or op in varying):
            inside.insert(op.clone(mapping))
    inside.create(scf.YieldOp)
    Builder.at_end(guarded.else_region.block, location).create(scf.YieldOp)


def _roots_read(work: list) -> set | None:
    """The kernel arguments the copies of ``work`` read through; None: one is unknown (a
    copy engine whose copies read through something other than a ``ptr`` operand, and
    that did not say what with :func:`register_global_access`)."""
    roots: set = set()
    for op in work:
        if not op.has_trait(IssuesIntoRing) or getattr(op, "ring", None) is None:
            continue
        if getattr(op, "ptr", None) is not None:
            sources = [op.ptr]
        else:
            accesses = GLOBAL_ACCESSES.get(type(op))
            sources = [value for value, kind in accesses(op) if kind == "r"] if accesses is not None else []
        found = [_root(value) for value in sources]
        if not found or None in found:
            return None
        roots.update(found)
    return roots


def root_argument(value: Any) -> Any:
    """The kernel argument a pointer (tile) value is computed from, or None: through
    ``tile.addptr`` and the like, selects of one argument, and the ops of
    :func:`register_pointer_path`.  Distinct arguments are taken not to overlap."""
    return _root(value)


def _root(value: Any) -> Any:
    """The kernel argument a pointer (tile) value is computed from, or None."""
    for _ in range(64):
        op = value.defining_op
        if op is None:
            region = getattr(getattr(value, "block", None), "parent", None)
            return value if region is not None and isinstance(region.parent, func.FuncOp) else None
        if isinstance(op, arith.SelectOp):
            sides = {_root(op.operands[1]), _root(op.operands[2])}
            return sides.pop() if len(sides) == 1 else None
        if isinstance(op, _POINTER_PATH):
            value = op.operands[0]
            continue
        operand = POINTER_PATHS.get(type(op))
        if operand is None:
            return None
        value = getattr(op, operand)
    return None


def overtaken_write(copies: list, ops: list) -> str | None:
    """Why the ring ``copies`` may not be issued before ``ops`` (and the ops in their
    regions) have run, in words, or None: a copy issued early (the next tile's, by a warp
    group of its own) must not read where one of them writes, so each write goes through
    a kernel argument the copies do not read (distinct arguments are taken not to
    overlap), and none orders memory against other programs (atomics), calls unknown
    code or spins on a volatile load.  Writes to shared memory do not matter."""
    read = _roots_read(copies)
    if read is None:
        return "the copies read through values whose kernel argument is not known"

    def clash(op: Any, value: Any) -> str | None:
        root = _root(value)
        if root is None:
            return f"'{op.name}' writes through a pointer whose kernel argument is not known"
        if root in read:
            return (f"'{op.name}' writes through '{root.name_hint or 'an argument'}', which the copies read: the "
                    "next tile's copies could read it before the write")
        return None

    for op in ops:
        for nested in op.walk():
            accesses = GLOBAL_ACCESSES.get(type(nested))
            why = None
            if accesses is not None:
                why = next((w for value, kind in accesses(nested) if kind == "w" for w in [clash(nested, value)]
                            if w is not None), None)
            elif isinstance(nested, _WRITES):
                why = clash(nested, nested.ptr)
            elif isinstance(nested, (func.CallOp, *_SYNCHRONIZES)):
                why = f"'{nested.name}' may order or write memory the copies read"
            elif isinstance(nested, tile.LoadOp) and nested.volatile:
                why = f"a volatile '{nested.name}' may wait for memory another program writes"
            elif nested.has_trait(WritesMemory):
                why = f"'{nested.name}' writes global memory without saying where (register_global_access)"
            if why is not None:
                return why
    return None


def _writes_elsewhere(outer: Any, inner: Any, setup: set, read: set | None) -> bool:
    """Whether every write of the outer body (outside the K loop and ``setup``) goes
    through a pointer argument the copies do not read, and nothing else has effects."""
    if read is None:
        return False
    for op in outer.body.block:
        if op is inner or op in setup:
            continue
        for nested in op.walk():
            accesses = GLOBAL_ACCESSES.get(type(nested))
            if accesses is not None:
                for value, kind in accesses(nested):
                    root = _root(value) if kind == "w" else None
                    if kind == "w" and (root is None or root in read):
                        return False
            elif isinstance(nested, _WRITES):
                root = _root(nested.ptr)
                if root is None or root in read:
                    return False
            elif isinstance(nested, (func.CallOp, *_SYNCHRONIZES)):
                return False
            elif isinstance(nested, tile.LoadOp):
                if nested.volatile:  # a spin on a flag another program sets
                    return False
            elif not (nested.has_trait(Pure) or isinstance(nested, _RING_ENDS) or nested.regions
                      or isinstance(nested, scf.YieldOp)):
                return False
    return True


__all__ = ["FLATTEN_HINT", "GLOBAL_ACCESSES", "POINTER_PATHS", "overtaken_write", "prefetch_next_iteration",
           "register_global_access", "register_pointer_path", "root_argument", "wants_prefetch"]
