"""Host tensor descriptors: ``TensorDescriptor``, the same class as Triton 3.6's
``triton.tools.tensor_descriptor.TensorDescriptor``.

A host tensor descriptor tells a kernel where a tensor lies in memory (its base, shape and
strides) and which block of it one load or store moves (``block_shape``).  The host builds
it to pass as a kernel argument; inside the kernel ``desc.load([i, j])`` reads one block
at those offsets, and reads outside the tensor give zero (``padding="zero"``) or NaN
(``padding="nan"``).  A launch passes it as its base, shape and strides
(``polytile_tma.arguments``); a Hopper lowering will pack it into a TMA descriptor.

The class mirrors Triton's, field for field, so a Triton kernel ports by changing imports::

    from polytile_tma.host import TensorDescriptor      # was: from triton.tools.tensor_descriptor import ...

    a_desc = TensorDescriptor.from_tensor(a, block_shape=[64, 64])
    b_desc = TensorDescriptor(b, b.shape, b.stride(), [64, 32], padding="nan")

It checks the rules Triton 3.6 checks (``__post_init__`` of its class and
``triton._utils.validate_block_shape``), and no others:

* the rank is 1 to 5, and ``strides`` and ``block_shape`` have one entry per dimension;
* every ``shape`` entry is positive;
* the base address is a multiple of 16 bytes, and every stride but the last is a multiple
  of 16 bytes: TMA addresses global memory in 16-byte units;
* the last stride is 1: TMA copies the innermost dimension as one run of elements;
* every ``block_shape`` entry is a power of two, and a block holds at most 2**20 elements
  (Triton's ``TRITON_MAX_TENSOR_NUMEL``): a block is a tile, and tiles have power-of-two
  dimensions and a bounded size;
* ``padding`` is ``"zero"`` or ``"nan"``, and ``"nan"`` needs floating-point elements.

Where Triton asserts, this class names each broken rule and why (``problems()``), and
raises one ``ValueError`` listing them all.  A dataclass can be changed after it is built,
so the launch path checks again with ``check_for_launch``, which raises polytile's
``LaunchError`` naming the kernel and the argument.  ``from_tensor`` leaves the base's
address to that launch check (it reads the rest at once): a tensor's address is a
property of the launch (``set_`` moves it), which reads it anyway, and reading it twice
cost each new descriptor about 110 ns on an H100 host.  So ``from_tensor(t[1:], ...)`` of an
unaligned view is an error of the launch, naming the argument, not of the call.

Bases: torch tensors, NumPy arrays (for the interpreter), and any object with
``data_ptr()``, ``dtype``, ``shape`` and ``stride()`` (strides in elements, as torch's).
This module imports neither torch nor NumPy: it recognises them by their types.
"""

from __future__ import annotations

import hashlib
import operator
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["TensorDescriptor"]

#: Bytes of each element type, by polytile's spelling (the IR's scalar types).
ELEMENT_BYTES = {
    "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "u8": 1, "u16": 2, "u32": 4, "u64": 8,
    "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "f8e4m3": 1, "f8e5m2": 1,
}

#: The element types that can hold NaN (``padding="nan"`` needs one).
FLOATING_ELEMENTS = frozenset({"f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"})

# dtype names -> polytile's spelling.  NumPy's and torch's names (``torch.float16`` is
# looked up as ``float16``), ml_dtypes' (``bfloat16``, ``float8_e4m3fn``: NumPy dtypes with
# those names), Triton's language names (``fp16``: polytile's ``pl.float16`` is named so)
# and polytile's own.  A name missing here is refused by name: guessing an element type
# would read memory wrongly.
_ELEMENT_NAMES = {
    **{name: name for name in ELEMENT_BYTES},
    "bool": "i1", "int1": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
    "fp16": "f16", "fp32": "f32", "fp64": "f64", "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2",
}

#: Ranks TMA can describe (``cuTensorMapEncodeTiled`` takes 1 to 5 dimensions; Triton checks the same).
MAX_RANK = 5

#: The most elements one block may hold: Triton's ``TRITON_MAX_TENSOR_NUMEL`` (2**20).
MAX_BLOCK_ELEMENTS = 1 << 20

#: Alignment TMA needs of the base address and of every stride but the last, in bytes.
ALIGNMENT = 16

# torch.compile traces with tensors that have no memory; Triton skips the address check for
# them (by these type names), and so do we.
_ADDRESSLESS_TORCH_TYPES = ("FakeTensor", "FunctionalTensor")

_ACCEPTED = "a torch tensor, a NumPy array, or an object with data_ptr(), dtype, shape and stride()"


class _Base(NamedTuple):
    """What a descriptor needs of its base: its kind in words, element type and address."""

    kind: str
    element: str
    element_bytes: int
    address: int | None  # None for torch.compile's fake tensors, which have no memory


def _is_torch(x: Any) -> bool:
    # By the type's module, so that this module never imports torch.
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "data_ptr")


def _is_numpy(x: Any) -> bool:
    # An object can only be a NumPy array if NumPy is already imported; no import here.
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.ndarray)


def _has_array_protocol(x: Any) -> bool:
    return all(hasattr(x, name) for name in ("data_ptr", "dtype", "shape", "stride"))


#: dtype -> element name, for the dtypes seen: a launch reads every descriptor's dtype,
#: and NumPy's ``dtype.name`` alone costs microseconds.
_ELEMENT_OF_DTYPE: dict = {}


def _element_of(dtype: Any) -> str:
    """polytile's name for ``dtype``'s elements; TypeError naming a dtype it has no type for."""
    try:
        return _ELEMENT_OF_DTYPE[dtype]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    element = _element_named(dtype)
    try:
        _ELEMENT_OF_DTYPE[dtype] = element
    except TypeError:
        pass
    return element


def _element_named(dtype: Any) -> str:
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(getattr(dtype, "name", None), str):  # NumPy dtypes (CuPy's, ml_dtypes')
        if getattr(dtype, "isnative", True) is False:
            # A byte-swapped array would be read as garbage, not converted.
            raise TypeError(f"base holds {dtype.str} elements in non-native byte order, which a kernel would "
                            f"read as garbage: convert it first (array.astype(array.dtype.newbyteorder('=')))")
        name = dtype.name
    else:
        name = str(dtype).rsplit(".", 1)[-1]  # torch.float16 -> float16
    element = _ELEMENT_NAMES.get(name)
    if element is None:
        known = ", ".join(sorted({n for n in _ELEMENT_NAMES if n not in ELEMENT_BYTES}))
        raise TypeError(f"base holds {name} elements, which polytile has no element type for "
                        f"(known dtypes: {known})")
    return element


#: type -> how to read a base of that type ("numpy", "torch", "fake", "protocol"): asked on
#: every launch, decided once per type.
_KIND_OF_TYPE: dict = {}


def _describe_base(base: Any) -> _Base:
    """The kind, element type and address of ``base``; TypeError for a base of the wrong kind."""
    kind = _KIND_OF_TYPE.get(type(base))
    if kind == "torch":
        dtype = base.dtype
        element = _element_of(dtype)
        if dtype not in DTYPE_FACTS:
            _remember_dtype(dtype, element)
        return _Base("torch tensor", element, ELEMENT_BYTES[element], base.data_ptr())
    if kind == "numpy":
        element = _element_of(base.dtype)
        return _Base("NumPy array", element, ELEMENT_BYTES[element], base.__array_interface__["data"][0])
    described = _describe_base_slowly(base)
    if described.kind in ("NumPy array", "torch tensor"):
        _KIND_OF_TYPE[type(base)] = "numpy" if described.kind == "NumPy array" else "torch"
    if described.kind == "torch tensor":
        TORCH_TYPES.add(type(base))
        _remember_dtype(base.dtype, described.element)
    return described


def _remember_dtype(dtype: Any, element: str) -> None:
    """Tell the C fast path about a torch dtype (torch's dtypes are hashable singletons)."""
    try:
        DTYPE_FACTS[dtype] = (element, ELEMENT_BYTES[element], element in FLOATING_ELEMENTS)
    except TypeError:  # an unhashable dtype: the Python path keeps it
        pass


def _describe_base_slowly(base: Any) -> _Base:
    if _is_numpy(base):
        element = _element_of(base.dtype)
        return _Base("NumPy array", element, ELEMENT_BYTES[element], int(base.__array_interface__["data"][0]))
    if _is_torch(base):
        element = _element_of(base.dtype)
        if type(base).__name__ in _ADDRESSLESS_TORCH_TYPES:
            return _Base(f"torch {type(base).__name__}", element, ELEMENT_BYTES[element], None)
        return _Base("torch tensor", element, ELEMENT_BYTES[element], int(base.data_ptr()))
    if _has_array_protocol(base):
        element = _element_of(base.dtype)
        return _Base(type(base).__name__, element, ELEMENT_BYTES[element], int(base.data_ptr()))
    raise TypeError(f"base is a {type(base).__module__}.{type(base).__qualname__}, "
                    f"but a TensorDescriptor's base must be {_ACCEPTED}")


def _element_strides(tensor: Any, base: _Base) -> tuple[int, ...]:
    """``tensor``'s strides in elements.  NumPy counts strides in bytes: convert them, and
    refuse strides that are not whole elements (a descriptor cannot address half of one)."""
    if not _is_numpy(tensor):
        return tuple(tensor.stride())
    size = base.element_bytes
    broken = [f"strides[{i}] = {s} bytes" for i, s in enumerate(tensor.strides) if s % size]
    if broken:
        raise ValueError(f"TensorDescriptor: the NumPy array's strides {tuple(tensor.strides)} (in bytes) are "
                         f"not whole elements of {size} bytes ({', '.join(broken)}): a descriptor counts "
                         f"strides in elements")
    return tuple(s // size for s in tensor.strides)


def _integers(field: str, value: Any, problems: list[str]) -> list[int | None] | None:
    """``value``'s entries as ints (None where one is not an integer, with a problem for it),
    or None, with a problem, when ``value`` is not a sequence."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        problems.append(f"{field} = {value!r} is not a sequence of integers (one per dimension)")
        return None
    entries: list[int | None] = []
    for i in range(len(value)):
        try:
            entries.append(operator.index(value[i]))  # ints, NumPy integers, torch's sizes
        except TypeError:
            problems.append(f"{field}[{i}] = {value[i]!r} is not an integer")
            entries.append(None)
    return entries


def _plainly_valid(desc: Any, base: _Base) -> bool:
    """Whether ``desc`` keeps every rule, when its fields are plain ints and lists (the
    common case, checked fast); False means "ask problems()", which says what is wrong."""
    try:
        shape, strides, block = desc.shape, desc.strides, desc.block_shape
        rank = len(shape)
        if not 1 <= rank <= MAX_RANK or len(strides) != rank or len(block) != rank:
            return False
        if base.address is not None and base.address % ALIGNMENT:
            return False
        if strides[-1] != 1 or desc.padding not in ("zero", "nan"):
            return False
        if desc.padding == "nan" and base.element not in FLOATING_ELEMENTS:
            return False
        size, count = base.element_bytes, 1
        for i in range(rank):
            n, b = shape[i], block[i]
            if type(n) is not int or type(b) is not int or n <= 0 or b <= 0 or b & (b - 1):
                return False
            count *= b
        for s in strides[:-1]:
            if type(s) is not int or s * size % ALIGNMENT:
                return False
        return count <= MAX_BLOCK_ELEMENTS and type(strides[-1]) is int
    except TypeError:
        return False


# -- what a launch keys and passes (polytile_tma.arguments reads these) ------------------

#: The key of a descriptor that breaks a rule (or holds anything but plain ints): no
#: kernel is compiled for it, so a launch with one never reuses a kernel (its fields
#: may change after a launch); the slow path's check names what is wrong.  A valid
#: descriptor's key is ``(element, block_shape, padding, shape divisible by 16 per
#: dimension, strides but the last divisible by 16)``.
BROKEN = ("broken",)

#: The torch tensor types seen as bases (with an address), and per torch dtype seen its
#: ``(element, bytes, floating)``: the C fast path (``_descriptor.c``) handles these.
TORCH_TYPES: set = set()
DTYPE_FACTS: dict = {}


def launch_answer(desc: Any) -> tuple:
    """``(key, parts)`` of ``desc`` for one launch: the key (see :data:`BROKEN`) and the
    values of the kernel parameters it passes as, ``(base, *shape, *strides[:-1])``;
    ``(BROKEN, ())`` for a descriptor that breaks a rule now.  The reference the C fast
    path (``_descriptor.key_and_parts``) agrees with, and the answer for every case it
    leaves to Python."""
    try:
        info = _describe_base(desc.base)
        shape, strides = tuple(desc.shape), tuple(desc.strides)
        block, padding = tuple(desc.block_shape), desc.padding
    except (TypeError, ValueError, AttributeError):
        return BROKEN, ()  # not a descriptor any more: the launch's check says what is wrong
    if not _plainly_valid(desc, info):
        if desc.problems():
            return BROKEN, ()  # the slow path's check names every broken rule
        # Valid, with integers of other types (NumPy's): keyed and passed as ints.
        shape, strides = tuple(map(operator.index, shape)), tuple(map(operator.index, strides))
        block = tuple(map(operator.index, block))
    key = (info.element, block, padding, tuple([s % 16 == 0 for s in shape]),
           tuple([s % 16 == 0 for s in strides[:-1]]))
    # A strided base (x[:, 1:]) passes as it is: the launch passes its first element's
    # address, and the descriptor's strides walk the memory around it.
    return key, (desc.base, *shape, *strides[:-1])


def _is_power_of_two(n: int) -> bool:
    # Triton's test is n & (n - 1) == 0, which lets 0 through; 0 is no power of two.
    return n > 0 and n & (n - 1) == 0


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


# -- construction: the C core where it is built, else the same in Python -------------------


#: Set while ``from_tensor`` builds a descriptor through ``cls(...)`` (a subclass's
#: ``__init__`` runs), in that thread: the base's address is then left to the launch, as
#: the C core leaves it (see ``from_tensor``).  Descriptors such an ``__init__`` builds
#: meanwhile are checked at their launch too.
_FROM_TENSOR = threading.local()


def _slow_init(desc: Any, from_tensor: bool = False) -> None:
    """The checks of a new descriptor that the C core leaves to Python (it handles torch
    tensors of known dtypes with plain int fields that keep every rule); ``from_tensor``:
    one ``from_tensor`` made, whose base's address the launch checks."""
    try:
        base = _describe_base(desc.base)
    except TypeError as error:
        raise TypeError(f"TensorDescriptor: {error}") from None
    if _plainly_valid(desc, base):
        return
    from_tensor = from_tensor or getattr(_FROM_TENSOR, "active", False)
    problems = desc.problems(address=not from_tensor)
    if problems:
        raise ValueError("TensorDescriptor: " + "; ".join(problems))


def _slow_from_tensor(cls: type, tensor: Any, block_shape: Sequence[int], padding: str = "zero") -> Any:
    """``from_tensor`` for every base the C core leaves to Python (NumPy's byte strides
    converted to elements)."""
    try:
        base = _describe_base(tensor)
    except TypeError as error:
        raise TypeError(f"TensorDescriptor.from_tensor: {error}") from None
    outer = getattr(_FROM_TENSOR, "active", False)
    _FROM_TENSOR.active = True
    try:
        return cls(tensor, tensor.shape, _element_strides(tensor, base), block_shape, padding)
    finally:
        _FROM_TENSOR.active = outer


class PythonDescriptorCore:
    """The fields of a descriptor in Python: what ``_descriptor.DescriptorCore`` is in C,
    for installs where the C module could not be built (every launch then keys its
    descriptors in Python: correct, and a few microseconds slower per descriptor)."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding", "__dict__", "__weakref__")

    def __init__(self, base: Any, shape: Any, strides: Any, block_shape: Any, padding: str = "zero") -> None:
        self.base, self.shape, self.strides, self.block_shape, self.padding = base, shape, strides, block_shape, padding
        _slow_init(self)

    @classmethod
    def from_tensor(cls, tensor: Any, block_shape: Sequence[int], padding: str = "zero") -> Any:
        """The descriptor of all of ``tensor``: its own shape and strides."""
        return _slow_from_tensor(cls, tensor, block_shape, padding)


def _native_core() -> tuple[Any, str]:
    """The C module, or None, and in words why (what ``NATIVE`` says)."""
    try:
        from . import _descriptor
    except ImportError as error:
        return None, f"not built ({error}): descriptors are keyed in Python"
    source = Path(__file__).with_name("_descriptor.c")
    if source.is_file() and _descriptor.source_digest != hashlib.sha256(source.read_bytes()).hexdigest():
        return None, "stale (_descriptor.c changed since it was built; reinstall polytile-tma): keyed in Python"
    return _descriptor, f"C ({Path(_descriptor.__file__).name})"


#: The C module (``_descriptor.c``) when it is built and current, else None.
_NATIVE, NATIVE = _native_core()


@dataclass(init=False)
class TensorDescriptor(_NATIVE.DescriptorCore if _NATIVE is not None else PythonDescriptorCore):
    """A tensor in memory and the block shape one access moves: Triton's ``TensorDescriptor``.

    ``base``: the tensor (a torch tensor, a NumPy array, or an object with ``data_ptr()``,
    ``dtype``, ``shape`` and ``stride()``); ``shape`` and ``strides``: the described tensor's,
    strides in elements; ``block_shape``: the block one ``load``/``store`` moves;
    ``padding``: what reads outside the tensor give, ``"zero"`` (the default) or ``"nan"``.

    Built as ``TensorDescriptor(base, shape, strides, block_shape, padding="zero")`` or
    ``TensorDescriptor.from_tensor(tensor, block_shape, padding="zero")``.  Building one
    checks every rule (see the module's docstring; ``from_tensor`` leaves the base's
    address to the launch) and raises ``TypeError`` for a base of the wrong kind or
    element type, ``ValueError`` naming every broken rule otherwise.

    A dataclass as Triton's is (``dataclasses.fields``, ``replace``, ``==``, ``repr``); its
    fields live in a C core (``_descriptor.c``) that keeps what the last launch passed,
    so that relaunching it, or launching a new one, costs little.
    """

    # Fields without defaults here: a class attribute would hide the core's field
    # (the core's constructor gives padding its default, "zero").
    base: Any = field()
    shape: list[int] = field()
    strides: list[int] = field()
    block_shape: list[int] = field()
    padding: str = field()

    def __reduce__(self) -> tuple:
        # copy.copy and pickle build it again from its fields (and its checks run again).
        state = getattr(self, "__dict__", None) or None
        return type(self), (self.base, self.shape, self.strides, self.block_shape, self.padding), state

    # -- what the launch path reads -------------------------------------------------------

    @property
    def rank(self) -> int:
        """The number of dimensions (1 to 5 in a valid descriptor)."""
        return len(self.shape)

    @property
    def element(self) -> str:
        """The element type of ``base`` in polytile's spelling (``"f16"``, ``"bf16"``,
        ``"i32"``, ``"f8e4m3"``, ...); TypeError naming a dtype polytile has no type for."""
        return _describe_base(self.base).element

    @property
    def element_bytes(self) -> int:
        """The size of one element of ``base`` in bytes (what strides in elements are multiplied by)."""
        return _describe_base(self.base).element_bytes

    @property
    def address(self) -> int:
        """The address of ``base``'s first element (a device address for GPU tensors, a host
        address for NumPy arrays)."""
        base = _describe_base(self.base)
        if base.address is None:
            raise TypeError(f"TensorDescriptor: base is a {base.kind}, which has no memory address")
        return base.address

    # -- checks ---------------------------------------------------------------------------

    def problems(self, *, address: bool = True) -> list[str]:
        """Every rule this descriptor breaks, each as a sentence that says why the rule
        exists; empty when it is valid.  Reads the fields as they are now; ``address``:
        whether to check the base's address too (``from_tensor`` leaves it to the launch)."""
        problems: list[str] = []
        try:
            base: _Base | None = _describe_base(self.base)
        except TypeError as error:
            problems.append(str(error))
            base = None
        shape = _integers("shape", self.shape, problems)
        strides = _integers("strides", self.strides, problems)
        block = _integers("block_shape", self.block_shape, problems)

        if shape is not None:
            rank = len(shape)
            if not 1 <= rank <= MAX_RANK:
                problems.append(f"the rank is {rank} (shape {tuple(self.shape)}), but a tensor descriptor has "
                                f"1 to {MAX_RANK} dimensions: TMA describes tensors of rank 1 to {MAX_RANK}")
            for name, entries in (("strides", strides), ("block_shape", block)):
                if entries is not None and len(entries) != rank:
                    problems.append(f"{name} has {_entries(len(entries))} but shape has {_entries(rank)}: "
                                    f"a descriptor needs one per dimension")
            for i, n in enumerate(shape):
                if n is not None and n <= 0:
                    problems.append(f"shape[{i}] = {n} is not positive: a descriptor describes a tensor "
                                    f"with at least one element in each dimension")

        if address and base is not None and base.address is not None and base.address % ALIGNMENT:
            problems.append(f"base is not {ALIGNMENT}-byte aligned (address {base.address:#x}): "
                            f"TMA reads and writes global memory from {ALIGNMENT}-byte-aligned addresses")

        if strides:
            if base is not None:
                size = base.element_bytes
                for i, stride in enumerate(strides[:-1]):
                    if stride is not None and stride * size % ALIGNMENT:
                        problems.append(f"strides[{i}] = {stride} elements of {size} bytes is {stride * size} "
                                        f"bytes, not a multiple of {ALIGNMENT}: TMA needs every stride but the "
                                        f"last to be a multiple of {ALIGNMENT} bytes")
            last = strides[-1]
            if last is not None and last != 1:
                problems.append(f"the last stride (strides[{len(strides) - 1}]) is {last}, not 1: the last "
                                f"dimension must be contiguous, because TMA copies it as one run of elements")

        if block is not None:
            count = 1
            for i, n in enumerate(block):
                if n is None:
                    continue
                if not _is_power_of_two(n):
                    problems.append(f"block_shape[{i}] = {n} is not a power of two: a block is a tile, "
                                    f"and tiles have power-of-two dimensions")
                count *= max(n, 0)
            if count > MAX_BLOCK_ELEMENTS:
                problems.append(f"block_shape {tuple(self.block_shape)} holds {count} elements, more than the "
                                f"{MAX_BLOCK_ELEMENTS} (2**20) a tile may hold")

        if self.padding == "nan":
            if base is not None and base.element not in FLOATING_ELEMENTS:
                problems.append(f"padding = 'nan' needs floating-point elements, but base holds {base.element}: "
                                f"reads outside an integer tensor cannot give NaN (use padding='zero')")
        elif self.padding != "zero":
            problems.append(f"padding = {self.padding!r} is neither 'zero' nor 'nan' (what reads outside the "
                            f"tensor give)")
        return problems

    def check_for_launch(self, kernel: str, argument: str) -> None:
        """Raise ``polytile.errors.LaunchError`` naming ``kernel`` and ``argument`` if this
        descriptor breaks a rule now: its fields may have changed since it was built."""
        problems = self.problems()
        if problems:
            from polytile.errors import LaunchError  # polytile's compiler is imported only when used

            raise LaunchError(f"kernel '{kernel}': argument '{argument}' (a TensorDescriptor): "
                              + "; ".join(problems))


if _NATIVE is not None:
    _NATIVE.configure(slow_init=_slow_init, slow_from_tensor=_slow_from_tensor, slow_key_and_parts=launch_answer,
                      torch_types=TORCH_TYPES, dtype_facts=DTYPE_FACTS)
    #: ``(key, parts)`` of a descriptor for one launch (:func:`launch_answer`, in C where built).
    key_and_parts = _NATIVE.key_and_parts
else:
    key_and_parts = launch_answer
