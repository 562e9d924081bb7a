"""``pl.inline_asm_elementwise``: the target's assembly run on every element (Triton's
``tl.inline_asm_elementwise``)."""

from __future__ import annotations

from typing import Any

from ..dialects.tile_asm import InlineAsmOp, registers_of
from ..ir import types as t
from . import semantic as sem
from .core import builtin, dtype as dtype_class, semantic_error, tensor, unwrap


@builtin
def inline_asm_elementwise(asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any) -> Any:
    """Run ``asm`` on every ``pack`` elements of ``args`` (Triton's semantics).

    ``asm``: the target's assembly (PTX on NVIDIA, AMDGCN on AMD), ``$0``, ``$1``... naming
    the outputs then the inputs; ``constraints``: LLVM's constraint string (``"=r,r,r"``);
    ``args``: tensors (broadcast to one shape) or numbers; ``dtype``: the result's dtype,
    or a tuple of dtypes for several results (a tuple of tensors is returned);
    ``is_pure``: whether the results are all the assembly does; ``pack``: how many
    elements one instance handles (narrow elements share 32-bit registers: with
    ``pack=4``, four int8s are one ``r`` operand).  The interpreter cannot run assembly:
    there it is an error."""
    asm, constraints, is_pure, pack = unwrap(asm), unwrap(constraints), unwrap(is_pure), unwrap(pack)
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise semantic_error("pl.inline_asm_elementwise: asm and constraints must be compile-time strings")
    if not isinstance(is_pure, bool):
        raise semantic_error(f"pl.inline_asm_elementwise: is_pure must be a compile-time True or False, got {is_pure!r}")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        raise semantic_error(f"pl.inline_asm_elementwise: pack must be a power of two of at least 1, got {pack!r}")
    args = unwrap(args)
    values = [sem.to_tensor(unwrap(a)) for a in (args if isinstance(args, (list, tuple)) else [args])]
    dtype = unwrap(dtype)
    several = isinstance(dtype, (list, tuple))
    dtypes = [unwrap(d) for d in (dtype if several else [dtype])]
    for d in dtypes:
        if not isinstance(d, dtype_class):
            raise semantic_error(f"pl.inline_asm_elementwise: dtype must be a dtype or a tuple of dtypes, got {d!r}")
    shape: tuple = ()
    for value in values:
        shape = sem.broadcast_shapes(shape, tuple(value.shape))
    values = [sem.broadcast_to_shape(v, shape) if tuple(v.shape) != shape else v for v in values]
    outputs = sum(registers_of(d.ir, pack)[0] for d in dtypes)
    inputs = sum(registers_of(t.element_type(v.type), pack)[0] for v in values)
    described = [c for c in constraints.split(",") if c.strip() and not c.strip().startswith("~")]
    if len(described) != outputs + inputs:
        raise semantic_error(f"pl.inline_asm_elementwise: the constraints {constraints!r} describe {len(described)} "
                             f"operands, but with pack = {pack} the assembly has {outputs} output and {inputs} input "
                             f"registers")
    result_types = [t.TileType(shape, d.ir) if shape else d.ir for d in dtypes]
    op = sem.emit(InlineAsmOp, [v.handle for v in values], asm=asm, constraints=constraints, pure=is_pure, pack=pack,
                  result_types=result_types)
    results = tuple(tensor(r) for r in op.results)
    return results if several else results[0]

