"""The kernel language: ``import polytile.language as pl``.

The names mirror ``triton.language``: dtypes (``pl.float32`` ...), ``pl.constexpr``,
``pl.tensor``, and builtins (``pl.program_id``, ``pl.load``, ``pl.sum``, ``pl.dot`` ...)
that a ``@jit`` kernel calls.  See docs/language.md for what works today.
"""

from __future__ import annotations

import importlib
from typing import Any

from .core import (
    KernelContext,
    PropagateNan,
    bfloat16,
    const,
    constexpr,
    dtype,
    float8e4nv,
    float8e4b8,
    float8e4b15,
    float8e5,
    float8e5b16,
    float16,
    float32,
    float64,
    int1,
    int8,
    int16,
    int32,
    int64,
    pointer_type,
    tensor,
    uint8,
    uint16,
    uint32,
    uint64,
)
#: The builtins, by the module that defines them: imported on first use, so that importing a
#: kernel module (which a launch from the disk cache does) costs only the dtypes and
#: ``constexpr``; tracing a kernel imports the rest.
_HOMES = {
    "abs": "standard", "advance": "block", "arange": "standard", "argmax": "reductions", "argmin": "reductions",
    "associative_scan": "scan", "atomic_add": "atomic", "atomic_and": "atomic", "atomic_cas": "atomic",
    "atomic_max": "atomic", "atomic_min": "atomic", "atomic_or": "atomic", "atomic_xchg": "atomic",
    "atomic_xor": "atomic", "broadcast": "standard", "broadcast_to": "standard", "cast": "standard",
    "cat": "shape", "cdiv": "standard", "ceil": "standard", "clamp": "standard", "cos": "standard",
    "cumprod": "scan", "cumsum": "scan", "debug_barrier": "debug", "device_assert": "debug",
    "device_print": "debug", "div_rn": "standard", "dot": "standard", "erf": "standard", "exp": "standard",
    "exp2": "standard", "expand_dims": "standard", "fdiv": "standard", "floor": "standard", "fma": "standard",
    "full": "standard", "full_like": "standard", "join": "shape", "load": "standard", "log": "standard",
    "log2": "standard", "make_block_ptr": "block", "max": "standard", "max_constancy": "standard",
    "max_contiguous": "standard", "maximum": "standard", "min": "standard", "minimum": "standard",
    "multiple_of": "standard", "num_programs": "standard", "permute": "standard", "philox": "random",
    "program_id": "standard", "rand": "random", "rand4x": "random", "randint": "random", "randint4x": "random",
    "randn": "random", "randn4x": "random", "range": "standard", "reduce": "standard", "reshape": "standard",
    "rsqrt": "standard", "sigmoid": "standard", "sin": "standard", "softmax": "standard", "split": "shape",
    "sqrt": "standard", "sqrt_rn": "standard", "static_assert": "standard", "static_print": "standard",
    "static_range": "standard", "store": "standard", "sum": "standard", "trans": "standard", "umulhi": "standard",
    "view": "standard", "where": "standard", "xor_sum": "standard", "zeros": "standard", "zeros_like": "standard",
    "WarpSpecialize": "loop_options", "interleave": "shape", "assume": "standard",
    "flip": "sorting", "sort": "sorting", "topk": "sorting", "gather": "shape", "ravel": "shape",
    "inline_asm_elementwise": "assembly", "histogram": "reductions", "dot_scaled": "scaled_dot",
}

#: Submodules that are namespaces of builtins, as Triton's (``pl.math.exp``).
_NAMESPACES = ("math", "extra")

# Triton spells the fp8 types several ways; these are the ones the IR has.
float8e4m3 = float8e4nv
float8e5m2 = float8e5
bool_ = int1
#: Triton's name for a pointer to int32.
pi32_t = pointer_type(int32)

__all__ = sorted([*(name for name in globals() if not name.startswith("_")
                    and name not in ("annotations", "importlib", "Any")), *_HOMES, *_NAMESPACES])


def __getattr__(name: str) -> Any:
    if name in _NAMESPACES:  # Triton's tl.math: a module of builtins
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    home = _HOMES.get(name)
    if home is None:
        # Neither dunder probes (copy, pickle) nor the import system asking for a submodule
        # not yet imported (`from polytile.language import semantic`) ask the plugins.
        if name.startswith("__") or name in _submodules():
            raise AttributeError(f"module 'polytile.language' has no attribute '{name}'")
        extensions = importlib.import_module(".extensions", __name__)

        value = extensions.plugin_builtin(name)
        if value is None:
            raise AttributeError(extensions.missing_name_message(name))
        return value
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def _submodules() -> frozenset:
    global _SUBMODULES
    if _SUBMODULES is None:
        import pkgutil

        _SUBMODULES = frozenset(info.name for info in pkgutil.iter_modules(__path__))
    return _SUBMODULES


_SUBMODULES: frozenset | None = None


def __dir__() -> list[str]:
    return list(__all__)
