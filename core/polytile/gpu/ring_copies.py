"""What ``pipeline-loops`` copies into a ring, and how: one :class:`RingCopies` per kind
of load, registered for the load's op class.

The core registers :class:`PointerTileCopies` for ``tile.load`` (a tile of pointers:
``gpu.async_copy``, NVIDIA ``cp.async``).  A plugin with another way to fill shared memory
(the TMA plugin's bulk tensor copies for descriptor loads) subclasses :class:`RingCopies`
and registers it for its load op with :func:`register_ring_copies`; the pass then
pipelines those loads the same way, into the same rings and barriers, and what the
plugin registered leaves with it.

A ring's copies complete in one of two ways, chosen per loop (the pass's ``completion``
option):

- ``"groups"``: each thread's copies of an iteration form a group
  (``gpu.async_commit_group``); ``gpu.async_wait {pending = n}`` waits for all but the
  newest ``n`` groups, and a ``gpu.barrier`` after it shows the bytes to every thread;
- ``"barriers"``: each slot has an mbarrier; the copies of a fill arrive on the slot's
  barrier (:meth:`RingCopies.signal`), and the reader waits for its phase
  (``gpu.mbarrier_wait``), after which the bytes are visible with no ``gpu.barrier``.
  The barrier expects the sum of :meth:`RingCopies.arrivals` of the loop's copies.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from ..dialects import arith, tile
from ..dialects.gpu import AsyncCommitGroupOp, AsyncCopyArriveOp, AsyncCopyOp, ConvertLayoutOp
from ..ir import types as t
from ..ir.builder import Builder
from ..plugins.tables import OwnedTable
from .layouts import BlockedLayout, DotOperandLayout

#: The narrowest copy ``cp.async`` makes.
MIN_COPY_BYTES = 4

GROUPS, BARRIERS = "groups", "barriers"


class RingCopies:
    """How ``pipeline-loops`` copies one kind of load into a ring slot.  Subclass it and
    register it with :func:`register_ring_copies` (see the module docstring)."""

    #: The completions these copies support (``"groups"``, ``"barriers"``).
    completions: ClassVar[frozenset] = frozenset({BARRIERS})
    #: Whether a load whose only use is a transpose feeding a dot (``b.T``) may be copied
    #: as it is into a ring read transposed: its slots are then the transposed view (the
    #: same bytes, :func:`~.pipelining.transposed_slot_layout`), and :meth:`issue` gets
    #: such a ring.  A copy engine writing whole blocks (bulk copies) can; per-thread
    #: copies of a pointer tile place each element themselves and do not.
    transposable: ClassVar[bool] = False

    def accepts(self, load: Any, infos: Any, target: Any) -> bool:
        """Whether ``load`` (an op of the registered class, in a loop, feeding a dot) can
        be copied asynchronously on ``target`` (a ``GpuTarget``); ``infos``: the
        module's axis info (:class:`~polytile.analysis.axis_info.AxisInfoAnalysis`)."""
        raise NotImplementedError

    def addresses(self, load: Any) -> list:
        """The operands the copy's source is computed from (run ahead of the loop's
        iteration: ``pipeline-loops`` moves what computes them)."""
        raise NotImplementedError

    def issue(self, builder: Builder, load: Any, lookup: Callable[[Any], Any], ring: Any, slot: Any,
              valid: Any, barriers: Any) -> None:
        """Create the ops that start copying ``load``'s tile into slot ``slot`` (an i32
        value) of ``ring``; ``lookup(operand)`` is the operand's value for the iteration
        being copied, ``valid`` (i1) whether that iteration exists (when not, the copy
        must not fault; the slot is never read).  ``barriers``: the ring's mbarriers
        (barrier ``slot`` is this fill's; a bulk copy completes on it), or None with
        ``"groups"`` completion."""
        raise NotImplementedError

    def prepare(self, builder: Builder, barriers: Any) -> None:
        """Once, after the ring's barriers are initialized and before any copy (a copy
        engine of another memory proxy fences the initialization here).  Nothing by
        default."""

    def commit(self, builder: Builder) -> None:
        """Close this iteration's group of copies (``"groups"`` completion)."""
        raise NotImplementedError

    def signal(self, builder: Builder, barriers: Any, slot: Any, valid: Any, loads: list) -> None:
        """Make this iteration's copies of ``loads`` (this kind's, in the order issued)
        arrive on barrier ``slot`` of ``barriers`` (``"barriers"`` completion); ``valid``
        as for :meth:`issue` (a bulk copy's expect-tx counts only the bytes it copies)."""
        raise NotImplementedError

    def slot_layout(self, load: Any) -> Any:
        """The shared layout of one ring slot for ``load``'s tile: by default the layout
        its dot operand is read from (``ldmatrix``, wgmma in place); a copy engine with
        a layout of its own (a TMA tensor map's swizzle) returns that."""
        from .pipelining import ring_slot_layout

        return ring_slot_layout(load.results[0].type)

    def arrivals(self, num_threads: int) -> int:
        """Arrivals :meth:`signal` makes per fill of a slot, with ``num_threads`` threads."""
        raise NotImplementedError


#: Load op class -> how its loads are copied into rings.
RING_COPIES: OwnedTable[RingCopies] = OwnedTable("ring copies")


def register_ring_copies(load_class: type, copies: RingCopies) -> RingCopies:
    """Pipeline loads of ``load_class`` with ``copies`` (a plugin's replace the core's
    for the same class while the plugin is loaded)."""
    RING_COPIES.add(load_class, copies)
    return copies


def ring_copies_for(op: Any) -> RingCopies | None:
    return RING_COPIES.get(type(op))


# --------------------------------------------------------------------------------------
# tile.load: cp.async


def feeds_dot(value: Any) -> bool:
    """Whether ``value`` is a dot's operand, directly or through a conversion into a dot
    operand layout."""
    for use in value.uses:
        user = use.owner
        if isinstance(user, tile.DotOp) and use.index in (0, 1):
            return True
        if isinstance(user, ConvertLayoutOp) and isinstance(user.result.type.layout, DotOperandLayout):
            return True
    return False


def _is_zero(value: Any) -> bool:
    from ..passes.rewrite import constant_value

    return constant_value(value) == 0


class PointerTileCopies(RingCopies):
    """``tile.load`` of a tile of pointers: ``gpu.async_copy`` (the backend's
    :class:`~polytile.gpu.lowering.async_copy.AsyncCopyUnit`), one arrival per thread."""

    completions: ClassVar[frozenset] = frozenset({GROUPS, BARRIERS})

    def accepts(self, load: Any, infos: Any, target: Any) -> bool:
        from .lowering.async_copy import async_copy_unit, copy_width

        if async_copy_unit(target) is None or not isinstance(load.ptr.type, t.TileType) or load.volatile:
            return False
        layout = load.result.type.layout
        if not isinstance(layout, BlockedLayout) or len(load.result.type.shape) != 2:
            return False
        if load.other is not None and not _is_zero(load.other):
            return False  # copies fill masked-off elements with zeros
        element = load.result.type.element
        if not isinstance(element, (t.IntType, t.FloatType)) or element.width < 8:
            return False
        width = copy_width(load.ptr, load.mask, infos, target, self.slot_layout(load))
        return width * element.width // 8 >= MIN_COPY_BYTES

    def addresses(self, load: Any) -> list:
        return [v for v in (load.ptr, load.mask) if v is not None]

    def issue(self, builder: Builder, load: Any, lookup: Callable[[Any], Any], ring: Any, slot: Any,
              valid: Any, barriers: Any) -> None:
        ptr_type = load.ptr.type
        bools = t.TileType(ptr_type.shape, t.i1, ptr_type.layout)
        mask = builder.create(tile.SplatOp, valid, result_types=[bools]).result
        if load.mask is not None:
            mask = builder.create(arith.BINARY_OPS["andi"], lookup(load.mask), mask).result
        builder.create(AsyncCopyOp, lookup(load.ptr), ring, slot, mask)

    def commit(self, builder: Builder) -> None:
        builder.create(AsyncCommitGroupOp)

    def signal(self, builder: Builder, barriers: Any, slot: Any, valid: Any, loads: list) -> None:
        builder.create(AsyncCopyArriveOp, barriers, slot)

    def arrivals(self, num_threads: int) -> int:
        return num_threads


POINTER_TILE_COPIES = register_ring_copies(tile.LoadOp, PointerTileCopies())

__all__ = ["BARRIERS", "GROUPS", "MIN_COPY_BYTES", "POINTER_TILE_COPIES", "PointerTileCopies", "RING_COPIES",
           "RingCopies", "feeds_dot", "register_ring_copies", "ring_copies_for"]
