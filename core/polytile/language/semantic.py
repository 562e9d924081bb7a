"""What the language's operators mean: type promotion, broadcasting, casts, and the ops
they emit.  Triton's rules, written for polytile's core IR.

Python numbers mixed with tensors are *weakly typed*, as in Triton: ``x + 1`` keeps
``x``'s type (an int8 tile stays int8), ``x * 0.5`` on an int tile gives float32.
"""

from __future__ import annotations

from typing import Any

from ..dialects import arith, math as math_d, tile
from ..ir import types as t
from .core import constexpr, current_context, dtype, semantic_error, tensor, unwrap

_PY_SCALARS = (bool, int, float)


def emit(op_class: Any, *args: Any, **kwargs: Any) -> Any:
    """Create an op at the current insertion point and location."""
    return current_context().builder.create(op_class, *args, **kwargs)


def is_literal(value: Any) -> bool:
    return isinstance(unwrap(value), _PY_SCALARS)


def literal_type(value: Any) -> t.Type:
    """The IR type a Python number gets when it must stand alone (Triton's rule)."""
    value = unwrap(value)
    if isinstance(value, bool):
        return t.i1
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return t.i32
        if -(1 << 63) <= value < (1 << 63):
            return t.i64
        if 0 <= value < (1 << 64):
            return t.u64
        raise semantic_error(f"integer {value} does not fit in 64 bits")
    if isinstance(value, float):
        return t.f32
    raise semantic_error(f"expected a number, got {type(value).__name__} {value!r}")


def constant(value: Any, type_: t.Type) -> tensor:
    """A constant scalar or tile of ``type_`` (every element ``value``)."""
    value = unwrap(value)
    element = t.element_type(type_)
    if element == t.i1:
        value = bool(value)
    elif isinstance(element, t.IntType):
        value = int(value)
        bits = element.width
        value &= (1 << bits) - 1  # wrap into range, then read as the type's signedness
        if element.signed and value >= 1 << (bits - 1):
            value -= 1 << bits
    elif isinstance(element, t.FloatType):
        value = float(value)
    else:
        raise semantic_error(f"cannot make a constant of type {type_}")
    return tensor(emit(arith.ConstantOp, value=value, result_types=[type_]).result)


def to_tensor(value: Any, type_: t.Type | None = None) -> tensor:
    """``value`` as a tensor: a Python number becomes a constant (of ``type_`` if given)."""
    value = unwrap(value)
    if isinstance(value, tensor):
        if isinstance(value.type, t.DialectType):
            # A plugin's value (a tensor descriptor) has its own methods, not a tile's
            # arithmetic: say so before anything reads a shape it does not have.
            raise semantic_error(f"{_describe(value)} is not a tile or a number: it works through its own "
                                 "methods (a descriptor's load and store), and is passed to @jit helpers that "
                                 "are inlined, not to noinline ones")
        return value
    if isinstance(value, _PY_SCALARS):
        return constant(value, type_ if type_ is not None else literal_type(value))
    raise semantic_error(f"expected a tensor or a number, got {_describe(value)}")


def _describe(value: Any) -> str:
    if isinstance(value, tensor):
        if isinstance(value.type, t.DialectType):
            return f"a {value.type} value"
        return f"a tensor of {value.type}"
    if isinstance(value, dtype):
        return f"the dtype {value!r}"
    if value is None:
        return "None"
    return f"{type(value).__name__} {value!r}"


def _scalar_name(value: Any) -> str:
    """The element type of an operand in the language's words (``fp32``; a Python float is
    ``fp32``, as Triton types it)."""
    from .core import dtype_of

    value = unwrap(value)
    if isinstance(value, tensor):
        try:
            return str(dtype_of(t.element_type(value.type)))
        except Exception:
            return str(t.element_type(value.type))
    return {bool: "int1", int: "int32", float: "fp32"}.get(type(value), type(value).__name__)


def type_name(type_: t.Type) -> str:
    """A type in the language's words: ``fp32``, ``tile<128xfp32>`` ... (for messages)."""
    from .core import dtype_of

    shape = t.shape_of(type_)
    try:
        element = str(dtype_of(type_))
    except Exception:
        element = str(t.element_type(type_))
    return f"{element}[{', '.join(map(str, shape))}]" if shape else element


# --------------------------------------------------------------------------------------
# Type promotion


def _float_rank(ft: t.FloatType) -> int:
    return {"f8e4m3": 0, "f8e5m2": 0, "f16": 1, "bf16": 1, "f32": 2, "f64": 3}[ft.kind]


def promote_types(a: t.Type, b: t.Type) -> t.Type:
    """The element type two strongly typed operands compute in."""
    if a == b:
        return a
    a_float, b_float = isinstance(a, t.FloatType), isinstance(b, t.FloatType)
    if a_float and b_float:
        ra, rb = _float_rank(a), _float_rank(b)
        if ra != rb:
            return a if ra > rb else b
        return t.f32 if ra == 1 else t.f16  # f16 with bf16, or two fp8 kinds
    if a == t.bf16 or b == t.bf16:
        return t.f32  # Triton: bf16 stays bf16 only with bf16
    if a_float:
        return a
    if b_float:
        return b
    if isinstance(a, t.IntType) and isinstance(b, t.IntType):
        if a.width != b.width:
            return a if a.width > b.width else b
        return a if not a.signed else b  # same width: unsigned wins, as in C
    raise semantic_error(f"cannot combine {type_name(a)} with {type_name(b)}")


def _check_literal_fits(value: Any, type_: t.Type) -> None:
    """A Python integer takes the other operand's type (int8 + 1 stays int8, as in
    Triton); one that does not fit there would silently change value, so it is an error."""
    if isinstance(value, bool) or not isinstance(value, int) or not isinstance(type_, t.IntType) or type_ == t.i1:
        return
    low = -(1 << (type_.width - 1)) if type_.signed else 0
    high = (1 << (type_.width - 1)) - 1 if type_.signed else (1 << type_.width) - 1
    if not low <= value <= high:
        raise semantic_error(f"the number {value} does not fit in {type_name(type_)}, the type of the other "
                             f"operand: it is out of range {low}..{high}; convert the operand first, e.g. "
                             "x.to(pl.int64)")


_DIV_OR_MOD = ("truediv", "floordiv", "mod")


def computation_type(a: Any, b: Any, op: str) -> t.Type:
    """The element type ``a op b`` computes in (``a``/``b`` are tensors or Python numbers)."""
    a, b = unwrap(a), unwrap(b)
    a_weak, b_weak = not isinstance(a, tensor), not isinstance(b, tensor)
    if a_weak and b_weak:
        raise semantic_error("internal: both operands are Python numbers")
    strong, weak = (a, b) if b_weak else (b, a)
    if a_weak or b_weak:
        strong_t = t.element_type(strong.type)
        if isinstance(strong_t, t.PointerType):
            result = strong_t
        elif isinstance(weak, float) and not isinstance(strong_t, t.FloatType):
            result = t.f32
        elif strong_t == t.i1 and isinstance(weak, int) and not isinstance(weak, bool):
            result = literal_type(weak)  # a bool tensor with a number: the number's kind wins, as Triton
        else:
            result = strong_t
            _check_literal_fits(weak, result)
    else:
        ea, eb = t.element_type(a.type), t.element_type(b.type)
        if isinstance(ea, t.PointerType) or isinstance(eb, t.PointerType):
            if ea == eb:
                return ea
            raise semantic_error(f"cannot combine {type_name(a.type)} with {type_name(b.type)}")
        result = promote_types(ea, eb)
        if op in _DIV_OR_MOD and isinstance(ea, t.IntType) and isinstance(eb, t.IntType) \
                and ea.signed != eb.signed and t.i1 not in (ea, eb):
            # Triton's words first ("Cannot use % because they have different signedness"):
            # code that ports checks them.
            raise semantic_error(f"Cannot use {_SYMBOLS[op]} because they have different signedness: "
                                 f"{type_name(a.type)} and {type_name(b.type)}, which is unlikely to give a useful "
                                 "answer; convert one of them first, e.g. x.to(pl.int32)")
    if op == "truediv" and isinstance(result, t.IntType):
        return t.f32
    if op in _DIV_OR_MOD and result in (t.f16, t.bf16):
        return t.f32  # as Triton: 16-bit float division and remainder compute in fp32
    if op == "truediv" and isinstance(result, t.FloatType) and _float_rank(result) == 0:
        return t.f16
    return result


# --------------------------------------------------------------------------------------
# Broadcasting


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) < len(b):
        a = (1,) * (len(b) - len(a)) + a
    elif len(b) < len(a):
        b = (1,) * (len(a) - len(b)) + b
    shape = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise semantic_error(f"incompatible shapes {list(a)} and {list(b)}: dimensions must be equal or 1")
        shape.append(max(x, y))
    return tuple(shape)


def broadcast_to_shape(x: tensor, shape: tuple[int, ...]) -> tensor:
    """``x`` (a scalar or a tile) stretched to ``shape`` by Triton's rules."""
    src = x.shape
    if src == tuple(shape):
        return x
    if not shape:
        raise semantic_error(f"cannot broadcast a tile of shape {list(src)} to a scalar")
    if not src:
        return tensor(emit(tile.SplatOp, x.handle, result_types=[t.TileType(tuple(shape), x.type)]).result)
    if len(src) > len(shape):
        raise semantic_error(f"cannot broadcast shape {list(src)} to {list(shape)}")
    while len(x.shape) < len(shape):
        x = tensor(emit(tile.ExpandDimsOp, x.handle, axis=0).result)
    for have, want in zip(x.shape, shape):
        if have != want and have != 1:
            raise semantic_error(f"cannot broadcast shape {list(src)} to {list(shape)}")
    if x.shape == tuple(shape):
        return x
    return tensor(emit(tile.BroadcastOp, x.handle, result_types=[t.TileType(tuple(shape), x.type.element)]).result)


def _operands(a: Any, b: Any, element: t.Type) -> tuple[tensor, tensor]:
    """Both operands cast to ``element`` and broadcast to one shape."""
    a, b = unwrap(a), unwrap(b)
    shape = broadcast_shapes(getattr(a, "shape", ()), getattr(b, "shape", ()))

    def prepare(x: Any) -> tensor:
        if not isinstance(x, tensor):
            return constant(x, t.TileType(shape, element) if shape else element)
        return broadcast_to_shape(cast_type(x, element), shape)

    return prepare(a), prepare(b)


# --------------------------------------------------------------------------------------
# Binary operators

_INT_OPS = {"add": "addi", "sub": "subi", "mul": "muli", "and": "andi", "or": "ori", "xor": "xori",
            "lshift": "shli"}
_FLOAT_OPS = {"add": "addf", "sub": "subf", "mul": "mulf", "truediv": "divf", "mod": "remf"}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
            "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}


def refuse_plugin_values(values: Any, what: str) -> None:
    """A plugin's value (a tensor descriptor, ``!tma.desc``) is no tile: an operator or a
    builtin that computes on tiles names it instead of reading a shape it does not have."""
    for value in values:
        value = unwrap(value)
        if isinstance(value, tensor) and isinstance(value.type, t.DialectType):
            raise semantic_error(f"{what}: {_describe(value)} is not a tile or a number; it works through its own "
                                 "methods (a descriptor's load and store)")


def binary(op: str, a: Any, b: Any) -> tensor:
    """``a op b`` for tensors and Python numbers (at least one a tensor)."""
    a, b = unwrap(a), unwrap(b)
    refuse_plugin_values((a, b), f"'{_SYMBOLS[op]}'")
    for x in (a, b):
        if not isinstance(x, (tensor, *_PY_SCALARS)):
            raise semantic_error(f"unsupported operand for '{_SYMBOLS[op]}': {_describe(x)}")
    a_ptr = isinstance(a, tensor) and t.is_pointer(a.type)
    b_ptr = isinstance(b, tensor) and t.is_pointer(b.type)
    if a_ptr or b_ptr:
        return _pointer_arith(op, a, b, a_ptr, b_ptr)
    element = computation_type(a, b, op)
    is_float = isinstance(element, t.FloatType)
    if op in ("and", "or", "xor", "lshift", "rshift") and is_float:
        # Triton's words first ("invalid operands of type ..."): code that ports checks them.
        raise semantic_error(f"invalid operands of type {_scalar_name(a)} and {_scalar_name(b)} for "
                             f"'{_SYMBOLS[op]}': it needs integer operands, got {_describe(a)} and {_describe(b)}")
    if op == "floordiv" and is_float:
        raise semantic_error("'//' needs integer operands; for floats use pl.floor(a / b)")
    x, y = _operands(a, b, element)
    if is_float:
        name = _FLOAT_OPS[op]
    elif op in _INT_OPS:
        name = _INT_OPS[op]
    else:  # division, remainder and right shift depend on signedness (C semantics, as Triton)
        signed = element.signed
        if op == "rshift" and isinstance(a, tensor):
            # Triton shifts arithmetically when the shifted value is signed, whatever the
            # operands were promoted to (int16 >> uint16 computes in uint16, sign-extending).
            signed = t.element_type(a.type).signed
        name = {"floordiv": "divsi" if signed else "divui", "mod": "remsi" if signed else "remui",
                "rshift": "shrsi" if signed else "shrui"}[op]
    return tensor(emit(arith.BINARY_OPS[name], x.handle, y.handle).result)


def _pointer_arith(op: str, a: Any, b: Any, a_ptr: bool, b_ptr: bool) -> tensor:
    if a_ptr and b_ptr:
        raise semantic_error(f"cannot apply '{_SYMBOLS[op]}' to two pointers")
    ptr, offset = (a, b) if a_ptr else (b, a)
    if op not in ("add", "sub") or (op == "sub" and b_ptr):
        raise semantic_error(f"cannot apply '{_SYMBOLS[op]}' to a pointer; pointers support '+' and '-' of integers")
    offset = unwrap(offset)
    if isinstance(offset, float) or (isinstance(offset, tensor) and not t.is_integer(offset.type)):
        raise semantic_error(f"a pointer offset must be an integer, got {_describe(offset)}")
    if op == "sub":
        offset = negate(to_tensor(offset))
    shape = broadcast_shapes(ptr.shape, getattr(offset, "shape", ()))
    ptr = broadcast_to_shape(ptr, shape)
    if isinstance(offset, tensor):
        offset = broadcast_to_shape(offset, shape)
    else:
        offset = constant(offset, t.TileType(shape, literal_type(offset)) if shape else literal_type(offset))
    return tensor(emit(tile.AddPtrOp, ptr.handle, offset.handle).result)


_INT_PREDICATES = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UINT_PREDICATES = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}
_FLOAT_PREDICATES = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


def compare(op: str, a: Any, b: Any) -> tensor:
    a, b = unwrap(a), unwrap(b)
    refuse_plugin_values((a, b), "a comparison")
    for x in (a, b):
        if not isinstance(x, (tensor, *_PY_SCALARS)):
            raise semantic_error(f"cannot compare with {_describe(x)}")
    element = computation_type(a, b, op)
    x, y = _operands(a, b, element)
    if isinstance(element, t.FloatType):
        return tensor(emit(arith.CmpFOp, x.handle, y.handle, predicate=_FLOAT_PREDICATES[op]).result)
    unsigned = isinstance(element, t.IntType) and not element.signed or isinstance(element, t.PointerType)
    table = _UINT_PREDICATES if unsigned else _INT_PREDICATES
    return tensor(emit(arith.CmpIOp, x.handle, y.handle, predicate=table[op]).result)


def negate(x: tensor) -> tensor:
    if t.is_float(x.type):
        return tensor(emit(arith.NegFOp, x.handle).result)
    if t.is_integer(x.type):
        zero = constant(0, x.type)
        return tensor(emit(arith.SubIOp, zero.handle, x.handle).result)
    raise semantic_error(f"cannot negate {_describe(x)}")


def invert(x: tensor) -> tensor:
    if not t.is_integer(x.type):
        raise semantic_error(f"'~' needs an integer operand, got {_describe(x)}")
    ones = constant(-1, x.type)
    return tensor(emit(arith.XOrIOp, x.handle, ones.handle).result)


def logical_not(x: tensor) -> tensor:
    if x.type == t.i1 or (t.is_bool(x.type)):
        return invert(x)
    return compare("eq", x, 0)


def to_bool(x: tensor) -> tensor:
    """``x != 0`` as i1 (conditions, masks)."""
    if t.is_bool(x.type):
        return x
    return compare("ne", x, 0)


# --------------------------------------------------------------------------------------
# Casts


def cast(x: Any, target: Any, bitcast: bool = False) -> tensor:
    """``x.to(target)``: ``target`` is a language dtype."""
    target = unwrap(target)
    if not isinstance(target, dtype):
        raise semantic_error(f"expected a dtype such as pl.float32, got {_describe(target)}")
    x = to_tensor(x)
    return cast_type(x, target.ir, bitcast)


def cast_type(x: tensor, dst: t.Type, bitcast: bool = False) -> tensor:
    src = t.element_type(x.type)
    if src == dst:
        return x
    result = t.like(x.type, dst)

    def op(name: str) -> tensor:
        return tensor(emit(arith.CASTS[name], x.handle, result_types=[result]).result)

    if bitcast:
        src_w, dst_w = _bits(src), _bits(dst)
        if src_w != dst_w:
            raise semantic_error(f"bitcast needs types of one bit width, got {type_name(src)} ({src_w} bits) "
                                 f"and {type_name(dst)} ({dst_w} bits)")
        if isinstance(src, t.PointerType) or isinstance(dst, t.PointerType):
            return _pointer_cast(x, src, dst, result)
        return op("bitcast")
    if isinstance(src, t.PointerType) or isinstance(dst, t.PointerType):
        return _pointer_cast(x, src, dst, result)
    if isinstance(src, t.IntType) and isinstance(dst, t.IntType):
        if dst == t.i1:
            return compare("ne", x, 0)
        if dst.width > src.width:
            return op("extsi" if src.signed and src != t.i1 else "extui")
        if dst.width < src.width:
            return op("trunci")
        return op("bitcast")  # same width, other signedness
    if isinstance(src, t.IntType) and isinstance(dst, t.FloatType):
        return op("sitofp" if src.signed and src != t.i1 else "uitofp")
    if isinstance(src, t.FloatType) and isinstance(dst, t.IntType):
        if dst == t.i1:
            return compare("ne", x, 0.0)
        return op("fptosi" if dst.signed else "fptoui")
    if isinstance(src, t.FloatType) and isinstance(dst, t.FloatType):
        if src.width == dst.width:  # f16 <-> bf16: through f32
            return cast_type(cast_type(x, t.f32), dst)
        return op("extf" if dst.width > src.width else "truncf")
    raise semantic_error(f"cannot convert {type_name(x.type)} to {type_name(dst)}")


def _bits(type_: t.Type) -> int:
    return 64 if isinstance(type_, t.PointerType) else type_.width  # type: ignore[attr-defined]


def _pointer_cast(x: tensor, src: t.Type, dst: t.Type, result: t.Type) -> tensor:
    if isinstance(src, t.PointerType) and isinstance(dst, t.PointerType):
        as_int = tensor(emit(arith.PtrToIntOp, x.handle, result_types=[t.like(x.type, t.i64)]).result)
        return tensor(emit(arith.IntToPtrOp, as_int.handle, result_types=[result]).result)
    if isinstance(src, t.PointerType) and isinstance(dst, t.IntType):
        return tensor(emit(arith.PtrToIntOp, x.handle, result_types=[result]).result)
    if isinstance(dst, t.PointerType) and isinstance(src, t.IntType):
        return tensor(emit(arith.IntToPtrOp, x.handle, result_types=[result]).result)
    raise semantic_error(f"cannot convert {type_name(x.type)} to {type_name(dst)}")


# --------------------------------------------------------------------------------------
# Indexing: x[None, :] and x[:, None]


def check_writable(pointer: tensor, what: str) -> None:
    """Refuse a write through a ``pl.const`` pointer (in Triton's words, which ports check)."""
    if t.element_type(pointer.type).const:
        raise semantic_error(f"Cannot store to a constant pointer: {what} writes through a pointer made from a "
                             "parameter annotated pl.const, which the kernel only reads through")


def subscript(x: tensor, index: Any) -> tensor:
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(unwrap(i) for i in items)
    # Triton's rule: position i of the index adds a dimension at i where it is None, and
    # ':' keeps what is there (a ':' past the last dimension keeps nothing, as in Triton).
    axis = 0
    for item in items:
        if item is None:
            if axis > len(x.shape):
                raise semantic_error(f"None at position {axis} of the index adds a dimension past the end of a "
                                     f"tensor of rank {len(x.shape)}")
            if x.shape:
                x = tensor(emit(tile.ExpandDimsOp, x.handle, axis=axis).result)
            else:  # a scalar becomes a tensor of one element
                x = broadcast_to_shape(x, (1,))
            axis += 1
        elif isinstance(item, slice) and item == slice(None):
            axis += 1
        else:
            raise semantic_error(f"unsupported tensor index: tensors can be indexed only with None and ':' (to "
                                 f"add or keep dimensions), got {_describe(item)}")
    return x


# --------------------------------------------------------------------------------------
# Elementwise math


def unary_float(name: str, x: Any) -> tensor:
    """``math.<name>`` of ``x``; integers are converted to float32 first (as Triton)."""
    x = to_tensor(x)
    if not t.is_float(x.type):
        if not t.is_integer(x.type):
            raise semantic_error(f"pl.{name} needs a number, got {_describe(x)}")
        x = cast_type(x, t.f32)
    return tensor(emit(math_d.UNARY_OPS[name], x.handle).result)


def unify(values: list[Any]) -> list[tensor]:
    """Tensors/numbers promoted to one element type and broadcast to one shape."""
    values = [unwrap(v) for v in values]
    refuse_plugin_values(values, "a tile operation")
    strong = [v for v in values if isinstance(v, tensor)]
    if not strong:
        values[0] = to_tensor(values[0])
        strong = [values[0]]
    element = t.element_type(strong[0].type)
    for v in strong[1:]:
        element = promote_types(element, t.element_type(v.type))
    if any(isinstance(v, float) for v in values) and isinstance(element, t.IntType):
        element = t.f32  # a float literal makes integer tensors float, as in x * 0.5
    shape: tuple[int, ...] = ()
    for v in values:
        shape = broadcast_shapes(shape, getattr(v, "shape", ()))
    out = []
    for v in values:
        if isinstance(v, tensor):
            out.append(broadcast_to_shape(cast_type(v, element), shape))
        elif isinstance(v, _PY_SCALARS):
            out.append(constant(v, t.TileType(shape, element) if shape else element))
        else:
            raise semantic_error(f"expected a tensor or a number, got {_describe(v)}")
    return out


def where(condition: Any, x: Any, y: Any) -> tensor:
    condition = to_bool(to_tensor(condition))
    x, y = unify([x, y])
    shape = broadcast_shapes(condition.shape, x.shape)
    condition = broadcast_to_shape(condition, shape)
    x, y = broadcast_to_shape(x, shape), broadcast_to_shape(y, shape)
    return tensor(emit(arith.SelectOp, condition.handle, x.handle, y.handle).result)


__all__ = ["binary", "compare", "cast", "cast_type", "constant", "to_tensor", "where", "constexpr"]
