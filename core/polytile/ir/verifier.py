"""The IR verifier: every op against its definition, plus SSA dominance.

Errors name the op and its source location (:class:`~polytile.errors.VerificationError`).
"""

from __future__ import annotations

from ..errors import VerificationError
from .attributes import is_attribute_value
from .constraints import AnyType
from .opdef import IsolatedFromAbove, Terminator, is_discardable_attribute, op_error
from .operation import Operation, group_slices
from .values import Value


def verify(op: Operation) -> None:
    """Raise VerificationError for the first problem found in ``op`` and everything in it."""
    _Verifier().run(op)


class _Verifier:
    def __init__(self) -> None:
        self.visible: list[set[Value]] = []

    def run(self, op: Operation) -> None:
        self.visible.append(set())
        self.visit(op)
        self.visible.pop()

    def visit(self, op: Operation) -> None:
        visible = self.visible
        for index, value in enumerate(op._operands):
            # Innermost scope first: most operands are defined in the op's own block.
            for scope in reversed(visible):
                if value in scope:
                    break
            else:
                raise op_error(op, f"operand #{index} does not dominate this use (it is defined later, "
                                   "in another region, or outside an isolated function)")
        verify_op_definition(op)
        isolated = op.has_trait(IsolatedFromAbove)
        for region_index, region in enumerate(op.regions):
            saved = self.visible
            if isolated:
                self.visible = []
            for block in region.blocks:
                self.visible.append(set(block.arguments))
                for inner in block:
                    if inner.parent is not block:
                        raise op_error(inner, "has a broken parent link")
                    self.visit(inner)
                    self.visible[-1].update(inner.results)
                self.visible.pop()
            self.visible = saved
        # Checks that need the nested ops verified first (a module matching calls to
        # the functions it holds): MLIR's region verifiers.
        after_regions = getattr(op, "verify_regions", None)
        if after_regions is not None:
            after_regions()


#: The declared attribute names of each definition's attribute tuple, by the tuple's id
#: (an entry holds the tuple, so the id stays its own): asked for every op after each pass.
_DECLARED: dict[int, tuple[tuple, frozenset[str]]] = {}


def _declared_names(attributes: tuple) -> frozenset[str]:
    entry = _DECLARED.get(id(attributes))
    if entry is None or entry[0] is not attributes:
        entry = (attributes, frozenset(a.name for a in attributes))
        if isinstance(attributes, tuple):
            _DECLARED[id(attributes)] = entry
    return entry[1]


def verify_op_definition(op: Operation) -> None:
    definition = op.definition
    operands = op._operands
    try:
        slices = group_slices(definition.operands, len(operands), op.operand_segments, "operand", op.name)
    except VerificationError as exc:
        raise op_error(op, exc.message) from None
    for group, (start, stop) in zip(definition.operands, slices):
        if group.optional and stop - start > 1:
            raise op_error(op, f"operand '{group.name}' takes at most one value, got {stop - start}")
        constraint = group.constraint
        if constraint is AnyType:
            continue
        for index in range(start, stop):
            type_ = operands[index].type
            if not constraint(type_):
                raise op_error(op, f"operand '{group.name}' must be {constraint.description}, got {type_}")
    results = op.results
    if definition.results:
        try:
            result_slices = group_slices(definition.results, len(results), None, "result", op.name)
        except VerificationError as exc:
            raise op_error(op, exc.message) from None
        for group, (start, stop) in zip(definition.results, result_slices):
            constraint = group.constraint
            if constraint is AnyType:
                continue
            for result in results[start:stop]:
                if not constraint(result.type):
                    raise op_error(op, f"result '{group.name}' must be {constraint.description}, got {result.type}")
    elif results:
        raise op_error(op, f"has no results, but {len(results)} were given")
    declared = _declared_names(definition.attributes)
    for attr in definition.attributes:
        if attr.name not in op.attributes:
            if not attr.optional:
                raise op_error(op, f"requires attribute '{attr.name}' ({attr.describe_kind()})")
            continue
        value = op.attributes[attr.name]
        if not attr.accepts(value):
            raise op_error(op, f"attribute '{attr.name}' must be {attr.describe_kind()}, got {value!r}")
    for key, value in op.attributes.items():
        if key not in declared and not is_discardable_attribute(key):
            known = ", ".join(sorted(declared)) or "none"
            raise op_error(op, f"has no attribute '{key}' (declared: {known}; hints a pass attaches must be "
                               "dialect-prefixed, like 'pt.hint')")
        if not is_attribute_value(value):
            raise op_error(op, f"attribute '{key}' holds {type(value).__name__}, which is not an IR attribute")
    if len(op.regions) != len(definition.regions):
        raise op_error(op, f"expects {len(definition.regions)} regions, got {len(op.regions)}")
    for region_def, region in zip(definition.regions, op.regions):
        if region_def.single_block and len(region.blocks) != 1:
            raise op_error(op, f"region '{region_def.name}' must have exactly one block, got {len(region.blocks)}")
        if region_def.terminators:
            for block in region.blocks:
                last = block.last_op
                if last is None or last.name not in region_def.terminators:
                    found = f"'{last.name}'" if last is not None else "an empty block"
                    raise op_error(op, f"region '{region_def.name}' must end with "
                                       f"{' or '.join(repr(t) for t in region_def.terminators)}, found {found}")
        for block in region.blocks:
            for inner in block:
                if inner.has_trait(Terminator) and inner is not block.last_op:
                    raise op_error(inner, "is a terminator but is not last in its block")
    for trait in definition.traits:
        trait.verify(op)
    custom = getattr(op, "verify_op", None)
    if custom is not None:
        custom()
