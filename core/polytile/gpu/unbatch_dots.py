"""``unbatch-dots``: a batched (3-D) ``tile.dot`` as 2-D dots, for GPU pipelines.

``pl.dot`` of B x M x K by B x K x N tiles (Triton's 3-D dot) is one ``tile.dot`` in the
tile IR, which the interpreter runs as it is.  The GPU layouts, matrix units and
pipelining know 2-D dots; this pass, first in ``distribute``, rewrites each batched dot
into 2-D ones with the shape ops every GPU lowering has (``tile.trans``,
``tile.reshape``, ``tile.split``, ``tile.join``), halving the batch at each level:

    a : B x M x K  --trans(1, 2, 0)-->  M x K x B  --reshape-->  M x K x B/2 x 2
      --split-->  the even and the odd batch entries, M x K x B/2 each
      --trans(2, 0, 1)-->  B/2 x M x K each

and the same for ``b`` and ``acc``; the two halves' dots, recursively, are stacked back
with the inverse steps (``join``, ``reshape``, ``trans``).  A batch of one is a
``reshape`` to 2-D and back.  So B 2-D dots run, each on its own instruction plan, with
log2(B) levels of layout changes through registers and shared memory around them:
correct on every GPU target, not tuned for speed (a batched dot whose batch the warps
share would be).  B must be a power of two, as every tile dimension is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..dialects import tile, tile_shape
from ..errors import CompilationError
from ..ir import types as t
from ..ir.builder import Builder
from ..passes.pass_base import Pass, PassContext, PreservedAnalyses

_TO_BATCH_LAST = (1, 2, 0)
_TO_BATCH_FIRST = (2, 0, 1)


def _trans(b: Builder, value: Any, order: tuple) -> Any:
    shape = value.type.shape
    result = t.TileType(tuple(shape[i] for i in order), value.type.element)
    return b.create(tile.TransOp, value, order=order, result_types=[result]).result


def _reshape(b: Builder, value: Any, shape: tuple) -> Any:
    return b.create(tile.ReshapeOp, value, result_types=[t.TileType(shape, value.type.element)]).result


def _halves(b: Builder, value: Any) -> tuple[Any, Any]:
    """The even and the odd batch entries of a B x R x C tile, B/2 x R x C each."""
    batch, rows, cols = value.type.shape
    last = _reshape(b, _trans(b, value, _TO_BATCH_LAST), (rows, cols, batch // 2, 2))
    split = b.create(tile_shape.SplitOp, last)
    return _trans(b, split.lhs, _TO_BATCH_FIRST), _trans(b, split.rhs, _TO_BATCH_FIRST)


def _stacked(b: Builder, even: Any, odd: Any) -> Any:
    """The inverse of :func:`_halves`."""
    half, rows, cols = even.type.shape
    joined = b.create(tile_shape.JoinOp, _trans(b, even, _TO_BATCH_LAST), _trans(b, odd, _TO_BATCH_LAST)).result
    return _trans(b, _reshape(b, joined, (rows, cols, 2 * half)), _TO_BATCH_FIRST)


def _unbatched(b: Builder, dot: Any, a: Any, bv: Any, acc: Any) -> Any:
    batch, m, k = a.type.shape
    n = bv.type.shape[2]
    if batch == 1:
        product = b.create(tile.DotOp, _reshape(b, a, (m, k)), _reshape(b, bv, (k, n)), _reshape(b, acc, (m, n)),
                           input_precision=dot.input_precision, max_num_imprecise_acc=dot.max_num_imprecise_acc)
        return _reshape(b, product.result, (1, m, n))
    (a0, a1), (b0, b1), (c0, c1) = _halves(b, a), _halves(b, bv), _halves(b, acc)
    return _stacked(b, _unbatched(b, dot, a0, b0, c0), _unbatched(b, dot, a1, b1, c1))


@dataclass
class UnbatchDots(Pass):
    """Rewrite each 3-D (batched) ``tile.dot`` into 2-D dots (see the module docstring)."""

    name: ClassVar[str] = "unbatch-dots"
    summary: ClassVar[str] = "batched (3-D) dots as 2-D dots, through shape ops"

    def applies_to(self, module: Any) -> bool:
        return any(isinstance(op, tile.DotOp) and op.a.type.rank == 3 for op in module.walk())

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        changed = False
        for dot in [op for op in module.walk() if isinstance(op, tile.DotOp) and op.a.type.rank == 3]:
            batch = dot.a.type.shape[0]
            if batch & (batch - 1):
                raise CompilationError(f"a batched pl.dot needs a power-of-two batch, got {batch}", location=dot.location)
            builder = Builder.before(dot, dot.location)
            result = _unbatched(builder, dot, dot.a, dot.b, dot.acc)
            dot.result.replace_all_uses_with(result)
            dot.erase()
            context.count("unbatch-dots.dots")
            changed = True
        return PreservedAnalyses.none() if changed else PreservedAnalyses.all()


__all__ = ["UnbatchDots"]
