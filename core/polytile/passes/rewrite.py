"""Pattern rewriting: a :class:`Rewriter`, the :class:`RewritePattern` protocol and a
greedy driver that folds, applies patterns and erases dead ops until nothing changes.

A pattern names the ops it applies to; the driver dispatches through a dict keyed by op
name, so adding patterns never grows an if-chain::

    class MulByTwo(RewritePattern):
        op_names = ("arith.muli",)

        def match_and_rewrite(self, op, rewriter):
            if constant_value(op.rhs) != 2:
                return False
            rewriter.replace_op(op, [rewriter.create(AddIOp, op.lhs, op.lhs).result])
            return True

    apply_patterns_greedily(func, [MulByTwo()])

Op classes may declare ``canonicalization_patterns`` (a tuple of pattern instances); the
driver collects them from every registered op, plus the patterns it is given.

Every change goes through the rewriter, which tells its listener (the driver) what
changed, so the driver revisits exactly the ops a change may have enabled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from typing import Any, Hashable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from ..errors import VerificationError
from ..ir.attributes import DialectAttribute
from ..ir.builder import Builder, InsertionPoint
from ..ir.opdef import ConstantLike, IsolatedFromAbove, Pure, ReadsMemory, RecursivelyPure, Terminator
from ..ir.operation import Block, Operation
from ..ir.registry import IR_REGISTRY
from ..ir.types import FloatType, IntType, Type, element_type
from ..ir.values import Value
from ..ir.verifier import verify_op_definition

__all__ = [
    "PatternSet", "RewriteListener", "RewritePattern", "RewritePatternProtocol", "Rewriter", "apply_patterns_greedily",
    "attribute_key", "attributes_key",
    "collect_patterns", "constant_key", "constant_value", "is_side_effect_free", "is_trivially_dead",
]


# --------------------------------------------------------------------------------------
# Facts about ops shared by the driver, DCE and CSE


def is_side_effect_free(op: Operation) -> bool:
    """Whether removing ``op`` (when its results are unused) cannot change behaviour.

    Reads count as free: an unused load may go.  A ``volatile = true`` read does not,
    since the point of volatile is that the access itself is observable.  An op with
    regions (``RecursivelyPure`` ones such as ``scf.for`` and ``tile.reduce``, and
    ``Pure`` ones alike) is free only when every op in its regions is: a trait on the op
    cannot vouch for the ops a kernel puts in its regions (an atomic in a combine region).
    """
    if op.has_trait(Pure) or op.has_trait(RecursivelyPure):
        return _regions_side_effect_free(op)
    if op.has_trait(ReadsMemory):
        return not op.attributes.get("volatile", False) and _regions_side_effect_free(op)
    return False


def _regions_side_effect_free(op: Operation) -> bool:
    for region in op.regions:
        for block in region.blocks:
            for inner in block:
                # A terminator only hands values to the parent op, which we are judging.
                if inner.has_trait(Terminator) and not inner.regions:
                    continue
                if not is_side_effect_free(inner):
                    return False
    return True


def is_trivially_dead(op: Operation) -> bool:
    """Unused results and no side effects: erasing it changes nothing."""
    if any(result.uses for result in op.results) or op.has_trait(Terminator):
        return False
    return is_side_effect_free(op)


def constant_value(value: Value) -> Any:
    """The Python value of ``value`` when a ConstantLike op defines it, else None."""
    op = value.defining_op
    if op is None or not op.has_trait(ConstantLike):
        return None
    return op.attributes.get("value")


def attribute_key(value: Any) -> Hashable:
    """A hashable key equal for equal attributes.

    Floats compare by their bits: 0.0 and -0.0 differ, a NaN equals a NaN with the same
    bits.  True and 1 differ (they print differently and mean different things).
    Raises TypeError for an unhashable value.
    """
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", struct.pack("<d", value))
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, tuple):
        return ("t",) + tuple(attribute_key(v) for v in value)
    if isinstance(value, DialectAttribute) and dataclasses.is_dataclass(value):
        # Dataclass equality would call 0.0 and -0.0 equal: compare field by field.
        return ("d", type(value), tuple(attribute_key(getattr(value, f.name)) for f in dataclasses.fields(value)))
    hash(value)
    return ("o", type(value), value)


def attributes_key(attributes: dict[str, Any]) -> Hashable:
    return tuple((name, attribute_key(attributes[name])) for name in sorted(attributes))


def _canonical_constant(value: Any, type_: Type) -> Any:
    """The value as it behaves in ``type_``: ``{value = 1} : f32`` equals ``1.0``, and an
    i32 may spell -1 as 4294967295 (the verifier accepts both)."""
    element = element_type(type_)
    try:
        if isinstance(element, IntType):
            if element.width == 1:
                return bool(value)
            mask = (1 << element.width) - 1
            bits = int(value) & mask
            if element.signed and bits >> (element.width - 1):
                bits -= 1 << element.width
            return bits
        if isinstance(element, FloatType):
            return float(value)
    except (TypeError, ValueError, OverflowError):
        pass
    return value


def constant_key(op: Operation) -> Hashable:
    """Constants with equal keys are interchangeable (used to deduplicate them)."""
    attributes = dict(op.attributes)
    if "value" in attributes and len(op.results) == 1:
        attributes["value"] = _canonical_constant(attributes["value"], op.results[0].type)
    return (op.name, tuple(r.type for r in op.results), attributes_key(attributes))


# --------------------------------------------------------------------------------------
# The rewriter


class RewriteListener:
    """What a rewriter reports.  The greedy driver implements it; the defaults ignore."""

    def notify_op_inserted(self, op: Operation) -> None:
        pass

    def notify_op_modified(self, op: Operation) -> None:
        pass

    def notify_op_replaced(self, op: Operation, new_values: Sequence[Value]) -> None:
        """Called before ``op``'s uses move to ``new_values``."""

    def notify_op_erased(self, op: Operation) -> None:
        """Called before ``op`` is erased (its operands are still attached)."""

    def materialize_constant(self, value: Any, type_: Type, location: Any, block: Block | None,
                             dialect: str) -> Value | None:
        """Make (or find) a constant usable in ``block``; None: the rewriter makes one in place."""
        return None


class Rewriter:
    """Changes the IR and tells its listener.  Patterns make every change through it.

    New ops go before the current op (the driver sets the insertion point before each
    op it visits), located where that op is.
    """

    def __init__(self, listener: RewriteListener | None = None):
        self.listener = listener or RewriteListener()
        self.builder = Builder()
        self.changed = False

    # -- where new ops go -------------------------------------------------------------
    def set_insertion_point_before(self, op: Operation) -> None:
        self.builder.insertion_point = InsertionPoint.before(op)
        self.builder.location = op.location

    def set_insertion_point_after(self, op: Operation) -> None:
        self.builder.insertion_point = InsertionPoint.after(op)
        self.builder.location = op.location

    def set_insertion_point_at_end(self, block: Block) -> None:
        self.builder.insertion_point = InsertionPoint.at_end(block)

    def set_insertion_point_at_start(self, block: Block) -> None:
        self.builder.insertion_point = InsertionPoint.at_start(block)

    @contextlib.contextmanager
    def insertion_point_before(self, op: Operation) -> Iterator["Rewriter"]:
        saved = (self.builder.insertion_point, self.builder.location)
        self.set_insertion_point_before(op)
        try:
            yield self
        finally:
            self.builder.insertion_point, self.builder.location = saved

    # -- making ops -------------------------------------------------------------------
    def create(self, op_class: type, *args: Any, **kwargs: Any) -> Operation:
        """``op_class.build(*args, **kwargs)`` inserted at the insertion point."""
        op = self.builder.create(op_class, *args, **kwargs)
        self._inserted(op)
        return op

    def insert(self, op: Operation) -> Operation:
        self.builder.insert(op)
        self._inserted(op)
        return op

    def _inserted(self, op: Operation) -> None:
        self.changed = True
        self.listener.notify_op_inserted(op)

    def constant(self, value: Any, type_: Type, location: Any = None, dialect: str = "arith") -> Value | None:
        """A constant of ``type_`` holding ``value``; None if no dialect can make one.

        Under the greedy driver the constant goes to the start of the function and equal
        constants are shared; otherwise it is made at the insertion point.
        """
        location = self.builder.location if location is None else location
        block = self.builder.insertion_point.block if self.builder.insertion_point else None
        found = self.listener.materialize_constant(value, type_, location, block, dialect)
        if found is not None:
            self.changed = True
            return found
        op = materialize_constant_op(self.builder, value, type_, location, dialect)
        if op is None:
            return None
        self._inserted(op)
        return op.results[0]

    # -- changing ops -----------------------------------------------------------------
    def replace_op(self, op: Operation, new_values: Sequence[Value]) -> None:
        """Replace every use of ``op``'s results with ``new_values``, then erase ``op``."""
        new_values = list(new_values)
        if len(new_values) != len(op.results):
            raise ValueError(f"replacing {len(op.results)} results of '{op.name}' with {len(new_values)} values")
        self.changed = True
        self.listener.notify_op_replaced(op, new_values)
        for old, new in zip(op.results, new_values):
            _inherit_name(old, new)
        op.replace_all_uses_with(new_values)
        self.erase_op(op)

    def replace_all_uses_with(self, old: Value, new: Value) -> None:
        if old is new:
            return
        users = list(old.users())
        old.replace_all_uses_with(new)
        self.changed = True
        for user in users:
            self.listener.notify_op_modified(user)

    def erase_op(self, op: Operation) -> None:
        """Erase ``op`` (and everything nested in it); its results must be unused."""
        for result in op.results:
            if result.uses:
                users = ", ".join(sorted({u.owner.name for u in result.uses}))
                raise ValueError(f"cannot erase '{op.name}': its result is still used by {users}")
        self.changed = True
        self.listener.notify_op_erased(op)
        op.erase()

    @contextlib.contextmanager
    def modify_op_in_place(self, op: Operation) -> Iterator[Operation]:
        """``with rewriter.modify_op_in_place(op): op.set_operands(...)``."""
        yield op
        self.changed = True
        self.listener.notify_op_modified(op)

    def set_operand(self, op: Operation, index: int, value: Value) -> None:
        with self.modify_op_in_place(op):
            op.set_operand(index, value)

    def move_op_before(self, op: Operation, anchor: Operation) -> None:
        op.move_before(anchor)
        self.changed = True
        self.listener.notify_op_modified(op)

    def inline_block_before(self, block: Block, anchor: Operation, arg_values: Sequence[Value] = (),
                            *, keep_terminator: bool = False) -> None:
        """Move ``block``'s ops before ``anchor``, its arguments replaced by ``arg_values``.

        The terminator stays behind unless ``keep_terminator``: the caller usually reads
        its operands and then erases the op that owned the block.
        """
        if len(arg_values) != len(block.arguments):
            raise ValueError(f"inlining a block of {len(block.arguments)} arguments with {len(arg_values)} values")
        for arg, value in zip(block.arguments, arg_values):
            self.replace_all_uses_with(arg, value)
        for op in list(block):
            if op is block.last_op and op.has_trait(Terminator) and not keep_terminator:
                break
            op.move_before(anchor)
            self.changed = True
            self.listener.notify_op_inserted(op)


def _inherit_name(old: Value, new: Value) -> None:
    """A value made to replace a named one takes its name, so the printed IR still reads
    like the kernel.  Not constants: they are shared, and one name would mislead."""
    if new.name_hint is None and old.name_hint is not None:
        defining = new.defining_op
        if defining is not None and not defining.has_trait(ConstantLike):
            new.name_hint = old.name_hint


def materialize_constant_op(builder: Builder, value: Any, type_: Type, location: Any,
                            dialect: str) -> Operation | None:
    """A constant op made by ``dialect``'s materializer (arith's when it has none),
    at the builder's insertion point; None when it cannot be made or would not verify."""
    materializer = IR_REGISTRY.constant_materializer(dialect) or IR_REGISTRY.constant_materializer("arith")
    if materializer is None:
        return None
    try:
        op = materializer(builder, value, type_, location)
    except (TypeError, ValueError, OverflowError):
        return None
    if op is None:
        return None
    try:
        verify_op_definition(op)
    except VerificationError:
        op.erase()
        return None
    return op


# --------------------------------------------------------------------------------------
# Patterns


@runtime_checkable
class RewritePatternProtocol(Protocol):
    op_names: tuple[str, ...] | None

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool: ...


class RewritePattern:
    """A local rewrite.  ``match_and_rewrite`` returns True when it changed the IR, and
    then made every change through ``rewriter``.

    ``op_names`` limits the ops it is tried on (None: every op, which is slower: prefer
    names).  Higher ``benefit`` is tried first.
    """

    op_names: tuple[str, ...] | None = None
    benefit: int = 1

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        raise NotImplementedError

    @property
    def label(self) -> str:
        return type(self).__name__


class PatternSet:
    """Patterns grouped by the op name they apply to, plus those for every op."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[Any]] = {}
        self.generic: list[Any] = []
        self._cache: dict[str, tuple[Any, ...]] = {}

    def add(self, pattern: Any, op_name: str | None = None) -> None:
        """Add ``pattern`` for ``op_name``, or for its own ``op_names`` (all ops if None)."""
        self._cache.clear()
        names = (op_name,) if op_name is not None else getattr(pattern, "op_names", None)
        if names is None:
            if not any(p is pattern for p in self.generic):
                self.generic.append(pattern)
            return
        for name in names:
            bucket = self.by_name.setdefault(name, [])
            if not any(p is pattern for p in bucket):
                bucket.append(pattern)

    def for_op(self, name: str) -> tuple[Any, ...]:
        found = self._cache.get(name)
        if found is None:
            merged = list(self.by_name.get(name, ())) + self.generic
            # A stable sort: equal benefits keep registration order, so results are deterministic.
            merged.sort(key=lambda p: -getattr(p, "benefit", 1))
            found = self._cache[name] = tuple(merged)
        return found

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_name.values()) + len(self.generic)


def collect_patterns(extra: Iterable[Any] = (), *, registered: bool = True) -> PatternSet:
    """The ``canonicalization_patterns`` of every registered op (when ``registered``),
    then ``extra``."""
    patterns = PatternSet()
    if registered:
        for cls in IR_REGISTRY.ops:
            for pattern in getattr(cls, "canonicalization_patterns", None) or ():
                names = getattr(pattern, "op_names", None)
                # An inherited tuple may hold patterns meant for the base op only.
                if names is None or cls.name in names:
                    patterns.add(pattern, cls.name)
    for pattern in extra:
        patterns.add(pattern)
    return patterns


# --------------------------------------------------------------------------------------
# The greedy driver


def _constant_scope_block(block: Block | None) -> Block | None:
    """The entry block of the closest isolated-from-above op around ``block``: constants
    placed there dominate every use in ``block``."""
    while block is not None:
        owner = block.parent_op
        if owner is None:
            return block
        if owner.has_trait(IsolatedFromAbove) and owner.regions and owner.regions[0].blocks:
            return owner.regions[0].blocks[0]
        block = owner.parent
    return None


class _ConstantTable:
    """The constants at the start of each function's entry block, one per (type, value).

    Keeping them together and shared makes the output deterministic and deduplicated,
    whatever order folding made them in.
    """

    def __init__(self) -> None:
        self.by_block: dict[Block, dict[Hashable, Operation]] = {}
        self.owned: set[Operation] = set()
        self.last: dict[Block, Operation | None] = {}

    def forget(self, op: Operation) -> None:
        self.owned.discard(op)

    def _anchor(self, block: Block) -> Operation | None:
        """The op before which the next constant goes: after the run of owned constants."""
        last = self.last.get(block)
        if last is None or last not in self.owned or last.parent is not block:
            last = None
            op = block.first_op
            while op is not None and op in self.owned:
                last, op = op, op.next_op
            self.last[block] = last
        return block.first_op if last is None else last.next_op

    def _lookup(self, block: Block, key: Hashable) -> Operation | None:
        found = self.by_block.setdefault(block, {}).get(key)
        return found if found is not None and found in self.owned else None

    def _own(self, block: Block, key: Hashable, op: Operation) -> None:
        self.by_block[block][key] = op
        self.owned.add(op)
        self.last[block] = op

    def adopt(self, op: Operation) -> tuple[Operation | None, bool]:
        """Take an existing constant.  Returns (an equal owned constant to use instead,
        or None; whether ``op`` moved)."""
        if op in self.owned:
            return None, False
        block = _constant_scope_block(op.parent)
        if block is None:
            return None, False
        try:
            key = constant_key(op)
        except TypeError:
            return None, False
        existing = self._lookup(block, key)
        if existing is not None:
            return existing, False
        anchor = self._anchor(block)
        moved = anchor is not op
        if moved:
            op.detach()
            block.insert_before(op, anchor)
        self._own(block, key, op)
        return None, moved

    def materialize(self, value: Any, type_: Type, location: Any, near: Block | None,
                    dialect: str) -> tuple[Value | None, Operation | None]:
        """(the constant's value, the op if a new one was made)."""
        block = _constant_scope_block(near)
        if block is None:
            return None, None
        builder = Builder(InsertionPoint(block, self._anchor(block)), location)
        op = materialize_constant_op(builder, value, type_, location, dialect)
        if op is None:
            return None, None
        key = constant_key(op)
        existing = self._lookup(block, key)
        if existing is not None:
            op.erase()
            return existing.results[0], None
        self._own(block, key, op)
        return op.results[0], op


#: Visits allowed per op in one sweep before the driver assumes patterns are cycling.
_REWRITES_PER_OP = 64


class _GreedyDriver(RewriteListener):
    def __init__(self, root: Operation, patterns: PatternSet, fold: bool, max_iterations: int,
                 context: Any, prefix: str):
        self.root = root
        self.patterns = patterns
        self.fold = fold
        self.max_iterations = max(1, max_iterations)
        self.context = context
        self.prefix = prefix
        self.rewriter = Rewriter(self)
        self.constants = _ConstantTable()
        self.worklist: list[Operation] = []
        self.queued: set[Operation] = set()
        self.erased: set[Operation] = set()

    def count(self, what: str, amount: int = 1) -> None:
        if self.context is not None and amount:
            self.context.count(f"{self.prefix}.{what}", amount)

    # -- the worklist -----------------------------------------------------------------
    def add(self, op: Operation | None) -> None:
        if op is None or op is self.root or op in self.queued or op in self.erased:
            return
        if not self.root.is_ancestor_of(op):
            return  # outside the root: not ours to touch
        self.queued.add(op)
        self.worklist.append(op)

    def run(self) -> bool:
        changed_any = False
        for iteration in range(self.max_iterations):
            # Visit in program order (the list is a stack), so constants are met, and
            # hoisted, in the order they appear.
            ops = [op for op in self.root.walk() if op is not self.root]
            self.worklist = ops[::-1]
            self.queued = set(ops)
            self.rewriter.changed = False
            # Patterns that undo each other would otherwise spin forever inside a sweep.
            budget = _REWRITES_PER_OP * (len(ops) + 1)
            while self.worklist:
                op = self.worklist.pop()
                self.queued.discard(op)
                if op in self.erased:
                    continue
                self.process(op)
                budget -= 1
                if budget <= 0:
                    self.count("sweep-limit")
                    self.worklist.clear()
                    self.queued.clear()
            self.count("iterations")
            if not self.rewriter.changed:
                return changed_any
            changed_any = True
        # Still changing after the last sweep: a fixed point was not reached.  The IR is
        # valid all the same; the counter lets a pipeline author notice.
        self.count("not-converged")
        return changed_any

    def process(self, op: Operation) -> None:
        if is_trivially_dead(op):
            self.rewriter.erase_op(op)
            self.count("erased-dead")
            return
        if self.fold:
            if op.has_trait(ConstantLike):
                self.process_constant(op)
                return
            if self.try_fold(op):
                self.count("folded")
                return
        patterns = self.patterns.for_op(op.name)
        if not patterns:
            return
        self.rewriter.set_insertion_point_before(op)
        for pattern in patterns:
            if pattern.match_and_rewrite(op, self.rewriter):
                self.count("rewritten")
                self.add(op)  # a no-op when the pattern erased it
                return

    def process_constant(self, op: Operation) -> None:
        existing, moved = self.constants.adopt(op)
        if existing is not None:
            self.rewriter.replace_op(op, list(existing.results))
            self.count("constants-merged")
        elif moved:
            self.rewriter.changed = True

    def try_fold(self, op: Operation) -> bool:
        fold = getattr(op, "fold", None)
        if fold is None or not op.results:
            return False
        try:
            folded = fold([constant_value(v) for v in op.operands])
        except (TypeError, ValueError, ArithmeticError):
            # A fold that cannot handle its constants (NumPy refuses some i1 arithmetic)
            # must not stop compilation: the op simply stays, to be computed at run time.
            self.count("fold-failures")
            return False
        if not folded or len(folded) != len(op.results) or any(r is None for r in folded):
            return False
        new_values: list[Value] = []
        made: list[Operation] = []
        for result, item in zip(op.results, folded):
            if isinstance(item, Value):
                if item is result:
                    return False  # folded to itself: nothing to do
                new_values.append(item)
                continue
            value, new_op = self.constants.materialize(item, result.type, op.location, op.parent,
                                                       op.definition.dialect)
            if value is None:
                for unused in made:
                    if not unused.results[0].uses:
                        self.constants.forget(unused)
                        unused.erase()
                return False
            if new_op is not None:
                made.append(new_op)
            new_values.append(value)
        self.rewriter.replace_op(op, new_values)
        return True

    # -- listener ---------------------------------------------------------------------
    def notify_op_inserted(self, op: Operation) -> None:
        for inner in op.walk():
            self.add(inner)

    def notify_op_modified(self, op: Operation) -> None:
        self.add(op)

    def notify_op_replaced(self, op: Operation, new_values: Sequence[Value]) -> None:
        for result in op.results:
            for user in result.users():
                self.add(user)

    def notify_op_erased(self, op: Operation) -> None:
        for inner in op.walk():
            self.erased.add(inner)
            self.constants.forget(inner)
        # Operands may now be dead; visit their definitions again.
        for inner in op.walk():
            for value in inner.operands:
                defining = value.defining_op
                if defining is not None and defining not in self.erased:
                    self.add(defining)

    def materialize_constant(self, value: Any, type_: Type, location: Any, block: Block | None,
                             dialect: str) -> Value | None:
        found, _ = self.constants.materialize(value, type_, location, block, dialect)
        return found


def apply_patterns_greedily(root: Operation, patterns: Iterable[Any] | PatternSet = (), *, fold: bool = True,
                            max_iterations: int = 10, registered: bool = True, context: Any = None,
                            statistics_prefix: str = "canonicalize") -> bool:
    """Rewrite everything nested in ``root`` until nothing changes; True if anything did.

    Each sweep visits every op: erases it if trivially dead, folds it (``fold``) through
    its ``fold`` method and its dialect's constant materializer, or applies the first
    matching pattern.  Ops a change may affect are revisited at once; sweeps repeat
    until one changes nothing, at most ``max_iterations`` times (``<prefix>.not-converged``
    counts the runs that stopped there; that is not an error).

    ``patterns`` are used with the registered ops' ``canonicalization_patterns`` (unless
    ``registered`` is False).  Constants made by folding go to the start of the
    enclosing function's entry block, one per type and value.  ``context`` (a
    PassContext) receives counters named ``<statistics_prefix>.<what>``.
    """
    if isinstance(patterns, PatternSet):
        pattern_set = patterns
        if registered:
            pattern_set = collect_patterns()
            for name, bucket in patterns.by_name.items():
                for p in bucket:
                    pattern_set.add(p, name)
            for p in patterns.generic:
                pattern_set.add(p)
    else:
        pattern_set = collect_patterns(patterns, registered=registered)
    return _GreedyDriver(root, pattern_set, fold, max_iterations, context, statistics_prefix).run()
