"""The language's value classes: dtypes, ``constexpr``, ``tensor``, and the builder context.

Inside a ``@jit`` kernel every run-time value is a :class:`tensor` wrapping an IR value
(a scalar or a tile); compile-time values (literals, ``constexpr`` parameters, shapes)
stay plain Python values until an operation needs them in the IR.  Builtins emit IR
through the *current context*, which the frontend installs while it generates a kernel
(Triton passes a ``_builder`` argument instead; a context keeps builtin signatures the
user's).
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import CompilationError
from ..ir import types as t

# --------------------------------------------------------------------------------------
# The current frontend context


_STATE = threading.local()


def current_context() -> Any:
    """The frontend context generating the kernel now; an error outside a kernel."""
    ctx = getattr(_STATE, "context", None)
    if ctx is None:
        raise CompilationError("polytile.language functions can only be called inside a @jit kernel "
                               "(they build the kernel's IR; call the kernel with kernel[grid](...) instead)")
    return ctx


def set_context(ctx: Any) -> Any:
    """Install ``ctx`` as the current context; returns the previous one (to restore)."""
    previous = getattr(_STATE, "context", None)
    _STATE.context = ctx
    return previous


def semantic_error(message: str) -> CompilationError:
    """An error in the user's terms; the frontend adds the kernel line it happened on."""
    return CompilationError(message)


def builtin(fn):
    """Marks a function as a language builtin: the frontend calls it directly while
    generating code (its arguments are tensors and compile-time Python values)."""
    fn.__polytile_builtin__ = True
    return fn


def is_builtin(fn: Any) -> bool:
    return getattr(fn, "__polytile_builtin__", False)


# --------------------------------------------------------------------------------------
# constexpr


class constexpr:
    """A compile-time constant.

    As an annotation (``BLOCK: pl.constexpr``) it makes a kernel parameter a
    compile-time value: each distinct value compiles its own kernel.  ``pl.constexpr(v)``
    wraps a value explicitly (module-level globals a kernel reads, for instance).
    """

    def __init__(self, value: Any = None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        return self.value.__index__()

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: Any) -> bool:
        return self.value == unwrap(other)

    def __hash__(self) -> int:
        return hash(self.value)


def unwrap(value: Any) -> Any:
    """A constexpr's Python value (other values unchanged)."""
    return value.value if isinstance(value, constexpr) else value


def _logical(kind: str, x: "tensor", other: Any) -> "tensor":
    sem = _sem()
    operands = [x, sem.to_tensor(other)]
    for operand in operands:
        if isinstance(t.element_type(operand.type), t.PointerType):
            raise semantic_error(f"'{kind}' of tensors takes numbers and booleans, got {sem._describe(operand)}")
    return sem.binary(kind, sem.to_bool(operands[0]), sem.to_bool(operands[1]))


# --------------------------------------------------------------------------------------
# kernel context managers


class KernelContext:
    """Base of what a kernel's ``with`` statement takes: ``with pl.some_scope(...):``.

    While a kernel compiles, ``__enter__()`` runs where the ``with`` starts (its value is
    what ``as`` binds) and ``__exit__(None, None, None)`` where its block ends; both may
    emit ops, as a builtin does.  Only instances of this class are accepted, so that a
    kernel's ``with`` never runs an arbitrary Python context manager (a file's, say) at
    compile time.  A ``return`` inside the block is refused (its exit would not run);
    ``break`` and ``continue`` leave the block through its exit."""

    def __enter__(self) -> Any:
        return None

    def __exit__(self, *exc_info: Any) -> None:
        return None


# --------------------------------------------------------------------------------------
# dtypes


class dtype:
    """An element type.  ``str(pl.float32) == "fp32"``, as in Triton; ``pl.dtype("int8")``
    is ``pl.int8`` (Triton's constructor by name)."""

    #: Triton's lists of type names, which its code and tests iterate.
    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64")
    STANDARD_FP_TYPES = ("fp16", "bf16", "fp32", "fp64")
    OTHER_TYPES = ("void",)

    def __init__(self, name: str, ir_type: t.Type | None = None):
        if ir_type is None:
            known = _BY_NAME.get(name)
            if known is None:
                raise TypeError(f"unknown dtype name {name!r} (known: {', '.join(sorted(_BY_NAME))})")
            if isinstance(known, unsupported_dtype):
                # Triton's other fp8 variants: pl.dtype("fp8e4b15") is pl.float8e4b15's twin.
                self.__class__ = unsupported_dtype
                self.__dict__.update(known.__dict__)
                return
            ir_type = known.ir
        self.name = name
        self.ir = ir_type

    # Triton's predicates, which kernels use in static conditions.
    def is_floating(self) -> bool:
        return isinstance(self.ir, t.FloatType)

    def is_int(self) -> bool:
        return isinstance(self.ir, t.IntType)

    def is_int_signed(self) -> bool:
        return isinstance(self.ir, t.IntType) and self.ir.signed and self.ir.width > 1

    def is_int_unsigned(self) -> bool:
        return isinstance(self.ir, t.IntType) and not self.ir.signed

    def is_bool(self) -> bool:
        return self.ir == t.i1

    def is_ptr(self) -> bool:
        return False

    def is_fp16(self) -> bool:
        return self.ir == t.f16

    def is_bf16(self) -> bool:
        return self.ir == t.bf16

    def is_fp32(self) -> bool:
        return self.ir == t.f32

    def is_fp64(self) -> bool:
        return self.ir == t.f64

    def is_fp8(self) -> bool:
        return self.ir in (t.f8e4m3, t.f8e5m2)

    @property
    def primitive_bitwidth(self) -> int:
        return self.ir.width

    @property
    def fp_mantissa_width(self) -> int:
        """A float type's stored mantissa bits (Triton's name): 23 for fp32, 3 for fp8e4nv."""
        return _float_layout(self)[0]

    @property
    def exponent_bias(self) -> int:
        """A float type's exponent bias (Triton's name): 127 for fp32, 7 for fp8e4nv."""
        return _float_layout(self)[1]

    @property
    def scalar(self) -> "dtype":
        return self

    def __eq__(self, other: Any) -> bool:
        other = unwrap(other)
        return isinstance(other, dtype) and self.ir == other.ir

    def __hash__(self) -> int:
        return hash(self.ir)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"pl.{_PYTHON_NAMES.get(self.name, self.name)}"


#: (mantissa bits, exponent bias) of each float type, by its Triton name.
_FLOAT_LAYOUTS = {"fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127), "fp64": (52, 1023), "fp8e4nv": (3, 7),
                  "fp8e5": (2, 15), "fp8e4b15": (3, 15), "fp8e4b8": (3, 8), "fp8e5b16": (2, 16)}


def _float_layout(dt: "dtype") -> tuple[int, int]:
    found = _FLOAT_LAYOUTS.get(dt.name)
    if found is None:
        raise AttributeError(f"{dt!r} is not a float type: it has no mantissa or exponent bias")
    return found


class pointer_type(dtype):
    """A pointer to ``element_ty`` elements (``pl.pointer_type(pl.float32)``); ``const``:
    one the kernel only reads through (a parameter annotated ``pl.const``)."""

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        self.element_ty = element_ty
        self.address_space = address_space
        self.const = bool(const)
        name = f"{'const_' if const else ''}pointer<{element_ty}>"
        super().__init__(name, t.PointerType(element_ty.ir, address_space, const))

    def is_ptr(self) -> bool:
        return True

    def is_const(self) -> bool:
        return self.const

    def __repr__(self) -> str:
        return f"pl.pointer_type({self.element_ty!r}{', const=True' if self.const else ''})"


class const:
    """The annotation of a pointer parameter the kernel only reads through (Triton's
    ``tl.const``): ``def kernel(x_ptr: pl.const, out_ptr)``.  Storing through it, or
    through a pointer computed from it, is a compile error (block pointers and tensor
    descriptors made from it do not keep the mark, as in Triton)."""


int1 = dtype("int1", t.i1)
int8 = dtype("int8", t.i8)
int16 = dtype("int16", t.i16)
int32 = dtype("int32", t.i32)
int64 = dtype("int64", t.i64)
uint8 = dtype("uint8", t.u8)
uint16 = dtype("uint16", t.u16)
uint32 = dtype("uint32", t.u32)
uint64 = dtype("uint64", t.u64)
float16 = dtype("fp16", t.f16)
bfloat16 = dtype("bf16", t.bf16)
float32 = dtype("fp32", t.f32)
float64 = dtype("fp64", t.f64)
float8e4nv = dtype("fp8e4nv", t.f8e4m3)
float8e5 = dtype("fp8e5", t.f8e5m2)



class unsupported_dtype(dtype):
    """A Triton element type polytile has no IR type for: the name exists (Triton code
    that lists it imports and compares), and using it in a kernel is an error that says so."""

    def __init__(self, name: str, python_name: str, why: str):
        self.name = name
        self._python_name = python_name
        self._why = why

    @property
    def ir(self) -> t.Type:
        raise TypeError(f"pl.{self._python_name} ({self._why}) is not supported by polytile: use pl.float8e4nv or "
                        f"pl.float8e5")

    def is_floating(self) -> bool:
        return True

    def is_fp8(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_fp16(self) -> bool:
        return False

    def is_bf16(self) -> bool:
        return False

    def is_fp32(self) -> bool:
        return False

    def is_fp64(self) -> bool:
        return False

    @property
    def primitive_bitwidth(self) -> int:
        return 8

    def __eq__(self, other: Any) -> bool:
        other = unwrap(other)
        return isinstance(other, unsupported_dtype) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"pl.{self._python_name}"


#: Triton's fp8 variants with other exponent biases (pre-Hopper NVIDIA, AMD's FNUZ types).
float8e4b15 = unsupported_dtype("fp8e4b15", "float8e4b15", "fp8 e4m3 with exponent bias 15")
float8e4b8 = unsupported_dtype("fp8e4b8", "float8e4b8", "AMD's fp8 e4m3 FNUZ")
float8e5b16 = unsupported_dtype("fp8e5b16", "float8e5b16", "AMD's fp8 e5m2 FNUZ")


class PropagateNan:
    """Triton's ``tl.PropagateNan``, for ``maximum``/``minimum``'s ``propagate_nan``:
    ``NONE`` lets the result be either operand where one is NaN, ``ALL`` propagates NaN.
    polytile always propagates NaN, which keeps both promises."""

    NONE = 0x0000
    ALL = 0xFFFF


_ALL_DTYPES = (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
               float16, bfloat16, float32, float64, float8e4nv, float8e5)
_PYTHON_NAMES = {"int1": "int1", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                 "fp8e4nv": "float8e4nv", "fp8e5": "float8e5"}
_BY_IR: dict[t.Type, dtype] = {d.ir: d for d in _ALL_DTYPES}
_BY_NAME: dict[str, dtype] = {d.name: d for d in (*_ALL_DTYPES, float8e4b15, float8e4b8, float8e5b16)}


def dtype_of(ir_type: t.Type) -> dtype:
    """The language dtype of an IR type's elements."""
    element = t.element_type(ir_type)
    if isinstance(element, t.PointerType):
        return pointer_type(dtype_of(element.pointee), element.address_space, element.const)
    found = _BY_IR.get(element)
    if found is None:
        raise semantic_error(f"type {element} has no language dtype")
    return found


# NumPy dtype names -> language dtypes (kernel arguments, `.to(np.float32)` would be odd).
NUMPY_TO_DTYPE = {"bool": int1, "int8": int8, "int16": int16, "int32": int32, "int64": int64,
                  "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
                  "float16": float16, "float32": float32, "float64": float64}


# --------------------------------------------------------------------------------------
# tensor


class Shape(tuple):
    """A tensor's shape: a tuple of ints that also behaves as the list of the same ints
    Triton's shapes are: it equals that list (``pl.static_assert(t.shape == [1, N])``),
    its slices are shapes too (``t.shape[1:] == [N]``), and a list or tuple added on
    either side gives a shape (``t.shape + [1]``, ``[1] + t.shape``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __getitem__(self, index: Any) -> Any:
        item = tuple.__getitem__(self, index)
        return Shape(item) if isinstance(index, slice) else item

    def __add__(self, other: Any) -> Any:
        if isinstance(other, (list, tuple)):
            return Shape(tuple(self) + tuple(other))
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (list, tuple)):
            return Shape(tuple(other) + tuple(self))
        return NotImplemented


class tensor:
    """A run-time value inside a kernel: a scalar or a tile, wrapping one IR value.

    Python operators work on tensors and mix them with Python numbers, with Triton's
    broadcasting and type promotion."""

    __slots__ = ("handle",)

    def __new__(cls, handle: Any = None) -> "tensor":
        # A value of a plugin's IR type gets the class the plugin registered for it (a
        # tensor descriptor's methods), wherever the frontend wraps it.
        if cls is tensor and isinstance(getattr(handle, "type", None), t.DialectType):
            from .extensions import value_class

            special = value_class(handle.type)
            if special is not None:
                return object.__new__(special)
        return object.__new__(cls)

    def __init__(self, handle: Any):
        self.handle = handle

    @property
    def type(self) -> t.Type:
        return self.handle.type

    @property
    def dtype(self) -> dtype:
        return dtype_of(self.handle.type)

    @property
    def shape(self) -> Shape:
        return Shape(t.shape_of(self.handle.type))

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"tensor<{self.type}>"

    def __bool__(self) -> bool:
        raise semantic_error("a run-time value cannot be used as a Python bool here; use it in an 'if' or "
                             "'while' condition, or combine conditions with '&' and '|'")

    def __iter__(self):
        raise semantic_error("cannot iterate over a tensor")

    __hash__ = object.__hash__

    # Arithmetic and comparisons: see polytile.language.semantic.
    def __add__(self, other): return _sem().binary("add", self, other)
    def __radd__(self, other): return _sem().binary("add", other, self)
    def __sub__(self, other): return _sem().binary("sub", self, other)
    def __rsub__(self, other): return _sem().binary("sub", other, self)
    def __mul__(self, other): return _sem().binary("mul", self, other)
    def __rmul__(self, other): return _sem().binary("mul", other, self)
    def __truediv__(self, other): return _sem().binary("truediv", self, other)
    def __rtruediv__(self, other): return _sem().binary("truediv", other, self)
    def __floordiv__(self, other): return _sem().binary("floordiv", self, other)
    def __rfloordiv__(self, other): return _sem().binary("floordiv", other, self)
    def __mod__(self, other): return _sem().binary("mod", self, other)
    def __rmod__(self, other): return _sem().binary("mod", other, self)
    def __and__(self, other): return _sem().binary("and", self, other)
    def __rand__(self, other): return _sem().binary("and", other, self)
    def __or__(self, other): return _sem().binary("or", self, other)
    def __ror__(self, other): return _sem().binary("or", other, self)
    def __xor__(self, other): return _sem().binary("xor", self, other)
    def __rxor__(self, other): return _sem().binary("xor", other, self)
    def __lshift__(self, other): return _sem().binary("lshift", self, other)
    def __rlshift__(self, other): return _sem().binary("lshift", other, self)
    def __rshift__(self, other): return _sem().binary("rshift", self, other)
    def __rrshift__(self, other): return _sem().binary("rshift", other, self)
    def __lt__(self, other): return _sem().compare("lt", self, other)
    def __le__(self, other): return _sem().compare("le", self, other)
    def __gt__(self, other): return _sem().compare("gt", self, other)
    def __ge__(self, other): return _sem().compare("ge", self, other)
    def __eq__(self, other): return _sem().compare("eq", self, other)  # type: ignore[override]
    def __ne__(self, other): return _sem().compare("ne", self, other)  # type: ignore[override]
    def __neg__(self): return _sem().negate(self)
    def __pos__(self): return self
    def __invert__(self): return _sem().invert(self)
    def __abs__(self): return _std().abs(self)

    def __pow__(self, other):
        raise semantic_error("'**' is not supported on tensors; multiply, or use pl.exp2/pl.log2")

    def __getitem__(self, index): return _sem().subscript(self, index)

    # Methods, as in Triton.
    def to(self, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> "tensor":
        return _std().cast(self, dtype, fp_downcast_rounding, bitcast)

    def cast(self, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> "tensor":
        """``pl.cast(self, ...)`` (Triton's ``tensor.cast``; ``to`` is the same)."""
        return _std().cast(self, dtype, fp_downcast_rounding, bitcast)

    def logical_and(self, other):
        """Element by element: both non-zero (Triton's ``tensor.logical_and``; what ``and``
        gives on tensors)."""
        return _logical("and", self, other)

    def logical_or(self, other):
        """Element by element: either non-zero (Triton's ``tensor.logical_or``)."""
        return _logical("or", self, other)

    # Triton's member functions of builtins that live in other modules.
    def ravel(self, can_reorder=False): return _module("shape").ravel(self, can_reorder)
    def gather(self, index, axis): return _module("shape").gather(self, index, axis)
    def histogram(self, num_bins, mask=None): return _module("reductions").histogram(self, num_bins, mask)

    def reshape(self, *shape, can_reorder=False): return _std().reshape(self, *shape, can_reorder=can_reorder)
    def view(self, *shape): return _std().reshape(self, *shape)
    def trans(self, *dims): return _std().trans(self, *dims)
    def permute(self, *dims): return _std().permute(self, *dims)
    def expand_dims(self, axis): return _std().expand_dims(self, axis)
    def broadcast_to(self, *shape): return _std().broadcast_to(self, *shape)
    def sum(self, axis=None, keep_dims=False, dtype=None): return _std().sum(self, axis, keep_dims, dtype)
    def max(self, axis=None, keep_dims=False): return _std().max(self, axis, keep_dims=keep_dims)
    def min(self, axis=None, keep_dims=False): return _std().min(self, axis, keep_dims=keep_dims)
    def argmax(self, axis, tie_break_left=True, keep_dims=False):
        from .reductions import argmax
        return argmax(self, axis, tie_break_left, keep_dims)

    def argmin(self, axis, tie_break_left=True, keep_dims=False):
        from .reductions import argmin
        return argmin(self, axis, tie_break_left, keep_dims)

    def cumsum(self, axis=0, reverse=False, dtype=None):
        from .scan import cumsum
        return cumsum(self, axis, reverse, dtype)

    def cumprod(self, axis=0, reverse=False):
        from .scan import cumprod
        return cumprod(self, axis, reverse)

    def split(self):
        from .shape import split
        return split(self)

    def xor_sum(self, axis=None, keep_dims=False): return _std().xor_sum(self, axis, keep_dims)
    def exp(self): return _std().exp(self)
    def log(self): return _std().log(self)
    def sqrt(self): return _std().sqrt(self)
    def sigmoid(self): return _std().sigmoid(self)

    @property
    def T(self) -> "tensor":
        return _std().trans(self)


def _sem():
    from . import semantic

    return semantic


def _std():
    from . import standard

    return standard


def _module(name: str):
    import importlib

    return importlib.import_module(f"{__package__}.{name}")
