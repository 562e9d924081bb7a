"""The workspace form of device tensor maps (Triton's first on-device TMA API, which
PyTorch PR #155380 analyses for mutations): a kernel writes a map into memory it is
given (a *workspace*) and loads and stores through the map's address.

- ``pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr, global_address,
  load_size, global_size, element_ty)``: a map of the 2-D row-major array at
  ``global_address`` (``global_size = [rows, columns]``, moved in blocks of
  ``load_size``) written at ``desc_ptr`` (``tma.workspace_create``);
- ``pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(desc_ptr)``: the fence a
  reader of a map another program wrote needs (``tma.workspace_acquire``);
- ``pl._experimental_descriptor_load(desc_ptr, offsets, shape, dtype)`` and
  ``pl._experimental_descriptor_store(desc_ptr, value, offsets)``: a block through the
  map at ``desc_ptr`` (``tma.workspace_load`` / ``tma.workspace_store``).

On Hopper (a target with bulk copies), where a bulk copy can move the block, the map is
a real CUDA tensor map: ``lower-tensor-descriptors`` makes the create ``tma.write_map``
(built as :mod:`.device_maps` builds one, then copied to ``desc_ptr``), the loads and
stores bulk copies through ``tma.map_at desc_ptr``, and the acquire ``tma.acquire_map``;
the map's rules (a 128-byte aligned ``desc_ptr``, a 16-byte aligned array, rows of
whole 16 bytes) are checked in the kernel where the specialization does not prove them.
Both sides decide from the element type and the block alone, so a map one kernel writes
is read as one by another.

Elsewhere the map is polytile's own record in the workspace: the array's address
(8 bytes) and its rows and columns (4 bytes each), within the 128 bytes a CUDA tensor
map takes, so workspaces sized for Triton fit.  ``lower-tensor-descriptors`` writes and
reads it with ordinary loads and stores, and an access through it is the masked access
of a descriptor of that array: out-of-bounds loads read zeros, stores drop what falls
outside.  A map written by one program is read by others once they see it (the
acquire, after the writer's release, as in Triton's examples).

The mutation analysis sees through the workspace: a create at ``W`` for ``A`` records
``A`` at ``W``, a store through ``W`` writes what is recorded there (see
:mod:`polytile.analysis.mutation`), in helpers too, at recomputed addresses and at
offsets into one workspace.
"""

from __future__ import annotations

from typing import Any

from polytile.analysis.mutation import Records, Writes, WritesRecorded, register_mutation_effects
from polytile.ir import types as t
from polytile.ir.constraints import Tile, TypeConstraint
from polytile.ir.opdef import Attr, Operand, ReadsMemory, Result, WritesMemory, define_op, op_error
from polytile.ir.operation import Operation
from polytile.language import semantic as sem
from polytile.language.block import _ints, _scalars
from polytile.language.core import builtin, dtype_of, semantic_error, tensor, unwrap

from .ops import I32

Pointer = TypeConstraint("a pointer scalar", lambda x: isinstance(x, t.PointerType))
#: Bytes of the record (within the 128 of a CUDA tensor map).
RECORD_BYTES = 16
#: The workspace bytes one map takes, as in Triton.
MAP_BYTES = 128


def _check_2d(op: Operation, offsets: list) -> None:
    if len(offsets) != 2:
        raise op_error(op, f"has {len(offsets)} offsets; the workspace form moves 2-D blocks")


@define_op
class WorkspaceCreateOp(Operation):
    """Writes at ``desc_ptr`` the map of the ``rows`` x ``columns`` row-major array at
    ``address`` (blocks of ``block_shape`` of ``element``)."""

    name = "tma.workspace_create"
    desc_ptr = Operand(Pointer)
    address = Operand(Pointer)
    rows = Operand(I32)
    columns = Operand(I32)
    block_shape = Attr(tuple)
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        if len(self.block_shape) != 2 or not all(type(d) is int and d > 0 for d in self.block_shape):
            raise op_error(self, f"load_size {list(self.block_shape)} must be two positive sizes")


@define_op
class WorkspaceAcquireOp(Operation):
    """Orders this program's reads of the map at ``desc_ptr`` after its writer's."""

    name = "tma.workspace_acquire"
    desc_ptr = Operand(Pointer)
    traits = (ReadsMemory,)


@define_op
class WorkspaceLoadOp(Operation):
    """The block at ``offsets`` of the array the map at ``desc_ptr`` describes."""

    name = "tma.workspace_load"
    desc_ptr = Operand(Pointer)
    offsets = Operand(I32, variadic=True)
    result = Result(Tile)
    traits = (ReadsMemory,)

    def verify_op(self) -> None:
        _check_2d(self, list(self.offsets))
        if self.result.type.rank != 2:
            raise op_error(self, f"loads 2-D blocks, not {self.result.type}")


@define_op
class WorkspaceStoreOp(Operation):
    """Stores ``value`` at ``offsets`` of the array the map at ``desc_ptr`` describes."""

    name = "tma.workspace_store"
    desc_ptr = Operand(Pointer)
    value = Operand(Tile)
    offsets = Operand(I32, variadic=True)
    traits = (WritesMemory,)

    def verify_op(self) -> None:
        _check_2d(self, list(self.offsets))
        if self.value.type.rank != 2:
            raise op_error(self, f"stores 2-D blocks, not {self.value.type}")


WORKSPACE_OPS = (WorkspaceCreateOp, WorkspaceAcquireOp, WorkspaceLoadOp, WorkspaceStoreOp)


def map_location(pointer: Any) -> tuple:
    """Where ``pointer`` points, as the mutation analysis compares it: the value it is
    computed from (a parameter, through pointer arithmetic and casts) and its byte offset
    from there (an int, or a key of the expression)."""
    from polytile.analysis.mutation import byte_offset

    root = pointer
    while root.defining_op is not None and root.defining_op.name in ("tile.addptr", "arith.ptrtoint",
                                                                      "arith.inttoptr", "arith.bitcast"):
        root = root.defining_op.operands[0]
    return id(root), byte_offset(pointer)

# The create writes the workspace and records the array's address there; a store writes
# through the address recorded where its map is.
register_mutation_effects(WorkspaceCreateOp)(lambda op: [Writes(op.desc_ptr), Records(op.desc_ptr, op.address)])
register_mutation_effects(WorkspaceStoreOp)(lambda op: [WritesRecorded(op.desc_ptr)])


# --------------------------------------------------------------------------------------
# The language


def _workspace_pointer(value: Any, what: str) -> tensor:
    value = unwrap(value)
    if not isinstance(value, tensor) or not isinstance(value.type, t.PointerType) or value.shape:
        raise semantic_error(f"{what}: desc_ptr must be a pointer scalar into the workspace (a kernel argument, "
                             f"or one plus an offset), got {sem._describe(value)}")
    return value


@builtin
def experimental_device_tensormap_create2d(desc_ptr: Any, global_address: Any, load_size: Any, global_size: Any,
                                           element_ty: Any) -> None:
    """Writes at ``desc_ptr`` a map of the ``global_size`` row-major array at
    ``global_address`` of ``element_ty``, moved in blocks of ``load_size`` (Triton's
    ``tl.extra.cuda.experimental_device_tensormap_create2d``)."""
    what = "pl.extra.cuda.experimental_device_tensormap_create2d"
    desc_ptr = _workspace_pointer(desc_ptr, what)
    address = unwrap(global_address)
    if not isinstance(address, tensor) or not isinstance(address.type, t.PointerType) or address.shape:
        raise semantic_error(f"{what}: global_address must be a pointer scalar, got {sem._describe(address)}")
    element = unwrap(element_ty)
    element = getattr(element, "ir", element)
    if element != address.type.pointee:
        raise semantic_error(f"{what}: element_ty {sem.type_name(element)} is not the type global_address points to "
                             f"({sem.type_name(address.type.pointee)})")
    block = _ints(load_size, f"{what}'s load_size")
    if len(block) != 2:
        raise semantic_error(f"{what}: load_size must have two entries, got {list(block)}")
    rows, columns = _scalars(global_size, f"{what}'s global_size", 2, t.i32)
    sem.emit(WorkspaceCreateOp, desc_ptr.handle, address.handle, rows, columns, block_shape=tuple(block))


@builtin
def experimental_tensormap_fenceproxy_acquire(desc_ptr: Any) -> None:
    """Orders this program's uses of the map at ``desc_ptr`` after its writer's."""
    desc_ptr = _workspace_pointer(desc_ptr, "pl.extra.cuda.experimental_tensormap_fenceproxy_acquire")
    sem.emit(WorkspaceAcquireOp, desc_ptr.handle)


@builtin
def _experimental_descriptor_load(desc_ptr: Any, offsets: Any, shape: Any, dtype: Any) -> tensor:
    """The block of ``shape`` (two sizes) of ``dtype`` at ``offsets`` through the map at
    ``desc_ptr``; zeros outside the array."""
    what = "pl._experimental_descriptor_load"
    desc_ptr = _workspace_pointer(desc_ptr, what)
    block = _ints(shape, f"{what}'s shape")
    if len(block) != 2:
        raise semantic_error(f"{what}: shape must have two entries, got {list(block)}")
    element = unwrap(dtype)
    element = getattr(element, "ir", element)
    if not isinstance(element, (t.IntType, t.FloatType)):
        raise semantic_error(f"{what}: dtype must be a number type, got {dtype!r}")
    result = t.TileType(tuple(block), element)
    op = sem.emit(WorkspaceLoadOp, desc_ptr.handle, _scalars(offsets, f"{what}'s offsets", 2, t.i32),
                  result_types=[result])
    return tensor(op.result)


@builtin
def _experimental_descriptor_store(desc_ptr: Any, value: Any, offsets: Any) -> None:
    """Stores the 2-D block ``value`` at ``offsets`` through the map at ``desc_ptr``;
    what falls outside the array is not written."""
    what = "pl._experimental_descriptor_store"
    desc_ptr = _workspace_pointer(desc_ptr, what)
    value = unwrap(value)
    if not isinstance(value, tensor) or len(value.shape) != 2 or not isinstance(value.type, t.TileType):
        raise semantic_error(f"{what}: value must be a 2-D tile, got {sem._describe(value)}")
    sem.emit(WorkspaceStoreOp, desc_ptr.handle, value.handle, _scalars(offsets, f"{what}'s offsets", 2, t.i32))


__all__ = ["MAP_BYTES", "RECORD_BYTES", "WORKSPACE_OPS", "WorkspaceAcquireOp", "WorkspaceCreateOp", "WorkspaceLoadOp",
           "WorkspaceStoreOp", "dtype_of", "experimental_device_tensormap_create2d",
           "experimental_tensormap_fenceproxy_acquire"]
