"""The contract between the core and a backend distribution.

A backend is data plus a few hooks: its name, the architectures it compiles for, its
typed options, how it finds devices, and the stages it adds to the pass pipeline.  A
backend package provides an instance through the ``polytile_register_backends`` hook
(see :mod:`polytile.plugins.hookspecs`).  Vendor modules (``cuda.bindings``, ``hip``)
are imported inside :meth:`Backend.active_devices` and the driver, never at import time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, NamedTuple, Protocol, Sequence

from .errors import ConfigError, LaunchError, NumWarpsError, TargetError, UnknownNameError
from .target import Target


class Device(NamedTuple):
    """One device a backend can run kernels on right now."""

    target: Target
    name: str
    index: int = 0
    properties: Mapping[str, Any] = MappingProxyType({})


class BackendUnavailable(Exception):
    """Raised by :meth:`Backend.active_devices` when the vendor runtime is missing.

    The message says what is missing ("libcuda.so not found"); ``polytile info`` shows it
    as the reason the backend has no device.  It is not an error for the user.
    """


@dataclass(frozen=True)
class BackendOptions:
    """Options common to every backend; a backend subclasses this with its own fields."""

    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False
    #: Let the compiler contract ``a * b + c`` into one fused multiply-add, rounded once
    #: (Triton's option, on by default; it changes results in the last bit).  GPU
    #: backends mark float adds, subtracts and multiplies ``contract`` in the LLVM IR
    #: (``polytile.llvm_codegen.allow_contraction``); the interpreter never fuses, which
    #: either value allows.
    enable_fp_fusion: bool = True


#: Compile metadata of a kernel with global scratch (polytile.gpu.global_scratch): the
#: bytes each program needs, their alignment, and what needs them; and the name of the
#: hidden last parameter the launch passes them in (polytile.runtime.allocator).
GLOBAL_SCRATCH_BYTES = "global_scratch_bytes"
GLOBAL_SCRATCH_ALIGNMENT = "global_scratch_alignment"
GLOBAL_SCRATCH_USERS = "global_scratch_users"
GLOBAL_SCRATCH_PARAMETER = "global_scratch"


class LaunchParam(NamedTuple):
    """One run-time parameter of a compiled kernel, as its launcher receives it."""

    name: str
    #: The IR type (``polytile.ir.types``): a ``PointerType`` or a scalar type.
    type: Any
    #: 16 when the kernel was specialized for a value (an address, for a pointer)
    #: divisible by 16, else 1.
    divisibility: int = 1
    #: The kernel was specialized for the integer 1.
    equal_to_1: bool = False


class ArgumentSlot(NamedTuple):
    """Where one run-time parameter lies in a kernel's parameter buffer, in bytes."""

    size: int
    alignment: int
    offset: int


class ArgumentLayout(NamedTuple):
    """The parameter buffer of a compiled kernel: one slot per run-time parameter, in
    order, and the bytes the caller passes (what the runtime appends after, such as AMD's
    hidden arguments, not counted)."""

    slots: tuple[ArgumentSlot, ...]
    size: int


def natural_argument_layout(types: Sequence[Any]) -> ArgumentLayout:
    """Each parameter at its natural alignment (at most 8), pointers 8 bytes, ``i1`` one
    byte, one after the other: how CUDA's and HIP's launch calls pack them.  ``types``
    are IR types; one with no layout is a ``ValueError`` naming it."""
    from .ir import types as t

    slots, offset = [], 0
    for type_ in types:
        if isinstance(type_, t.PointerType):
            size = 8
        elif isinstance(type_, t.ScalarType):
            size = max(1, type_.width // 8)
        else:
            raise ValueError(f"parameters of type {type_} have no known layout in the parameter buffer")
        alignment = min(size, 8)
        offset += -offset % alignment
        slots.append(ArgumentSlot(size, alignment, offset))
        offset += size
    return ArgumentLayout(tuple(slots), offset)


class Launcher(Protocol):
    """What :meth:`Backend.make_launcher` returns; called once per launch."""

    def __call__(self, grid: tuple[int, int, int], args: Sequence[Any]) -> None: ...


class Backend:
    """Base class of every backend.  Subclasses set the class attributes and override
    the hooks they need.

    **Launching.**  A backend that runs kernels overrides :meth:`make_launcher` (or, more
    simply but slower, defines ``launch(module, kernel_name, grid, args)``, which the
    default :meth:`make_launcher` wraps).  :meth:`make_launcher` is called once per
    compiled specialization, when the runtime creates its ``CompiledKernel``; the
    launcher it returns is then called on every launch, so all the work that does not
    depend on the argument values (loading the module, looking the function up, planning
    how to pack the arguments) belongs in :meth:`make_launcher`.
    """

    #: Short name, the part of a target before ``:`` ("nvidia", "amd", "interp").
    name: ClassVar[str] = ""
    #: One line for ``polytile info``.
    description: ClassVar[str] = ""
    #: Architectures this backend compiles for; empty for a backend without architectures.
    architectures: ClassVar[tuple[str, ...]] = ()
    #: Architecture used for ``backend`` alone (``--target nvidia``), if any.
    default_architecture: ClassVar[str | None] = None
    #: The dataclass holding this backend's typed options.
    options_class: ClassVar[type[BackendOptions]] = BackendOptions

    def resolve_target(self, target: Target) -> Target:
        """Check ``target`` against this backend and fill in the default architecture."""
        if target.backend != self.name:
            raise TargetError(f"backend '{self.name}' cannot compile for target '{target}'")
        if not self.architectures:
            if target.arch is not None:
                raise TargetError(f"target '{target}': backend '{self.name}' takes no architecture; use '{self.name}'")
            return target
        arch = target.arch or self.default_architecture
        if arch is None:
            raise TargetError(
                f"target '{target}' names no architecture; use one of "
                + ", ".join(f"'{self.name}:{a}'" for a in self.architectures)
            )
        if arch not in self.architectures:
            from .errors import did_you_mean

            raise TargetError(f"target '{target}': backend '{self.name}' has no architecture '{arch}'"
                              f"{did_you_mean(arch, self.architectures)} (it has {', '.join(self.architectures)})")
        return Target(self.name, arch)

    def parse_options(self, options: Mapping[str, Any]) -> BackendOptions:
        """Turn user-given options (``num_warps=8``) into this backend's options object.

        Unknown names are an error listing close matches; values are checked against the
        field's type.
        """
        known = {f.name: f for f in dataclasses.fields(self.options_class)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise UnknownNameError(f"option for backend '{self.name}'", key, known)
            expected = known[key].type
            expected_type = {"int": int, "bool": bool, "float": float, "str": str}.get(
                expected if isinstance(expected, str) else getattr(expected, "__name__", ""), None
            )
            if expected_type is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"option '{key}' of backend '{self.name}' must be an integer, got {value!r}")
            if expected_type is bool and not isinstance(value, bool):
                raise ConfigError(f"option '{key}' of backend '{self.name}' must be True or False, got {value!r}")
            values[key] = value
        parsed = self.options_class(**values)
        self.check_options(parsed)
        return parsed

    def check_options(self, options: BackendOptions) -> None:
        """Reject option values this backend cannot honour (raise ``ConfigError``)."""
        if options.num_warps < 1 or options.num_warps & (options.num_warps - 1):
            raise NumWarpsError(f"option 'num_warps' must be a power of 2 (1, 2, 4, 8, ...), got {options.num_warps}")
        if options.num_stages < 1:
            raise ConfigError(f"option 'num_stages' must be >= 1, got {options.num_stages}")

    def active_devices(self) -> list[Device]:
        """The devices present now.  Import vendor modules here, lazily.

        Return ``[]`` when the runtime is present but no device is; raise
        :class:`BackendUnavailable` with a short reason when the runtime itself is missing.
        """
        return []

    def host_device(self) -> Device | None:
        """The device a backend that runs kernels on the host stands for when it has no
        hardware (the interpreter: the CPU, with its core count as
        ``multiprocessor_count``); None for a hardware backend."""
        return None

    def configure_pipeline(self, *, pipeline: Any, target: Target, options: BackendOptions) -> None:
        """Append this backend's stages to ``pipeline`` (the core's tile stage is already there)."""

    def versions(self) -> Mapping[str, str]:
        """Toolchain versions that must enter the compile cache key (``{"llvmlite": "0.50"}``)."""
        return {}

    def argument_layout(self, *, kernel_name: str, params: Sequence[LaunchParam],
                        metadata: Mapping[str, Any]) -> ArgumentLayout:
        """Where each run-time parameter of a compiled kernel lies in its parameter buffer
        (what ahead-of-time compiles write for a C launcher).

        :param kernel_name: the kernel function's name.
        :param params: its run-time parameters, in order.
        :param metadata: the compile result's metadata (``CompileResult.metadata``), where
            a backend finds what its binary declares.
        :return: one :class:`ArgumentSlot` per entry of ``params``.

        The default is :func:`natural_argument_layout`; a backend whose binary declares its
        own offsets (AMD's code object notes) returns those.
        """
        return natural_argument_layout([param.type for param in params])

    def synchronize(self) -> None:
        """Return once every kernel this backend launched from this thread (on its current
        device) has finished.  The autotuner times its trials with it.  The default is
        for backends whose launches return when the kernel is done (the interpreter)."""

    def threads_per_warp(self, target: Target) -> int:
        """Threads of one warp (wavefront) on ``target``: what ``pl.extra.cuda.num_threads()``
        multiplies ``num_warps`` by.  32 unless the backend says otherwise."""
        return 32

    def can_launch(self) -> bool:
        """Whether this backend runs kernels (else the runtime falls back to the
        interpreter when no target was asked for, and says so when one was)."""
        return type(self).make_launcher is not Backend.make_launcher

    def make_launcher(self, *, compiled: Any, kernel_name: str, params: Sequence[LaunchParam],
                      options: BackendOptions) -> Launcher:
        """Return the launcher of one compiled specialization.

        :param compiled: the runtime's ``CompiledKernel``: ``compiled.module`` (the IR
            after the pipeline), ``compiled.binaries`` (``{"cubin": b"..."}``: what
            this backend's compile result listed in ``binaries``, also after an on-disk
            cache hit), ``compiled.metadata`` (the JSON-able dict its result listed in
            ``metadata``, shared memory bytes and the like), ``compiled.target``.
        :param kernel_name: the kernel function's name in the module.
        :param params: the kernel's run-time parameters, in order (constexpr parameters
            and arguments passed as ``None`` are compiled in and not passed).
        :param options: the parsed options the kernel was compiled with (``num_warps``...).
        :return: a callable ``launcher(grid, args)``, called on every launch with
            ``grid`` a tuple of three non-negative ints and ``args`` one value per entry
            of ``params``: the objects the caller passed, unconverted (a torch tensor, a
            CuPy or NumPy array, anything with ``__cuda_array_interface__`` or DLPack,
            for a pointer; a Python or NumPy scalar otherwise; ``pl.constexpr`` wrappers
            removed).  Their types match ``params`` (the runtime checked them when it
            specialized); the launcher reads the addresses, packs the values by IR type,
            launches, and raises :class:`~polytile.errors.LaunchError` naming the kernel and the
            argument for one it cannot pass (a tensor on another device, say).  It must
            not keep ``args`` after it returns.

        The default raises :class:`~polytile.errors.LaunchError`: the backend compiles
        but cannot launch (see :meth:`can_launch`).  The interpreter's launcher, which
        views pointer arguments as NumPy arrays of the caller's memory, is in
        :mod:`polytile.interpreter.plugin`.
        """
        raise LaunchError(f"kernel '{kernel_name}': backend '{self.name}' compiles but cannot launch kernels")


# --------------------------------------------------------------------------------------
# Helpers for backends that talk to a vendor runtime through Python bindings whose calls
# return ``(error, *values)`` tuples (cuda-bindings, hip-python).


def import_vendor_module(module: str, *, distribution: str, install_hint: str, runtime: str,
                         missing_names: tuple[str, ...] = ()) -> Any:
    """Import ``module`` lazily; say what is missing as :class:`BackendUnavailable`.

    A missing package (``missing_names``: the module and its parents) reads "X is not
    installed (install hint)"; any other import failure means the bindings are there but
    the vendor runtime library is not: "<runtime> not found: ...".
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name in (None, *missing_names):
            raise BackendUnavailable(f"{distribution} is not installed ({install_hint})") from exc
        raise BackendUnavailable(f"{runtime} not found: {distribution} failed to import: {exc}") from exc
    except (ImportError, OSError, RuntimeError) as exc:
        raise BackendUnavailable(f"{runtime} not found: {distribution} failed to import: {exc}") from exc


def vendor_error_name(err: Any) -> str:
    return getattr(err, "name", None) or str(err)


def check_vendor_call(result: tuple, call: str, *, success: str, runtime: str) -> Any:
    """The values of a binding call's ``(error, *values)`` result, or BackendUnavailable."""
    err, *values = result
    if vendor_error_name(err) != success:
        raise BackendUnavailable(f"{runtime} call {call} failed with {vendor_error_name(err)}")
    return values[0] if len(values) == 1 else tuple(values)


def installed_versions(*distributions: str) -> dict[str, str]:
    """Versions of the installed distributions among ``distributions`` (for cache keys)."""
    # Not importlib.metadata: importing it costs ~20 ms, and a backend's versions enter
    # the key of every launch that reads its kernel from the disk cache.  The plugin
    # manager's reader of *.dist-info folders answers by importlib.metadata's rules.
    from .plugins.distributions import installed_versions as read

    return read(*distributions)
