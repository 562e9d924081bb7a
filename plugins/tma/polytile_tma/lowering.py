"""``lower-tensor-descriptors``: tensor descriptor ops to the core's pointer ops.

A descriptor made in the kernel (``tma.make_descriptor``) is its base pointer, shape and
strides; this pass keeps those as separate SSA values and rewrites each access into
pointer tiles ``base + sum_d position_d * stride_d`` masked by ``0 <= position_d <
shape_d`` in every dimension:

- ``tma.load`` -> ``tile.load`` with the padding (zero or NaN) as ``other``; of a host
  descriptor that brings a tensor map (Hopper), ``tma.bulk_load`` through the map
  where a bulk copy can move the block (:mod:`.bulk`);
- ``tma.store`` -> ``tile.store`` (what falls outside is not written); through a tensor
  map (Hopper), ``tma.bulk_store``;
- ``tma.reduce`` -> ``tile.atomic_rmw`` (add on floats is ``fadd``; min and max on
  unsigned integers are ``umin`` / ``umax``); through a tensor map, where the copy engine
  combines that kind and element type, ``tma.bulk_store {reduce = kind}``;
- ``tma.gather`` / ``tma.scatter`` -> the same, with the rows taken from the row tile;
- ``tma.dim`` -> the shape or stride value itself.

That is the descriptors' meaning on every target (the interpreter runs the result, so it
bounds-checks each element against the array it reads), and the lowering every backend
gets for free.  Index arithmetic is i64 (the strides are).  A descriptor that flows
through a loop, an ``if`` or a call is an error naming the op: Triton's descriptors are
made where they are used, or passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.dialects import arith, tile, tile_debug
from polytile.errors import CompilationError, SourceLocation
from polytile.ir import types as t
from polytile.ir.builder import Builder
from polytile.passes import Pass, PassContext, PreservedAnalyses
from polytile.passes.rewrite import constant_value
from polytile.passes.lower_block_pointers import block_positions, element_addresses

from . import ops
from .types import TensorDescType


@dataclass
class _Parts:
    base: Any
    shape: list
    strides: list
    #: The tensor map of a host descriptor on Hopper (None elsewhere).
    map: Any = None


def _error(op: Any, message: str) -> CompilationError:
    location = op.location if isinstance(op.location, SourceLocation) else None
    return CompilationError(f"lower-tensor-descriptors: {message}", location)


def _is_descriptor(value: Any) -> bool:
    return isinstance(value.type, TensorDescType)


#: Attribute of a kernel (``func.func``) whose host descriptors pass a tensor map: pairs
#: ``[map argument, base argument]`` (positions), so that what reads or writes through
#: the map and what goes through the base pointer (masked accesses, gathers, scatters)
#: are known to touch one array (:func:`array_of`).
MAP_BASES = "tma.map_bases"


def _kernel_of(op: Any) -> Any:
    return next((a for a in op.ancestors() if a.name == "func.func"), None)


def _link_map_to_base(op: Any, tensor_map: Any, base: Any) -> None:
    """Record on the kernel that the argument ``tensor_map`` describes the array of the
    argument ``base`` (a host descriptor's parts)."""
    kernel = _kernel_of(op)
    if kernel is None or tensor_map.defining_op is not None or base.defining_op is not None:
        return
    arguments = list(kernel.arguments)
    if tensor_map not in arguments or base not in arguments:
        return
    pair = (arguments.index(tensor_map), arguments.index(base))
    pairs = tuple(tuple(p) for p in kernel.attributes.get(MAP_BASES, ()))
    if pair not in pairs:
        kernel.attributes[MAP_BASES] = (*pairs, pair)


def array_of(op: Any, tensor_map: Any) -> Any:
    """The value that names the array ``tensor_map`` (an operand of ``op``) describes, for
    the analyses that tell arrays apart by the kernel argument they come from: a host
    descriptor's base argument (its map argument is another parameter of the same array),
    or the map itself (one made in the kernel leads to its base pointer)."""
    kernel = _kernel_of(op)
    if kernel is not None and tensor_map.defining_op is None:
        arguments = list(kernel.arguments)
        for map_index, base_index in kernel.attributes.get(MAP_BASES, ()):
            if map_index < len(arguments) and arguments[map_index] is tensor_map and base_index < len(arguments):
                return arguments[base_index]
    return tensor_map


class _Lowering:
    def __init__(self, module: Any = None, device_maps: bool = False) -> None:
        self.module = module
        #: Whether descriptors made in the kernel get a tensor map built on the device
        #: (Hopper: :mod:`.device_maps`), where their loads and stores can use one.
        self.device_maps = device_maps
        self._axis_info: Any = None
        self.parts: dict[Any, _Parts] = {}
        self.dead: list[Any] = []
        #: The workspace maps made so far: (location, (element, block), line).
        self.creates: list[Any] = []

    def walk(self, block: Any) -> None:
        for op in list(block):
            handler = _handlers().get(type(op))
            if handler is not None:
                handler(self, op)
                continue
            if any(_is_descriptor(v) for v in (*op.operands, *op.results)):
                raise _error(op, f"a tensor descriptor passed through '{op.name}' is not supported; make it "
                                 "(pl.make_tensor_descriptor) where it is used, outside loops and branches")
            for region in op.regions:
                for inner in region.blocks:
                    self.walk(inner)

    def _get(self, op: Any) -> _Parts:
        found = self.parts.get(op.desc)
        if found is None:
            raise _error(op, f"'{op.name}' uses a tensor descriptor that does not come from tma.make_descriptor")
        return found

    # -- handlers ---------------------------------------------------------------------
    def make(self, op: Any) -> None:
        tensor_map = op.map
        if tensor_map is None and self.device_maps and self._wants_device_map(op):
            from . import device_maps  # noqa: F401  (the op's lowering and the scratch it asks for)
            from .bulk import CreateMapOp

            b = Builder.before(op)
            tensor_map = b.create(CreateMapOp, op.base, list(op.shape), list(op.strides),
                                  block=tuple(op.block_shape), padding=op.padding).result
        elif tensor_map is not None:
            _link_map_to_base(op, tensor_map, op.base)
        self.parts[op.result] = _Parts(op.base, list(op.shape), list(op.strides), tensor_map)
        self.dead.append(op)

    @staticmethod
    def _moves_through_map(user: Any, element: Any) -> bool:
        """Whether ``user`` of a descriptor would go through its map: a load, a store, or
        a reduction the copy engine combines."""
        from .bulk import bulk_reduction

        if isinstance(user, ops.ReduceOp):
            return bulk_reduction(user.kind, element)
        return isinstance(user, (ops.LoadOp, ops.StoreOp))

    def _wants_device_map(self, op: Any) -> bool:
        """A map built on the device pays where the descriptor is made once per program
        (in the kernel's body, not in a loop, a branch or a noinline callee), its block
        can be a bulk copy, something loads, stores or bulk-reduces through it, and the map is provably
        valid (:func:`.device_maps.map_is_provable`)."""
        from .bulk import box_plan, element_code
        from .device_maps import map_is_provable

        function = op.parent_op
        if function is None or function.name != "func.func" or not function.attributes.get("kernel"):
            return False
        element = op.base.type.pointee
        if element_code(element) is None or box_plan(element.width, tuple(op.block_shape)) is None:
            return False
        if not any(self._moves_through_map(use.owner, element) for use in op.result.uses):
            return False
        if self._axis_info is None:
            from polytile.analysis.axis_info import AxisInfoAnalysis

            self._axis_info = AxisInfoAnalysis(self.module)
        info = self._axis_info.info
        return map_is_provable(info(op.base), [info(s) for s in op.strides], element.width)

    def dim(self, op: Any) -> None:
        parts = self._get(op)
        op.result.replace_all_uses_with((parts.shape if op.kind == "shape" else parts.strides)[op.index])
        op.erase()

    def _block(self, op: Any, b: Builder) -> tuple[Any, Any]:
        parts = self._get(op)
        block = op.desc.type.block.shape
        positions = [block_positions(b, offset, size, t.i64) for offset, size in zip(op.offsets, block)]
        return element_addresses(b, parts.base, parts.shape, parts.strides, positions, tuple(range(len(block))))

    def _rows(self, op: Any, b: Builder) -> tuple[Any, Any]:
        parts = self._get(op)
        rows = op.x_offsets
        rows = b.create(arith.ExtSIOp, rows, result_types=[t.TileType(rows.type.shape, t.i64)]).result
        columns = block_positions(b, op.y_offset, op.desc.type.block.shape[1], t.i64)
        return element_addresses(b, parts.base, parts.shape, parts.strides, [rows, columns], (0, 1))

    @staticmethod
    def _padded_load(b: Builder, op: Any, pointers: Any, mask: Any) -> None:
        desc = op.desc.type
        result_type = op.result.type
        value = float("nan") if desc.padding == "nan" else 0
        value = float(value) if isinstance(desc.element, t.FloatType) else int(value)
        other = b.create(arith.ConstantOp, value=value, result_types=[result_type]).result
        load = b.create(tile.LoadOp, pointers, mask=mask, other=other, result_types=[result_type])
        op.result.replace_all_uses_with(load.result)
        op.erase()

    def load(self, op: Any) -> None:
        b = Builder.before(op)
        parts = self._get(op)
        result = op.result.type
        if parts.map is not None:
            from . import hopper  # noqa: F401  (how pipeline-loops and the lowering handle bulk copies)
            from .bulk import BulkLoadOp, box_plan
        if parts.map is not None and box_plan(t.element_type(result).width, tuple(result.shape)) is not None:
            # The tensor map pads as the descriptor says (its out-of-bounds fill).
            load = b.create(BulkLoadOp, parts.map, list(op.offsets), result_types=[result])
            op.result.replace_all_uses_with(load.result)
            op.erase()
            return
        self._padded_load(b, op, *self._block(op, b))

    def gather(self, op: Any) -> None:
        b = Builder.before(op)
        self._padded_load(b, op, *self._rows(op, b))

    def store(self, op: Any) -> None:
        b = Builder.before(op)
        parts = self._get(op)
        value = op.value.type
        if parts.map is not None:
            from . import hopper  # noqa: F401
            from .bulk import BulkStoreOp, box_plan
        if parts.map is not None and box_plan(t.element_type(value).width, tuple(value.shape)) is not None:
            # What falls outside the array is dropped by the copy engine.
            b.create(BulkStoreOp, parts.map, list(op.offsets), op.value)
            op.erase()
            return
        pointers, mask = self._block(op, b)
        b.create(tile.StoreOp, pointers, op.value, mask=mask)
        op.erase()

    def scatter(self, op: Any) -> None:
        b = Builder.before(op)
        pointers, mask = self._rows(op, b)
        b.create(tile.StoreOp, pointers, op.value, mask=mask)
        op.erase()

    def reduce(self, op: Any) -> None:
        b = Builder.before(op)
        parts = self._get(op)
        element = op.desc.type.element
        kind = op.kind
        if parts.map is not None:
            from . import hopper  # noqa: F401
            from .bulk import BulkStoreOp, box_plan, bulk_reduction
        if parts.map is not None and bulk_reduction(kind, element) and \
                box_plan(element.width, tuple(op.value.type.shape)) is not None:
            # The copy engine combines the block into global memory (relaxed, as below),
            # dropping what falls outside the array.
            b.create(BulkStoreOp, parts.map, list(op.offsets), op.value, reduce=kind)
            op.erase()
            return
        pointers, mask = self._block(op, b)
        if kind == "add" and isinstance(element, t.FloatType):
            kind = "fadd"
        elif kind in ("min", "max") and isinstance(element, t.IntType) and not element.signed:
            kind = "u" + kind  # float min and max (f16, bf16) are the core's float atomics
        # A reduction through a descriptor returns nothing and orders nothing (TMA's
        # reductions are relaxed): the old values are dropped.
        b.create(tile.AtomicRMWOp, pointers, op.value, mask=mask, kind=kind, sem="relaxed")
        op.erase()

    # -- the workspace form (see .workspace): a tensor map, or a record of address, rows
    # and columns ----------------------------------------------------------------------
    @staticmethod
    def _record_field(b: Builder, desc_ptr: Any, byte: int, type_: Any) -> Any:
        """A pointer to the ``type_`` field ``byte`` bytes into the record at ``desc_ptr``."""
        address = b.create(arith.PtrToIntOp, desc_ptr, result_types=[t.i64]).result
        if byte:
            offset = b.create(arith.ConstantOp, value=byte, result_types=[t.i64]).result
            address = b.create(arith.BINARY_OPS["addi"], address, offset).result
        return b.create(arith.IntToPtrOp, address, result_types=[t.PointerType(type_)]).result

    def _check_against_maps(self, op: Any, element: Any, shape: tuple, what: str) -> None:
        """A load or store through a map this function makes at the same place must move
        that map's element type and block: the record holds no element type, so another
        one would address the array in the wrong steps."""
        from .workspace import map_location

        where = map_location(op.desc_ptr)
        for location, made, line in self.creates:
            if location != where:
                continue
            if made != (element, shape):
                at = f" (line {line})" if line is not None else ""
                raise _error(op, f"{what} moves blocks of {list(shape)} {element} through the map made{at} for "
                                 f"blocks of {list(made[1])} {made[0]}; use the map's load_size and element_ty")

    def _workspace_map(self, element: Any, block: tuple) -> bool:
        """Whether the workspace maps of blocks of ``block`` ``element`` are real tensor
        maps here (a target with bulk copies, a block one can move): the create writes one
        and the loads and stores copy through it.  Both sides decide from the element type
        and the block alone, so a map made by one kernel is read as such by another."""
        from .bulk import box_plan, element_code

        return self.device_maps and element_code(element) is not None and \
            box_plan(element.width, tuple(block)) is not None

    def workspace_create(self, op: Any) -> None:
        from .workspace import map_location

        element = op.address.type.pointee
        self.creates.append((map_location(op.desc_ptr), (element, tuple(op.block_shape)),
                             getattr(op.location, "line", None)))
        b = Builder.before(op)
        if self._workspace_map(element, op.block_shape):
            from . import device_maps  # noqa: F401  (the map ops' lowering and scratch)
            from .bulk import WriteMapOp

            self._assert_map_rules(b, op, element)
            columns = b.create(arith.ExtSIOp, op.columns, result_types=[t.i64]).result
            one = b.create(arith.ConstantOp, value=1, result_types=[t.i64]).result
            b.create(WriteMapOp, op.desc_ptr, op.address, [op.rows, op.columns], [columns, one],
                     block=tuple(op.block_shape), location=op.location)
            op.erase()
            return
        address = b.create(arith.PtrToIntOp, op.address, result_types=[t.i64]).result
        for byte, type_, value in ((0, t.i64, address), (8, t.i32, op.rows), (12, t.i32, op.columns)):
            b.create(tile.StoreOp, self._record_field(b, op.desc_ptr, byte, type_), value)
        op.erase()

    def _assert_map_rules(self, b: Builder, op: Any, element: Any) -> None:
        """A real tensor map holds only what the copy engine takes (as Triton's maps):
        the launch fails, naming the rule, where the kernel is given anything else (each
        rule the specialization's divisibility already proves is not checked again)."""
        if self._axis_info is None:
            from polytile.analysis.axis_info import AxisInfoAnalysis

            self._axis_info = AxisInfoAnalysis(self.module)
        info = self._axis_info.info

        size = element.width // 8
        row_rule = f"a row (global_size[1] elements of {element}) must be a multiple of 16 bytes"
        columns, rows = constant_value(op.columns), constant_value(op.rows)
        for value, index in ((rows, 0), (columns, 1)):
            if value is not None and value <= 0:
                raise _error(op, f"experimental_device_tensormap_create2d: global_size[{index}] = {value}; a tensor "
                                 "map's dimensions are positive")
        if columns is not None and columns * size % 16:
            raise _error(op, f"experimental_device_tensormap_create2d makes a CUDA tensor map on this target: "
                             f"{row_rule}, and global_size[1] = {columns}")
        for dimension, index in ((op.rows, 0), (op.columns, 1)):
            if constant_value(dimension) is None:
                zero = b.create(arith.ConstantOp, value=0, result_types=[t.i32]).result
                holds = b.create(arith.CmpIOp, dimension, zero, predicate="sgt", result_types=[t.i1]).result
                b.create(tile_debug.AssertOp, holds, message="experimental_device_tensormap_create2d makes a CUDA "
                         f"tensor map on this target: global_size[{index}] must be positive", always=True,
                         location=op.location)
        rules = ((op.desc_ptr, 1, 128, "desc_ptr must be 128-byte aligned (a CUDA tensor map's alignment)"),
                 (op.address, 1, 16, "global_address must be 16-byte aligned"),
                 (op.columns, size, 16, row_rule))
        for subject, scale, divisor, rule in rules:
            if info(subject).divisibility[0] * scale % divisor == 0 or (subject is op.columns and columns is not None):
                continue
            if subject is op.columns:  # the row's bytes
                value = b.create(arith.ExtSIOp, subject, result_types=[t.i64]).result
                value = b.create(arith.BINARY_OPS["muli"], value,
                                 b.create(arith.ConstantOp, value=scale, result_types=[t.i64]).result).result
            else:
                value = b.create(arith.PtrToIntOp, subject, result_types=[t.i64]).result
            low_bits = b.create(arith.ConstantOp, value=divisor - 1, result_types=[t.i64]).result
            remainder = b.create(arith.BINARY_OPS["andi"], value, low_bits).result
            zero = b.create(arith.ConstantOp, value=0, result_types=[t.i64]).result
            holds = b.create(arith.CmpIOp, remainder, zero, predicate="eq", result_types=[t.i1]).result
            b.create(tile_debug.AssertOp, holds, message="experimental_device_tensormap_create2d makes a CUDA "
                                                         f"tensor map on this target: {rule}", always=True,
                     location=op.location)

    def _workspace_parts(self, b: Builder, desc_ptr: Any, element: Any) -> _Parts:
        def field(byte: int, type_: Any) -> Any:
            return b.create(tile.LoadOp, self._record_field(b, desc_ptr, byte, type_), result_types=[type_]).result

        address, rows, columns = field(0, t.i64), field(8, t.i32), field(12, t.i32)
        base = b.create(arith.IntToPtrOp, address, result_types=[t.PointerType(element)]).result
        stride = b.create(arith.ExtSIOp, columns, result_types=[t.i64]).result
        one = b.create(arith.ConstantOp, value=1, result_types=[t.i64]).result
        return _Parts(base, [rows, columns], [stride, one])

    def _workspace_block(self, b: Builder, op: Any, parts: _Parts, block: tuple) -> tuple[Any, Any]:
        positions = [block_positions(b, offset, size, t.i64) for offset, size in zip(op.offsets, block)]
        return element_addresses(b, parts.base, parts.shape, parts.strides, positions, (0, 1))

    def _map_at(self, b: Builder, op: Any, element: Any, block: tuple) -> Any:
        """The real tensor map at ``op``'s ``desc_ptr`` where the workspace holds one for
        blocks of ``block`` ``element`` (see :meth:`_workspace_map`), else None."""
        if not self._workspace_map(element, block):
            return None
        from . import device_maps, hopper  # noqa: F401  (the map ops' and the copies' lowering)
        from .bulk import MapAtOp

        return b.create(MapAtOp, op.desc_ptr).result

    def workspace_load(self, op: Any) -> None:
        b = Builder.before(op)
        result = op.result.type
        self._check_against_maps(op, result.element, tuple(result.shape), "pl._experimental_descriptor_load")
        tensor_map = self._map_at(b, op, result.element, tuple(result.shape))
        if tensor_map is not None:
            from .bulk import BulkLoadOp

            # The map reads zeros outside the array (its fill), as the record's masks do.
            load = b.create(BulkLoadOp, tensor_map, list(op.offsets), result_types=[result])
        else:
            parts = self._workspace_parts(b, op.desc_ptr, result.element)
            pointers, mask = self._workspace_block(b, op, parts, tuple(result.shape))
            zero = 0.0 if isinstance(result.element, t.FloatType) else 0
            other = b.create(arith.ConstantOp, value=zero, result_types=[result]).result
            load = b.create(tile.LoadOp, pointers, mask=mask, other=other, result_types=[result])
        op.result.replace_all_uses_with(load.result)
        op.erase()

    def workspace_store(self, op: Any) -> None:
        b = Builder.before(op)
        value = op.value.type
        self._check_against_maps(op, value.element, tuple(value.shape), "pl._experimental_descriptor_store")
        tensor_map = self._map_at(b, op, value.element, tuple(value.shape))
        if tensor_map is not None:
            from .bulk import BulkStoreOp

            b.create(BulkStoreOp, tensor_map, list(op.offsets), op.value)
        else:
            parts = self._workspace_parts(b, op.desc_ptr, value.element)
            pointers, mask = self._workspace_block(b, op, parts, tuple(value.shape))
            b.create(tile.StoreOp, pointers, op.value, mask=mask)
        op.erase()

    def workspace_acquire(self, op: Any) -> None:
        # A record is read with ordinary loads, ordered after the writer's release by the
        # acquire the program made to see it (an atomic, as in Triton's examples); a real
        # map is read by the copy engine, whose proxy needs its own acquire.
        if self.device_maps:
            from . import device_maps  # noqa: F401
            from .bulk import AcquireMapOp

            Builder.before(op).create(AcquireMapOp, op.desc_ptr, location=op.location)
        op.erase()

    def erase_dead(self) -> None:
        for op in reversed(self.dead):
            if op.parent is not None and not any(r.has_uses for r in op.results):
                op.erase()


_HANDLERS = {
    ops.MakeDescriptorOp: _Lowering.make,
    ops.DimOp: _Lowering.dim,
    ops.LoadOp: _Lowering.load,
    ops.StoreOp: _Lowering.store,
    ops.ReduceOp: _Lowering.reduce,
    ops.GatherOp: _Lowering.gather,
    ops.ScatterOp: _Lowering.scatter,
}


def _handlers() -> dict:
    """The handlers, the workspace form's added at the first module that uses it (its
    module imports the mutation analysis: kernels without descriptors never pay for it)."""
    if len(_HANDLERS) == len(ops.TMA_OPS):
        from . import workspace

        _HANDLERS.update({workspace.WorkspaceCreateOp: _Lowering.workspace_create,
                          workspace.WorkspaceAcquireOp: _Lowering.workspace_acquire,
                          workspace.WorkspaceLoadOp: _Lowering.workspace_load,
                          workspace.WorkspaceStoreOp: _Lowering.workspace_store})
    return _HANDLERS


def _uses_descriptors(module: Any) -> bool:
    # By name: the tma dialect's ops (the workspace form's among them) without importing them.
    return any(op.name.startswith("tma.") for op in module.walk())


def lower_tensor_descriptors(module: Any, device_maps: bool = False) -> bool:
    """Rewrite every descriptor op of ``module``; True when something changed.
    ``device_maps``: build tensor maps on the device for descriptors the kernel makes
    (a target with bulk tensor copies, see :mod:`.device_maps`)."""
    if not _uses_descriptors(module):
        return False
    lowering = _Lowering(module, device_maps)
    for op in module.walk():
        if op.name == "func.func":
            if any(_is_descriptor(arg) for arg in op.arguments):
                raise _error(op, "a tensor descriptor argument reached lower-tensor-descriptors; host descriptors "
                                 "are expanded before it")
            for block in op.regions[0].blocks:
                lowering.walk(block)
    lowering.erase_dead()
    return True


@dataclass
class LowerTensorDescriptors(Pass):
    """Tensor descriptor ops to masked pointer loads, stores and atomics (see the module
    docstring)."""

    name: ClassVar[str] = "lower-tensor-descriptors"
    summary: ClassVar[str] = "tensor descriptors (pl.make_tensor_descriptor) to masked pointer accesses"
    #: Build the tensor maps of descriptors made in the kernel on the device, so their
    #: blocks move as bulk copies (set for targets with a tensor memory accelerator).
    device_maps: bool = False

    def applies_to(self, module: Any) -> bool:
        return _uses_descriptors(module)

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        if lower_tensor_descriptors(module, self.device_maps):
            context.count("lower-tensor-descriptors.lowered")
            return PreservedAnalyses.none()
        return PreservedAnalyses.all()


__all__ = ["LowerTensorDescriptors", "MAP_BASES", "array_of", "lower_tensor_descriptors"]
