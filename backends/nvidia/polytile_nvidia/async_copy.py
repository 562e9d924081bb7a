"""``cp.async`` for ``gpu.async_copy`` (sm_80 and later): the NVIDIA async copy unit.

A 16-byte copy bypasses L1 (``.cg``, the only cache level 16-byte copies allow); 4- and
8-byte copies use ``.ca``.  A zero-filled copy passes a source size of 0 (``cp-size``
bytes are written, ``src-size`` read: the rest are zeros), so it reads nothing; a
thread that only repeats another's elements is predicated off.  Commit and wait are
``cp.async.commit_group`` / ``cp.async.wait_group N``; or the copies complete on an
mbarrier (``cp.async.mbarrier.arrive.noinc``, see :mod:`.mbarrier`).

The asm statements clobber memory: LLVM must not move shared-memory reads across a wait.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def copy_ptx(size: int, predicated: bool) -> str:
    """``cp.async`` of ``size`` bytes: operands $0 shared address, $1 global address,
    $2 source size (and $3 the predicate, non-zero: copy)."""
    cache = "cg" if size == 16 else "ca"
    text = f"cp.async.{cache}.shared.global [$0], [$1], {size}, $2;"
    if not predicated:
        return text
    return "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p " + text + " }"


COMMIT_PTX = "cp.async.commit_group;"
#: Arrive on the mbarrier at $0 once this thread's earlier copies have landed; ``noinc``:
#: the arrival counts towards the barrier's expected count (one per thread).
ARRIVE_PTX = "cp.async.mbarrier.arrive.noinc.shared.b64 [$0];"
WAIT_PTX = "cp.async.wait_group {};"


def _void_asm(builder: ir.IRBuilder, text: str, inputs: list, constraints: list[str]) -> None:
    function_type = ir.FunctionType(ir.VoidType(), [v.type for v in inputs])
    builder.asm(function_type, text, ",".join([*constraints, "~{memory}"]), inputs, side_effect=True)


class NvidiaAsyncCopy:
    """The ``AsyncCopyUnit`` of the NVIDIA backend."""

    def copy(self, builder: ir.IRBuilder, shared_address: Any, global_pointer: Any, size: int, fill: Any,
             predicate: Any) -> None:
        source_size = ir.Constant(_I32, size) if fill is None else \
            builder.select(fill, ir.Constant(_I32, 0), ir.Constant(_I32, size))
        inputs = [shared_address, builder.ptrtoint(global_pointer, _I64), source_size]
        constraints = ["r", "l", "r"]
        if predicate is not None:
            inputs.append(builder.zext(predicate, _I32))
            constraints.append("r")
        _void_asm(builder, copy_ptx(size, predicate is not None), inputs, constraints)

    def commit(self, builder: ir.IRBuilder) -> None:
        _void_asm(builder, COMMIT_PTX, [], [])

    def wait(self, builder: ir.IRBuilder, pending: int) -> None:
        _void_asm(builder, WAIT_PTX.format(pending), [], [])

    def arrive(self, builder: ir.IRBuilder, barrier_address: Any) -> None:
        _void_asm(builder, ARRIVE_PTX, [barrier_address], ["r"])


NVIDIA_ASYNC_COPY = NvidiaAsyncCopy()

__all__ = ["ARRIVE_PTX", "COMMIT_PTX", "NVIDIA_ASYNC_COPY", "NvidiaAsyncCopy", "WAIT_PTX", "copy_ptx"]
