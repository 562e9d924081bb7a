"""Operations, blocks and regions: the containers of the IR.

An :class:`Operation` has operands (SSA values), results, attributes, regions and a
source location.  Each op kind is a subclass defined declaratively with
:func:`polytile.ir.opdef.define_op`; the class carries the definition that drives
building, printing, parsing, verifying, folding and interpreting.

Blocks hold their operations in an intrusive doubly linked list, so inserting and
erasing are O(1) while passes rewrite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Sequence

from ..errors import VerificationError
from .attributes import normalize_attribute, same_attribute
from .types import Type
from .values import BlockArgument, OpResult, Use, Value

if TYPE_CHECKING:
    from .opdef import OpDefinition


class Operation:
    """One operation.  Subclasses are made by :func:`~polytile.ir.opdef.define_op`."""

    name: ClassVar[str] = ""
    definition: ClassVar["OpDefinition"]

    __slots__ = (
        "_operands",
        "_uses",
        "operand_segments",
        "results",
        "attributes",
        "regions",
        "location",
        "parent",
        "prev_op",
        "next_op",
    )

    def __init__(
        self,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, Any] | None = None,
        regions: Sequence["Region"] = (),
        location: Any = None,
        operand_segments: tuple[int, ...] | None = None,
        result_names: Sequence[str | None] | None = None,
    ):
        self._operands: list[Value] = []
        self._uses: list[Use] = []
        for value in operands:
            self._append_operand(value)
        self.operand_segments = operand_segments
        names = result_names or [None] * len(result_types)
        self.results: tuple[OpResult, ...] = tuple(
            OpResult(t, self, i, names[i]) for i, t in enumerate(result_types)
        )
        self.attributes: dict[str, Any] = {}
        for key, value in (attributes or {}).items():
            self.set_attr(key, value)
        self.regions: tuple[Region, ...] = tuple(regions)
        for region in self.regions:
            region.parent = self
        self.location = location
        self.parent: Block | None = None
        self.prev_op: Operation | None = None
        self.next_op: Operation | None = None

    # -- operands ---------------------------------------------------------------------
    def _append_operand(self, value: Value) -> None:
        if not isinstance(value, Value):
            raise TypeError(f"operand of '{self.name}' must be an IR value, got {type(value).__name__} {value!r}")
        use = Use(self, len(self._operands))
        self._operands.append(value)
        self._uses.append(use)
        value.uses.append(use)

    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    @property
    def num_operands(self) -> int:
        return len(self._operands)

    def operand(self, index: int) -> Value:
        return self._operands[index]

    def set_operand(self, index: int, value: Value) -> None:
        old = self._operands[index]
        if old is value:
            return
        use = self._uses[index]
        old.uses.remove(use)
        self._operands[index] = value
        value.uses.append(use)

    def drop_operand_uses(self) -> None:
        """Forget this op's uses of its operands (before erasing it)."""
        for value, use in zip(self._operands, self._uses):
            try:
                value.uses.remove(use)
            except ValueError:
                pass
        self._operands = []
        self._uses = []

    def set_operands(self, values: Sequence[Value], operand_segments: tuple[int, ...] | None = None) -> None:
        self.drop_operand_uses()
        for value in values:
            self._append_operand(value)
        self.operand_segments = operand_segments

    # -- results ----------------------------------------------------------------------
    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"'{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    def replace_all_uses_with(self, values: Sequence[Value]) -> None:
        if len(values) != len(self.results):
            raise ValueError(f"replacing {len(self.results)} results of '{self.name}' with {len(values)} values")
        for old, new in zip(self.results, values):
            old.replace_all_uses_with(new)

    # -- structure --------------------------------------------------------------------
    @property
    def parent_op(self) -> "Operation | None":
        block = self.parent
        if block is None or block.parent is None:
            return None
        return block.parent.parent

    @property
    def parent_region(self) -> "Region | None":
        return None if self.parent is None else self.parent.parent

    def ancestors(self) -> Iterator["Operation"]:
        op = self.parent_op
        while op is not None:
            yield op
            op = op.parent_op

    def is_ancestor_of(self, other: "Operation") -> bool:
        return any(a is self for a in other.ancestors())

    def walk(self, post_order: bool = False) -> Iterator["Operation"]:
        """This op and every op nested in it.  Safe to erase the yielded op in post-order."""
        if not post_order:
            yield self
        for region in self.regions:
            for block in region.blocks:
                op = block.first_op
                while op is not None:
                    following = op.next_op
                    yield from op.walk(post_order)
                    op = following
        if post_order:
            yield self

    def detach(self) -> "Operation":
        if self.parent is not None:
            self.parent.unlink(self)
        return self

    def erase(self) -> None:
        """Remove this op from its block and drop every use it makes.

        Its results must be unused: erasing a used value would leave dangling operands.
        """
        for result in self.results:
            if result.uses:
                users = ", ".join(sorted({u.owner.name for u in result.uses}))
                raise ValueError(f"cannot erase '{self.name}': its result is still used by {users}")
        self.detach()
        for op in self.walk(post_order=True):
            op.drop_operand_uses()

    def move_before(self, anchor: "Operation") -> None:
        self._check_move_anchor(anchor)
        self.detach()
        anchor.parent.insert_before(self, anchor)  # type: ignore[union-attr]

    def move_after(self, anchor: "Operation") -> None:
        self._check_move_anchor(anchor)
        self.detach()
        anchor.parent.insert_after(self, anchor)  # type: ignore[union-attr]

    def _check_move_anchor(self, anchor: "Operation") -> None:
        # Checked before detaching, so that a bad anchor leaves this op where it was.
        if anchor is self:
            raise ValueError(f"cannot move '{self.name}' next to itself")
        if anchor.parent is None:
            raise ValueError(f"cannot move '{self.name}' next to '{anchor.name}', which is in no block")

    # -- definition-driven helpers ----------------------------------------------------
    @classmethod
    def has_trait(cls, trait: type) -> bool:
        return trait in cls.definition.trait_types

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> "Operation":
        """An op from operand groups and attributes given by name (or operands in order):
        see :func:`polytile.ir.opdef.build_op`."""
        return _build_op(cls, *args, **kwargs)

    def operand_group_slice(self, index: int) -> tuple[int, int]:
        """Where operand group ``index`` of the definition lies among the operands."""
        return group_slices(self.definition.operands, len(self._operands), self.operand_segments, "operand",
                            self.name)[index]

    def result_group_slice(self, index: int) -> tuple[int, int]:
        """Where result group ``index`` of the definition lies among the results."""
        return group_slices(self.definition.results, len(self.results), None, "result", self.name)[index]

    def operand_groups(self) -> list[tuple[Any, tuple[Value, ...]]]:
        """Each operand group of the definition with its values."""
        slices = group_slices(self.definition.operands, len(self._operands), self.operand_segments, "operand",
                              self.name)
        return [(g, tuple(self._operands[a:b])) for g, (a, b) in zip(self.definition.operands, slices)]

    def get_attr(self, name: str, default: Any = None) -> Any:
        return self.attributes.get(name, default)

    def set_attr(self, name: str, value: Any) -> None:
        """Set attribute ``name``.  A declared attribute set to its default is removed
        instead: ops never store defaults, so that an op built in Python, one parsed
        from text that leaves the default out and one whose text spells it are the same
        op (CSE merges them; they print alike).  ``op.<attr>`` still reads the default."""
        value = normalize_attribute(value)
        definition = getattr(type(self), "definition", None)
        if definition is not None and name in definition.defaults \
                and same_attribute(value, definition.defaults[name]):
            self.attributes.pop(name, None)
            return
        self.attributes[name] = value

    def clone(self, mapping: dict[Value, Value] | None = None) -> "Operation":
        """A deep copy; operands found in ``mapping`` are replaced, and the copy's
        results and block arguments are added to it."""
        mapping = {} if mapping is None else mapping
        new = type(self).__new__(type(self))
        Operation.__init__(
            new,
            [mapping.get(v, v) for v in self._operands],
            [r.type for r in self.results],
            dict(self.attributes),
            [],
            self.location,
            self.operand_segments,
            [r.name_hint for r in self.results],
        )
        for old, fresh in zip(self.results, new.results):
            mapping[old] = fresh
        new.regions = tuple(region.clone(mapping) for region in self.regions)
        for region in new.regions:
            region.parent = new
        return new

    def __repr__(self) -> str:
        return f"<{self.name} op>"

    def __str__(self) -> str:
        from .printer import Printer

        return Printer().print_operation_text(self)


class Block:
    """A list of operations with arguments.  Structured control flow uses one block per region."""

    __slots__ = ("arguments", "parent", "first_op", "last_op", "_length")

    def __init__(self, arg_types: Iterable[Type] = (), arg_names: Sequence[str | None] | None = None):
        types = list(arg_types)
        names = list(arg_names) if arg_names is not None else [None] * len(types)
        self.arguments: list[BlockArgument] = [BlockArgument(t, self, i, names[i]) for i, t in enumerate(types)]
        self.parent: Region | None = None
        self.first_op: Operation | None = None
        self.last_op: Operation | None = None
        self._length = 0

    def add_argument(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.arguments), name_hint)
        self.arguments.append(arg)
        return arg

    def erase_argument(self, index: int) -> None:
        arg = self.arguments[index]
        if arg.uses:
            raise ValueError("cannot erase a block argument that is still used")
        del self.arguments[index]
        for i, a in enumerate(self.arguments):
            a.index = i

    @property
    def parent_op(self) -> Operation | None:
        return None if self.parent is None else self.parent.parent

    def __iter__(self) -> Iterator[Operation]:
        op = self.first_op
        while op is not None:
            following = op.next_op
            yield op
            op = following

    def __len__(self) -> int:
        return self._length

    @property
    def ops(self) -> list[Operation]:
        return list(self)

    @property
    def terminator(self) -> Operation | None:
        return self.last_op

    def _check_free(self, op: Operation) -> None:
        if op.parent is not None:
            raise ValueError(f"'{op.name}' is already in a block; detach it first")

    def append(self, op: Operation) -> Operation:
        self._check_free(op)
        op.parent = self
        op.prev_op = self.last_op
        op.next_op = None
        if self.last_op is None:
            self.first_op = op
        else:
            self.last_op.next_op = op
        self.last_op = op
        self._length += 1
        return op

    def _check_anchor(self, anchor: Operation) -> None:
        # Linking next to an op of another block (or a detached one, say an erased op a
        # builder still points at) would splice this block's list into a foreign one.
        if anchor.parent is not self:
            raise ValueError(f"the insertion point's anchor op '{anchor.name}' is no longer in this block "
                             "(was it erased?)" if anchor.parent is None else
                             f"the insertion point's anchor op '{anchor.name}' is in another block")

    def insert_before(self, op: Operation, anchor: Operation | None) -> Operation:
        """Insert ``op`` before ``anchor`` (at the end when ``anchor`` is None).

        ``anchor`` must be in this block (ValueError otherwise)."""
        if anchor is None:
            return self.append(op)
        self._check_anchor(anchor)
        self._check_free(op)
        op.parent = self
        op.next_op = anchor
        op.prev_op = anchor.prev_op
        if anchor.prev_op is None:
            self.first_op = op
        else:
            anchor.prev_op.next_op = op
        anchor.prev_op = op
        self._length += 1
        return op

    def insert_after(self, op: Operation, anchor: Operation) -> Operation:
        """Insert ``op`` after ``anchor``, which must be in this block."""
        self._check_anchor(anchor)
        return self.insert_before(op, anchor.next_op)

    def unlink(self, op: Operation) -> None:
        if op.parent is not self:
            raise ValueError(f"'{op.name}' is not in this block")
        if op.prev_op is None:
            self.first_op = op.next_op
        else:
            op.prev_op.next_op = op.next_op
        if op.next_op is None:
            self.last_op = op.prev_op
        else:
            op.next_op.prev_op = op.prev_op
        op.parent = op.prev_op = op.next_op = None
        self._length -= 1

    def clone(self, mapping: dict[Value, Value]) -> "Block":
        new = Block([a.type for a in self.arguments], [a.name_hint for a in self.arguments])
        for old, fresh in zip(self.arguments, new.arguments):
            mapping[old] = fresh
        for op in self:
            new.append(op.clone(mapping))
        return new


class Region:
    """A list of blocks owned by an operation."""

    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Iterable[Block] = ()):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for block in blocks:
            self.add_block(block)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The only block of a single-block region."""
        if len(self.blocks) != 1:
            raise ValueError(f"region has {len(self.blocks)} blocks, expected exactly one")
        return self.blocks[0]

    def clone(self, mapping: dict[Value, Value]) -> "Region":
        return Region(block.clone(mapping) for block in self.blocks)

    def walk(self) -> Iterator[Operation]:
        for block in self.blocks:
            for op in block:
                yield from op.walk()


#: group_slices' answers by (id of the groups tuple, count, segments): every operand or
#: result accessor of every op asks, and the verifier asks for each op after each pass.
#: An entry holds its groups tuple, so the id stays that tuple's while the entry exists.
_SLICES: dict[tuple[int, int, tuple[int, ...] | None], tuple[Sequence[Any], tuple[tuple[int, int], ...]]] = {}


def group_slices(groups: Sequence[Any], count: int, segments: tuple[int, ...] | None, what: str, op_name: str):
    """Where each group's values lie in a flat list of ``count`` values (a tuple of
    ``(start, stop)`` per group)."""
    if segments is not None and type(segments) is not tuple:  # unhashable, or could change
        return _group_slices(groups, count, segments, what, op_name)
    key = (id(groups), count, segments)
    cached = _SLICES.get(key)
    if cached is not None and cached[0] is groups:
        return cached[1]
    slices = _group_slices(groups, count, segments, what, op_name)
    if isinstance(groups, tuple):  # a list could change after its answer was kept
        _SLICES[key] = (groups, slices)
    return slices


def _group_slices(groups: Sequence[Any], count: int, segments: tuple[int, ...] | None, what: str,
                  op_name: str) -> tuple[tuple[int, int], ...]:
    if segments is not None:
        if len(segments) != len(groups) or sum(segments) != count:
            raise VerificationError(
                f"{what} segments {list(segments)} do not match {len(groups)} groups and {count} values", op_name
            )
        sizes = list(segments)
    else:
        variable = [g for g in groups if g.is_variable]
        fixed = len(groups) - len(variable)
        if len(variable) > 1:
            raise VerificationError(f"{what} segments are missing", op_name)
        if variable:
            rest = count - fixed
            if rest < 0:
                raise VerificationError(f"expects at least {fixed} {what}s, got {count}", op_name)
            sizes = [rest if g.is_variable else 1 for g in groups]
        else:
            if count != fixed:
                raise VerificationError(f"expects {fixed} {what}{'s' if fixed != 1 else ''}, got {count}", op_name)
            sizes = [1] * fixed
    slices, start = [], 0
    for size in sizes:
        slices.append((start, start + size))
        start += size
    return tuple(slices)


def _build_op(cls: type, *args: Any, **kwargs: Any) -> Operation:
    # opdef imports this module, so it is imported on the first build, and the global
    # replaced by its build_op: later builds call it directly (builds are frequent).
    global _build_op
    from .opdef import build_op

    _build_op = build_op
    return build_op(cls, *args, **kwargs)
