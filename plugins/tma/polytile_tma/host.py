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
``LaunchError`` naming the kernel and the argument.

Bases: torch tensors, NumPy arrays (for the interpreter), and any object with
``data_ptr()``, ``dtype``, ``shape`` and ``stride()`` (strides in elements, as torch's).
This module imports neither torch nor NumPy: it recognises them by their types.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
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
        element = _element_of(base.dtype)
        return _Base("torch tensor", element, ELEMENT_BYTES[element], base.data_ptr())
    if kind == "numpy":
        element = _element_of(base.dtype)
        return _Base("NumPy array", element, ELEMENT_BYTES[element], base.__array_interface__["data"][0])
    described = _describe_base_slowly(base)
    if described.kind in ("NumPy array", "torch tensor"):
        _KIND_OF_TYPE[type(base)] = "numpy" if described.kind == "NumPy array" else "torch"
    return described


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

#: Where a descriptor keeps what its last launch computed: (base, copies of the facts it
#: was computed from, key, parts).  Made when a valid descriptor is built, so that its
#: first launch finds it too.
LAUNCH_FACTS = "_polytile_launch"
#: torch tensor types seen as bases: their relaunches take the key's fast path.
TORCH_TYPES: set = set()


#: The key of a descriptor that breaks a rule (or holds anything but plain ints): no
#: kernel is compiled for it, so a launch with one never reuses a kernel (its fields
#: are a dataclass's and may change after a launch); the slow path's check names what
#: is wrong.  A valid descriptor's key is ``(element, block_shape, padding, shape
#: divisible by 16 per dimension, strides but the last divisible by 16)``.
BROKEN = ("broken",)


#: In a descriptor's ``__dict__`` while every change of the descriptor replaces an entry
#: there: its sequence fields are tuples (``torch.Size`` among them) or lists it watches
#: (:class:`WatchedList`, which ``from_tensor`` makes), so an assignment replaces the field
#: and a change in place drops this entry.  NVIDIA's native dispatcher reuses a
#: descriptor's last parts while its entries are the same objects
#: (``ArgumentAdapter.version_attribute``); the Python path keys it again otherwise.
VERSION = "_polytile_version"


class WatchedList(list):
    """A descriptor's list field (``from_tensor``'s ``block_shape``): a change in place
    tells the descriptor, whose next launch then keys it again."""

    __slots__ = ("_owner",)

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self._owner = None

    def _changed(self) -> None:
        owner = self._owner
        if owner is not None:
            owner.__dict__.pop(VERSION, None)


def _watching(name: str) -> Any:
    method = getattr(list, name)

    def changed(self: WatchedList, *args: Any) -> Any:
        result = method(self, *args)
        self._changed()
        return result

    changed.__name__ = name
    return changed


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop", "remove",
              "clear", "sort", "reverse"):
    setattr(WatchedList, _name, _watching(_name))


def _versioned(desc: Any) -> bool:
    """Whether every change of ``desc`` replaces an entry of its ``__dict__``."""
    for field in (desc.shape, desc.strides, desc.block_shape):
        if not (isinstance(field, tuple) or (type(field) is WatchedList and field._owner is desc)):
            return False
    return type(desc.padding) is str


def still_versioned(desc: Any) -> None:
    """Drop ``desc``'s version when a field was assigned since it was given (what a
    native dispatcher asks after it saw an attribute of the descriptor replaced)."""
    fields = desc.__dict__.get(VERSION)
    if fields is not None and (fields[0] is not desc.shape or fields[1] is not desc.strides
                               or fields[2] is not desc.block_shape):
        del desc.__dict__[VERSION]


def _copy(field: Any) -> Any:
    """A copy of a field that compares equal to it until it changes (a list stays a list)."""
    return list(field) if isinstance(field, list) else field


def remember_launch(desc: Any, base: _Base, shape: tuple, strides: tuple, block: tuple) -> tuple:
    """Key ``desc`` (valid, its fields as int tuples) and keep the key and the parts with it."""
    # Written for speed: a launch may build its descriptors every time (list
    # comprehensions, no generators; the key a plain tuple).
    key = (base.element, block, desc.padding, tuple([s % 16 == 0 for s in shape]),
           tuple([s % 16 == 0 for s in strides[:-1]]))
    # Copies of the fields as they are (a list stays a list: compared as such on the fast
    # path, so a change in place shows), and for torch bases the dtype object.
    data = desc.base
    torch = base.kind == "torch tensor"
    copies = (base.address, base.element, _copy(desc.shape), _copy(desc.strides), _copy(desc.block_shape),
              desc.padding, data.dtype if torch else None)
    desc.__dict__[LAUNCH_FACTS] = (data, copies, key, (data if torch else _launch_base(data), *shape, *strides[:-1]))
    if torch:
        TORCH_TYPES.add(type(data))
    if torch and _versioned(desc):
        # The fields it holds for: one assigned since (a list it does not watch, say) ends
        # it at the next launch that asks (still_versioned).
        desc.__dict__[VERSION] = (desc.shape, desc.strides, desc.block_shape)
    else:
        desc.__dict__.pop(VERSION, None)
    return key


def _launch_base(base: Any) -> Any:
    """What a launch passes for the base pointer: the base itself, or for a NumPy view that
    is not contiguous (``x[::2]``, ``x[:, 1:]``) the memory it lies in as a contiguous 1-D
    view from its first element on.  The interpreter binds a pointer to a contiguous
    array; the descriptor's own strides then address the view inside it (and the
    interpreter checks every access against that memory)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(base, numpy.ndarray) or base.flags.c_contiguous:
        return base
    root = base
    while isinstance(root.base, numpy.ndarray):
        root = root.base
    if not root.flags.c_contiguous:
        return base  # the launch says what it needs
    size = base.itemsize
    start = base.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    memory = root.reshape(-1).view(numpy.uint8)
    end = start + (memory.size - start) // size * size
    return memory[start:end].view(base.dtype)


def _is_power_of_two(n: int) -> bool:
    # Triton's test is n & (n - 1) == 0, which lets 0 through; 0 is no power of two.
    return n > 0 and n & (n - 1) == 0


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


@dataclass
class TensorDescriptor:
    """A tensor in memory and the block shape one access moves: Triton's ``TensorDescriptor``.

    ``base``: the tensor (a torch tensor, a NumPy array, or an object with ``data_ptr()``,
    ``dtype``, ``shape`` and ``stride()``); ``shape`` and ``strides``: the described tensor's,
    strides in elements; ``block_shape``: the block one ``load``/``store`` moves;
    ``padding``: what reads outside the tensor give, ``"zero"`` or ``"nan"``.

    Building one checks every rule (see the module's docstring) and raises ``TypeError``
    for a base of the wrong kind or element type, ``ValueError`` naming every broken rule
    otherwise.
    """

    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"

    def __getstate__(self) -> dict:
        # A copy (copy.copy, pickle) shares or rebuilds the fields but is keyed anew: what a
        # launch kept with this one (its facts, its version) does not go with it.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_polytile")}

    def __post_init__(self) -> None:
        block = self.block_shape
        if type(block) is WatchedList and block._owner is None:
            block._owner = self
        try:
            base = _describe_base(self.base)
        except TypeError as error:
            raise TypeError(f"TensorDescriptor: {error}") from None
        if _plainly_valid(self, base):
            # The common case, checked without words (a launch may make descriptors each
            # time); what the launch will key it by is kept with it.
            remember_launch(self, base, tuple(self.shape), tuple(self.strides), tuple(self.block_shape))
            return
        problems = self.problems()
        if problems:
            raise ValueError("TensorDescriptor: " + "; ".join(problems))

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Sequence[int], padding: str = "zero") -> TensorDescriptor:
        """The descriptor of all of ``tensor``: its own shape and strides (NumPy's byte
        strides converted to elements)."""
        if _KIND_OF_TYPE.get(type(tensor)) == "torch":  # strides in elements already: nothing to convert
            # The block shape a list the descriptor watches, so that a launch may reuse what
            # it passed last time while nothing changed (VERSION).
            return TensorDescriptor(tensor, tensor.shape, tensor.stride(), WatchedList(block_shape), padding)
        try:
            base = _describe_base(tensor)
        except TypeError as error:
            raise TypeError(f"TensorDescriptor.from_tensor: {error}") from None
        if base.kind == "torch tensor":
            block_shape = WatchedList(block_shape)
        return TensorDescriptor(tensor, tensor.shape, _element_strides(tensor, base), block_shape, padding)

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

    def problems(self) -> list[str]:
        """Every rule this descriptor breaks, each as a sentence that says why the rule
        exists; empty when it is valid.  Reads the fields as they are now."""
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
            for field, entries in (("strides", strides), ("block_shape", block)):
                if entries is not None and len(entries) != rank:
                    problems.append(f"{field} has {_entries(len(entries))} but shape has {_entries(rank)}: "
                                    f"a descriptor needs one per dimension")
            for i, n in enumerate(shape):
                if n is not None and n <= 0:
                    problems.append(f"shape[{i}] = {n} is not positive: a descriptor describes a tensor "
                                    f"with at least one element in each dimension")

        if base is not None and base.address is not None and base.address % ALIGNMENT:
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
