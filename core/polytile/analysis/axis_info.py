"""Axis info: what is known, dimension by dimension, about the integers and pointers of
a kernel, so that GPU backends can vectorize loads and stores and pick coalesced layouts.

For every SSA value the analysis gives an :class:`AxisInfo`; a scalar counts as a tile of
shape ``[1]``.  Per dimension ``d``:

- ``contiguity[d] = c``: split the dimension into groups of ``c`` consecutive elements
  (starting at index 0); along each group the value goes up by 1 element by element (for
  pointers: by one pointee, so consecutive addresses);
- ``divisibility[d] = k``: the first element of every such group is a multiple of ``k``
  (pointers: the address in *bytes*, as Triton counts it);
- ``constancy[d] = c``: in groups of ``c`` consecutive elements every element is equal;
- ``constant``: the value of every element, when it is one known integer.

``arange(0, 128)`` is ``contiguity = [128], divisibility = [1073741824], constancy = [1]``
(zero is a multiple of everything; :data:`MAX_DIVISIBILITY` stands for it).  Facts come
from ``tile.arange``, constants, the kernel's specialization hints (``pt.divisibility``,
``pt.equal_to_1`` on the ``func.func``), the language's ``multiple_of`` /
``max_contiguous`` / ``max_constancy`` hints (``pt.multiple_of``... on the hinted op), and
flow through shape ops, arithmetic, comparisons, ``tile.addptr``, loops, ifs and the calls
of noinline functions.  The rules follow Triton's ``lib/Analysis/AxisInfo.cpp``; where the
result's groups are smaller than an operand's, divisibility is taken at the result's group
starts (:func:`divisibility_at`), which keeps the facts true for every group.

Values of contiguous ranges are assumed not to wrap around the integer width, as in Triton.

Rules are a table keyed by op class (:data:`AXIS_INFO_RULES`); a plugin that adds ops adds
rules with :func:`register_axis_info_rule`.  Ops without a rule get no facts, except what a
hint on them says.  For tests, the pass ``test-print-axis-info``
(:class:`polytile.passes.print_axis_info.TestPrintAxisInfo`) writes the result onto the IR
(``pt.axis_info`` on ops, ``pt.arg_axis_info`` on functions and loops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

from ..dialects import arith, func as func_d, scf, tile, tile_shape
from ..errors import VerificationError
from ..ir import types as t
from ..ir.attributes import DialectAttribute, format_attribute
from ..ir.registry import IR_REGISTRY
from .manager import Analysis, AnalysisManager

#: Stands for "a multiple of everything" (the divisibility of 0), as Triton's
#: ``highestPowOf2Divisor(0)`` for 32-bit values.  Any larger divisibility is capped to it,
#: which only understates what is known.
MAX_DIVISIBILITY = 1 << 30

#: Discardable op attributes from the language's hints, and the fact each one states.
HINT_ATTRIBUTES = {"pt.multiple_of": "divisibility", "pt.max_contiguous": "contiguity",
                   "pt.max_constancy": "constancy"}

def pow2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (capped); 0 divides by everything."""
    if n == 0:
        return MAX_DIVISIBILITY
    return min(n & -n, MAX_DIVISIBILITY)


def _mul_div(a: int, b: int) -> int:
    return min(a * b, MAX_DIVISIBILITY)


@dataclass(frozen=True)
class AxisInfo(DialectAttribute):
    """Per-dimension facts about one value (see the module docstring).  It is an IR
    attribute so that tests print it: ``#axis_info<contiguity = [128], ...>``."""

    attribute_name: ClassVar[str] = "axis_info"
    contiguity: tuple
    divisibility: tuple
    constancy: tuple
    constant: int | None = None

    def __post_init__(self) -> None:
        fields = (self.contiguity, self.divisibility, self.constancy)
        if len({len(f) for f in fields}) != 1 or not self.contiguity:
            raise ValueError("contiguity, divisibility and constancy need one entry per dimension")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for f in fields for v in f):
            raise ValueError("contiguity, divisibility and constancy are positive integers")

    @property
    def rank(self) -> int:
        return len(self.contiguity)

    @classmethod
    def unknown(cls, shape: Sequence[int]) -> "AxisInfo":
        """Nothing known: every group has one element."""
        ones = (1,) * len(shape)
        return cls(ones, ones, ones)

    @classmethod
    def of_constant(cls, value: int, shape: Sequence[int]) -> "AxisInfo":
        return cls((1,) * len(shape), (pow2_divisor(value),) * len(shape), tuple(shape), value)

    def element_divisibility(self) -> int:
        """What divides *every* element: each dimension without contiguous runs says so."""
        return max(divisibility_at(self, d, 1) for d in range(self.rank))

    def join(self, other: "AxisInfo") -> "AxisInfo":
        """What holds of a value that is either ``self`` or ``other`` (if/loop merges)."""
        return AxisInfo(tuple(math.gcd(a, b) for a, b in zip(self.contiguity, other.contiguity)),
                        tuple(math.gcd(a, b) for a, b in zip(self.divisibility, other.divisibility)),
                        tuple(math.gcd(a, b) for a, b in zip(self.constancy, other.constancy)),
                        self.constant if self.constant == other.constant else None)

    def format_parameters(self) -> str:
        text = (f"contiguity = {format_attribute(self.contiguity)}, divisibility = "
                f"{format_attribute(self.divisibility)}, constancy = {format_attribute(self.constancy)}")
        return text if self.constant is None else f"{text}, constant = {self.constant}"


def divisibility_at(info: AxisInfo, d: int, group: int) -> int:
    """What divides the elements at indices ``0, group, 2*group, ...`` along ``d``.

    Those are the group starts of ``info`` when ``group`` is a multiple of its contiguity;
    otherwise they lie inside contiguous runs, ``start + j*gcd(group, contiguity)``.  With
    ``group = 1``: a value in contiguous runs ``[16, 17, ...]`` divides by nothing."""
    contiguity = info.contiguity[d]
    if group % contiguity == 0:
        return info.divisibility[d]
    return math.gcd(info.divisibility[d], math.gcd(group, contiguity))


def shape_of(value: Any) -> tuple[int, ...]:
    """The shape axis info describes for a value: a tile's (a block pointer's tile's), or
    ``(1,)`` for a scalar."""
    type_ = value.type
    if isinstance(type_, t.BlockPointerType):
        type_ = type_.tile
    return type_.shape if isinstance(type_, t.TileType) else (1,)


def _pointee_bytes(type_: t.Type) -> int:
    element = t.element_type(type_)
    pointee = getattr(element, "pointee", None)
    width = getattr(pointee, "width", 8)
    return max(width // 8, 1)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, int) else None


# --------------------------------------------------------------------------------------
# The rules: op class -> rule(op, operand infos) -> one info per result.

Rule = Callable[[Any, list[AxisInfo]], list[AxisInfo]]
AXIS_INFO_RULES: dict[type, Rule] = {}


def register_axis_info_rule(*op_classes: type) -> Callable[[Rule], Rule]:
    """Decorator: ``rule(op, infos)`` gives the results' axis info of ops of these classes
    from the operands' (``infos[i]`` for ``op.operands[i]``)."""

    def register(rule: Rule) -> Rule:
        for cls in op_classes:
            AXIS_INFO_RULES[cls] = rule
        return rule

    return register


def _folded(op: Any, infos: list[AxisInfo]) -> int | None:
    """The op's constant result when every operand is a known constant: the op's own
    folder computes it, so the analysis agrees with folding and the interpreter."""
    constants = [i.constant for i in infos]
    if not infos or any(c is None for c in constants):
        return None
    fold = getattr(op, "fold", None)
    if fold is None:
        return None
    try:
        folded = fold(constants)
    except (ArithmeticError, ValueError, TypeError):
        return None
    return _as_int(folded[0]) if folded else None


def _result_shape(op: Any) -> tuple[int, ...]:
    return shape_of(op.results[0])


def _make(op: Any, infos: list[AxisInfo], contiguity: Callable[[int], int], divisibility: Callable[[int], int],
          constancy: Callable[[int], int]) -> list[AxisInfo]:
    shape = _result_shape(op)
    constant = _folded(op, infos)
    if constant is not None:
        return [AxisInfo.of_constant(constant, shape)]
    dims = range(len(shape))
    return [AxisInfo(tuple(contiguity(d) for d in dims), tuple(divisibility(d) for d in dims),
                     tuple(constancy(d) for d in dims))]


def _is_constant(info: AxisInfo, value: int) -> bool:
    return info.constant is not None and info.constant == value


def _whole(info: AxisInfo, field: str, shape: tuple[int, ...], d: int) -> bool:
    return getattr(info, field)[d] == shape[d]


def _add_like(op: Any, lhs: AxisInfo, rhs: AxisInfo, scale: int, subtract: bool) -> list[AxisInfo]:
    def contiguity(d: int) -> int:
        # A contiguous right side of a subtraction makes the result go down, not up.
        from_lhs = math.gcd(lhs.contiguity[d], rhs.constancy[d])
        return from_lhs if subtract else max(from_lhs, math.gcd(lhs.constancy[d], rhs.contiguity[d]))

    def divisibility(d: int) -> int:
        group = contiguity(d)
        return math.gcd(divisibility_at(lhs, d, group), _mul_div(divisibility_at(rhs, d, group), scale))

    return _make(op, [lhs, rhs], contiguity, divisibility,
                 lambda d: math.gcd(lhs.constancy[d], rhs.constancy[d]))


@register_axis_info_rule(arith.AddIOp)
def _addi(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    return _add_like(op, infos[0], infos[1], 1, subtract=False)


@register_axis_info_rule(arith.SubIOp)
def _subi(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    return _add_like(op, infos[0], infos[1], 1, subtract=True)


@register_axis_info_rule(tile.AddPtrOp)
def _addptr(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    ptr, offset = infos
    scale = _pointee_bytes(op.operands[0].type)
    if ptr.constant is not None and offset.constant is not None:
        return [AxisInfo.of_constant(ptr.constant + offset.constant * scale, _result_shape(op))]
    # The offset counts pointees; divisibility of a pointer counts bytes.
    return _add_like(op, ptr, offset, scale, subtract=False)


def _gcd_constancy(lhs: AxisInfo, rhs: AxisInfo) -> Callable[[int], int]:
    return lambda d: math.gcd(lhs.constancy[d], rhs.constancy[d])


@register_axis_info_rule(arith.MulIOp)
def _muli(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos

    def contiguity(d: int) -> int:
        return max(lhs.contiguity[d] if _is_constant(rhs, 1) else 1, rhs.contiguity[d] if _is_constant(lhs, 1) else 1)

    def divisibility(d: int) -> int:
        group = contiguity(d)
        return _mul_div(divisibility_at(lhs, d, group), divisibility_at(rhs, d, group))

    return _make(op, infos, contiguity, divisibility, _gcd_constancy(lhs, rhs))


def _divi(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos
    shape = _result_shape(op)

    def contiguity(d: int) -> int:
        return lhs.contiguity[d] if _is_constant(rhs, 1) else 1

    def divisibility(d: int) -> int:
        if _is_constant(lhs, 0) or _is_constant(rhs, 1):
            return lhs.divisibility[d]
        return 1

    def constancy(d: int) -> int:
        result = math.gcd(lhs.constancy[d], rhs.constancy[d])
        if _whole(lhs, "contiguity", shape, d) and _whole(rhs, "constancy", shape, d):
            # [k*g, k*g+1, ...] / (p*g): runs of gcd(contiguity, g) give one quotient.
            run = math.gcd(lhs.contiguity[d], math.gcd(lhs.divisibility[d], rhs.divisibility[d]))
            result = max(result, run)
        return result

    return _make(op, infos, contiguity, divisibility, constancy)


def _remi(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos
    shape = _result_shape(op)
    if _is_constant(rhs, 1):
        return [AxisInfo.of_constant(0, shape)]

    def contiguity(d: int) -> int:
        if _whole(lhs, "contiguity", shape, d) and _whole(rhs, "constancy", shape, d):
            # Runs that start at multiples of g = gcd(divisibilities) stay below the
            # next multiple of the divisor, so they stay contiguous.
            return math.gcd(lhs.contiguity[d], math.gcd(lhs.divisibility[d], rhs.divisibility[d]))
        return 1

    def divisibility(d: int) -> int:
        group = contiguity(d)
        return math.gcd(divisibility_at(lhs, d, group), divisibility_at(rhs, d, group))

    return _make(op, infos, contiguity, divisibility, _gcd_constancy(lhs, rhs))


register_axis_info_rule(arith.DivSIOp, arith.DivUIOp)(_divi)
register_axis_info_rule(arith.RemSIOp, arith.RemUIOp)(_remi)


@register_axis_info_rule(arith.ShLIOp)
def _shli(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos
    shift = rhs.constant if rhs.constant is not None and 0 <= rhs.constant < 64 else None

    def contiguity(d: int) -> int:
        return lhs.contiguity[d] if shift == 0 else 1

    def divisibility(d: int) -> int:
        # An unknown shift only multiplies by a power of two: the divisibility stays.
        return _mul_div(divisibility_at(lhs, d, contiguity(d)), 1 << (shift or 0))

    return _make(op, infos, contiguity, divisibility, _gcd_constancy(lhs, rhs))


def _shr(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos
    shift = rhs.constant if rhs.constant is not None and 0 <= rhs.constant < 64 else None

    def contiguity(d: int) -> int:
        return lhs.contiguity[d] if shift == 0 else 1

    def divisibility(d: int) -> int:
        if shift is None:
            return 1
        # Only the power-of-two part survives a shift: 20 >> 3 is 2, 60 >> 3 is 7.
        return max(pow2_divisor(divisibility_at(lhs, d, contiguity(d))) >> shift, 1)

    return _make(op, infos, contiguity, divisibility, _gcd_constancy(lhs, rhs))


register_axis_info_rule(arith.ShRSIOp, arith.ShRUIOp)(_shr)


def _min_max(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos

    def contiguity(d: int) -> int:
        # Inside a run common to both sides each goes up by one, so their max/min does.
        return math.gcd(lhs.contiguity[d], rhs.contiguity[d])

    def divisibility(d: int) -> int:
        group = contiguity(d)
        return math.gcd(divisibility_at(lhs, d, group), divisibility_at(rhs, d, group))

    return _make(op, infos, contiguity, divisibility, _gcd_constancy(lhs, rhs))


register_axis_info_rule(*(arith.BINARY_OPS[n] for n in ("maxsi", "minsi", "maxui", "minui")))(_min_max)


def _bitwise(keep_more: bool) -> Rule:
    def rule(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
        lhs, rhs = infos

        def divisibility(d: int) -> int:
            # Low zero bits: `and` keeps those of either side, `or`/`xor` those of both.
            a, b = pow2_divisor(divisibility_at(lhs, d, 1)), pow2_divisor(divisibility_at(rhs, d, 1))
            return max(a, b) if keep_more else min(a, b)

        return _make(op, infos, lambda d: 1, divisibility, _gcd_constancy(lhs, rhs))

    return rule


register_axis_info_rule(arith.AndIOp)(_bitwise(keep_more=True))
register_axis_info_rule(arith.OrIOp, arith.XOrIOp)(_bitwise(keep_more=False))

#: Predicates for which ``splat(c) <pred> contiguous`` is constant over runs that start
#: at multiples of g (c a multiple of g): ``c > x`` and ``c <= x`` flip only at a multiple
#: of g.  Mirrored for ``contiguous <pred> splat(c)``.
_CONSTANT_LEFT_PREDICATES = frozenset({"sgt", "ugt", "sle", "ule"})
_CONSTANT_RIGHT_PREDICATES = frozenset({"slt", "ult", "sge", "uge"})


@register_axis_info_rule(arith.CmpIOp)
def _cmpi(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    lhs, rhs = infos
    shape = _result_shape(op)
    predicate = op.predicate

    def constancy(d: int) -> int:
        result = math.gcd(lhs.constancy[d], rhs.constancy[d])
        common = math.gcd(lhs.divisibility[d], rhs.divisibility[d])
        if predicate in _CONSTANT_LEFT_PREDICATES and _whole(lhs, "constancy", shape, d):
            result = max(result, math.gcd(rhs.contiguity[d], common))
        elif predicate in _CONSTANT_RIGHT_PREDICATES and _whole(rhs, "constancy", shape, d):
            result = max(result, math.gcd(lhs.contiguity[d], common))
        return result

    return _make(op, infos, lambda d: 1, lambda d: 1, constancy)


@register_axis_info_rule(arith.SelectOp)
def _select(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    condition, lhs, rhs = infos
    if condition.constant is not None:
        return [lhs if condition.constant else rhs]
    shape = _result_shape(op)
    # A scalar condition picks one side for the whole tile.
    cond_constancy = condition.constancy if isinstance(op.condition.type, t.TileType) else shape

    def contiguity(d: int) -> int:
        return math.gcd(math.gcd(lhs.contiguity[d], rhs.contiguity[d]), cond_constancy[d])

    def divisibility(d: int) -> int:
        group = contiguity(d)
        return math.gcd(divisibility_at(lhs, d, group), divisibility_at(rhs, d, group))

    def constancy(d: int) -> int:
        return math.gcd(math.gcd(lhs.constancy[d], rhs.constancy[d]), cond_constancy[d])

    constant = lhs.constant if lhs.constant is not None and lhs.constant == rhs.constant else None
    if constant is not None:
        return [AxisInfo.of_constant(constant, shape)]
    dims = range(len(shape))
    return [AxisInfo(tuple(map(contiguity, dims)), tuple(map(divisibility, dims)), tuple(map(constancy, dims)))]


@register_axis_info_rule(arith.ConstantOp)
def _constant(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    shape = _result_shape(op)
    value = _as_int(op.value) if not isinstance(t.element_type(op.result.type), t.FloatType) else None
    if value is None:
        return [AxisInfo((1,) * len(shape), (1,) * len(shape), tuple(shape))]
    return [AxisInfo.of_constant(value, shape)]


@register_axis_info_rule(tile.ArangeOp)
def _arange(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    length = op.end - op.start
    if length == 1:
        return [AxisInfo.of_constant(op.start, (1,))]
    return [AxisInfo((length,), (pow2_divisor(op.start),), (1,))]


@register_axis_info_rule(tile.SplatOp)
def _splat(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    shape = _result_shape(op)
    source = infos[0]
    if source.constant is not None:
        return [AxisInfo.of_constant(source.constant, shape)]
    return [AxisInfo((1,) * len(shape), (source.element_divisibility(),) * len(shape), tuple(shape))]


@register_axis_info_rule(tile.BroadcastOp)
def _broadcast(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    source = infos[0]
    src_shape, shape = shape_of(op.operands[0]), _result_shape(op)
    if source.constant is not None:
        return [AxisInfo.of_constant(source.constant, shape)]
    stretched = [a != b for a, b in zip(src_shape, shape)]
    return [AxisInfo(tuple(1 if s else c for s, c in zip(stretched, source.contiguity)),
                     source.divisibility,
                     tuple(n if s else c for s, n, c in zip(stretched, shape, source.constancy)))]


@register_axis_info_rule(tile.ExpandDimsOp)
def _expand_dims(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    source = infos[0]
    axis = op.axis
    if source.constant is not None:
        return [AxisInfo.of_constant(source.constant, _result_shape(op))]

    def insert(values: tuple, value: int) -> tuple:
        return values[:axis] + (value,) + values[axis:]

    # The new dimension has size 1: its one group is every element.
    return [AxisInfo(insert(source.contiguity, 1), insert(source.divisibility, source.element_divisibility()),
                     insert(source.constancy, 1))]


@register_axis_info_rule(tile.TransOp)
def _trans(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    source = infos[0]
    order = op.order
    return [AxisInfo(tuple(source.contiguity[i] for i in order), tuple(source.divisibility[i] for i in order),
                     tuple(source.constancy[i] for i in order), source.constant)]


@register_axis_info_rule(tile.ReshapeOp)
def _reshape(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    source = infos[0]
    src_shape, shape = shape_of(op.operands[0]), _result_shape(op)
    if source.constant is not None:
        return [AxisInfo.of_constant(source.constant, shape)]
    every = source.element_divisibility()
    src_dims = [d for d, n in enumerate(src_shape) if n != 1]
    dst_dims = [d for d, n in enumerate(shape) if n != 1]
    if [src_shape[d] for d in src_dims] == [shape[d] for d in dst_dims]:
        # Only dimensions of size 1 come or go: the others keep their facts.
        contiguity, divisibility, constancy = [1] * len(shape), [every] * len(shape), [1] * len(shape)
        for s, r in zip(src_dims, dst_dims):
            contiguity[r], divisibility[r], constancy[r] = (source.contiguity[s], source.divisibility[s],
                                                            source.constancy[s])
        return [AxisInfo(tuple(contiguity), tuple(divisibility), tuple(constancy))]
    if all(c == n for c, n in zip(source.constancy, src_shape)):
        return [AxisInfo((1,) * len(shape), (every,) * len(shape), tuple(shape))]
    return [AxisInfo((1,) * len(shape), (every,) * len(shape), (1,) * len(shape))]


def _cast(pointer_size_changes: bool) -> Rule:
    def rule(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
        source = infos[0]
        if not pointer_size_changes:
            return [source]
        # ptrtoint / inttoptr: a pointer steps by its pointee's size, an integer by 1.
        pointer = op.operands[0].type if t.is_pointer(op.operands[0].type) else op.results[0].type
        if _pointee_bytes(pointer) == 1:
            return [source]
        return [AxisInfo((1,) * source.rank, tuple(divisibility_at(source, d, 1) for d in range(source.rank)),
                         source.constancy, source.constant)]

    return rule


@register_axis_info_rule(arith.TruncIOp)
def _trunci(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    source = infos[0]
    width = t.element_type(op.results[0].type).width
    limit = 1 << max(width - 1, 0)
    constant = _folded(op, infos)
    if constant is not None:
        return [AxisInfo.of_constant(constant, _result_shape(op))]
    # Truncation keeps low bits: only the power-of-two part of a divisibility survives.
    return [AxisInfo(source.contiguity, tuple(min(pow2_divisor(v), limit) for v in source.divisibility),
                     source.constancy)]


register_axis_info_rule(arith.ExtSIOp, arith.ExtUIOp)(_cast(False))
register_axis_info_rule(arith.PtrToIntOp, arith.IntToPtrOp)(_cast(True))


def _constancy_only(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    """Conversions to and from floats: equal inputs give equal outputs, nothing more."""
    source = infos[0]
    return [AxisInfo((1,) * source.rank, (1,) * source.rank, source.constancy)]


register_axis_info_rule(*(arith.CASTS[n] for n in ("sitofp", "uitofp", "fptosi", "fptoui", "extf", "truncf",
                                                    "bitcast")))(_constancy_only)


def _unknown_results(op: Any, infos: list[AxisInfo]) -> list[AxisInfo]:
    return [AxisInfo.unknown(shape_of(r)) for r in op.results]


# program_id and num_programs: unknown at compile time; loads: anything in memory.
register_axis_info_rule(tile.ProgramIdOp, tile.NumProgramsOp, tile.LoadOp, tile.AtomicRMWOp, tile.AtomicCASOp,
                        tile.DotOp, tile.ReduceOp, tile_shape.ScanOp, tile_shape.JoinOp, tile_shape.SplitOp,
                        tile_shape.CatOp, func_d.CallOp)(_unknown_results)


# --------------------------------------------------------------------------------------
# The analysis


class AxisInfoAnalysis(Analysis):
    """Axis info of every value of a module (or of one ``func.func``).

        infos = context.analyses.get(AxisInfoAnalysis, module)
        infos[value].contiguity

    Pure: it reads the IR and never changes it.  Functions are analysed callers first, so
    a noinline function's arguments get what holds at every call site (a kernel's, and an
    uncalled function's, come from the specialization hints; a recursive one's are
    unknown).  Call results are unknown, as in Triton.
    """

    def __init__(self, op: Any, analyses: AnalysisManager | None = None):
        super().__init__(op, analyses)  # type: ignore[arg-type]
        self._infos: dict[Any, AxisInfo] = {}
        if op.name == "func.func":
            self._function(op, self._argument_hints(op))
            return
        functions = [f for f in op.body.block if f.name == "func.func"]
        done: set[int] = set()
        for function in self._callers_first(op, functions, analyses):
            self._function(function, self._arguments(function, done))
            done.add(id(function))

    def __getitem__(self, value: Any) -> AxisInfo:
        found = self._infos.get(value)
        return found if found is not None else AxisInfo.unknown(shape_of(value))

    def info(self, value: Any) -> AxisInfo:
        """The facts about ``value`` (nothing known for a value the analysis never saw)."""
        return self[value]

    def knows(self, value: Any) -> bool:
        """Whether the analysis saw ``value`` (a value made after it ran: no)."""
        return value in self._infos

    # -- functions ------------------------------------------------------------------------
    @staticmethod
    def _callers_first(module: Any, functions: list[Any], analyses: AnalysisManager | None) -> list[Any]:
        from .call_graph import CallGraph

        graph = analyses.get(CallGraph, module) if analyses is not None else CallGraph(module)
        return list(reversed(graph.bottom_up()))

    def _arguments(self, function: Any, done: set[int]) -> list[AxisInfo]:
        if function.attributes.get("kernel"):
            return self._argument_hints(function)
        sites = [op for op in _calls_to(self.op, function.attributes.get("sym_name"))]
        if not sites:
            return self._argument_hints(function)
        if not all(id(_enclosing_function(site)) in done for site in sites):
            return [AxisInfo.unknown(shape_of(a)) for a in function.arguments]  # recursion
        joined = [self[v] for v in sites[0].operands]
        for site in sites[1:]:
            joined = [a.join(self[v]) for a, v in zip(joined, site.operands)]
        return joined

    @staticmethod
    def _argument_hints(function: Any) -> list[AxisInfo]:
        args = function.arguments
        divisibility = function.attributes.get("pt.divisibility")
        equal_to_1 = function.attributes.get("pt.equal_to_1")
        name = function.attributes.get("sym_name")
        for key, values in (("pt.divisibility", divisibility), ("pt.equal_to_1", equal_to_1)):
            if values is not None and (not isinstance(values, tuple) or len(values) != len(args)):
                raise VerificationError(f"'{key}' of function '@{name}' must list one entry per argument "
                                        f"({len(args)}), got {format_attribute(values)}", function.name,
                                        function.location)
        infos = []
        for index, arg in enumerate(args):
            shape = shape_of(arg)
            scalar = isinstance(arg.type, (t.IntType, t.PointerType))
            if scalar and equal_to_1 is not None and equal_to_1[index] and isinstance(arg.type, t.IntType):
                infos.append(AxisInfo.of_constant(1, shape))
            elif scalar and divisibility is not None:
                infos.append(AxisInfo((1,), (min(max(int(divisibility[index]), 1), MAX_DIVISIBILITY),), (1,)))
            else:
                infos.append(AxisInfo.unknown(shape))
        return infos

    def _function(self, function: Any, arguments: list[AxisInfo]) -> None:
        for arg, info in zip(function.arguments, arguments):
            self._infos[arg] = info
        self._block(function.entry_block)

    # -- ops ------------------------------------------------------------------------------
    def _block(self, block: Any) -> None:
        for op in block:
            self._op(op)

    def _op(self, op: Any) -> None:
        handler = _REGION_HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
            return
        if op.regions:
            # A region this analysis does not model (a reduction's combine, a plugin's):
            # its arguments are unknown, its ops still get facts.
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        self._infos[arg] = AxisInfo.unknown(shape_of(arg))
                    self._block(block)
        if not op.results:
            return
        rule = AXIS_INFO_RULES.get(type(op), _unknown_results)
        results = rule(op, [self[v] for v in op.operands])
        for result, info in zip(op.results, results):
            self._infos[result] = _apply_hints(op, result, info)

    def _set_results(self, op: Any, infos: list[AxisInfo]) -> None:
        for result, info in zip(op.results, infos):
            self._infos[result] = _apply_hints(op, result, info)

    def _for(self, op: Any) -> None:
        lower, step = self[op.lower], self[op.step]
        # lower + i*step: a multiple of what divides both; never known to be constant.
        self._infos[op.induction_variable] = AxisInfo((1,), (math.gcd(lower.divisibility[0],
                                                                      step.divisibility[0]),), (1,))
        carried = self._fixed_point(op.body.block, op.region_iter_args, [self[v] for v in op.init_args])
        self._set_results(op, carried)

    def _while(self, op: Any) -> None:
        before, after = op.before.block, op.after.block
        self._fixed_point(before, before.arguments, [self[v] for v in op.init_args], after)
        passed = [self[v] for v in before.last_op.operands[1:]]
        self._set_results(op, passed)

    def _fixed_point(self, block: Any, args: list[Any], initial: list[AxisInfo], last_block: Any = None) -> list[AxisInfo]:
        """Analyse a loop until what its arguments hold is what every iteration gives
        them: the join of the initial values and of what the body yields."""
        last_block = last_block or block
        current = initial
        # Terminates: a round that changes anything divides some fact by at least 2 or
        # forgets a constant, and facts are positive integers.
        while True:
            for arg, info in zip(args, current):
                self._infos[arg] = info
            self._block(block)
            if last_block is not block:
                for arg, value in zip(last_block.arguments, block.last_op.operands[1:]):
                    self._infos[arg] = self[value]
                self._block(last_block)
            yielded = [self[v] for v in last_block.last_op.operands]
            joined = [a.join(y) for a, y in zip(current, yielded)]
            if joined == current:
                return current
            current = joined

    def _if(self, op: Any) -> None:
        self._block(op.then_region.block)
        self._block(op.else_region.block)
        if not op.results:
            return
        condition = self[op.condition].constant
        then_values = [self[v] for v in op.then_region.block.last_op.operands]
        else_values = [self[v] for v in op.else_region.block.last_op.operands]
        if condition is not None:
            self._set_results(op, then_values if condition else else_values)
        else:
            self._set_results(op, [a.join(b) for a, b in zip(then_values, else_values)])


_REGION_HANDLERS: dict[type, Callable[[AxisInfoAnalysis, Any], None]] = {
    scf.ForOp: AxisInfoAnalysis._for,
    scf.WhileOp: AxisInfoAnalysis._while,
    scf.IfOp: AxisInfoAnalysis._if,
}


def _calls_to(module: Any, name: str) -> list[Any]:
    return [op for op in module.walk() if type(op) is func_d.CallOp and op.callee.name == name]


def _enclosing_function(op: Any) -> Any:
    parent = op.parent_op
    while parent is not None and parent.name != "func.func":
        parent = parent.parent_op
    return parent


def _apply_hints(op: Any, result: Any, info: AxisInfo) -> AxisInfo:
    """Add what the language's hints on ``op`` state.  A hint is a fact the user vouches
    for, so it adds to what the analysis found rather than replacing it."""
    if not any(key in op.attributes for key in HINT_ATTRIBUTES):
        return info
    facts = {"contiguity": info.contiguity, "divisibility": info.divisibility, "constancy": info.constancy}
    for key, field in HINT_ATTRIBUTES.items():
        hint = op.attributes.get(key)
        if hint is None:
            continue
        values = hint if isinstance(hint, tuple) else (hint,) * info.rank
        if len(values) != info.rank or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                               for v in values):
            raise VerificationError(f"hint '{key}' = {format_attribute(hint)} needs one positive integer per "
                                    f"dimension of {result.type} ({info.rank})", op.name, op.location)
        facts[field] = tuple(max(a, min(b, MAX_DIVISIBILITY)) for a, b in zip(facts[field], values))
    return AxisInfo(facts["contiguity"], facts["divisibility"], facts["constancy"], info.constant)


# --------------------------------------------------------------------------------------
# Printing, for tests (like MLIR's -test-print-alignment)


def annotate_axis_info(module: Any, analysis: AxisInfoAnalysis) -> None:
    """Write the analysis onto the IR: ``pt.axis_info`` on every op with results (a list
    for several results), ``pt.arg_axis_info`` on functions and ``scf.for`` (their
    block arguments, the induction variable first)."""
    for op in module.walk():
        if op.name in ("func.func", "scf.for"):
            op.set_attr("pt.arg_axis_info", tuple(analysis[a] for a in op.regions[0].blocks[0].arguments))
        if op.results and op.name != "func.func":
            infos = tuple(analysis[r] for r in op.results)
            op.set_attr("pt.axis_info", infos[0] if len(infos) == 1 else infos)


if AxisInfo.attribute_name not in IR_REGISTRY.attributes:
    IR_REGISTRY.attributes.add(AxisInfo.attribute_name, AxisInfo)

