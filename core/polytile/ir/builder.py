"""A builder that creates ops at an insertion point, with a current source location."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, TypeVar

from .operation import Block, Operation

OpT = TypeVar("OpT", bound=Operation)


class InsertionPoint:
    """Before ``anchor`` in ``block``; at the block's end when ``anchor`` is None."""

    __slots__ = ("block", "anchor", "last_inserted")

    def __init__(self, block: Block, anchor: Operation | None = None):
        if anchor is not None and anchor.parent is not block:
            raise ValueError(f"the anchor op '{anchor.name}' is not in this block")
        self.block = block
        self.anchor = anchor
        #: The op a builder inserted here last: where to go on if ``anchor`` is erased.
        self.last_inserted: Operation | None = None

    def resolve(self) -> Operation | None:
        """The op to insert before now (None: the block's end).

        The common rewrite "create the replacement before op, erase op, create more"
        erases the anchor: inserting then goes on right after what was inserted here
        last, which is where the anchor stood.  Without such an op there is no telling
        where the anchor was, and a ValueError says so (never a corrupt op list)."""
        anchor = self.anchor
        if anchor is None or anchor.parent is self.block:
            return anchor
        last = self.last_inserted
        if last is not None and last.parent is self.block:
            self.anchor = last.next_op
            return self.anchor
        raise ValueError(f"the insertion point's anchor op '{anchor.name}' is no longer in this block "
                         "(was it erased?); set a new insertion point")

    @classmethod
    def at_end(cls, block: Block) -> "InsertionPoint":
        return cls(block, None)

    @classmethod
    def at_start(cls, block: Block) -> "InsertionPoint":
        return cls(block, block.first_op)

    @classmethod
    def before(cls, op: Operation) -> "InsertionPoint":
        return cls(_block_of(op), op)

    @classmethod
    def after(cls, op: Operation) -> "InsertionPoint":
        return cls(_block_of(op), op.next_op)


def _block_of(op: Operation) -> Block:
    if op.parent is None:
        raise ValueError(f"'{op.name}' is in no block: there is no insertion point next to it")
    return op.parent


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
        point = self.insertion_point
        point.block.insert_before(op, point.resolve())
        point.last_inserted = op
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
