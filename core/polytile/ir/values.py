"""SSA values and their use lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from .types import Type

if TYPE_CHECKING:
    from .operation import Block, Operation


class Use:
    """One use of a value: operand number ``index`` of ``owner``."""

    __slots__ = ("owner", "index")

    def __init__(self, owner: "Operation", index: int):
        self.owner = owner
        self.index = index

    def __repr__(self) -> str:
        return f"Use({self.owner.name}#{self.index})"


class Value:
    """An SSA value: the result of an operation or an argument of a block."""

    __slots__ = ("type", "uses", "name_hint")

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.uses: list[Use] = []
        self.name_hint = name_hint

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)

    def users(self) -> Iterator["Operation"]:
        seen: set[int] = set()
        for use in self.uses:
            if id(use.owner) not in seen:
                seen.add(id(use.owner))
                yield use.owner

    def replace_all_uses_with(self, other: "Value") -> None:
        if other is self:
            return
        for use in list(self.uses):
            use.owner.set_operand(use.index, other)

    def replace_uses_if(self, other: "Value", predicate) -> None:
        for use in list(self.uses):
            if predicate(use):
                use.owner.set_operand(use.index, other)

    @property
    def defining_op(self) -> "Operation | None":
        return None

    @property
    def parent_block(self) -> "Block | None":
        raise NotImplementedError


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: Type, op: "Operation", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.op = op
        self.index = index

    @property
    def defining_op(self) -> "Operation":
        return self.op

    @property
    def parent_block(self) -> "Block | None":
        return self.op.parent

    def __repr__(self) -> str:
        return f"<result {self.index} of {self.op.name}: {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: "Block", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def parent_block(self) -> "Block":
        return self.block

    def __repr__(self) -> str:
        return f"<block argument {self.index}: {self.type}>"
