"""What one compilation of a ``@jit`` function is: :class:`CompiledKernel` (the module,
its backend, and the launcher the backend made for it), the :class:`Specialization` a
launch's arguments make, and :class:`MockTensor`, the stand-in for an array that
``warmup`` compiles for.  The JIT (:mod:`.jit`) finds and makes them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

from ..backend import (GLOBAL_SCRATCH_ALIGNMENT, GLOBAL_SCRATCH_BYTES, GLOBAL_SCRATCH_PARAMETER, GLOBAL_SCRATCH_USERS,
                       LaunchParam)
from ..errors import PolytileError
from ..ir import types as t
from ..language import core as lc
from .adapters import flattening_launcher
from .allocator import scratch_launcher
from .cache import globals_guard


class CompiledKernel:
    """One specialization compiled for one target: the module, its backend, and the
    launcher the backend made for it (once, here)."""

    def __init__(self, name: str, module: Any, target: Any, backend: Any, run_params: list[str],
                 globals_used: list, result: Any = None, cache_key: str | None = None, from_disk: bool = False, *,
                 options: Any = None, params: tuple[LaunchParam, ...] | None = None, binaries: dict | None = None,
                 metadata: dict | None = None, select: tuple[int, ...] | None = None, ir_text: str | None = None,
                 adapters: list | None = None, rebuild: Callable[[], Any] | None = None):
        self.name = name
        #: For a kernel read from the disk cache: compiles it again (bypassing the cache)
        #: and returns the ``CompileResult``, for ``asm`` keys the cache does not keep.
        self.rebuild = rebuild
        #: The IR text of a kernel read from the disk cache with ``module`` None: parsed on first use.
        self._ir_text = ir_text
        self.module = module
        self.target = target
        self.backend = backend
        self.run_params = run_params
        self.globals_used = globals_used
        #: The ``CompileResult`` (None for a kernel read from the on-disk cache).
        self.result = result
        #: The on-disk cache key (None when the cache is off).
        self.cache_key = cache_key
        self.from_disk = from_disk
        #: The parsed backend options it was compiled with.
        self.options = options if options is not None else backend.parse_options({})
        #: Its run-time parameters (name, IR type, hints), as the launcher receives them.
        self.params = params if params is not None else tuple(LaunchParam(n, None) for n in run_params)
        #: Backend artifacts (``{"cubin": b"..."}``) and their JSON-able metadata.
        self.binaries = dict(binaries or {})
        self.metadata = dict(metadata or {})
        #: Option values a callable grid sees (``meta["num_warps"]``) unless given at the
        #: launch, as in Triton; the JIT function leaves out names of its parameters.
        self.grid_defaults = dataclasses.asdict(self.options) if dataclasses.is_dataclass(self.options) else {}
        #: None, or a function saying whether the compile-time globals it read are unchanged.
        self.guard = globals_guard(globals_used)
        #: Bytes of global scratch each program needs (polytile.set_allocator), or 0.
        self.global_scratch = int(self.metadata.get(GLOBAL_SCRATCH_BYTES, 0))
        params = self.params
        if self.global_scratch:
            # The launch's scratch is the kernel's hidden last parameter.
            params = (*params, LaunchParam(GLOBAL_SCRATCH_PARAMETER, t.PointerType(t.i8), divisibility=16))
        launcher = backend.make_launcher(compiled=self, kernel_name=name, params=params, options=self.options)
        #: The backend's launcher itself (``launcher`` below may wrap it).
        self.backend_launcher = launcher
        #: ``allocation(programs) -> (memory, address)`` for a kernel with global scratch
        #: (what a backend's native dispatcher calls at each launch), else None.
        self.scratch_allocation = None
        if self.global_scratch:
            launcher = scratch_launcher(launcher, name, self.global_scratch,
                                        int(self.metadata.get(GLOBAL_SCRATCH_ALIGNMENT, 16)),
                                        list(self.metadata.get(GLOBAL_SCRATCH_USERS, ())))
            self.scratch_allocation = launcher.allocation
        if adapters is not None and any(a is not None for a in adapters):
            # Arguments a plugin adapts (tensor descriptors) pass as their parts.
            launcher = flattening_launcher(launcher, adapters)
        if select is not None:
            # Some run-time parameters were passed None and compiled in: the launch's
            # values include them, the launcher does not take them.
            inner = launcher

            def launcher(grid: tuple[int, int, int], args: Any, _inner: Any = inner, _select: Any = select) -> None:
                _inner(grid, [args[i] for i in _select])

        #: ``launcher(grid3, args)``: what every launch of this specialization calls.
        self.launcher = launcher

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} for {self.target}>"

    @property
    def module(self) -> Any:
        """The kernel's IR after the pipeline.  A GPU kernel read from the disk cache
        launches from its binary, so its IR is parsed only when something asks for it."""
        if self._module is None and self._ir_text is not None:
            module = parse_cached(self._ir_text)
            if module is None:
                raise PolytileError(f"kernel '{self.name}': the IR kept with it in the disk cache (entry "
                                    f"{self.cache_key}) does not parse; delete that entry to compile it again")
            self._module, self._ir_text = module, None
        return self._module

    @module.setter
    def module(self, module: Any) -> None:
        self._module = module

    @property
    def asm(self) -> "KernelAssembly":
        """What the compile made, by name, as Triton's ``CompiledKernel.asm``:
        ``asm["ir"]`` (the IR after the pipeline), ``asm["llir"]`` (LLVM IR; also
        ``"llvm_ir"``), ``asm["ptx"]`` and ``asm["cubin"]`` on NVIDIA, ``asm["amdgcn"]``
        and ``asm["hsaco"]`` on AMD."""
        return KernelAssembly(self)


class KernelAssembly(Mapping):
    """``CompiledKernel.asm``: the IR, and the text and binary artifacts of the compile.

    A kernel read from the on-disk cache kept only its IR and binary: asked for anything
    else, it compiles again (once, bypassing the cache) to have them."""

    #: Triton's names for artifacts polytile names otherwise.
    ALIASES = {"llir": "llvm_ir"}

    def __init__(self, kernel: CompiledKernel):
        self._kernel = kernel

    def _artifacts(self) -> dict[str, Any]:
        kernel = self._kernel
        if kernel.result is None and kernel.rebuild is not None:
            kernel.result, kernel.rebuild = kernel.rebuild(), None
        found = dict(kernel.binaries)
        if kernel.result is not None:
            from ..passes.instrumentation import file_artifacts

            found.update(file_artifacts(kernel.result.artifacts))  # text and bytes, not values
        return found

    def __getitem__(self, key: str) -> Any:
        if key == "ir":
            from ..ir import print_ir

            return print_ir(self._kernel.module)
        if key in self._kernel.binaries:
            return self._kernel.binaries[key]
        artifacts = self._artifacts()
        name = self.ALIASES.get(key, key)
        if name not in artifacts:
            raise KeyError(f"kernel '{self._kernel.name}' for {self._kernel.target} has no {key!r}; it has "
                           + ", ".join(repr(k) for k in self))
        return artifacts[name]

    def __iter__(self) -> Any:
        names = ["ir", *self._artifacts()]
        if "llvm_ir" in names:
            names.append("llir")
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Specialization(NamedTuple):
    """What one launch's arguments make of the kernel."""

    key: tuple
    arg_types: dict
    constexprs: dict
    values: list
    #: Per run-time argument (in order): ``"D"`` divisible by 16, ``"1"`` equal to 1, ``""``.
    hints: tuple
    #: Run-time arguments a plugin adapts (a tensor descriptor): name -> AdaptedPiece.
    adapted: dict | None = None


class MockTensor:
    """An array of ``dtype`` known only by its element type, for ``warmup``: Triton's
    ``kernel.warmup(torch.float32, ...)`` compiles for a pointer to that type (assumed
    16-byte aligned, as a fresh allocation is)."""

    def __init__(self, dtype: Any):
        self.dtype = dtype

    def data_ptr(self) -> int:
        return 0

    @staticmethod
    def wrap_dtype(value: Any) -> Any:
        """``value`` as a :class:`MockTensor` where it is an element type (a torch dtype,
        a NumPy dtype or scalar type, a ``polytile.language`` dtype), else itself."""
        import numpy as np

        cls = type(value)
        if isinstance(value, lc.dtype) or isinstance(value, np.dtype) or \
                (cls.__module__ == "torch" and cls.__name__ == "dtype"):
            return MockTensor(value)
        if isinstance(value, type) and issubclass(value, np.generic):
            return MockTensor(np.dtype(value))
        return value


def parse_cached(text: str) -> Any:
    """The module of a cache entry, or None when it does not parse or verify (an entry
    from an older IR syntax, say): recompiled then, never trusted."""
    from ..ir import parse_module, verify

    try:
        module = parse_module(text, "<kernel cache>")
        verify(module)
        return module
    except PolytileError:
        return None


__all__ = ["CompiledKernel", "MockTensor", "Specialization", "parse_cached"]
