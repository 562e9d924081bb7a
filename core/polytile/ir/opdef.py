"""Declarative op definitions.

One class per op, written once, drives building, printing, parsing, verifying, folding
and interpreting::

    @define_op
    class AddIOp(Operation):
        '''Integer addition, wrapping on overflow.'''
        name = "arith.addi"
        lhs = Operand(IntLike)
        rhs = Operand(IntLike)
        result = Result(IntLike)
        traits = (Pure, Commutative, SameOperandsAndResultType, Elementwise)

        def fold(self, constants):            # optional
            ...

The descriptors become properties (``op.lhs`` is the operand value, ``op.result`` the
result value; attributes declared with :class:`Attr` read ``op.attributes``).  The class is
registered under its name so the parser finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import VerificationError
from .attributes import SymbolRef, is_attribute_value, normalize_attribute, same_attribute
from .constraints import AnyType, TypeConstraint
from .operation import Block, Operation, Region
from .types import Type
from .values import Value

# --------------------------------------------------------------------------------------
# Field declarations


class Operand:
    """An operand group.  ``variadic`` takes zero or more values; ``optional`` zero or one."""

    def __init__(self, constraint: TypeConstraint = AnyType, *, variadic: bool = False, optional: bool = False, doc: str = ""):
        self.constraint = constraint
        self.variadic = variadic
        self.optional = optional
        self.doc = doc
        self.name = ""

    @property
    def is_variable(self) -> bool:
        return self.variadic or self.optional


class Result(Operand):
    """A result group; same options as :class:`Operand`."""


class Attr:
    """A declared attribute: its Python kind, whether it is required, its default."""

    def __init__(self, kind: type | tuple[type, ...], *, optional: bool = False, default: Any = None, doc: str = ""):
        self.kind = kind
        self.optional = optional or default is not None
        self.default = default
        self.doc = doc
        self.name = ""

    def accepts(self, value: Any) -> bool:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        for kind in kinds:
            if kind is int and isinstance(value, bool):
                continue
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                return True
            if isinstance(value, kind):
                return True
        return False

    def describe_kind(self) -> str:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", tuple: "a list",
                 SymbolRef: "a symbol reference (@name)", Type: "a type"}
        return " or ".join(names.get(k, f"a {k.__name__}") for k in kinds)


class RegionDef:
    """A region the op owns.  ``terminators`` lists the op names allowed to end its block."""

    def __init__(self, *, single_block: bool = True, terminators: Sequence[str] = (), doc: str = ""):
        self.single_block = single_block
        self.terminators = tuple(terminators)
        self.doc = doc
        self.name = ""


# --------------------------------------------------------------------------------------
# Traits


class Trait:
    """Base class of traits.  ``verify`` may raise VerificationError (via ``op_error``)."""

    @staticmethod
    def verify(op: Operation) -> None:
        pass


class Pure(Trait):
    """No side effects: unused results may be deleted, equal ops merged and hoisted."""


class ReadsMemory(Trait):
    """Reads memory but writes nothing: may be deleted when unused, never merged or hoisted."""


class WritesMemory(Trait):
    """Writes global memory (besides the core's stores and atomics): a plugin's store or
    bulk copy out.  Passes that move reads across writes (``pipeline-loops``' copies
    issued iterations ahead) leave code holding one alone."""


class RecursivelyPure(Trait):
    """Side-effect free exactly when every op in its regions is (``scf.for``, ``scf.if``, ``tile.reduce``)."""


class Commutative(Trait):
    """The two operands may be swapped; canonicalization puts constants on the right."""


class Elementwise(Trait):
    """Applies per element; scalars and tiles of one shape."""


class Terminator(Trait):
    """Ends a block."""


class ReturnLike(Trait):
    """Hands values back to the parent op (``scf.yield``, ``func.return``)."""


class ConstantLike(Trait):
    """Produces a compile-time constant held in its ``value`` attribute."""


class IsolatedFromAbove(Trait):
    """Regions may not use values defined outside the op (functions, modules)."""


class SymbolTable(Trait):
    """Holds symbol ops (a module holds functions)."""


class Symbol(Trait):
    """Defines a symbol named by its ``sym_name`` attribute."""


class SameOperandsAndResultType(Trait):
    @staticmethod
    def verify(op: Operation) -> None:
        types = {v.type for v in op.operands} | {r.type for r in op.results}
        if len(types) > 1:
            raise op_error(op, "requires operands and results of one type, got " + ", ".join(sorted(str(x) for x in types)))


class SameOperandsType(Trait):
    @staticmethod
    def verify(op: Operation) -> None:
        types = {v.type for v in op.operands}
        if len(types) > 1:
            raise op_error(op, "requires operands of one type, got " + ", ".join(sorted(str(x) for x in types)))


class SameOperandsShape(Trait):
    """Operands (and results) have one shape; element types may differ (casts, compares)."""

    @staticmethod
    def verify(op: Operation) -> None:
        from .types import shape_of

        shapes = {shape_of(v.type) for v in op.operands} | {shape_of(r.type) for r in op.results}
        if len(shapes) > 1:
            raise op_error(op, "requires operands and results of one shape, got " + ", ".join(
                sorted("x".join(map(str, s)) or "scalar" for s in shapes)))


def HasParent(*names: str) -> type[Trait]:
    """The op may only appear directly inside one of the ops ``names``."""

    class _HasParent(Trait):
        parents = names

        @staticmethod
        def verify(op: Operation) -> None:
            parent = op.parent_op
            if parent is None or parent.name not in names:
                where = f"'{parent.name}'" if parent is not None else "the top level"
                raise op_error(op, f"must be inside {' or '.join(repr(n) for n in names)}, found in {where}")

    _HasParent.__name__ = f"HasParent({', '.join(names)})"
    return _HasParent


def op_error(op: Operation, message: str) -> VerificationError:
    return VerificationError(message, op.name, op.location)


# --------------------------------------------------------------------------------------
# The definition


@dataclass
class OpDefinition:
    name: str
    dialect: str
    summary: str
    operands: tuple[Operand, ...]
    results: tuple[Result, ...]
    attributes: tuple[Attr, ...]
    regions: tuple[RegionDef, ...]
    traits: tuple[type[Trait], ...]
    trait_types: frozenset = field(default_factory=frozenset)
    #: Declared attributes that have a default, by name: never stored (see Operation.set_attr).
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def variable_operand_groups(self) -> list[Operand]:
        return [g for g in self.operands if g.is_variable]

    @property
    def needs_segments(self) -> bool:
        """Several variable-length operand groups: the split must be stored."""
        return len(self.variable_operand_groups) > 1

    def is_keyworded(self, group: Operand) -> bool:
        """Whether the text form writes this group as ``name(%a, ...)``: optional groups
        always (``mask(%m)`` reads better than a bare third operand), variadic ones when
        there are several."""
        if group.optional:
            return True
        if group.variadic:
            return sum(1 for g in self.operands if g.variadic) > 1
        return False

    @property
    def is_pure(self) -> bool:
        return Pure in self.trait_types


def _operand_property(index: int, group: Operand):
    def getter(op: Operation):
        start, stop = op.operand_group_slice(index)
        if group.variadic:
            return tuple(op._operands[start:stop])
        if group.optional:
            return op._operands[start] if stop > start else None
        return op._operands[start]

    return property(getter, doc=group.doc or None)


def _result_property(index: int, group: Result):
    def getter(op: Operation):
        start, stop = op.result_group_slice(index)
        if group.variadic:
            return op.results[start:stop]
        if group.optional:
            return op.results[start] if stop > start else None
        return op.results[start]

    return property(getter, doc=group.doc or None)


def _attribute_property(attr: Attr):
    name = attr.name

    def getter(op: Operation):
        return op.attributes.get(name, attr.default)

    def setter(op: Operation, value: Any) -> None:
        op.set_attr(name, value)

    return property(getter, setter, doc=attr.doc or None)


def _region_property(index: int, region: RegionDef):
    return property(lambda op: op.regions[index], doc=region.doc or None)


def define_op(cls: type[Operation]) -> type[Operation]:
    """Turn a class body of Operand/Result/Attr/RegionDef declarations into an op."""
    from .registry import IR_REGISTRY

    if not cls.name or "." not in cls.name:
        raise ValueError(f"op class {cls.__name__} needs a dotted name such as 'dialect.op'")
    operands, results, attributes, regions = [], [], [], []
    for key, value in list(vars(cls).items()):
        if isinstance(value, Result):
            value.name = key
            results.append(value)
        elif isinstance(value, Operand):
            value.name = key
            operands.append(value)
        elif isinstance(value, Attr):
            value.name = key
            attributes.append(value)
        elif isinstance(value, RegionDef):
            value.name = key
            regions.append(value)
    if sum(1 for r in results if r.is_variable) > 1:
        raise ValueError(f"op {cls.name}: at most one variable-length result group is supported")
    traits = tuple(getattr(cls, "traits", ()))
    definition = OpDefinition(
        name=cls.name,
        dialect=cls.name.split(".", 1)[0],
        summary=(cls.__doc__ or "").strip().split("\n")[0],
        operands=tuple(operands),
        results=tuple(results),
        attributes=tuple(attributes),
        regions=tuple(regions),
        traits=traits,
        trait_types=frozenset(traits),
        defaults={a.name: normalize_attribute(a.default) for a in attributes if a.default is not None},
    )
    cls.definition = definition
    for i, group in enumerate(operands):
        setattr(cls, group.name, _operand_property(i, group))
    for i, group in enumerate(results):
        setattr(cls, group.name, _result_property(i, group))
    for attr in attributes:
        setattr(cls, attr.name, _attribute_property(attr))
    for i, region in enumerate(regions):
        setattr(cls, region.name, _region_property(i, region))
    if "__slots__" not in vars(cls):
        pass  # subclasses get a __dict__; that is fine and lets passes cache data on ops
    # An op class builds through build_op directly (Operation.build, for any other class,
    # reaches it through one more call): op building is frequent.
    cls.build = classmethod(build_op)  # type: ignore[method-assign]
    IR_REGISTRY.register_op(cls)
    return cls


def build_op(
    cls: type[Operation],
    *args: Any,
    result_types: Sequence[Type] | None = None,
    regions: Sequence[Region] | int | None = None,
    location: Any = None,
    **named: Any,
) -> Operation:
    """Make an op from operand groups and attributes given by name (or operands in order).

    Result types may be omitted when the op can infer them (``infer_result_types``).
    Regions default to one empty block each.
    """
    definition = cls.definition
    groups = definition.operands
    if len(args) > len(groups):
        raise TypeError(f"{cls.name} takes {len(groups)} operand groups, got {len(args)} positional arguments")
    values_by_group: dict[str, Any] = {}
    for group, value in zip(groups, args):
        values_by_group[group.name] = value
    attributes: dict[str, Any] = {}
    attr_names = {a.name for a in definition.attributes}
    for key, value in named.items():
        if any(g.name == key for g in groups):
            if key in values_by_group:
                raise TypeError(f"{cls.name}: operand group '{key}' given twice")
            values_by_group[key] = value
        elif key in attr_names or is_discardable_attribute(key):
            attributes[key] = normalize_attribute(value)
        else:
            raise TypeError(f"{cls.name} has no operand or attribute named '{key}'")
    flat: list[Value] = []
    sizes: list[int] = []
    for group in groups:
        value = values_by_group.get(group.name)
        if group.variadic:
            items = list(value or ())
        elif group.optional:
            items = [] if value is None else [value]
        else:
            if value is None:
                raise TypeError(f"{cls.name} needs operand '{group.name}'")
            items = [value]
        flat.extend(items)
        sizes.append(len(items))
    if result_types is None:
        infer = getattr(cls, "infer_result_types", None)
        if infer is None:
            if definition.results:
                raise TypeError(f"{cls.name} cannot infer its result types; pass result_types=")
            result_types = ()
        else:
            # Inference sees every declared attribute, defaults included; the op itself
            # stores only the attributes that differ from their defaults.
            result_types = infer(values_by_group, {**definition.defaults, **attributes})
    if regions is None:
        regions = len(definition.regions)
    if isinstance(regions, int):
        regions = [Region([Block()]) for _ in range(regions)]
    segments = tuple(sizes) if definition.needs_segments else None
    return cls(flat, list(result_types), attributes, regions, location, segments)


def is_default_attribute(cls: type[Operation], key: str, value: Any) -> bool:
    """Whether ``value`` is the declared default of ``cls``'s attribute ``key``."""
    definition = getattr(cls, "definition", None)
    return (definition is not None and key in definition.defaults
            and same_attribute(normalize_attribute(value), definition.defaults[key]))


def is_discardable_attribute(key: str) -> bool:
    """Attributes an op does not declare must be dialect-prefixed (``pt.divisibility``):
    passes attach them as hints, and any pass may drop them."""
    return "." in key


def check_attribute_value(op: Operation, key: str, value: Any) -> None:
    if not is_attribute_value(value):
        raise op_error(op, f"attribute '{key}' holds {type(value).__name__} {value!r}, which is not an IR attribute")
