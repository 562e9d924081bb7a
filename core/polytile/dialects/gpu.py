"""The ``gpu`` dialect: ops that exist only once tiles have layouts (after a GPU
backend's distribute stage).

``gpu.convert_layout`` moves a tile from one distributed layout to another; the values
do not change, only which thread holds which element.  ``assign-layouts`` inserts it where
two uses of a value need different layouts; the interpreter runs it as the identity.

Shared-memory buffers that live across ops (an operand staged for a dot, a pipelined
load) are explicit values of type ``!gpu.buffer<64x64xf16, #gpu.shared<...>>``:

- ``%b = gpu.local_alloc [%tile]`` gives a buffer (written with ``%tile`` when given);
  the memory stage places it (``gpu.buffer_offset``) for as long as it has uses;
- ``gpu.local_store %tile, %b`` writes a tile into it, ``%t = gpu.local_load %b`` reads
  it back in any distributed layout;
- ``gpu.barrier`` synchronizes the threads of a program, so that shared-memory writes
  before it are seen by reads after it; the memory stage's ``insert-barriers`` puts it
  where a shared-memory hazard needs it, and nowhere else.

Software pipelining (``pipeline-loops``) keeps a *ring* of tiles in one buffer
(``!gpu.buffer<3x128x64xf16, ...>``: slots first) and fills it asynchronously:

- ``gpu.async_copy %ptrs, %ring, %slot mask(%m)`` starts copying a tile from global
  memory into a slot (masked-off elements become zero);
- ``gpu.async_commit_group`` closes the copies issued since the last one into a group,
  ``gpu.async_wait {pending = n}`` waits until at most ``n`` groups are in flight;
- ``%t = gpu.local_load_slot %ring, %slot`` reads a slot into a distributed layout.

Or a ring's slots complete on *mbarriers* (hardware barriers in shared memory with a phase
that flips each time their expected arrivals are in; NVIDIA sm_90), one per slot, kept in
a buffer of i64 (``!gpu.buffer<3xi64, ...>``):

- ``gpu.mbarrier_init %bars {count = n}`` makes each barrier expect ``n`` arrivals per
  phase (one thread initializes them); ``gpu.mbarrier_inval %bars`` ends their life,
  before their bytes may be used for anything else;
- ``gpu.async_copy_arrive %bars, %i`` arrives on barrier ``i`` once this thread's copies
  issued so far have landed;
- ``gpu.mbarrier_wait %bars, %i, %phase`` waits until the phase of parity ``%phase``
  completes; then every copy that arrived on it is visible to this thread, with no
  ``gpu.barrier`` needed.

These ops exist only between the distribute stage and the LLVM lowering: the
interpreter never sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from ..ir import types as t
from ..ir.constraints import IntScalar, Tile, TypeConstraint
from ..ir.opdef import Attr, Operand, Pure, Result, Trait, define_op, op_error
from ..ir.operation import Operation
from ..ir.registry import IR_REGISTRY, Dialect


@dataclass(frozen=True, repr=False)
class BufferType(t.DialectType):
    """A tile's worth of shared memory, placed by a shared layout: the element at
    ``coords`` sits at element offset ``layout.offset(coords, shape)``."""

    type_name: ClassVar[str] = "gpu.buffer"
    shape: tuple
    element: t.Type
    layout: Any

    def __post_init__(self) -> None:
        if not self.shape or any(not isinstance(d, int) or d <= 0 for d in self.shape):
            raise ValueError(f"a buffer's shape must be positive integers, got {self.shape!r}")
        from ..gpu.layouts import SharedLayout  # the GPU toolkit sits above the dialects

        if not isinstance(self.layout, SharedLayout):
            raise ValueError(f"a buffer's layout must be a shared layout (#gpu.shared, #gpu.nvmma_shared), "
                             f"got {self.layout!r}")

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def format_parameters(self) -> str:
        from ..ir.attributes import format_attribute
        from ..ir.printer import format_type

        return "x".join(map(str, self.shape)) + "x" + format_type(self.element) + ", " + format_attribute(self.layout)

    @classmethod
    def parse_parameters(cls, parser: Any) -> "BufferType":
        parser.skip_space()
        start = parser.pos
        dims = parser.match(_DIMS)
        if not dims:
            parser.error("expected the shape of the buffer, like '64x64x' before the element type")
        shape = tuple(int(d) for d in dims.group(1).split("x")[:-1])
        element = parser.parse_type()
        parser.expect(",", "between the buffer's element type and its shared layout")
        layout = parser.parse_attribute_value()
        try:
            return cls(shape, element, layout)
        except ValueError as exc:
            parser.error(str(exc), start)
            raise


_DIMS = re.compile(r"((?:\d+x)+)")

Buffer = TypeConstraint("a shared-memory buffer (!gpu.buffer)", lambda x: isinstance(x, BufferType))


def _same_tile(op: Operation, tile: Any, buffer: Any) -> None:
    if tuple(tile.shape) != tuple(buffer.shape) or tile.element != buffer.element:
        raise op_error(op, f"{tile} and {buffer} differ in shape or element type")


@define_op
class ConvertLayoutOp(Operation):
    """The same tile in another layout."""

    name = "gpu.convert_layout"
    source = Operand(Tile)
    result = Result(Tile)
    traits = (Pure,)
    semantics = staticmethod(lambda x: x)

    def verify_op(self) -> None:
        src, dst = self.source.type, self.result.type
        if src.shape != dst.shape or src.element != dst.element:
            raise op_error(self, f"converts the layout only; {src} and {dst} differ in shape or element type")

    def fold(self, constants: list) -> list | None:
        if self.source.type == self.result.type:
            return [self.source]
        return None


@define_op
class LocalAllocOp(Operation):
    """A shared-memory buffer, written with ``source`` when one is given.  It is live
    (holds its bytes) from here to its last use."""

    name = "gpu.local_alloc"
    source = Operand(Tile, optional=True)
    result = Result(Buffer)

    def verify_op(self) -> None:
        if self.source is not None:
            _same_tile(self, self.source.type, self.result.type)


@define_op
class LocalStoreOp(Operation):
    """Writes ``value`` into ``buffer``."""

    name = "gpu.local_store"
    value = Operand(Tile)
    buffer = Operand(Buffer)

    def verify_op(self) -> None:
        _same_tile(self, self.value.type, self.buffer.type)


@define_op
class LocalLoadOp(Operation):
    """Reads ``buffer`` into a tile (in the result's distributed layout)."""

    name = "gpu.local_load"
    buffer = Operand(Buffer)
    result = Result(Tile)

    def verify_op(self) -> None:
        _same_tile(self, self.result.type, self.buffer.type)


@define_op
class BarrierOp(Operation):
    """All threads of the program wait here; shared-memory writes before it are visible
    to reads after it (``bar.sync``).  ``insert-barriers`` places these."""

    name = "gpu.barrier"


# --------------------------------------------------------------------------------------
# Asynchronous copies into a ring of buffers (pipeline-loops)


class IssuesIntoRing(Trait):
    """The op starts or closes asynchronous copies into a ring (``gpu.async_copy``, its
    commit or arrive, a plugin's bulk copy): passes that move a ring's fill (async-dots
    moves it after the wait that frees its slot) move these ops together."""


class WritesThroughAsyncProxy(Trait):
    """The op's copies write shared memory through the async proxy (a bulk tensor copy).
    Copies without it (``gpu.async_copy``: cp.async) write through the generic proxy,
    so an async-proxy reader of the slot (wgmma) puts a proxy fence between its wait for
    them and its read."""


def _ring_slot(op: Operation, ring: Any, tile: Any) -> None:
    """A ring is a buffer of ``stages x tile``; each slot holds one tile."""
    if len(ring.shape) != len(tile.shape) + 1 or tuple(ring.shape[1:]) != tuple(tile.shape) or \
            ring.element != tile.element:
        raise op_error(op, f"{ring} is not a ring of {tile} (a leading dimension of slots, then the tile's shape)")


@define_op
class AsyncCopyOp(Operation):
    """Starts copying the tile ``ptr`` points at into slot ``slot`` of ``ring``, where
    ``mask`` holds; masked-off elements become ``other`` (zero without it).  The copy is
    in flight until a ``gpu.async_wait`` retires its group (``insert-barriers`` then
    counts the bytes as written), or, where a ``gpu.async_copy_arrive`` follows it, until
    a ``gpu.mbarrier_wait`` sees that barrier's phase complete: nothing may read the slot
    before that."""

    name = "gpu.async_copy"
    traits = (IssuesIntoRing,)
    ptr = Operand(Tile)
    ring = Operand(Buffer)
    slot = Operand(IntScalar)
    mask = Operand(Tile, optional=True)
    other = Operand(Tile, optional=True)

    def verify_op(self) -> None:
        ptr_type = self.ptr.type
        if not isinstance(ptr_type.element, t.PointerType):
            raise op_error(self, f"copies through a tile of pointers, got {ptr_type}")
        _ring_slot(self, self.ring.type, t.TileType(ptr_type.shape, ptr_type.element.pointee, ptr_type.layout))
        if self.mask is not None and (tuple(self.mask.type.shape) != tuple(ptr_type.shape) or self.mask.type.element != t.i1):
            raise op_error(self, f"the mask must be a tile of i1 shaped like the pointers {ptr_type}, got {self.mask.type}")
        if self.other is not None and (tuple(self.other.type.shape) != tuple(ptr_type.shape)
                                       or self.other.type.element != ptr_type.element.pointee):
            raise op_error(self, f"'other' must be a tile of {ptr_type.element.pointee} shaped like the pointers, "
                                 f"got {self.other.type}")


@define_op
class AsyncCommitGroupOp(Operation):
    """Closes the group of this thread's ``gpu.async_copy`` issued since the last commit
    (``cp.async.commit_group``)."""

    name = "gpu.async_commit_group"
    traits = (IssuesIntoRing,)


@define_op
class AsyncWaitOp(Operation):
    """Waits until at most ``pending`` committed groups are still in flight: the copies of
    the older ones are in shared memory (``cp.async.wait_group``).  Other threads see them
    after the next ``gpu.barrier``."""

    name = "gpu.async_wait"
    pending = Attr(int)

    def verify_op(self) -> None:
        if self.pending < 0:
            raise op_error(self, f"pending must be >= 0, got {self.pending}")


@define_op
class LocalLoadSlotOp(Operation):
    """Reads slot ``slot`` of ``ring`` into a tile in the result's distributed layout (a
    dot operand layout reads with the matrix unit's own instruction, NVIDIA ``ldmatrix``)."""

    name = "gpu.local_load_slot"
    ring = Operand(Buffer)
    slot = Operand(IntScalar)
    result = Result(Tile)
    #: Where the result starts in the slot, when it is a part of it (a K slice of a dot
    #: operand); absent: the whole slot.
    offsets = Attr(tuple, optional=True)

    def verify_op(self) -> None:
        ring, tile = self.ring.type, self.result.type
        if self.offsets is None:
            _ring_slot(self, ring, tile)
            return
        slot = tuple(ring.shape[1:])
        if len(slot) != len(tile.shape) or ring.element != tile.element or len(self.offsets) != len(slot) or \
                any(not isinstance(o, int) or o < 0 or o + n > s for o, n, s in zip(self.offsets, tile.shape, slot)):
            raise op_error(self, f"{tile} at offsets {list(self.offsets)} is not inside a slot of {ring}")


# --------------------------------------------------------------------------------------
# Barriers in shared memory (mbarriers), which a ring's copies may complete on

Barriers = TypeConstraint("a buffer of mbarriers (!gpu.buffer<Nxi64, ...>)",
                          lambda x: isinstance(x, BufferType) and len(x.shape) == 1 and x.element == t.i64)


@define_op
class MBarrierInitOp(Operation):
    """Makes every barrier of ``barriers`` expect ``count`` arrivals per phase, in phase 0
    (NVIDIA ``mbarrier.init``, by one thread; the others use them after a
    ``gpu.barrier``)."""

    name = "gpu.mbarrier_init"
    barriers = Operand(Barriers)
    count = Attr(int)

    def verify_op(self) -> None:
        if not 0 < self.count < 1 << 20:
            raise op_error(self, f"an mbarrier expects between 1 and 2^20 - 1 arrivals per phase, got {self.count}")


@define_op
class MBarrierWaitOp(Operation):
    """Waits until the phase of barrier ``index`` whose parity is ``phase`` (0 or 1) has
    completed (NVIDIA ``mbarrier.try_wait.parity`` in a loop).  What was written before
    the arrivals that completed it is then visible to this thread."""

    name = "gpu.mbarrier_wait"
    barriers = Operand(Barriers)
    index = Operand(IntScalar)
    phase = Operand(IntScalar)


@define_op
class MBarrierInvalOp(Operation):
    """Ends the life of every barrier of ``barriers`` (NVIDIA ``mbarrier.inval``, by one
    thread): their bytes may hold something else after the next ``gpu.barrier``."""

    name = "gpu.mbarrier_inval"
    barriers = Operand(Barriers)


@define_op
class AsyncCopyArriveOp(Operation):
    """Arrives on barrier ``index`` once every ``gpu.async_copy`` this thread issued before
    it has landed (NVIDIA ``cp.async.mbarrier.arrive.noinc``: the arrival counts towards
    the barrier's expected count)."""

    name = "gpu.async_copy_arrive"
    barriers = Operand(Barriers)
    index = Operand(IntScalar)
    traits = (IssuesIntoRing,)


@define_op
class MBarrierArriveOp(Operation):
    """Each warp arrives once on barrier ``index`` of ``barriers`` where ``valid`` holds
    (NVIDIA ``mbarrier.arrive`` by the warp's first lane, after the warp's earlier work):
    a barrier that N warps release expects N arrivals per phase.  What the warp wrote
    before is visible to a thread whose wait that phase completes."""

    name = "gpu.mbarrier_arrive"
    barriers = Operand(Barriers)
    index = Operand(IntScalar)
    valid = Operand(TypeConstraint("an i1 scalar", lambda x: x == t.i1))


class RunsInWarpGroups(Trait):
    """The op's regions run at the same time, each in its own group of the program's warps
    (a warp-specialization plugin's op).  ``insert-barriers`` synchronizes everything
    pending before such an op that any region touches (all warps are there), walks each
    region on its own, and ``allocate-shared`` keeps what a region allocates for the
    whole op: the regions' accesses are ordered by the mbarriers the op's maker puts in
    them, not by program order."""


# --------------------------------------------------------------------------------------
# Asynchronous dots (async-dots)

#: A ``tile.dot`` attribute: the dot returns before its result is ready (a matrix unit
#: that issues asynchronously, NVIDIA's wgmma); a ``gpu.dot_wait`` retires it.
ASYNC_DOT_ATTR = "gpu.async"
#: A ``gpu.local_load`` attribute: ``hoist-dot-operands`` stored the buffer before the
#: loop and nothing writes it after, so the dot reading the load's value may read the
#: buffer in place (when the dot runs) instead of the load's registers.
IN_PLACE_ATTR = "gpu.in_place"


@define_op
class DotWaitOp(Operation):
    """Waits until at most ``pending`` groups of this thread's asynchronous dots
    (``tile.dot`` with ``gpu.async``) are in flight (NVIDIA: ``wgmma.wait_group``).
    ``values`` are results of such dots, and ``outputs`` the same values: a dot's result
    is read only through a wait that retired it, or handed on to the next asynchronous
    dot accumulating into it.  ``buffers`` are the shared memory the dots read: the
    wait is where their reads end (``insert-barriers`` counts them as read here)."""

    name = "gpu.dot_wait"
    values = Operand(Tile, variadic=True)
    buffers = Operand(Buffer, variadic=True)
    outputs = Result(Tile, variadic=True)
    pending = Attr(int)

    def verify_op(self) -> None:
        if self.pending < 0:
            raise op_error(self, f"pending must be >= 0, got {self.pending}")
        if [v.type for v in self.values] != [r.type for r in self.outputs]:
            raise op_error(self, "the outputs are the waited values: one of the same type for each")


@define_op
class FenceAsyncSharedOp(Operation):
    """Makes this thread's shared-memory writes before it visible to the matrix unit's
    asynchronous reads (NVIDIA: wgmma reads through the async proxy,
    ``fence.proxy.async.shared::cta``); the readers still need a ``gpu.barrier`` after
    it.  Nothing on a unit that reads no shared memory asynchronously."""

    name = "gpu.fence_async_shared"


# The layouts (#gpu.blocked, #gpu.shared, ...) are this dialect's attributes, but they are
# defined by the GPU toolkit (polytile.gpu.layouts), which sits above the dialects: they
# register themselves when it is imported, and polytile.gpu.plugin registers them with
# this dialect, so GPU IR text parses wherever plugin dialects are loaded.  (#axis_info
# registers itself with its analysis: only its test printer writes it.)
GPU_DIALECT = Dialect("gpu", ops=(ConvertLayoutOp, LocalAllocOp, LocalStoreOp, LocalLoadOp, BarrierOp, AsyncCopyOp,
                                  AsyncCommitGroupOp, AsyncWaitOp, LocalLoadSlotOp, MBarrierInitOp, MBarrierWaitOp,
                                  MBarrierInvalOp, AsyncCopyArriveOp, DotWaitOp, FenceAsyncSharedOp,
                                  MBarrierArriveOp),
                      types=(BufferType,),
                      doc="Layouts of distributed tiles, shared-memory buffers, and the conversions between them.")

if GPU_DIALECT.name not in IR_REGISTRY.dialects:  # imported on first need (see dialects/__init__)
    IR_REGISTRY.register(GPU_DIALECT)

__all__ = ["ASYNC_DOT_ATTR", "IN_PLACE_ATTR", "AsyncCommitGroupOp", "AsyncCopyArriveOp", "AsyncCopyOp", "AsyncWaitOp",
           "BarrierOp", "BufferType", "ConvertLayoutOp", "DotWaitOp", "FenceAsyncSharedOp", "GPU_DIALECT", "IssuesIntoRing", "LocalAllocOp",
           "LocalLoadOp", "LocalLoadSlotOp", "LocalStoreOp", "MBarrierArriveOp", "MBarrierInitOp", "MBarrierInvalOp",
           "MBarrierWaitOp", "RunsInWarpGroups", "WritesThroughAsyncProxy"]
