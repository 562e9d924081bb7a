"""What a launch argument specializes to, found with cheap per-type probes.

A launch turns each run-time argument into a *key piece*: a small hashable value that
determines the argument's IR type and its specialization hints (16-byte divisibility,
``== 1``), and nothing else.  The piece comes from a *probe* chosen once per Python type
(``type(x)`` -> probe, one dict get), so a launch never asks ``isinstance`` questions
or converts arrays: a NumPy array is ``(dtype, aligned)``, a torch tensor
``(torch dtype, aligned)``, an int ``"i32:D"``.  Only when the key is new (a cache miss)
does :func:`describe_argument` turn the piece into an IR type, with an error naming the
kernel and the argument if the value cannot be passed.

A probe that cannot key a value (an int wider than 64 bits, a torch tensor NumPy cannot
view, a ``pl.constexpr`` wrapper) returns a fresh :class:`Unkeyed`, equal only to itself:
that launch takes the slow path, which explains or handles it.
"""

from __future__ import annotations

import keyword
import numbers
import operator
from typing import Any, Callable, Hashable

import numpy as np

from ..errors import ArgumentOverflowError, LaunchError
from ..ir import types as t
from ..language import core as lc
from .args import as_writable_array, dlpack_element_and_address, is_torch_tensor, numpy_address


class Unkeyed:
    """A key piece equal only to itself: the launch is a miss and takes the slow path."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unkeyed>"


class ArgumentKind:
    """How the arguments of one Python type specialize.

    ``probe(x)`` and ``plain(x)`` (for ``do_not_specialize`` parameters: no hints) return
    the key piece; ``describe(piece, error)`` returns ``(IR type, hint)`` for a piece of
    this kind, calling ``error(reason)`` for one no kernel can take.

    ``inline``, when set, is ``(condition, probe, plain)``: Python expressions over ``{x}``
    computing the same pieces without a call, which the entry point writes out for the
    types a parameter was first launched with (``condition`` narrows the type check, as
    an int range does; ``{p}`` is the entry's name prefix, and ``names`` the values
    those expressions read, by name without the prefix).
    """

    __slots__ = ("name", "probe", "plain", "describe", "inline", "names", "adapter")

    def __init__(self, name: str, probe: Callable[[Any], Hashable], plain: Callable[[Any], Hashable],
                 describe: Callable[[Any, Callable[[str], Exception]], tuple[t.Type, str]],
                 inline: tuple[str, str, str] | None = None, names: dict[str, Any] | None = None,
                 adapter: Any = None):
        self.name = name
        self.probe = probe
        self.plain = plain
        self.describe = describe
        self.inline = inline
        self.names = names or {}
        #: The plugin's ArgumentAdapter for a type a plugin adapts (.adapters), else None.
        self.adapter = adapter


# -- scalars ------------------------------------------------------------------------------
# Scalar pieces are strings "<ir type>" or "<ir type>:<hint>" ("i32:D", "i64:1"); two kinds
# giving the same string (a Python int and an np.int32) pass the same way.

_SCALAR_TYPES = {str(ty): ty for ty in (t.i1, t.i8, t.i16, t.i32, t.i64, t.u8, t.u16, t.u32, t.u64,
                                        t.f16, t.bf16, t.f32, t.f64)}


def _describe_scalar(piece: Any, error: Callable[[str], Exception]) -> tuple[t.Type, str]:
    if isinstance(piece, Unkeyed):
        raise error("does not fit in 64 bits")
    name, _, hint = piece.partition(":")
    return _SCALAR_TYPES[name], hint


def _int_piece(x: int) -> Any:
    # Python ints take the narrowest of i32, i64, u64 that holds them, as in Triton.
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return "i32:1" if x == 1 else "i32" if x & 15 else "i32:D"
    if -0x8000000000000000 <= x <= 0x7FFFFFFFFFFFFFFF:
        return "i64:1" if x == 1 else "i64" if x & 15 else "i64:D"
    if 0 <= x <= 0xFFFFFFFFFFFFFFFF:
        return "u64" if x & 15 else "u64:D"
    return Unkeyed()


def _int_plain(x: int) -> Any:
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return "i32"
    if -0x8000000000000000 <= x <= 0x7FFFFFFFFFFFFFFF:
        return "i64"
    if 0 <= x <= 0xFFFFFFFFFFFFFFFF:
        return "u64"
    return Unkeyed()


def _constant(piece: str) -> Callable[[Any], str]:
    return lambda x: piece


def _hinted_integer(ir: str) -> tuple[Callable[[Any], str], Callable[[Any], str]]:
    one, divisible = f"{ir}:1", f"{ir}:D"
    return (lambda x: one if x == 1 else ir if x % 16 else divisible), _constant(ir)


def _numpy_scalar_kind(cls: type) -> ArgumentKind:
    element = lc.NUMPY_TO_DTYPE.get(np.dtype(cls).name)
    if element is None:
        dtype = np.dtype(cls)

        def refuse(piece: Any, error: Callable[[str], Exception]) -> tuple[t.Type, str]:
            raise error(f"has NumPy type {dtype}, which kernels cannot take")

        unkeyed = lambda x: Unkeyed()  # noqa: E731
        return ArgumentKind(f"numpy {dtype}", unkeyed, unkeyed, refuse)
    ir = str(element.ir)
    if isinstance(element.ir, t.IntType) and element.ir != t.i1:
        probe, plain = _hinted_integer(ir)
    else:
        probe = plain = _constant(ir)
    return ArgumentKind(f"numpy {ir}", probe, plain, _describe_scalar)


# -- arrays -------------------------------------------------------------------------------
# Array pieces are ``(element token, aligned)`` (``aligned`` is None for do_not_specialize
# parameters); the token is what the array library calls its dtype, named on a miss.

#: Element names (NumPy's, torch's, DLPack's) -> language dtypes.
_ELEMENT_NAMES = {**{str(d): d for d in lc._ALL_DTYPES},  # a reinterpret()ed tensor's: its language dtype
                  **lc.NUMPY_TO_DTYPE, "bfloat16": lc.bfloat16, "float8_e4m3fn": lc.float8e4nv,
                  "float8_e5m2": lc.float8e5}


def _describe_array(token_name: Callable[[Any], str], library: str) -> Callable[..., tuple[t.Type, str]]:
    def describe(piece: Any, error: Callable[[str], Exception]) -> tuple[t.Type, str]:
        if isinstance(piece, Unkeyed):
            raise error(f"is a {library} whose memory cannot be read")
        token, aligned = piece
        name = token_name(token)
        element = _ELEMENT_NAMES.get(name)
        if element is None:
            raise error(f"is an array of {name}, which kernels cannot take")
        return t.PointerType(element.ir), "D" if aligned else ""

    return describe


def _numpy_name(token: Any) -> str:
    try:
        return np.dtype(token).name
    except TypeError:
        return str(token)


def _torch_name(token: Any) -> str:
    return str(token).rsplit(".", 1)[-1]


def _array_kind(name: str, element: Callable[[Any], Any], address: Callable[[Any], int],
                token_name: Callable[[Any], str], library: str) -> ArgumentKind:
    def probe(x: Any) -> Any:
        return element(x), not address(x) & 15

    def plain(x: Any) -> Any:
        return element(x), None

    return ArgumentKind(name, probe, plain, _describe_array(token_name, library))


def _ndarray_kind() -> ArgumentKind:
    address = numpy_address()
    offset = getattr(address, "offset", None)
    if offset is None:
        return _array_kind("numpy array", lambda x: x.dtype, address, _numpy_name, "NumPy array")
    memory = address.memory  # type: ignore[attr-defined]

    # The hottest probe of all, written out: no call for the address.
    def probe(x: Any) -> Any:
        return x.dtype, not memory[(id(x) + offset) >> 3] & 15

    def plain(x: Any) -> Any:
        return x.dtype, None

    return ArgumentKind("numpy array", probe, plain, _describe_array(_numpy_name, "NumPy array"),
                        inline=("", f"({{x}}.dtype, not {{p}}memory[({{p}}id({{x}}) + {offset}) >> 3] & 15)",
                                "({x}.dtype, None)"),
                        names={"memory": memory})


def _interface_kind(attribute: str, library: str) -> ArgumentKind:
    def probe(x: Any) -> Any:
        interface = getattr(x, attribute)
        data = interface.get("data")
        if data is None:  # memory through the buffer protocol: NumPy finds the address
            array = np.asarray(x)
            return array.dtype, not numpy_address()(array) & 15
        return interface["typestr"], not data[0] & 15

    def plain(x: Any) -> Any:
        return getattr(x, attribute)["typestr"], None

    return ArgumentKind(library, probe, plain, _describe_array(_numpy_name, library))


def _dlpack_kind() -> ArgumentKind:
    def probe(x: Any) -> Any:
        try:
            name, address = dlpack_element_and_address(x)
        except (BufferError, TypeError, ValueError, RuntimeError, AttributeError):
            return Unkeyed()
        return name, not address & 15

    def plain(x: Any) -> Any:
        piece = probe(x)
        return piece if isinstance(piece, Unkeyed) else (piece[0], None)

    return ArgumentKind("DLPack object", probe, plain, _describe_array(str, "DLPack object"))


def _host_view_kind() -> ArgumentKind:
    """torch-like objects without a dtype: viewed as NumPy arrays at each launch."""
    array_kind = _ndarray_kind()

    def view(x: Any) -> Any:
        try:
            return as_writable_array("", "", x, ValueError)
        except ValueError:
            return None

    def probe(x: Any) -> Any:
        array = view(x)
        return Unkeyed() if array is None else array_kind.probe(array)

    def plain(x: Any) -> Any:
        array = view(x)
        return Unkeyed() if array is None else array_kind.plain(array)

    return ArgumentKind("array view", probe, plain, _describe_array(_numpy_name, "tensor"))


# -- the per-type registry ----------------------------------------------------------------

_KINDS: dict[type, ArgumentKind] = {}
#: ``type -> probe`` and ``type -> plain probe``: what a launch looks up, one get per argument.
PROBES: dict[type, Callable[[Any], Hashable]] = {}
PLAIN_PROBES: dict[type, Callable[[Any], Hashable]] = {}


def _make_kind(cls: type, value: Any) -> ArgumentKind | None:
    if issubclass(cls, (bool, np.bool_)):
        return ArgumentKind("bool", _constant("i1"), _constant("i1"), _describe_scalar, inline=("", "'i1'", "'i1'"))
    if issubclass(cls, int):
        return ArgumentKind("int", _int_piece, _int_plain, _describe_scalar,
                            inline=(" and -0x80000000 <= {x} <= 0x7FFFFFFF",
                                    "'i32:1' if {x} == 1 else 'i32' if {x} & 15 else 'i32:D'", "'i32'"))
    if issubclass(cls, float):
        return ArgumentKind("float", _constant("f32"), _constant("f32"), _describe_scalar,
                            inline=("", "'f32'", "'f32'"))
    if issubclass(cls, np.generic):
        return _numpy_scalar_kind(cls)
    if issubclass(cls, np.ndarray):
        return _ndarray_kind()
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):  # torch, and what copies its protocol
        kind = _array_kind("tensor", lambda x: x.dtype, lambda x: x.data_ptr(), _torch_name, "tensor")
        kind.inline = ("", "({x}.dtype, not {x}.data_ptr() & 15)", "({x}.dtype, None)")
        return kind
    if is_torch_tensor(value):
        return _host_view_kind()
    if hasattr(value, "__cuda_array_interface__"):
        return _interface_kind("__cuda_array_interface__", "CUDA array")
    if hasattr(value, "__array_interface__"):
        return _interface_kind("__array_interface__", "array")
    if hasattr(value, "__dlpack__"):
        return _dlpack_kind()
    from .adapters import adapter_for

    adapter = adapter_for(value)
    return None if adapter is None else _adapted_kind(adapter)


def _adapted_kind(adapter: Any) -> ArgumentKind:
    """A plugin's argument type (a tensor descriptor): keyed, typed and checked by its adapter."""
    from .adapters import AdaptedPiece

    def probe(x: Any) -> Any:
        return AdaptedPiece(adapter, adapter.key(x))

    def describe(piece: Any, error: Callable[[str], Exception]) -> tuple[t.Type, str]:
        return adapter.ir_type(piece.key), ""

    return ArgumentKind(adapter.name, probe, probe, describe, adapter=adapter)


def forget_adapted_kinds() -> None:
    """Drop the kinds plugins' adapters gave (the set of plugins changed): the next launch
    with such a value asks the plugins again."""
    for cls in [cls for cls, kind in _KINDS.items() if kind.adapter is not None]:
        for table in (_KINDS, PROBES, PLAIN_PROBES):
            table.pop(cls, None)


def adapter_of(value: Any) -> Any:
    """The plugin adapter ``value`` passes through, or None (plain arrays and numbers)."""
    kind = kind_of(value)
    return None if kind is None else kind.adapter


def kind_of(value: Any) -> ArgumentKind | None:
    """The kind of ``value``'s type (made and remembered on first sight), or None for a
    type no kernel takes (and for ``pl.constexpr`` wrappers, unwrapped by the slow path)."""
    cls = type(value)
    kind = _KINDS.get(cls)
    if kind is None and cls is not lc.constexpr and value is not None:
        kind = _make_kind(cls, value)
        if kind is not None:
            _KINDS[cls] = kind
            PROBES[cls] = kind.probe
            PLAIN_PROBES[cls] = kind.plain
    return kind


def probe_new(value: Any) -> Hashable:
    """The piece of a value whose type has no probe yet (it gets one, if it can)."""
    if value is None:
        return None
    kind = kind_of(value)
    return Unkeyed() if kind is None else kind.probe(value)


def plain_new(value: Any) -> Hashable:
    if value is None:
        return None
    kind = kind_of(value)
    return Unkeyed() if kind is None else kind.plain(value)


PROBES[type(None)] = PLAIN_PROBES[type(None)] = _constant(None)  # type: ignore[assignment]


def describe_argument(kernel: str, name: str, value: Any, specialize: bool = True) -> tuple[t.Type, str]:
    """The IR type a run-time argument passes as, and its hint (``"D"``, ``"1"`` or ``""``)."""
    def error(reason: str) -> Exception:
        return _launch_error(f"kernel '{kernel}': argument '{name}' {reason}")

    kind = kind_of(value)
    if kind is None:
        owner = _unloaded_plugin_of(type(value))
        if owner is not None:
            raise _launch_error(
                f"kernel '{kernel}': argument '{name}' is a {type(value).__module__}.{type(value).__qualname__}, from "
                f"the package of {owner.info.describe()}, which would pass it to kernels, but that plugin is "
                f"{owner.reason or owner.status} (see `polytile info`)")
        raise _launch_error(
            f"kernel '{kernel}': argument '{name}' is {type(value).__name__} {_short_repr(value)}; kernels take NumPy arrays "
            "(or torch tensors, objects with __cuda_array_interface__, __array_interface__ or DLPack), Python "
            "numbers and bools (or constexpr parameters)")
    if isinstance(value, int) and not isinstance(value, bool) and isinstance(_int_plain(value), Unkeyed):
        raise ArgumentOverflowError(f"kernel '{kernel}': argument '{name}' = {value} does not fit in 64 bits "
                                    "(integers pass as i32, i64 or u64)")
    if is_torch_tensor(value) and kind.name == "array view":
        as_writable_array(kernel, name, value, _launch_error)  # raises what is wrong with it
    piece = kind.probe(value) if specialize else kind.plain(value)
    return kind.describe(piece, error)


def _unloaded_plugin_of(value_type: type) -> Any:
    """The disabled or failed plugin whose package ``value_type`` comes from (its entry
    point's top-level package), or None: what an argument of that type needed."""
    module = getattr(value_type, "__module__", "") or ""
    if module in ("builtins", "__main__") or module.startswith("polytile."):
        return None
    from ..plugins.manager import get_plugin_manager
    from ..plugins.records import LOADED

    package = module.split(".", 1)[0]
    for record in get_plugin_manager().plugins():
        if record.status != LOADED and record.group != "builtin" and \
                record.value.split(":", 1)[0].split(".", 1)[0] == package:
            return record
    return None


def _short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut short: a list of a million numbers must not flood the message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 5]} ...{text[-1] if text[-1] in ')]}' else ''}"


def constexpr_piece(value: Any) -> Hashable:
    """The key piece of a constexpr value that is not an ``int``: typed, so that ``True``,
    ``1`` and ``1.0`` (equal in Python) stay three specializations."""
    value = lc.unwrap(value)
    cls = type(value)
    if cls is int:
        return value
    if cls is tuple or cls is list:
        return cls, tuple(constexpr_piece(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return cls, repr(value)
    return cls, value


def _launch_error(message: str) -> Exception:
    return LaunchError(message)


# -- the generated entry point ------------------------------------------------------------


class _Missing:
    """The default the entry point gives a required parameter, to report it missing in
    the runtime's words rather than Python's."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def option_key(options: dict) -> Hashable:
    """The key piece of the launch options given (in the order given: the same call site
    gives the same order, and another order only costs another hot-cache entry)."""
    items = tuple(options.items())
    try:
        hash(items)
    except TypeError:
        return Unkeyed()
    return items


#: The largest grid on each axis, the same on every target: CUDA's and HIP's limits (x up
#: to 2**31 - 1 blocks, y and z up to 65535), which the interpreter keeps too, so that a
#: grid that runs on one target runs on all of them.
MAX_GRID = (2**31 - 1, 65535, 65535)


def _grid_entry(value: Any) -> int:
    """One axis of a grid as an int: a Python int, a NumPy integer or a 0-d integer
    tensor (anything with ``__index__``); bools, floats and strings raise TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError
    return operator.index(value)


def make_grid3(kernel: str, error: Callable[[str], Exception]) -> Callable[[Any], tuple[int, int, int]]:
    """``grid3(grid)``: the grid as a 3-tuple of ints within :data:`MAX_GRID`, or ``error``.

    A grid entry must be an integer: a float (``n / BLOCK`` instead of ``pl.cdiv``), a bool
    or a string is an error naming the axis, never truncated to some number of programs."""
    limit_x, limit_y, limit_z = MAX_GRID

    def slow(grid: Any) -> tuple[int, int, int]:
        if isinstance(grid, (list, tuple)):
            items = tuple(grid)
        elif isinstance(grid, (numbers.Number, np.generic)) or hasattr(grid, "__index__"):
            # kernel[4] is kernel[(4,)]; _grid_entry judges the number
            items = (grid,)
        else:
            raise error(f"kernel '{kernel}': the grid must be a tuple of 1 to 3 integers "
                        f"(or a callable returning one), got {grid!r}")
        if not 1 <= len(items) <= 3:
            raise error(f"kernel '{kernel}': the grid must be a tuple of 1 to 3 integers, got {len(items)} "
                        f"entries: {grid!r}")
        counts = []
        for axis, value in enumerate(items):
            try:
                count = _grid_entry(value)
            except (TypeError, ValueError, RuntimeError):
                hint = (" (use pl.cdiv(n, BLOCK), or //, for a number of programs)"
                        if isinstance(value, (float, np.floating)) else "")
                raise error(f"kernel '{kernel}': grid {grid!r}: axis {axis} must be an integer, got "
                            f"{value!r} ({type(value).__name__}){hint}") from None
            if count < 0:
                raise error(f"kernel '{kernel}': grid {grid!r}: axis {axis} must be non-negative, got {count}")
            if count > MAX_GRID[axis]:
                raise error(f"kernel '{kernel}': grid {grid!r}: axis {axis} has {count} programs, more than the "
                            f"{MAX_GRID[axis]} allowed on that axis (on every target); use bigger blocks or loop "
                            "inside the kernel")
            counts.append(count)
        return tuple(counts + [1, 1])[:3]  # type: ignore[return-value]

    def grid3(grid: Any) -> tuple[int, int, int]:
        if type(grid) is tuple:
            n = len(grid)
            if n == 1:
                x = grid[0]
                if type(x) is int and 0 <= x <= limit_x:
                    return x, 1, 1
            elif n == 2:
                x, y = grid
                if type(x) is int and type(y) is int and 0 <= x <= limit_x and 0 <= y <= limit_y:
                    return x, y, 1
            elif n == 3:
                x, y, z = grid
                if (type(x) is int and type(y) is int and type(z) is int
                        and 0 <= x <= limit_x and 0 <= y <= limit_y and 0 <= z <= limit_z):
                    return grid
        return slow(grid)

    return grid3


def make_entry(kernel: str, signature: Any, constexprs: set[str], plain: frozenset, *, hot: dict,
               miss: Callable, fail: Callable, grid3: Callable,
               seen: dict[str, type] | None = None) -> Callable:
    """The launch entry point of one ``@jit`` function, as generated Python source.

    ``entry(grid, *args, **kwargs)`` has the kernel's own parameters and defaults, so
    Python binds the arguments; it builds the key from one probe per argument, looks it
    up in ``hot`` (one dict get), calls ``miss(key, all values, options)`` on a miss
    (which returns the compiled kernel and the run-time values to pass), normalises the
    grid and calls the compiled kernel's launcher.  A callable grid receives the
    arguments by name over the launch options given over ``compiled.grid_defaults``
    (the backend's option values, ``num_warps``...), as in Triton.  Launch options (``num_warps``,
    ``target``...) arrive in ``**options``.  A required parameter defaults to
    :data:`MISSING` and ``fail(extra positionals, values, options)`` reports it, with
    any surplus positional argument, in the runtime's words.

    ``seen`` gives, by parameter, the type of an argument launched before: for it the
    probe is written out inline behind a ``type(x) is T`` check (saving a dict get and a
    call per argument); other types take the per-type probe.
    """
    names = list(signature.parameters)
    prefix = "_pt_"
    while any(name.startswith(prefix) for name in names):
        prefix = "_" + prefix
    p = prefix
    namespace: dict[str, Any] = {
        f"{p}M": MISSING, f"{p}get": PROBES.get, f"{p}new": probe_new, f"{p}pget": PLAIN_PROBES.get,
        f"{p}pnew": plain_new, f"{p}cx": constexpr_piece, f"{p}optkey": option_key, f"{p}hot": hot,
        f"{p}miss": miss, f"{p}fail": fail, f"{p}grid3": grid3, f"{p}tuple": tuple,
        # Builtins under the prefix too: a parameter may be named ``type``, ``len``...
        f"{p}type": type, f"{p}int": int, f"{p}len": len, f"{p}callable": callable, f"{p}id": id,
    }
    params = [f"{p}grid"]
    required = []
    pieces = []
    runtime = []
    probes = []
    star_done = False
    last_positional_only = None
    for index, (name, param) in enumerate(signature.parameters.items()):
        if param.kind is param.KEYWORD_ONLY and not star_done:
            params.append(f"*{p}more")
            star_done = True
        if param.default is param.empty:
            params.append(f"{name}={p}M")
            required.append(name)
        else:
            namespace[f"{p}d{index}"] = param.default
            params.append(f"{name}={p}d{index}")
        if param.kind is param.POSITIONAL_ONLY:
            last_positional_only = len(params)
        if name in constexprs:
            pieces.append(f"{name} if {p}type({name}) is {p}int else {p}cx({name})")
        else:
            generic = f"{p}pget({p}type({name}), {p}pnew)({name})" if name in plain else \
                f"{p}get({p}type({name}), {p}new)({name})"
            kind = _KINDS.get((seen or {}).get(name))  # type: ignore[arg-type]
            if kind is not None and kind.inline is not None:
                condition, specialized, unspecialized = kind.inline
                namespace[f"{p}t{index}"] = seen[name]  # type: ignore[index]
                for key, value in kind.names.items():
                    namespace[p + key] = value
                expression = (unspecialized if name in plain else specialized).format(x=name, p=p)
                probes += [f"    if {p}type({name}) is {p}t{index}{condition.format(x=name, p=p)}:",
                           f"        {p}p{index} = {expression}",
                           "    else:",
                           f"        {p}p{index} = {generic}"]
                pieces.append(f"{p}p{index}")
            else:
                pieces.append(generic)
            runtime.append(name)
    if last_positional_only is not None:
        params.insert(last_positional_only, "/")
    if not star_done:
        params.append(f"*{p}more")
    params.append(f"**{p}opts")
    pieces.append(f"{p}optkey({p}opts) if {p}opts else None")
    every = "".join(f"{name}, " for name in names)
    check = " or ".join([f"{p}more"] + [f"{name} is {p}M" for name in required])
    meta = ", ".join(f"{name!r}: {name}" for name in names)
    function = kernel if kernel.isidentifier() and not keyword.iskeyword(kernel) \
        and not kernel.startswith(prefix) else "kernel"
    lines = [
        f"def {function}({', '.join(params)}):",
        f"    if {check}:",
        f"        {p}fail({p}more, ({every}), {p}opts)",
        *probes,
        f"    {p}key = ({''.join(piece + ', ' for piece in pieces)})",
        f"    {p}values = ({''.join(name + ', ' for name in runtime)})",
        f"    {p}k = {p}hot.get({p}key)",
        f"    if {p}k is None or ({p}k.guard is not None and not {p}k.guard()):",
        f"        {p}k, {p}values = {p}miss({p}key, ({every}), {p}opts)",
        f"    if {p}type({p}grid) is {p}tuple and {p}len({p}grid) == 1:",
        f"        {p}g = {p}grid[0]",
        f"        if {p}type({p}g) is {p}int and 0 <= {p}g <= {MAX_GRID[0]}:",
        f"            {p}k.launcher(({p}g, 1, 1), {p}values)",
        f"            return {p}k",
        f"    elif {p}callable({p}grid):",
        f"        {p}grid = {p}grid({{**{p}k.grid_defaults, **{p}opts, {meta}}})",
        f"    {p}k.launcher({p}grid3({p}grid), {p}values)",
        f"    return {p}k",
    ]
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<polytile launcher of {kernel}>", "exec"), namespace)  # noqa: S102 - our own source
    entry = namespace[function]
    entry.__polytile_source__ = source
    return entry


def make_namer(kernel: str, signature: Any, error: Callable[[str], Exception]) -> Callable[..., dict]:
    """``named(*args, **kwargs)``: the arguments by name, defaults filled in for the
    parameters not given (one without a default that was not given is left out), other
    keywords (launch options, meta-parameters a tuner adds) kept.  For ``@autotune`` keys
    and ``@heuristics``, at every launch, so generated like :func:`make_entry`."""
    names = list(signature.parameters)
    prefix = "_pt_"
    while any(name.startswith(prefix) for name in names):
        prefix = "_" + prefix
    p = prefix
    namespace: dict[str, Any] = {f"{p}M": MISSING, f"{p}error": error, f"{p}len": len}
    params = []
    star_done = False
    last_positional_only = None
    for index, (name, param) in enumerate(signature.parameters.items()):
        if param.kind is param.KEYWORD_ONLY and not star_done:
            params.append(f"*{p}more")
            star_done = True
        if param.default is param.empty:
            params.append(f"{name}={p}M")
        else:
            namespace[f"{p}d{index}"] = param.default
            params.append(f"{name}={p}d{index}")
        if param.kind is param.POSITIONAL_ONLY:
            last_positional_only = len(params)
    if last_positional_only is not None:
        params.insert(last_positional_only, "/")
    if not star_done:
        params.append(f"*{p}more")
    params.append(f"**{p}extra")
    entries = ", ".join(f"{name!r}: {name}" for name in names)
    source = (
        f"def named({', '.join(params)}):\n"
        f"    if {p}more:\n"
        f"        raise {p}error({kernel!r}, {p}len({p}more))\n"
        f"    {p}named = {{k: v for k, v in {{{entries}}}.items() if v is not {p}M}}\n"
        f"    if {p}extra:\n"
        f"        {p}named.update({p}extra)\n"
        f"    return {p}named\n"
    )
    namespace[f"{p}error"] = lambda kernel_name, extra: error(
        f"'{kernel_name}': too many positional arguments (it takes at most {len(names)}, got {len(names) + extra})")
    exec(compile(source, f"<polytile argument names of {kernel}>", "exec"), namespace)  # noqa: S102 - our own source
    return namespace["named"]
