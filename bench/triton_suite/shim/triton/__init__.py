"""A ``triton`` package backed by polytile, for running Triton's own tests unchanged
(``python -m bench.triton_suite``); not for programs (they import polytile).

``triton.language`` (and every module under it), ``triton.testing`` and
``triton.tools.tensor_descriptor`` *are* polytile's modules (an import hook hands out
the same module objects); the rest of this package is the scaffolding Triton's test
files import around the language (``triton._internal_testing``, ``triton.knobs``,
``triton.runtime.driver``), written for polytile.  What polytile has no counterpart of
(``triton.compile``, Triton's own IR) raises an error that says so: the harness counts
such tests apart, as tests of Triton's internals.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: Triton module names that are polytile's modules, by prefix.
ALIASES = {
    "triton.language": "polytile.language",
    "triton.testing": "polytile.testing",
    "triton.tools.tensor_descriptor": "polytile.tools.tensor_descriptor",
}


class _SameModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``triton.language.X`` as the module object ``polytile.language.X`` (one
    module under two names: identity checks and registries stay single)."""

    def find_spec(self, fullname, path=None, target=None):
        if self._real_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    @staticmethod
    def _real_name(fullname: str):
        for prefix, real in ALIASES.items():
            if fullname == prefix or fullname.startswith(prefix + "."):
                return real + fullname[len(prefix):]
        return None

    def create_module(self, spec):
        return importlib.import_module(self._real_name(spec.name))

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _SameModules())

import polytile  # noqa: E402
import polytile.errors as _errors  # noqa: E402
import polytile.runtime as _runtime  # noqa: E402

from . import knobs  # noqa: E402,F401

language = importlib.import_module("triton.language")
jit = _runtime.jit
autotune = _runtime.autotune
heuristics = _runtime.heuristics
Config = _runtime.Config
cdiv = _runtime.cdiv
next_power_of_2 = _runtime.next_power_of_2
JITFunction = _runtime.JITFunction
reinterpret = _runtime.reinterpret
set_allocator = _runtime.set_allocator
TensorWrapper = _runtime.TensorWrapper
CompilationError = _errors.CompilationError
TritonError = _errors.PolytileError
OutOfResources = _errors.OutOfResourcesError
MockTensor = getattr(_runtime, "MockTensor", None)


class InternalsError(NotImplementedError):
    """A Triton internal polytile has no counterpart of (the harness counts its tests apart)."""


def compile(*args, **kwargs):
    raise InternalsError("triton.compile is Triton's compiler entry point (TTIR/TTGIR sources); polytile compiles "
                         "@jit kernels with kernel.warmup(...) or polytile.compiler.compile_module")


__version__ = "3.6.0+polytile"
