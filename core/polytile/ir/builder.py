"""A builder that creates ops at an insertion point, with a current source location."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, TypeVar

from .operation import Block, Operation

OpT = TypeVar("OpT", bound=Operation)


class InsertionPoint:
    """Before ``anchor`` in ``block``; at the block's end when ``anchor`` is None."""

    __slots__ = ("block", "anchor")

    def __init__(self, block: Block, anchor: Operation | None = None):
        self.block = block
        self.anchor = anchor

    @classmethod
    def at_end(cls, block: Block) -> "InsertionPoint":
        return cls(block, None)

    @classmethod
    def at_start(cls, block: Block) -> "InsertionPoint":
        return cls(block, block.first_op)

    @classmethod
    def before(cls, op: Operation) -> "InsertionPoint":
        return cls(op.parent, op)  # type: ignore[arg-type]

    @classmethod
    def after(cls, op: Operation) -> "InsertionPoint":
        return cls(op.parent, op.next_op)  # type: ignore[arg-type]


class Builder:
    """Creates ops and inserts them::

        b = Builder.at_end(block)
        total = b.create(AddIOp, x, y).result
    """

    def __init__(self, insertion_point: InsertionPoint | None = None, location: Any = None):
        self.insertion_point = insertion_point
        self.location = location

    @classmethod
    def at_end(cls, block: Block, location: Any = None) -> "Builder":
        return cls(InsertionPoint.at_end(block), location)

    @classmethod
    def before(cls, op: Operation, location: Any = None) -> "Builder":
        return cls(InsertionPoint.before(op), op.location if location is None else location)

    @classmethod
    def after(cls, op: Operation, location: Any = None) -> "Builder":
        return cls(InsertionPoint.after(op), op.location if location is None else location)

    def insert(self, op: OpT) -> OpT:
        if self.insertion_point is None:
            raise ValueError("the builder has no insertion point")
        block, anchor = self.insertion_point.block, self.insertion_point.anchor
        block.insert_before(op, anchor)
        return op

    def create(self, op_class: type[OpT], *args: Any, location: Any = None, **kwargs: Any) -> OpT:
        op = op_class.build(*args, location=self.location if location is None else location, **kwargs)  # type: ignore[attr-defined]
        return self.insert(op)

    @contextlib.contextmanager
    def at(self, insertion_point: InsertionPoint) -> Iterator["Builder"]:
        saved = self.insertion_point
        self.insertion_point = insertion_point
        try:
            yield self
        finally:
            self.insertion_point = saved

    @contextlib.contextmanager
    def located(self, location: Any) -> Iterator["Builder"]:
        saved = self.location
        self.location = location
        try:
            yield self
        finally:
            self.location = saved
