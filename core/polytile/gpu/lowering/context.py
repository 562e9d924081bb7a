"""The lowering table and the state one kernel's lowering carries.

A tile value becomes, in each thread, a Python list of LLVM scalars: one per register of
its layout, in register order (``LinearLayout`` register 0 first).  A scalar value is one
LLVM value.  ``LOWERINGS`` maps an op class to ``fn(op, operands, ctx)``, where
``operands`` holds the operands in that form, and the function returns the results in
that form (a list with one entry per result).
"""

from __future__ import annotations

import linecache
from typing import Any, Callable

from ...errors import CompilationError, SourceLocation
from ...ir import types as t
from ...plugins.tables import OwnedTable

Lowering = Callable[[Any, list, "LoweringContext"], list]

#: The dynamic shared memory array every kernel of a module shares (an extern global).
SHARED_MEMORY_SYMBOL = "polytile_shared"

#: Op class -> lowering function (see the module docstring); each entry owned by the
#: plugin that registered it (:class:`~polytile.plugins.tables.OwnedTable`).  The core's
#: lowerings are in the modules named here, imported on the table's first read.
LOWERINGS: OwnedTable[Lowering] = OwnedTable("GPU lowering", providers=tuple(
    f"polytile.gpu.lowering.{name}" for name in (
        "async_copy", "atomics", "calls", "control_flow", "convert", "debug", "dot", "elementwise", "gather",
        "histogram", "inline_asm", "mbarrier", "memory", "reduce", "scan", "shapes", "shared", "tiles")))


def register_lowering(*op_classes: type) -> Callable[[Lowering], Lowering]:
    """Decorator: ``@register_lowering(MyOp)`` makes ``fn`` the lowering of ``MyOp``
    for every GPU backend (a plugin may override a core op's lowering the same way: the
    core's comes back when the plugin is withdrawn)."""
    def register(fn: Lowering) -> Lowering:
        for cls in op_classes:
            LOWERINGS.add(cls, fn)
        return fn
    return register


def op_error(op: Any, kernel: str, message: str) -> CompilationError:
    """An error about ``op`` at its kernel source line (shown with a caret when the
    source can be read)."""
    location = op.location if isinstance(op.location, SourceLocation) else None
    source_line = None
    if location is not None:
        text = linecache.getline(location.file, location.line)
        source_line = text.rstrip("\n") or None
        if source_line is not None:
            indent = len(source_line) - len(source_line.lstrip())
            source_line = source_line.strip()
            location = SourceLocation(location.file, location.line, max(location.column - indent, 0))
    return CompilationError(f"in kernel '{kernel}': {message}", location, source_line)


class LoweringContext:
    """One kernel's lowering: the LLVM function and builder, the values lowered so far,
    the target's data and hooks, and the facts (axis info) the lowering may use."""

    def __init__(self, module: Any, function: Any, builder: Any, target: Any, kernel: str, num_warps: int,
                 axis_info: Any):
        self.module = module
        self.function = function
        self.builder = builder
        self.target = target
        self.kernel = kernel
        self.num_warps = num_warps
        self.warp_size = target.warp_size
        self.axis_info = axis_info
        self.values: dict[Any, Any] = {}
        self.thread_id = None
        self.lane_id = None
        self.warp_id = None
        #: The kernel's global scratch (see :mod:`polytile.gpu.global_scratch`): its plan
        #: and the hidden parameter with the launch's base address (None without).
        self.global_scratch_plan: Any = None
        self.global_scratch_base: Any = None
        #: Warps the launch starts (``num_warps`` plus the kernel's worker warps).
        self.launch_warps = num_warps
        #: Registers per thread the kernel's code assumes, where a lowering fixed them
        #: (warp groups moving registers); None: the assembler chooses.
        self.register_cap: int | None = None

    # -- values -----------------------------------------------------------------------
    def get(self, value: Any) -> Any:
        try:
            return self.values[value]
        except KeyError:
            raise RuntimeError(f"value {value!r} used before it was lowered") from None

    def set(self, value: Any, lowered: Any) -> None:
        self.values[value] = lowered

    # -- errors -----------------------------------------------------------------------
    def unsupported(self, op: Any, what: str | None = None) -> CompilationError:
        subject = what or f"'{op.name}'"
        return op_error(op, self.kernel, f"{subject} is not supported by the {self.target.backend_name} backend yet")

    def error(self, op: Any, message: str) -> CompilationError:
        return op_error(op, self.kernel, message)

    # -- LLVM helpers -----------------------------------------------------------------
    def declare(self, name: str, return_type: Any, argument_types: list) -> Any:
        """The LLVM function ``name`` (declared on first use)."""
        from llvmlite import ir

        found = self.module.globals.get(name)
        if found is not None:
            return found
        return ir.Function(self.module, ir.FunctionType(return_type, argument_types), name)

    def call(self, name: str, return_type: Any, arguments: list) -> Any:
        return self.builder.call(self.declare(name, return_type, [a.type for a in arguments]), arguments)

    def i32(self, value: int) -> Any:
        from llvmlite import ir

        return ir.Constant(ir.IntType(32), value)

    # -- shared memory ----------------------------------------------------------------
    def shared_base(self) -> Any:
        """An ``i8`` pointer (shared address space) to the program's dynamic shared
        memory, whose size the memory stage computed (``gpu.shared_bytes``)."""
        from llvmlite import ir

        name = SHARED_MEMORY_SYMBOL
        found = self.module.globals.get(name)
        if found is None:
            found = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0), name,
                                      addrspace=self.target.shared_address_space)
            found.linkage = "external"
            # Only 16 is promised: where the driver puts dynamic shared memory is checked at
            # run time by the kernels that need 1024 (wgmma reading swizzled slots in place).
            found.align = 16
        return found

    def global_scratch(self, op: Any) -> Any:
        """An ``i8`` pointer (global address space) to the bytes of global scratch ``op``
        registered with ``register_global_scratch``, in this program's slice."""
        plan = self.global_scratch_plan
        offset = plan.offsets.get(op) if plan is not None else None
        if offset is None or self.global_scratch_base is None:
            raise self.error(op, f"internal error: '{op.name}' needs global scratch but the kernel has none for it "
                                 "(only ops of a kernel function get global scratch, not those of noinline callees)")
        from llvmlite import ir

        b = self.builder
        i64 = ir.IntType(64)
        x, y, z = (b.zext(self.target.read_id(b, "block_id", axis), i64) for axis in range(3))
        nx, ny = (b.zext(self.target.read_id(b, "num_blocks", axis), i64) for axis in range(2))
        program = b.add(x, b.mul(nx, b.add(y, b.mul(ny, z))))
        byte = b.add(b.mul(program, i64(plan.bytes)), i64(offset))
        return b.gep(self.global_scratch_base, [byte], source_etype=ir.IntType(8))

    def scratch(self, op: Any) -> Any:
        """An ``i8`` pointer (shared address space) to the scratch space of ``op``, which
        registered its size with ``polytile.gpu.allocation.register_scratch``."""
        from llvmlite import ir

        from ..allocation import SCRATCH_OFFSET_ATTR

        offset = op.attributes.get(SCRATCH_OFFSET_ATTR)
        if offset is None:
            raise self.error(op, f"internal error: '{op.name}' needs shared memory but has no "
                                 f"{SCRATCH_OFFSET_ATTR}; the memory stage (allocate-shared) must run before lower-to-llvm")
        return self.builder.gep(self.shared_base(), [self.i32(0), self.i32(offset)], inbounds=True,
                                source_etype=ir.ArrayType(ir.IntType(8), 0))


def layout_of(value: Any) -> Any:
    """The distributed layout of a tile value (assign-layouts must have run)."""
    layout = value.type.layout if isinstance(value.type, t.TileType) else None
    if layout is None:
        raise ValueError(f"tile {value.type} has no layout; run the distribute stage (assign-layouts) first")
    return layout


def linear_layout_of(value: Any) -> Any:
    return layout_of(value).linear(value.type.shape)
