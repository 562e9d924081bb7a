"""Which globals (and closure variables) a kernel may read.

A kernel is compiled with the values of the globals it reads folded into its code, and
the compiled kernel is reused, in the process and from the disk cache, for as long as
those values are the same. That is only sound for values the cache key and the launch
guard can compare (:func:`polytile.runtime.cache.constant_globals`): numbers, strings,
bools, None, dtypes and tuples of them, plain or wrapped in ``pl.constexpr``. Modules,
classes and functions (``@jit`` ones included) are read for what they name, not folded.

Anything else, a list, a dict, a set, a NumPy array, an object whose attributes the
kernel reads, can change after the kernel was compiled without the kernel noticing, so
the old code would run with the old value: a silent wrong result. As in Triton, reading
one is a compile error that says to use a tuple or ``pl.constexpr``.
"""

from __future__ import annotations

import types
from typing import Any

from ..language import core as lc

_SCALARS = (bool, int, float, str, type(None), lc.dtype)


def is_keyed_constant(value: Any) -> bool:
    """True for a value the cache key and the launch guard compare by value."""
    if isinstance(value, tuple):
        return all(is_keyed_constant(item) for item in value)
    return isinstance(value, _SCALARS)


def refusal(value: Any) -> str | None:
    """None when a kernel may read ``value`` from a global; else what it is, in words."""
    inner = value.value if isinstance(value, lc.constexpr) else value
    if is_keyed_constant(inner) or isinstance(inner, (types.ModuleType, type)) or callable(inner):
        return None
    if isinstance(inner, tuple):
        odd = next(item for item in inner if not is_keyed_constant(item))
        return f"a tuple holding {_a(odd)}"
    return _a(inner)


def _a(value: Any) -> str:
    name = type(value).__name__
    if name == "ndarray":
        return "a NumPy array"
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def refusal_message(name: str, value: Any) -> str | None:
    """The compile error for a kernel reading global ``name`` = ``value``, or None."""
    what = refusal(value)
    if what is None:
        return None
    return (f"the kernel reads the global '{name}', which is {what}: its value is folded into the compiled "
            f"kernel, and {what.split(' holding ')[0]} can change afterwards without the kernel seeing it, so old "
            "code would run. Use a value that cannot change: a tuple of numbers or strings, or "
            f"{name.rsplit('.', 1)[-1]} = pl.constexpr(...) of a number, string, dtype or such a tuple (or pass it "
            "to the kernel as an argument)")
