"""Interpretation rules of :mod:`polytile.dialects.tile_debug` (print, assert, barrier) and of
``tile.inline_asm`` (an error: the interpreter runs no assembly)."""

from __future__ import annotations

import sys

import numpy as np

from ..dialects import tile_asm, tile_debug
from ..ir.operation import Operation
from .executor import ProgramContext, register_rule


def _format(value: np.ndarray, hex_: bool) -> str:
    if hex_ and value.dtype.kind in "iub":
        bits = value.dtype.itemsize * 8
        return f"0x{int(value) & ((1 << bits) - 1):0{bits // 4}x}"
    return str(value.item() if value.dtype.kind != "b" else bool(value))


@register_rule(tile_debug.PrintOp)
def print_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    """One line per element, as Triton's device_print:
    ``pid (x, y, z) idx (i, j) prefix: v1, v2``."""
    print(print_text(op, operands, ctx.program_id), file=sys.stdout, flush=True)


def print_text(op: Operation, operands: list, program_id: tuple[int, ...]) -> str:
    """What ``op`` prints in program ``program_id`` for its operand values ``operands``."""
    prefix, hex_ = op.attributes.get("prefix", ""), op.attributes.get("hex", False)
    pid = f"pid ({', '.join(map(str, program_id))})"
    shape = next((v.shape for v in operands if np.ndim(v)), ())
    values = [np.broadcast_to(v, shape) for v in operands]
    lines = []
    for index in np.ndindex(*shape) if shape else [()]:
        idx = f" idx ({', '.join(map(str, index))})" if shape else ""
        text = ", ".join(_format(np.asarray(v[index]), hex_) for v in values)
        lines.append(f"{pid}{idx} {prefix}{text}")
    return "\n".join(lines)


@register_rule(tile_debug.AssertOp)
def assert_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    message = assertion_failure(op, operands[0])
    if message is not None:
        raise ctx.error(op, message)


@register_rule(tile_debug.AssumeOp)
def assume_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    message = assumption_failure(op, operands[0])
    if message is not None:
        raise ctx.error(op, message)


def assumption_failure(op: Operation, condition: np.ndarray) -> str | None:
    """What a false ``pl.assume`` says (a GPU would compute wrong results from it)."""
    message = assertion_failure(op, condition)
    if message is None:
        return None
    where = message.removeprefix("device assertion failed")
    return (f"pl.assume: the condition is false{where}; on a GPU the compiler relies on it, and what the kernel "
            "computes would then be wrong")


def assertion_failure(op: Operation, condition: np.ndarray) -> str | None:
    """The message of a failed assertion on one program's ``condition``, or None."""
    failed = ~np.asarray(condition, dtype=bool)
    if not failed.any():
        return None
    where = ""
    if failed.ndim:
        first = tuple(int(i) for i in np.unravel_index(int(np.argmax(failed)), failed.shape))
        where = f" at element {first[0] if len(first) == 1 else first}"
    message = op.attributes.get("message", "")
    return f"device assertion failed{where}{': ' + message if message else ''}"


@register_rule(tile_debug.BarrierOp)
def barrier_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    return None


@register_rule(tile_asm.InlineAsmOp)
def inline_asm_rule(op: Operation, operands: list, ctx: ProgramContext) -> None:
    from ..errors import InterpreterUnsupportedError

    raise ctx.error(op, "pl.inline_asm_elementwise runs the target's own assembly (PTX on NVIDIA, AMDGCN on AMD), "
                        "which the interpreter cannot run: launch this kernel on a GPU target, or keep an "
                        "interpreter branch without the assembly (`if ON_GPU: ... else: ...` on a constexpr)",
                    InterpreterUnsupportedError)
