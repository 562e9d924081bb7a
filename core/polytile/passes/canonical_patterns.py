"""Canonicalization patterns of the core dialects (arith, scf, tile).

The dialect modules stay declarative; :func:`register_canonical_patterns` attaches these
patterns to the op classes as ``canonicalization_patterns``, where the greedy driver
finds them.  It is idempotent and keeps patterns others attached.

Float rewrites are made only when they are exact for every input, NaN, infinities and
signed zeros included: ``x * 1.0`` and ``x + (-0.0)`` are ``x``, ``x + 0.0`` is not
(``-0.0 + 0.0`` is ``+0.0``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..dialects.arith import CASTS
from ..dialects.scf import ForOp, IfOp
from ..ir import types as t
from ..ir.opdef import Commutative
from ..ir.operation import Operation, Region
from ..ir.registry import IR_REGISTRY
from ..ir.values import Value
from .rewrite import RewritePattern, Rewriter, constant_value

__all__ = ["canonical_patterns", "drop_if_results", "drop_loop_carried", "register_canonical_patterns"]


# --------------------------------------------------------------------------------------
# Reading constants


def _scalar(value: Value) -> Any:
    """The constant behind ``value`` when it is one number (or bool), else None.

    A constant of tile type with a scalar value is a splat, which is what the patterns
    below rely on; a plugin's dense constant (a tuple) is not, and is left alone.
    """
    const = constant_value(value)
    return const if isinstance(const, (bool, int, float)) else None


def _element(value: Value) -> t.Type:
    return t.element_type(value.type)


def _int_bits(value: Value) -> int | None:
    """The bits of an integer constant (as an unsigned number), or None."""
    element = _element(value)
    const = _scalar(value)
    if const is None or not isinstance(element, t.IntType) or isinstance(const, float):
        return None
    return int(const) & ((1 << element.width) - 1)


def _is_int(n: int) -> Callable[[Value], bool]:
    def check(value: Value) -> bool:
        bits = _int_bits(value)
        return bits is not None and bits == n & ((1 << _element(value).width) - 1)  # type: ignore[attr-defined]

    return check


_is_zero = _is_int(0)
_is_one = _is_int(1)
_is_all_ones = _is_int(-1)


def _float_const(value: Value) -> float | None:
    const = _scalar(value)
    if const is None or not isinstance(_element(value), t.FloatType) or isinstance(const, bool):
        return None
    return float(const)


def _is_float(expected: float) -> Callable[[Value], bool]:
    """Bit-exact: -0.0 and 0.0 are different constants here."""

    def check(value: Value) -> bool:
        const = _float_const(value)
        return (const is not None and const == expected
                and math.copysign(1.0, const) == math.copysign(1.0, expected))

    return check


def _all_ones_value(type_: t.Type) -> Any:
    element = t.element_type(type_)
    if element.width == 1:  # type: ignore[attr-defined]
        return True
    return -1 if element.signed else (1 << element.width) - 1  # type: ignore[attr-defined]


def _replace_with_constant(rewriter: Rewriter, op: Operation, value: Any) -> bool:
    made = rewriter.constant(value, op.results[0].type, op.location)
    if made is None:
        return False
    rewriter.replace_op(op, [made])
    return True


# --------------------------------------------------------------------------------------
# arith


class CommuteConstantToRight(RewritePattern):
    """``op c, x`` → ``op x, c`` for a commutative op: the other patterns and later
    passes only look for constants on the right."""

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if op.num_operands != 2:
            return False
        lhs, rhs = op.operands
        if constant_value(lhs) is None or constant_value(rhs) is not None:
            return False
        with rewriter.modify_op_in_place(op):
            op.set_operands([rhs, lhs], op.operand_segments)
        return True


class ReplaceWithLhs(RewritePattern):
    """``op x, c`` → ``x`` when ``c`` is the op's right identity (x+0, x*1, x|0, ...)."""

    def __init__(self, op_name: str, is_identity: Callable[[Value], bool]):
        self.op_names = (op_name,)
        self.is_identity = is_identity

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        lhs, rhs = op.operands
        if lhs.type != op.results[0].type or not self.is_identity(rhs):
            return False
        rewriter.replace_op(op, [lhs])
        return True


class ReplaceWithConstant(RewritePattern):
    """``op x, c`` → a constant when ``c`` decides the result (x*0, x&0, x|-1, x%1)."""

    def __init__(self, op_name: str, matches: Callable[[Value], bool], result: Callable[[t.Type], Any]):
        self.op_names = (op_name,)
        self.matches = matches
        self.result = result

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        if not self.matches(op.operands[1]):
            return False
        return _replace_with_constant(rewriter, op, self.result(op.results[0].type))


class SameOperands(RewritePattern):
    """``op x, x`` → ``x`` (idempotent ops) or a constant (x-x, x^x: integers only)."""

    def __init__(self, op_name: str, constant: Callable[[t.Type], Any] | None = None):
        self.op_names = (op_name,)
        self.constant = constant

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        lhs, rhs = op.operands
        if lhs is not rhs:
            return False
        if self.constant is None:
            rewriter.replace_op(op, [lhs])
            return True
        return _replace_with_constant(rewriter, op, self.constant(op.results[0].type))


_SWAPPED_PREDICATE = {
    "eq": "eq", "ne": "ne", "slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle",
    "ult": "ugt", "ule": "uge", "ugt": "ult", "uge": "ule",
}
_REFLEXIVE_PREDICATE = {p: p in ("eq", "sle", "sge", "ule", "uge") for p in _SWAPPED_PREDICATE}


class CmpIConstantToRight(RewritePattern):
    """``cmpi slt, c, x`` → ``cmpi sgt, x, c``."""

    op_names = ("arith.cmpi",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        lhs, rhs = op.operands
        swapped = _SWAPPED_PREDICATE.get(op.attributes.get("predicate"))
        if swapped is None or constant_value(lhs) is None or constant_value(rhs) is not None:
            return False
        with rewriter.modify_op_in_place(op):
            op.set_operands([rhs, lhs])
            op.set_attr("predicate", swapped)
        return True


class CmpISameOperands(RewritePattern):
    """``cmpi p, x, x`` is true for eq/sle/sge/ule/uge and false otherwise."""

    op_names = ("arith.cmpi",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        lhs, rhs = op.operands
        reflexive = _REFLEXIVE_PREDICATE.get(op.attributes.get("predicate"))
        if lhs is not rhs or reflexive is None:
            return False
        return _replace_with_constant(rewriter, op, reflexive)


class SelectSimplify(RewritePattern):
    """``select c, x, x`` → ``x``; ``select true, a, b`` → ``a``; ``select false, a, b`` → ``b``."""

    op_names = ("arith.select",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        condition, if_true, if_false = op.operands
        if if_true is if_false:
            rewriter.replace_op(op, [if_true])
            return True
        const = _scalar(condition)
        if const is None:
            return False
        rewriter.replace_op(op, [if_true if const else if_false])
        return True


class DoubleNegation(RewritePattern):
    """``negf(negf(x))`` → ``x`` (exact: negation only flips the sign bit)."""

    op_names = ("arith.negf",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        inner = op.operands[0].defining_op
        if inner is None or inner.name != "arith.negf":
            return False
        rewriter.replace_op(op, [inner.operands[0]])
        return True


def _width(type_: t.Type) -> int:
    return t.element_type(type_).width  # type: ignore[attr-defined]


def _cast_to(kind: str) -> Callable[[Rewriter, Operation, Value], Value | None]:
    """Replace the outer cast by one ``kind`` cast of the innermost value."""

    def build(rewriter: Rewriter, outer: Operation, source: Value) -> Value | None:
        return rewriter.create(CASTS[kind], source, result_types=[outer.results[0].type]).results[0]

    return build


def _same_type_or(kind_narrower: str | None, kind_wider: str | None):
    """For trunc(ext(x)): ``x`` when the types match, else one cast the right way."""

    def build(rewriter: Rewriter, outer: Operation, source: Value) -> Value | None:
        result_type = outer.results[0].type
        if source.type == result_type:
            return source
        if _width(result_type) == _width(source.type):
            return None  # i8 -> u8 differ in signedness only: not a trunc or an ext
        kind = kind_narrower if _width(result_type) < _width(source.type) else kind_wider
        return None if kind is None else _cast_to(kind)(rewriter, outer, source)

    return build


def _identity_if_same_type(rewriter: Rewriter, outer: Operation, source: Value) -> Value | None:
    return source if source.type == outer.results[0].type else None


def _bitcast_chain(rewriter: Rewriter, outer: Operation, source: Value) -> Value | None:
    if source.type == outer.results[0].type:
        return source
    return _cast_to("bitcast")(rewriter, outer, source)


# (outer, inner) -> what replaces outer(inner(x)).  Only exact compositions: truncf(truncf(x))
# rounds twice and is missing on purpose, as are float<->int round trips.
_CAST_CHAINS: dict[tuple[str, str], Callable[[Rewriter, Operation, Value], Value | None]] = {
    ("extsi", "extsi"): _cast_to("extsi"),
    ("extui", "extui"): _cast_to("extui"),
    ("extsi", "extui"): _cast_to("extui"),  # the inner zero-extension cleared the sign bit
    ("extf", "extf"): _cast_to("extf"),
    ("trunci", "trunci"): _cast_to("trunci"),
    ("trunci", "extsi"): _same_type_or("trunci", "extsi"),
    ("trunci", "extui"): _same_type_or("trunci", "extui"),
    ("truncf", "extf"): _identity_if_same_type,
    ("bitcast", "bitcast"): _bitcast_chain,
}


class CastOfCast(RewritePattern):
    """Composes two casts into one, or none, where that is exact (see ``_CAST_CHAINS``)."""

    op_names = tuple(sorted({f"arith.{outer}" for outer, _ in _CAST_CHAINS}))

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        inner = op.operands[0].defining_op
        if inner is None or not inner.name.startswith("arith."):
            return False
        build = _CAST_CHAINS.get((op.name[len("arith."):], inner.name[len("arith."):]))
        if build is None:
            return False
        replacement = build(rewriter, op, inner.operands[0])
        if replacement is None:
            return False
        rewriter.replace_op(op, [replacement])
        return True


# --------------------------------------------------------------------------------------
# scf


class InlineConstantIf(RewritePattern):
    """``scf.if`` on a constant: the taken region's ops replace it, its yield the results."""

    op_names = ("scf.if",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        const = _scalar(op.operands[0])
        if const is None:
            return False
        block = op.regions[0 if const else 1].block
        yielded = list(block.last_op.operands) if block.last_op is not None else []
        rewriter.inline_block_before(block, op)
        rewriter.replace_op(op, yielded)
        return True


def _signed_value(value: Value) -> int | None:
    """An integer constant read with its type's signedness."""
    bits = _int_bits(value)
    if bits is None:
        return None
    element = _element(value)
    if element.signed and element.width > 1 and bits >> (element.width - 1):  # type: ignore[attr-defined]
        bits -= 1 << element.width  # type: ignore[attr-defined]
    return bits


class RemoveZeroTripFor(RewritePattern):
    """An ``scf.for`` with ``lower >= upper`` never runs: its results are its inits."""

    op_names = ("scf.for",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        lower, upper = op.operands[0], op.operands[1]
        if lower is not upper:
            lo, hi = _signed_value(lower), _signed_value(upper)
            if lo is None or hi is None or lo < hi:
                return False
        rewriter.replace_op(op, list(op.init_args))
        return True


class RemoveUnchangedLoopCarried(RewritePattern):
    """A loop-carried value the body yields unchanged is its init throughout: use the
    init, inside the loop and after it, and stop carrying it."""

    op_names = ("scf.for",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        block = op.regions[0].block
        yielded = block.last_op.operands if block.last_op is not None else ()
        unchanged = {i for i, (arg, value) in enumerate(zip(block.arguments[1:], yielded)) if value is arg}
        if not unchanged:
            return False
        drop_loop_carried(rewriter, op, unchanged)
        return True


def drop_loop_carried(rewriter: Rewriter, op: Operation, drop: set[int]) -> Operation:
    """Rebuild ``scf.for`` without the loop-carried values numbered ``drop``.

    Uses of a dropped value (its block argument in the body, its result after the loop)
    become uses of its init value.  That is exact when the body yields it unchanged; DCE
    calls this only for values nothing reads.  Returns the new loop.
    """
    block = op.regions[0].block
    inits = list(op.init_args)
    keep = [i for i in range(len(inits)) if i not in drop]
    for i in drop:
        rewriter.replace_all_uses_with(block.arguments[1 + i], inits[i])
    for i in sorted(drop, reverse=True):
        block.erase_argument(1 + i)
    terminator = block.last_op
    with rewriter.modify_op_in_place(terminator):
        terminator.set_operands([terminator.operands[i] for i in keep])
    op.regions[0].blocks.remove(block)
    new = ForOp([*op.operands[:3], *(inits[i] for i in keep)], [op.results[i].type for i in keep],
                dict(op.attributes), [Region([block])], op.location)
    for j, i in enumerate(keep):
        new.results[j].name_hint = op.results[i].name_hint
    with rewriter.insertion_point_before(op):
        rewriter.insert(new)
    rewriter.replace_op(op, [new.results[keep.index(i)] if i in keep else inits[i] for i in range(len(inits))])
    return new


def drop_if_results(rewriter: Rewriter, op: Operation, drop: set[int]) -> Operation:
    """Rebuild ``scf.if`` without the results numbered ``drop`` (they must be unused)."""
    keep = [i for i in range(len(op.results)) if i not in drop]
    regions = []
    for region in op.regions:
        block = region.blocks[0]
        terminator = block.last_op
        with rewriter.modify_op_in_place(terminator):
            terminator.set_operands([terminator.operands[i] for i in keep])
        region.blocks.remove(block)
        regions.append(Region([block]))
    new = IfOp(list(op.operands), [op.results[i].type for i in keep], dict(op.attributes), regions, op.location)
    for j, i in enumerate(keep):
        new.results[j].name_hint = op.results[i].name_hint
    with rewriter.insertion_point_before(op):
        rewriter.insert(new)
    # A dropped result is unused: "replacing" it with itself is a no-op, and erase checks it.
    rewriter.replace_op(op, [new.results[keep.index(i)] if i in keep else op.results[i]
                             for i in range(len(op.results))])
    return new


# --------------------------------------------------------------------------------------
# tile


class SplatOfConstant(RewritePattern):
    """``tile.splat c`` → a tile constant (arith constants of tile type are splats)."""

    op_names = ("tile.splat",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        const = _scalar(op.operands[0])
        if const is None:
            return False
        return _replace_with_constant(rewriter, op, const)


class ShapeOfConstant(RewritePattern):
    """Broadcasting, reshaping, expanding or transposing a constant tile gives the same
    constant in the new shape (every element is equal)."""

    op_names = ("tile.broadcast", "tile.reshape", "tile.expand_dims", "tile.trans")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        const = _scalar(op.operands[0])
        if const is None:
            return False
        return _replace_with_constant(rewriter, op, const)


class IdentityShapeOp(RewritePattern):
    """``tile.broadcast`` / ``tile.reshape`` to the source's own type do nothing."""

    op_names = ("tile.broadcast", "tile.reshape")

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        source = op.operands[0]
        if source.type != op.results[0].type:
            return False
        rewriter.replace_op(op, [source])
        return True


class ComposeShapeOps(RewritePattern):
    """``reshape(reshape(x))`` → ``reshape(x)`` (row-major order is kept through both);
    ``broadcast(broadcast(x))`` → ``broadcast(x)``; ``broadcast(splat(x))`` → ``splat(x)``."""

    op_names = ("tile.broadcast", "tile.reshape")
    _ABSORBS = {("tile.reshape", "tile.reshape"), ("tile.broadcast", "tile.broadcast"),
                ("tile.broadcast", "tile.splat")}

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        inner = op.operands[0].defining_op
        if inner is None or (op.name, inner.name) not in self._ABSORBS:
            return False
        new = rewriter.create(type(inner), inner.operands[0], result_types=[op.results[0].type])
        rewriter.replace_op(op, [new.results[0]])
        return True


class AddPtrZero(RewritePattern):
    """``tile.addptr p, 0`` → ``p``."""

    op_names = ("tile.addptr",)

    def match_and_rewrite(self, op: Operation, rewriter: Rewriter) -> bool:
        ptr, offset = op.operands
        if not _is_zero(offset) or ptr.type != op.results[0].type:
            return False
        rewriter.replace_op(op, [ptr])
        return True


# --------------------------------------------------------------------------------------
# The table and its registration


def _zero(type_: t.Type) -> Any:
    return 0


def canonical_patterns() -> dict[str, tuple[RewritePattern, ...]]:
    """Op name -> the patterns this module gives it (commutative ops get theirs in
    :func:`register_canonical_patterns`, from the registry)."""
    table: dict[str, list[RewritePattern]] = {}

    def add(*patterns: RewritePattern) -> None:
        for pattern in patterns:
            for name in pattern.op_names or ():
                table.setdefault(name, []).append(pattern)

    # Integer right identities: the op is `x` itself.
    for name, check in (("addi", _is_zero), ("subi", _is_zero), ("muli", _is_one), ("ori", _is_zero),
                        ("xori", _is_zero), ("andi", _is_all_ones), ("shli", _is_zero), ("shrsi", _is_zero),
                        ("shrui", _is_zero), ("divsi", _is_one), ("divui", _is_one)):
        add(ReplaceWithLhs(f"arith.{name}", check))
    # Float right identities, exact for every x (NaN, inf, -0.0 included).
    for name, check in (("mulf", _is_float(1.0)), ("divf", _is_float(1.0)), ("addf", _is_float(-0.0)),
                        ("subf", _is_float(0.0))):
        add(ReplaceWithLhs(f"arith.{name}", check))
    # Right operands that decide the result (integers: x*0 is not 0 for a float NaN).
    add(ReplaceWithConstant("arith.muli", _is_zero, _zero), ReplaceWithConstant("arith.andi", _is_zero, _zero),
        ReplaceWithConstant("arith.ori", _is_all_ones, _all_ones_value),
        ReplaceWithConstant("arith.remsi", _is_one, _zero), ReplaceWithConstant("arith.remui", _is_one, _zero))
    # x op x.
    for name in ("andi", "ori", "maxsi", "minsi", "maxui", "minui"):
        add(SameOperands(f"arith.{name}"))
    add(SameOperands("arith.subi", _zero), SameOperands("arith.xori", _zero))
    add(CmpIConstantToRight(), CmpISameOperands(), SelectSimplify(), DoubleNegation(), CastOfCast())
    add(InlineConstantIf(), RemoveZeroTripFor(), RemoveUnchangedLoopCarried())
    add(SplatOfConstant(), ShapeOfConstant(), IdentityShapeOp(), ComposeShapeOps(), AddPtrZero())
    return {name: tuple(patterns) for name, patterns in table.items()}


_COMMUTE = CommuteConstantToRight()
_TABLE: dict[str, tuple[RewritePattern, ...]] | None = None


def register_canonical_patterns() -> None:
    """Attach the patterns to the registered op classes (idempotent).

    Every registered op with the Commutative trait (plugin ops too) gets the pattern
    that moves constants to the right.  Patterns already on a class stay, first.
    """
    global _TABLE
    if _TABLE is None:
        _TABLE = canonical_patterns()
    wanted: dict[type, list[RewritePattern]] = {}
    for cls in IR_REGISTRY.ops:
        patterns = list(_TABLE.get(cls.name, ()))
        if cls.has_trait(Commutative):
            patterns.insert(0, _COMMUTE)
        if patterns:
            wanted[cls] = patterns
    for cls, patterns in wanted.items():
        existing = tuple(vars(cls).get("canonicalization_patterns", ()))
        missing = tuple(p for p in patterns if not any(p is e for e in existing))
        if missing:
            cls.canonicalization_patterns = existing + missing  # type: ignore[attr-defined]

