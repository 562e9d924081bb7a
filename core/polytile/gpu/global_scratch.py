"""Global scratch: device memory each program of one launch owns, given by the user's
allocator (``polytile.set_allocator``).

Some ops need memory in global space that lives for one launch and belongs to one
program: a tensor map built on the device (polytile-tma's device descriptors) is
written there and read by the copy engine, which cannot read shared memory for it.  An
op class says how much with :func:`register_global_scratch`; then

- ``lower-to-llvm`` plans the kernel (:func:`plan_global_scratch`): each such op gets an
  offset in the program's slice, and the kernel gets one more parameter after those of
  its arguments, the base of the launch's scratch.  ``LoweringContext.global_scratch(op)``
  is the op's bytes in this program's slice: ``base + program * bytes + offset``, with
  programs numbered ``x + y * nx + z * nx * ny``;
- the plan goes into the compile's metadata (:data:`BYTES_KEY`, :data:`ALIGNMENT_KEY`,
  :data:`USERS_KEY`), so a kernel read from the disk cache launches the same way;
- at launch, :mod:`polytile.runtime.allocator` asks the allocator for ``bytes *
  programs`` bytes (Triton's ``alloc_fn(size, alignment, stream)``) and passes the
  address as that last parameter.  A kernel that needs scratch when no allocator is set
  fails with a :class:`~polytile.errors.LaunchError` saying how to set one.

Only ops of a kernel function get scratch: a ``noinline`` callee has no such parameter,
so an op there is an error naming it (a plugin makes such ops only in kernels).
"""

from __future__ import annotations

from typing import Any, Callable

from ..backend import GLOBAL_SCRATCH_ALIGNMENT, GLOBAL_SCRATCH_BYTES, GLOBAL_SCRATCH_PARAMETER, GLOBAL_SCRATCH_USERS
from ..plugins.tables import OwnedTable

#: ``fn(op, target) -> (bytes, alignment)``: the global scratch an op of a class needs
#: (bytes 0: none for this instance), by op class.
GlobalScratchSize = Callable[[Any, Any], "tuple[int, int]"]
GLOBAL_SCRATCH: OwnedTable[GlobalScratchSize] = OwnedTable("global scratch size")

#: Compile metadata: the bytes of global scratch one program needs (absent: none), the
#: alignment of each program's slice, and what needs it (for the launch's error message);
#: the name of the kernel's hidden last parameter.  Part of the launcher contract, so
#: defined with it (the runtime reads them without importing this module).
BYTES_KEY, ALIGNMENT_KEY, USERS_KEY = GLOBAL_SCRATCH_BYTES, GLOBAL_SCRATCH_ALIGNMENT, GLOBAL_SCRATCH_USERS
PARAMETER_NAME = GLOBAL_SCRATCH_PARAMETER


def register_global_scratch(*op_classes: type) -> Callable[[GlobalScratchSize], GlobalScratchSize]:
    """Decorator: ``@register_global_scratch(MyOp)`` on ``fn(op, target) -> (bytes,
    alignment)`` says how many bytes of per-program global memory an op of that class
    needs, aligned how (a power of two).  Its lowering reads them with
    ``ctx.global_scratch(op)``; give the op a ``purpose`` attribute (a short phrase such
    as ``"the tensor map of pl.make_tensor_descriptor"``) and the launch error names it."""
    def register(fn: GlobalScratchSize) -> GlobalScratchSize:
        for cls in op_classes:
            GLOBAL_SCRATCH.add(cls, fn)
        return fn
    return register


class GlobalScratchPlan:
    """Where each op's scratch lies in a program's slice (``offsets``, by op), the
    slice's size and alignment, and what needs it.  (A plain class: ``import`` of the
    runtime reads this module, and a warm start makes no dataclass it can avoid.)"""

    __slots__ = ("offsets", "bytes", "alignment", "users")

    def __init__(self) -> None:
        self.offsets: dict = {}
        self.bytes = 0
        self.alignment = 1
        self.users: list = []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GlobalScratchPlan):
            return NotImplemented
        return (self.offsets, self.bytes, self.alignment, self.users) == \
            (other.offsets, other.bytes, other.alignment, other.users)

    def __repr__(self) -> str:
        return f"GlobalScratchPlan(bytes={self.bytes}, alignment={self.alignment}, users={self.users})"

    def metadata(self) -> dict:
        if not self.bytes:
            return {}
        return {BYTES_KEY: self.bytes, ALIGNMENT_KEY: self.alignment, USERS_KEY: list(self.users)}


def plan_global_scratch(function: Any, target: Any) -> GlobalScratchPlan:
    """The global scratch of kernel ``function``: each op that registered some gets the
    next offset aligned as it asks; the slice is rounded up to the largest alignment, so
    every program's slice starts aligned too."""
    plan = GlobalScratchPlan()
    if not GLOBAL_SCRATCH:
        return plan
    for op in function.walk():
        size_of = GLOBAL_SCRATCH.get(type(op))
        if size_of is None:
            continue
        size, alignment = (int(v) for v in size_of(op, target))
        if size <= 0:
            continue
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"'{op.name}': global scratch alignment must be a power of two, got {alignment}")
        offset = (plan.bytes + alignment - 1) // alignment * alignment
        plan.offsets[op] = offset
        plan.bytes = offset + size
        plan.alignment = max(plan.alignment, alignment)
        purpose = getattr(op, "purpose", None)
        purpose = purpose if isinstance(purpose, str) else op.name
        line = getattr(op.location, "line", None)
        user = f"{purpose} (line {line})" if line is not None else str(purpose)
        if user not in plan.users:
            plan.users.append(user)
    plan.bytes = (plan.bytes + plan.alignment - 1) // plan.alignment * plan.alignment
    return plan


__all__ = ["ALIGNMENT_KEY", "BYTES_KEY", "GLOBAL_SCRATCH", "GlobalScratchPlan", "PARAMETER_NAME", "USERS_KEY",
           "plan_global_scratch", "register_global_scratch"]
