"""The language's builtins: ``pl.program_id``, ``pl.load``, ``pl.sum``, ``pl.dot`` ...

Each one is a Python function the frontend calls while generating a kernel; it checks
its arguments in the user's terms and emits core IR through the current context.
Compile-time arguments (axes, shapes, dtypes) arrive as Python values.
"""

from __future__ import annotations

import builtins as _py
from typing import Any

from ..dialects import arith, math as math_d, tile
from ..ir import types as t
from ..ir.builder import InsertionPoint
from ..ir.operation import Block, Region
from . import block as _block, semantic as sem
from .core import builtin, constexpr, current_context, dtype, dtype_of, semantic_error, tensor, unwrap
from .core import dtype as _dtype_class

# --------------------------------------------------------------------------------------
# Helpers


def _const_int(value: Any, what: str) -> int:
    value = unwrap(value)
    if isinstance(value, _py.bool) or not isinstance(value, _py.int):
        raise semantic_error(f"{what} must be a compile-time integer (a literal or a pl.constexpr), "
                             f"got {sem._describe(value)}")
    return value


def _shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    shape = unwrap(shape)
    if isinstance(shape, (_py.int, constexpr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise semantic_error(f"{what} must be a tuple of compile-time integers, got {sem._describe(shape)}")
    dims = tuple(_const_int(d, f"each dimension of the {what}") for d in shape)
    for d in dims:
        if d <= 0:
            raise semantic_error(f"{what} {list(dims)} has a dimension that is not positive")
    return dims


def _dtype(value: Any, what: str = "dtype") -> dtype:
    value = unwrap(value)
    if not isinstance(value, dtype):
        raise semantic_error(f"{what} must be a dtype such as pl.float32, got {sem._describe(value)}")
    return value


def _axis(axis: Any, rank: int) -> int:
    axis = _const_int(axis, "axis")
    if not -rank <= axis < rank:
        raise semantic_error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def _vararg_shape(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        return tuple(unwrap(shape[0]))
    return shape


# --------------------------------------------------------------------------------------
# Programs and ranges


@builtin
def program_id(axis: Any) -> tensor:
    """The index of this program along grid axis 0, 1 or 2."""
    axis = _const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise semantic_error(f"program_id axis must be 0, 1, or 2 but got {axis}")
    return tensor(sem.emit(tile.ProgramIdOp, axis=axis).result)


@builtin
def num_programs(axis: Any) -> tensor:
    """The number of programs along grid axis 0, 1 or 2."""
    axis = _const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise semantic_error(f"num_programs axis must be 0, 1, or 2 but got {axis}")
    return tensor(sem.emit(tile.NumProgramsOp, axis=axis).result)


@builtin
def arange(start: Any, end: Any) -> tensor:
    """``start, ..., end - 1`` as a 1-D int32 tile; ``end - start`` must be a power of two."""
    start, end = _const_int(start, "arange's start"), _const_int(end, "arange's end")
    n = end - start
    if n <= 0:
        raise semantic_error(f"arange's end ({end}) must be greater than its start ({start})")
    if n & (n - 1):
        raise semantic_error(f"arange's range must be a power of 2, got {n} (end - start = {end} - {start})")
    return tensor(sem.emit(tile.ArangeOp, start=start, end=end).result)


@builtin
def full(shape: Any, value: Any, dtype: Any) -> tensor:
    """A tile of ``shape`` with every element ``value`` (a number or a scalar tensor); the
    shape ``()`` gives a scalar tensor, as in Triton."""
    dims, element = _shape(shape), _dtype(dtype).ir
    value = unwrap(value)
    if isinstance(value, tensor):
        if value.shape:
            raise semantic_error(f"full's value must be a scalar, got a tensor of shape {list(value.shape)}")
        value = sem.cast_type(value, element)
        return sem.broadcast_to_shape(value, dims) if dims else value
    return sem.constant(value, t.TileType(dims, element) if dims else element)


@builtin
def zeros(shape: Any, dtype: Any) -> tensor:
    """A tile of zeros."""
    return full(shape, 0, dtype)


@builtin
def zeros_like(input: Any) -> tensor:
    """Zeros of ``input``'s shape and dtype."""
    input = sem.to_tensor(input)
    return sem.constant(0, input.type)


@builtin
def full_like(input: Any, value: Any, dtype: Any = None) -> tensor:
    input = sem.to_tensor(input)
    element = input.type if dtype is None else t.like(input.type, _dtype(dtype).ir)
    return sem.constant(value, element) if not isinstance(unwrap(value), tensor) else \
        full(input.shape, value, _dtype(dtype) if dtype is not None else input.dtype)


@builtin
def cdiv(x: Any, div: Any) -> Any:
    """``ceil(x / div)`` for integers (compile-time when both are)."""
    x, div = unwrap(x), unwrap(div)
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return (x + div - 1) // div
    return (x + div - 1) // div


# --------------------------------------------------------------------------------------
# Casts and selection


@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False) -> tensor:
    """``input`` converted to ``dtype`` (``bitcast``: its bits reinterpreted).
    ``fp_downcast_rounding``: None or ``"rtne"`` (round to nearest even, what every
    conversion does); Triton's ``"rtz"`` is refused rather than silently rounded to
    nearest."""
    rounding = unwrap(fp_downcast_rounding)
    if rounding is not None:
        if rounding not in ("rtne", "rtz"):
            raise semantic_error(f"fp_downcast_rounding must be None, 'rtne' or 'rtz', got {rounding!r}")
        source, target = sem.to_tensor(input), unwrap(dtype)
        element = t.element_type(source.type)
        narrowing = (not unwrap(bitcast) and isinstance(element, t.FloatType) and isinstance(target, _dtype_class)
                     and isinstance(target.ir, t.FloatType) and target.ir.width < element.width)
        if not narrowing:
            raise semantic_error("fp_downcast_rounding applies only to a conversion from a float to a narrower "
                                 f"float, not from {sem.type_name(element)} to {target}")
        if rounding == "rtz":
            raise semantic_error("fp_downcast_rounding='rtz' (round toward zero) is not supported yet: conversions "
                                 "round to nearest even ('rtne', the default)")
    return sem.cast(input, unwrap(dtype), bool(unwrap(bitcast)))


@builtin
def where(condition: Any, x: Any, y: Any) -> tensor:
    """``x`` where ``condition`` holds, else ``y``, elementwise with broadcasting."""
    return sem.where(condition, x, y)


def _minmax(kind: str, x: Any, y: Any, propagate_nan: Any) -> tensor:
    x, y = sem.unify([x, y])
    element = t.element_type(x.type)
    if isinstance(element, t.FloatType):
        # Triton's propagate_nan: NONE (the default) gives the other operand where one is
        # NaN (IEEE maxNum, NVIDIA's max.f32); ALL gives NaN.
        propagate = unwrap(propagate_nan)
        if propagate not in (None, 0, 0xFFFF):
            raise semantic_error(f"pl.{kind}imum: propagate_nan must be pl.PropagateNan.NONE or .ALL, got "
                                 f"{propagate!r}")
        if propagate == 0xFFFF:
            name = "maximumf" if kind == "max" else "minimumf"
        else:
            name = "maxnumf" if kind == "max" else "minnumf"
    elif isinstance(element, t.IntType):
        name = ("max" if kind == "max" else "min") + ("si" if element.signed else "ui")
    else:
        raise semantic_error(f"pl.{kind}imum needs numbers, got {sem._describe(x)}")
    return tensor(sem.emit(arith.BINARY_OPS[name], x.handle, y.handle).result)


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return _minmax("max", x, y, propagate_nan)


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return _minmax("min", x, y, propagate_nan)


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = None) -> tensor:
    """``x`` limited to ``[min, max]``; a NaN ``x`` gives NaN only with
    ``propagate_nan=pl.PropagateNan.ALL`` (Triton's rule)."""
    return minimum(maximum(x, min, propagate_nan), max, propagate_nan)


# --------------------------------------------------------------------------------------
# Elementwise math


def _math1(name: str, doc: str):
    def fn(x: Any) -> tensor:
        return sem.unary_float(name, x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _math1("exp", "e to the x, elementwise.")
exp2 = _math1("exp2", "2 to the x, elementwise.")
log = _math1("log", "Natural logarithm, elementwise.")
log2 = _math1("log2", "Base-2 logarithm, elementwise.")
sqrt = _math1("sqrt", "Square root, elementwise.")
sqrt_rn = _math1("sqrt_rn", "Square root, correctly rounded.")
rsqrt = _math1("rsqrt", "1 / sqrt(x), elementwise.")
sin = _math1("sin", "Sine, elementwise.")
cos = _math1("cos", "Cosine, elementwise.")
erf = _math1("erf", "The error function, elementwise.")
floor = _math1("floor", "Round down, elementwise.")
ceil = _math1("ceil", "Round up, elementwise.")


@builtin
def abs(x: Any) -> tensor:
    """Absolute value (integers wrap at the minimum; unsigned values are unchanged)."""
    x = sem.to_tensor(x)
    if t.is_float(x.type):
        return tensor(sem.emit(math_d.UNARY_OPS["absf"], x.handle).result)
    if t.is_integer(x.type):
        element = t.element_type(x.type)
        if not element.signed or element == t.i1:
            return x
        return tensor(sem.emit(math_d.UNARY_OPS["absi"], x.handle).result)
    raise semantic_error(f"pl.abs needs a number, got {sem._describe(x)}")


@builtin
def fma(x: Any, y: Any, z: Any) -> tensor:
    x, y, z = sem.unify([x, y, z])
    if not t.is_float(x.type):
        raise semantic_error("pl.fma needs floats")
    return tensor(sem.emit(math_d.FmaOp, x.handle, y.handle, z.handle).result)


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: Any = False) -> tensor:
    """``x / y`` on floats; ``ieee_rounding=True`` makes it :func:`div_rn` (as Triton)."""
    ieee_rounding = unwrap(ieee_rounding)
    if not isinstance(ieee_rounding, bool):
        raise semantic_error(f"pl.fdiv: ieee_rounding must be a constant True or False, got {ieee_rounding!r}")
    if ieee_rounding:
        return div_rn(x, y)
    x, y = sem.unify([x, y])
    if not t.is_float(x.type):
        raise semantic_error("pl.fdiv needs floats")
    return sem.binary("truediv", x, y)


@builtin
def div_rn(x: Any, y: Any) -> tensor:
    """``x / y`` correctly rounded (IEEE) on every target; ``/`` may be within 2 ulp for
    f32 on GPUs, as Triton's."""
    x, y = sem.unify([x, y])
    if not t.is_float(x.type):
        raise semantic_error("pl.div_rn needs floats")
    return tensor(sem.emit(math_d.DivRnOp, x.handle, y.handle).result)


@builtin
def umulhi(x: Any, y: Any) -> tensor:
    x, y = sem.unify([x, y])
    if not t.is_integer(x.type):
        raise semantic_error("pl.umulhi needs integers")
    # Signed operands take the signed high half, as Triton's (libdevice __nv_mulhi).
    name = "mulhisi" if t.element_type(x.type).signed else "mulhiui"
    return tensor(sem.emit(arith.BINARY_OPS[name], x.handle, y.handle).result)


@builtin
def sigmoid(x: Any) -> tensor:
    """``1 / (1 + exp(-x))``."""
    x = sem.to_tensor(x)
    return 1.0 / (1.0 + exp(-x if t.is_float(x.type) else -sem.cast_type(x, t.f32)))


@builtin
def softmax(x: Any, dim: Any = None, keep_dims: Any = False, ieee_rounding: Any = False) -> tensor:
    """Softmax along ``dim`` (axis 0 by default, as Triton)."""
    axis = 0 if unwrap(dim) is None else unwrap(dim)
    z = x - max(x, axis, keep_dims=keep_dims)
    num = exp(z)
    return num / sum(num, axis, keep_dims=keep_dims)


# --------------------------------------------------------------------------------------
# Memory


def _pointer_operand(pointer: Any, what: str) -> tensor:
    pointer = unwrap(pointer)
    if not isinstance(pointer, tensor) or not t.is_pointer(pointer.type):
        raise semantic_error(f"pl.{what} needs a pointer (a kernel argument bound to an array, plus offsets), "
                             f"got {sem._describe(pointer)}")
    if isinstance(t.element_type(pointer.type).pointee, t.PointerType):
        pass  # loading pointers is allowed
    return pointer


def _mask_for(mask: Any, shape: tuple[int, ...]) -> Any:
    if mask is None:
        return None
    mask = sem.to_bool(sem.to_tensor(mask))
    return sem.broadcast_to_shape(mask, sem.broadcast_shapes(shape, mask.shape)).handle


@builtin
def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: Any = "",
         cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False) -> tensor:
    """Load through a pointer or a tile of pointers; lanes where ``mask`` is false take ``other``.
    Through a block pointer, ``boundary_check``/``padding_option`` guard the array's edges."""
    if _block.is_block_pointer(pointer):
        return _block.load_block(unwrap(pointer), mask, other, boundary_check, padding_option)
    pointer = _pointer_operand(pointer, "load")
    mask, other = unwrap(mask), unwrap(other)
    if unwrap(boundary_check) or unwrap(padding_option):
        raise semantic_error("boundary_check and padding_option apply to block pointers (pl.make_block_ptr); "
                             "with plain pointers use mask and other")
    if mask is not None:
        mask_t = sem.to_bool(sem.to_tensor(mask))
        shape = sem.broadcast_shapes(pointer.shape, mask_t.shape)
        pointer = sem.broadcast_to_shape(pointer, shape)
        mask = sem.broadcast_to_shape(mask_t, shape).handle
    elif other is not None:
        raise semantic_error("pl.load's 'other' needs a 'mask' (it gives the masked-off lanes their value)")
    pointee = t.element_type(pointer.type).pointee
    if other is not None:
        other = sem.broadcast_to_shape(sem.cast_type(sem.to_tensor(other, pointee) if not isinstance(other, tensor)
                                                     else other, pointee), pointer.shape).handle
    attrs = {}
    if unwrap(cache_modifier):
        attrs["cache"] = unwrap(cache_modifier)
    if unwrap(eviction_policy):
        attrs["evict"] = unwrap(eviction_policy)
    if unwrap(volatile):
        attrs["volatile"] = True
    return tensor(sem.emit(tile.LoadOp, pointer.handle, mask=mask, other=other, **attrs).result)


@builtin
def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: Any = "",
          eviction_policy: Any = "") -> None:
    """Store ``value`` (broadcast to the pointer's shape, converted to its element type) where ``mask`` holds.
    Through a block pointer, ``boundary_check`` skips elements outside the array."""
    if _block.is_block_pointer(pointer):
        return _block.store_block(unwrap(pointer), value, mask, boundary_check)
    pointer = _pointer_operand(pointer, "store")
    sem.check_writable(pointer, "pl.store")
    value, mask = unwrap(value), unwrap(mask)
    if unwrap(boundary_check):
        raise semantic_error("boundary_check applies to block pointers (pl.make_block_ptr); "
                             "with plain pointers use mask")
    pointee = t.element_type(pointer.type).pointee
    value = sem.to_tensor(value, pointee) if not isinstance(value, tensor) else value
    if value.shape and pointer.shape and len(value.shape) != len(pointer.shape):
        # Triton refuses it too: a value of another rank is most often stored through
        # pointers built for another shape (and would write past them).
        raise semantic_error(f"pl.store: the value's shape {list(value.shape)} has another rank than the pointers' "
                             f"{list(pointer.shape)}; a value broadcasts only along dimensions of size 1 (add them "
                             f"with None, as value[None, :])")
    shape = sem.broadcast_shapes(pointer.shape, value.shape)
    if mask is not None:
        mask = sem.to_bool(sem.to_tensor(mask))
        shape = sem.broadcast_shapes(shape, mask.shape)
        mask = sem.broadcast_to_shape(mask, shape).handle
    pointer = sem.broadcast_to_shape(pointer, shape)
    value = sem.broadcast_to_shape(sem.cast_type(value, pointee), shape)
    attrs = {}
    if unwrap(cache_modifier):
        attrs["cache"] = unwrap(cache_modifier)
    if unwrap(eviction_policy):
        attrs["evict"] = unwrap(eviction_policy)
    sem.emit(tile.StoreOp, pointer.handle, value.handle, mask=mask, **attrs)


# --------------------------------------------------------------------------------------
# Shapes


@builtin
def expand_dims(input: Any, axis: Any) -> tensor:
    """Insert dimensions of size 1 at ``axis`` (an int or a tuple of ints)."""
    input = sem.to_tensor(input)
    axes = unwrap(axis)
    axes = tuple(unwrap(a) for a in axes) if isinstance(axes, (tuple, list)) else (axes,)
    new_rank = len(input.shape) + len(axes)
    normalized = sorted(_axis(a, new_rank) for a in axes)
    if len(set(normalized)) != len(normalized):
        raise semantic_error(f"expand_dims got a repeated axis in {list(axes)}")
    for a in normalized:
        if not input.shape:
            input = sem.broadcast_to_shape(input, (1,))
            continue
        input = tensor(sem.emit(tile.ExpandDimsOp, input.handle, axis=a).result)
    return input


@builtin
def broadcast_to(input: Any, *shape: Any) -> tensor:
    return sem.broadcast_to_shape(sem.to_tensor(input), _shape(_vararg_shape(shape)))


@builtin
def broadcast(input: Any, other: Any) -> tuple[tensor, tensor]:
    a, b = sem.to_tensor(input), sem.to_tensor(other)
    shape = sem.broadcast_shapes(a.shape, b.shape)
    return sem.broadcast_to_shape(a, shape), sem.broadcast_to_shape(b, shape)


@builtin
def reshape(input: Any, *shape: Any, can_reorder: Any = False) -> tensor:
    input = sem.to_tensor(input)
    dims = _shape(_vararg_shape(shape))
    n = 1
    for d in dims:
        n *= d
    if n != input.numel:
        raise semantic_error(f"cannot reshape a tensor of shape {list(input.shape)} ({input.numel} elements) "
                             f"to {list(dims)} ({n} elements)")
    if dims == input.shape:
        return input
    if not input.shape:
        return sem.broadcast_to_shape(input, dims)
    return tensor(sem.emit(tile.ReshapeOp, input.handle, result_types=[t.TileType(dims, input.type.element)]).result)


view = reshape


@builtin
def permute(input: Any, *dims: Any) -> tensor:
    input = sem.to_tensor(input)
    order = tuple(_const_int(d, "each dimension") for d in _vararg_shape(dims))
    if sorted(order) != list(_py.range(len(input.shape))):
        raise semantic_error(f"{list(order)} is not a permutation of the dimensions of a rank-{len(input.shape)} tensor")
    if order == tuple(_py.range(len(order))):
        return input
    shape = tuple(input.shape[i] for i in order)
    return tensor(sem.emit(tile.TransOp, input.handle, order=order,
                           result_types=[t.TileType(shape, input.type.element)]).result)


@builtin
def trans(input: Any, *dims: Any) -> tensor:
    """Transpose; without ``dims`` a 2-D tensor's two axes swap."""
    input = sem.to_tensor(input)
    dims = _vararg_shape(dims)
    if not dims:
        if len(input.shape) != 2:
            raise semantic_error(f"pl.trans without dims needs a 2-D tensor, got shape {list(input.shape)}")
        dims = (1, 0)
    return permute(input, *dims)


# --------------------------------------------------------------------------------------
# Reductions


def _reduce_region(elements: list[t.Type], combine: Any) -> Region:
    """A combine region taking two scalars per operand; ``combine(lhs, rhs)`` builds its body."""
    ctx = current_context()
    block = Block(elements * 2)
    n = len(elements)
    with ctx.builder.at(InsertionPoint.at_end(block)):
        args = [tensor(a) for a in block.arguments]
        results = combine(args[:n], args[n:])
        results = results if isinstance(results, (tuple, list)) else (results,)
        if len(results) != n:
            raise semantic_error(f"the combine function must return {n} value(s), got {len(results)}")
        handles = [sem.cast_type(sem.to_tensor(r, e), e).handle for r, e in zip(results, elements)]
        sem.emit(tile.ReduceReturnOp, handles)
    return Region([block])


def reduce_values(inputs: list[tensor], axis: Any, combine: Any, keep_dims: Any = False) -> list[tensor]:
    """Reduce ``inputs`` (tiles of one shape) along ``axis`` (None: all axes) with ``combine``."""
    inputs = [sem.to_tensor(x) for x in inputs]
    axis, keep_dims = unwrap(axis), bool(unwrap(keep_dims))
    shape = inputs[0].shape
    if not shape:
        return inputs  # a scalar is its own reduction
    if axis is None:
        flat = [reshape(x, (x.numel,)) for x in inputs]
        out = reduce_values(flat, 0, combine)
        if keep_dims:
            out = [reshape(o, (1,) * len(shape)) for o in out]
        return out
    axis = _axis(axis, len(shape))
    reduced = shape[:axis] + shape[axis + 1:]
    elements = [x.type.element for x in inputs]
    region = _reduce_region(elements, combine)
    result_types = [t.TileType(reduced, e) if reduced else e for e in elements]
    op = sem.emit(tile.ReduceOp, [x.handle for x in inputs], axis=axis, result_types=result_types, regions=[region])
    out = [tensor(r) for r in op.results]
    if keep_dims:
        out = [expand_dims(o, axis) for o in out]
    return out


@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: Any = False) -> Any:
    """Reduce with a ``@jit`` combine function of two (tuples of) scalars."""
    ctx = current_context()
    inputs = list(input) if isinstance(input, tuple) else [input]

    def combine(lhs, rhs):
        return ctx.call_function(combine_fn, [*lhs, *rhs])

    out = reduce_values(inputs, axis, combine, keep_dims)
    return tuple(out) if isinstance(input, tuple) else out[0]


def _binary_combine(name_float: str, name_int: str):
    def combine(lhs, rhs):
        a, b = lhs[0], rhs[0]
        name = name_float if t.is_float(a.type) else name_int
        if name == "max" or name == "min":
            signed = t.element_type(a.type).signed
            name = name + ("si" if signed else "ui")
        return tensor(sem.emit(arith.BINARY_OPS[name], a.handle, b.handle).result)

    return combine


@builtin
def sum(input: Any, axis: Any = None, keep_dims: Any = False, dtype: Any = None) -> tensor:
    """Sum along ``axis`` (all axes when None).  Integers narrower than 32 bits sum in
    (u)int32; float16/bfloat16 accumulate in float32 and return their own dtype."""
    input = sem.to_tensor(input)
    if unwrap(dtype) is not None:
        input = sem.cast(input, dtype)
    else:
        element = t.element_type(input.type)
        if isinstance(element, t.IntType) and element.width < 32:
            input = sem.cast_type(input, t.i32 if element.signed or element == t.i1 else t.u32)
        elif element in (t.f16, t.bf16):
            # Accumulate 16-bit floats in fp32 (a long fp16 sum loses most of its bits);
            # the result keeps the input's dtype, as Triton's does.
            wide = sem.cast_type(input, t.f32)
            total = reduce_values([wide], axis, _binary_combine("addf", "addi"), keep_dims)[0]
            return sem.cast_type(total, element)
    return reduce_values([input], axis, _binary_combine("addf", "addi"), keep_dims)[0]


@builtin
def max(input: Any, axis: Any = None, return_indices: Any = False, return_indices_tie_break_left: Any = True,
        keep_dims: Any = False) -> Any:
    """Maximum along ``axis`` (all axes when None); NaN propagates.  With
    ``return_indices``, the pair (maximum, its int32 index), as Triton."""
    if unwrap(return_indices):
        from .reductions import reduce_with_indices

        return reduce_with_indices("max", input, axis, return_indices_tie_break_left, keep_dims)
    input = sem.to_tensor(input)
    if t.is_bool(input.type):
        input = sem.cast_type(input, t.i32)
    return reduce_values([input], axis, _binary_combine("maximumf", "max"), keep_dims)[0]


@builtin
def min(input: Any, axis: Any = None, return_indices: Any = False, return_indices_tie_break_left: Any = True,
        keep_dims: Any = False) -> Any:
    """Minimum along ``axis`` (all axes when None); NaN propagates.  With
    ``return_indices``, the pair (minimum, its int32 index), as Triton."""
    if unwrap(return_indices):
        from .reductions import reduce_with_indices

        return reduce_with_indices("min", input, axis, return_indices_tie_break_left, keep_dims)
    input = sem.to_tensor(input)
    if t.is_bool(input.type):
        input = sem.cast_type(input, t.i32)
    return reduce_values([input], axis, _binary_combine("minimumf", "min"), keep_dims)[0]


@builtin
def xor_sum(input: Any, axis: Any = None, keep_dims: Any = False) -> tensor:
    input = sem.to_tensor(input)
    if not t.is_integer(input.type):
        raise semantic_error("pl.xor_sum needs integers")
    return reduce_values([input], axis, _binary_combine("xori", "xori"), keep_dims)[0]


# --------------------------------------------------------------------------------------
# dot


_PRECISIONS = {"tf32": "tf32", "tf32x3": "tf32x3", "ieee": "ieee"}


@builtin
def dot(input: Any, other: Any, acc: Any = None, input_precision: Any = None, allow_tf32: Any = None,
        max_num_imprecise_acc: Any = None, out_dtype: Any = None) -> tensor:
    """``input @ other (+ acc)`` of 2-D tiles (M x K by K x N), or of 3-D ones batched
    along their first dimension (B x M x K by B x K x N), of any sizes: shapes the
    target's matrix instructions do not fit (a dimension under 16, say) are computed with
    multiply-adds.

    The accumulator type is Triton's: int32 for int8 operands (the only integers), fp32
    for fp32 and bf16, fp64 for fp64, fp32 or fp16 for fp16 and fp8.  ``out_dtype``
    (default: ``acc``'s type, else the first of these) narrower than the accumulator and
    of its kind (int8 for an int8 dot, fp16 for an fp32 one) is ignored as Triton ignores
    it, with a warning: the result keeps the accumulator's type.  Another type is an
    error where Triton would silently ignore it (int8 with out_dtype=fp32)."""
    a, b = sem.to_tensor(input), sem.to_tensor(other)
    if len(a.shape) not in (2, 3) or len(b.shape) != len(a.shape):
        raise semantic_error(f"pl.dot needs 2-D tensors, or 3-D ones batched along the first dimension, got "
                             f"shapes {list(a.shape)} and {list(b.shape)}")
    batch = tuple(a.shape[:-2])
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if tuple(b.shape[:-2]) != batch:
        raise semantic_error(f"pl.dot: the batch dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    if k != k2:
        raise semantic_error(f"pl.dot: the inner dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    ea, eb = a.type.element, b.type.element
    if ea != eb:
        if t.is_float(a.type) and t.is_float(b.type):
            common = sem.promote_types(ea, eb)
            a, b = sem.cast_type(a, common), sem.cast_type(b, common)
        else:
            raise semantic_error(f"pl.dot operands must have one dtype, got {a.dtype} and {b.dtype}")
    allowed = _dot_accumulators(a.type.element)
    acc = unwrap(acc)
    if acc is not None:
        acc = sem.to_tensor(acc)
        if tuple(acc.shape) != batch + (m, n):
            raise semantic_error(f"pl.dot: acc has shape {list(acc.shape)}, expected {list(batch + (m, n))}")
    if unwrap(out_dtype) is not None:
        out, what = _dtype(out_dtype, "out_dtype").ir, "out_dtype={}"
    elif acc is not None:
        out, what = acc.type.element, "an acc of {}"
    else:
        out, what = allowed[0], ""
    if out not in allowed and acc is None and _narrower_of_kind(out, allowed[0]) and out != t.bf16:
        # Triton ignores such an out_dtype (an int8 dot asked for int8 is int32, an fp32
        # one asked for fp16 is fp32; a store then narrows it), so kernels written for it
        # rely on the wide result: it is kept, and said.  bf16 Triton refuses by name.
        import warnings

        warnings.warn(f"pl.dot: out_dtype={dtype_of(out)!r} is narrower than the accumulator; as in Triton the "
                      f"result stays {dtype_of(allowed[0])!r} (convert it with .to(...) to narrow it)",
                      UserWarning, stacklevel=2)
        out = allowed[0]
    if out not in allowed:
        operands = sem.type_name(a.type.element)
        raise semantic_error(f"pl.dot of {operands} operands cannot accumulate in {what.format(sem.type_name(out))}: "
                             f"{operands} operands accumulate in {' or '.join(map(sem.type_name, allowed))}; pass "
                             f"out_dtype={' or '.join(repr(dtype_of(x)) for x in allowed)} (or leave it out), "
                             "convert the result with .to(...)")
    if acc is None:
        acc = sem.constant(0, t.TileType(batch + (m, n), out))
    elif acc.type.element != out:
        raise semantic_error(f"pl.dot: acc is {sem.type_name(acc.type)} but out_dtype is {sem.type_name(out)}; "
                             "convert acc with .to(...)")
    precision = unwrap(input_precision)
    if precision is None:
        precision = "tf32" if unwrap(allow_tf32) in (None, True) else "ieee"
    if precision not in _PRECISIONS:
        raise semantic_error(f"unknown input_precision '{precision}'; use 'tf32', 'tf32x3' or 'ieee'")
    attrs = {"input_precision": precision}
    if unwrap(max_num_imprecise_acc):
        attrs["max_num_imprecise_acc"] = _const_int(max_num_imprecise_acc, "max_num_imprecise_acc")
    return tensor(sem.emit(tile.DotOp, a.handle, b.handle, acc.handle, **attrs).result)


def _narrower_of_kind(out: t.Type, accumulator: t.Type) -> bool:
    """Whether ``out`` is an integer type narrower than an integer ``accumulator``, or a
    float type narrower than a float one (a type the accumulation converts into)."""
    if isinstance(out, t.IntType) and isinstance(accumulator, t.IntType):
        return out.width < accumulator.width
    if isinstance(out, t.FloatType) and isinstance(accumulator, t.FloatType):
        return out.width < accumulator.width
    return False


builtins_min = _py.min


def _dot_accumulators(element: t.Type) -> tuple[t.Type, ...]:
    """The types a dot of ``element`` operands may accumulate in (Triton's), default first."""
    if isinstance(element, t.IntType) and element != t.i8:
        raise semantic_error(f"pl.dot on integers needs int8 operands (accumulated in int32), got "
                             f"{sem.type_name(element)}")
    allowed = tile.DOT_ACCUMULATORS.get(element)
    if allowed is None:
        raise semantic_error(f"pl.dot cannot multiply {sem.type_name(element)} tiles; it takes "
                             + ", ".join(map(sem.type_name, tile.DOT_ACCUMULATORS)))
    return allowed


# --------------------------------------------------------------------------------------
# Compile-time helpers and hints


@builtin
def assume(cond: Any) -> None:
    """Tell the compiler that ``cond`` holds (Triton's ``tl.assume``): on GPUs LLVM may
    rely on it (``llvm.assume``) and it is not checked, so a kernel whose ``cond`` is false
    computes wrong results there; the interpreter checks it and says where it is false.
    ``cond`` is a boolean: a comparison, a Python bool, or a tensor of them."""
    cond = unwrap(cond)
    if isinstance(cond, tensor):
        if t.element_type(cond.type) != t.i1:
            raise semantic_error(f"pl.assume needs a boolean condition (a comparison), got {sem._describe(cond)}")
        from ..dialects.tile_debug import AssumeOp

        sem.emit(AssumeOp, cond.handle)
        return None
    if not isinstance(cond, bool):
        raise semantic_error(f"pl.assume needs a boolean condition (a comparison), got {cond!r}")
    if not cond:
        raise semantic_error("pl.assume(False): the condition is false at compile time")
    return None


@builtin
def static_assert(cond: Any, msg: Any = "") -> None:
    """Fail compilation when the compile-time ``cond`` is false."""
    cond = unwrap(cond)
    if isinstance(cond, tensor):
        raise semantic_error("pl.static_assert needs a compile-time condition; this one depends on run-time values")
    if not cond:
        raise semantic_error(f"static assertion failed{': ' + str(unwrap(msg)) if unwrap(msg) else ''}")


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n") -> None:
    """Print at compile time (run-time values print as their type)."""
    print(*[unwrap(v) for v in values], sep=sep, end=end)


def _hint(name: str, input: Any, values: Any) -> tensor:
    input = sem.to_tensor(input)
    vals = unwrap(values)
    vals = tuple(unwrap(v) for v in vals) if isinstance(vals, (tuple, list)) else (vals,)
    for v in vals:
        _const_int(v, f"{name}'s values")
    op = input.handle.defining_op
    if op is not None:
        # A discardable hint: passes may use it for axis info, any pass may drop it.
        op.set_attr(f"pt.{name}", vals if len(vals) > 1 else vals[0])
    return input


@builtin
def multiple_of(input: Any, values: Any) -> tensor:
    """Hint that ``input``'s values are multiples of ``values``."""
    return _hint("multiple_of", input, values)


@builtin
def max_contiguous(input: Any, values: Any) -> tensor:
    """Hint that the first ``values`` elements of ``input`` are contiguous."""
    return _hint("max_contiguous", input, values)


@builtin
def max_constancy(input: Any, values: Any) -> tensor:
    return _hint("max_constancy", input, values)


class static_range:
    """``for i in pl.static_range(...)``: unrolled at compile time; bounds are constexpr."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None):
        self.args = (arg1, arg2, step)

    def __iter__(self):
        raise semantic_error("pl.static_range can only be used as the iterable of a 'for' loop in a kernel")


class range:
    """``for i in pl.range(...)``: a run-time loop, with loop hints (``num_stages``, ...)."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: Any = False, flatten: Any = False,
                 warp_specialize: Any = False, disable_licm: Any = False):
        self.args = (arg1, arg2, step)
        # As written: the frontend checks them (check_loop_hints) and leaves out what is off.
        self.hints = {"num_stages": num_stages, "loop_unroll_factor": loop_unroll_factor,
                      "disallow_acc_multi_buffer": disallow_acc_multi_buffer, "flatten": flatten,
                      "warp_specialize": warp_specialize, "disable_licm": disable_licm}

    def __iter__(self):
        raise semantic_error("pl.range can only be used as the iterable of a 'for' loop in a kernel")


__all__ = [name for name, value in list(globals().items()) if getattr(value, "__polytile_builtin__", False)]
__all__ += ["static_range", "range", "view", "reduce_values"]
__all__ = [n for n in __all__ if n not in ("builtins_min",)]
