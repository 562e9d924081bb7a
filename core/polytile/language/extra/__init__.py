"""Triton's ``tl.extra``: ``libdevice`` (the C math library's functions, on every target)
and the vendor namespaces ``cuda`` and ``hip`` (each with the same ``libdevice``).

Plugins add names here too (``pl.extra.cuda.experimental_device_tensormap_create2d`` of
polytile-tma, through ``polytile_register_builtins`` with ``namespace="extra.cuda"``): a
name this package does not define is looked up among theirs, and a missing one says which
distribution provides it.  Both spellings work, as in Triton::

    from polytile.language.extra import libdevice           # tl.extra.libdevice
    from polytile.language.extra.cuda import libdevice      # tl.extra.cuda.libdevice
    y = pl.extra.cuda.libdevice.tanh(x)
"""

from __future__ import annotations

from typing import Any

from ..extensions import namespace_attribute, namespace_names

_SUBMODULES = ("cuda", "hip", "libdevice")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        import importlib

        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    return namespace_attribute(__name__, "extra", name)


def __dir__() -> list[str]:
    return sorted({*_SUBMODULES, *namespace_names("extra")})
