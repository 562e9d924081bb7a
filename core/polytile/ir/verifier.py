"""The IR verifier: every op against its definition, plus SSA dominance.

Errors name the op and its source location (:class:`~polytile.errors.VerificationError`).
"""

from __future__ import annotations

from ..errors import VerificationError
from .attributes import is_attribute_value
from .opdef import IsolatedFromAbove, Terminator, is_discardable_attribute, op_error
from .operation import Operation
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

    def _is_visible(self, value: Value) -> bool:
        return any(value in scope for scope in self.visible)

    def visit(self, op: Operation) -> None:
        for index, value in enumerate(op.operands):
            if not self._is_visible(value):
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


def verify_op_definition(op: Operation) -> None:
    definition = op.definition
    try:
        groups = op.operand_groups()
    except VerificationError as exc:
        raise op_error(op, exc.message) from None
    for group, values in groups:
        if group.optional and len(values) > 1:
            raise op_error(op, f"operand '{group.name}' takes at most one value, got {len(values)}")
        for value in values:
            if not group.constraint(value.type):
                raise op_error(op, f"operand '{group.name}' must be {group.constraint.description}, got {value.type}")
    try:
        result_slices = [op.result_group_slice(i) for i in range(len(definition.results))]
    except VerificationError as exc:
        raise op_error(op, exc.message) from None
    if not definition.results and op.results:
        raise op_error(op, f"has no results, but {len(op.results)} were given")
    for group, (start, stop) in zip(definition.results, result_slices):
        for result in op.results[start:stop]:
            if not group.constraint(result.type):
                raise op_error(op, f"result '{group.name}' must be {group.constraint.description}, got {result.type}")
    declared = {a.name: a for a in definition.attributes}
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
