"""The language suite's ``compile`` target: every launch is also compiled for every GPU
arch in CI (issues 4 and 5), then runs on the interpreter so the test's own assertions hold.

At each launch the launched specialization goes through the frontend once and through
each arch's real pipeline (the backend stages, assembling with ptxas / nvJitLink and
ld.lld included).  Each artifact is then checked: the PTX declares the kernel for the
arch and the cubin is a CUDA ELF holding it; the HSACO's metadata note names the kernel
symbol, the kernarg size of the parameters, the arch's wavefront size and the LDS bytes
the allocation computed.  A compile failure fails the test and names the arch.

Results are kept per (kernel specialization, options, arch) for the session, so a kernel
launched by many tests (or many times by one) compiles once per arch.

Which archs: ``PT_TEST_ARCHS`` (read once, by the session's first compile-all test), a comma-separated list
of targets such as ``nvidia:sm_90a,amd:gfx942``; unset or ``all``: :data:`DEFAULT_ARCHS`.
It is not a ``POLYTILE_*`` variable: tests/conftest.py removes those from every test.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any

import pytest

from polytile.errors import PolytileError
from polytile.ir_testing import compile_for_targets
from tests.toolchains import REQUIRE_LLD_VARIABLE, missing_linker

#: What CI compiles every language-suite kernel for.
DEFAULT_ARCHS = ("nvidia:sm_80", "nvidia:sm_86", "nvidia:sm_89", "nvidia:sm_90a",
                 "amd:gfx90a", "amd:gfx942", "amd:gfx950", "amd:gfx1100")

ARCHS_VARIABLE = "PT_TEST_ARCHS"

#: Launch keywords that are compile options (the rest of ``polytile.runtime.jit``'s
#: launch options are accepted and ignored by every backend).
_OPTION_NAMES = ("num_warps", "num_stages", "debug")

_ELF_MACHINE_CUDA = 190


def selected_archs() -> tuple[str, ...]:
    """The archs of :data:`ARCHS_VARIABLE`, or :data:`DEFAULT_ARCHS`."""
    text = os.environ.get(ARCHS_VARIABLE, "").strip()
    if not text or text == "all":
        return DEFAULT_ARCHS
    archs = tuple(item.strip() for item in text.split(",") if item.strip())
    unknown = [a for a in archs if ":" not in a]
    if unknown:
        raise pytest.UsageError(f"{ARCHS_VARIABLE}={text!r}: {', '.join(unknown)} is not a target; write "
                                "backend:arch, such as nvidia:sm_90a or amd:gfx942")
    return archs


class CompileTarget(str):
    """The value the ``target`` fixture gives for the compile-all run: equal to
    ``"interp"`` (the kernel executes there, and tests that branch on the target take the
    interpreter's branch), and recognisable so that only the launches a test makes with
    its fixture's target are compiled for the GPU archs."""

    def __new__(cls) -> "CompileTarget":
        return super().__new__(cls, "interp")


@dataclass(frozen=True)
class ExpectedError:
    """A kernel an arch cannot compile, and the polytile error that says so."""

    test: str  # the test's name without parameters, e.g. "test_dtypes.py::test_fp8_roundtrip"
    arch: str
    message: str  # a substring of the error, naming the op and the arch
    reason: str


#: Kernels an arch truly cannot support (an op the hardware lacks).  The test asserts the
#: error is exactly this one; a kernel of the list that compiles fails the test too, so
#: the list never goes stale.  docs/gpu-testing.md explains it.
EXPECTED_ERRORS: tuple[ExpectedError, ...] = ()


class ArchCompiler:
    """Compiles launched specializations for every arch, once per session each."""

    def __init__(self, archs: tuple[str, ...]):
        self.archs = archs
        #: Per launched specialization: each arch's error, or None.  Only the outcome is
        #: kept: the compiled modules of the whole suite would not fit in memory.
        self._outcomes: dict[tuple, dict[str, BaseException | None]] = {}
        #: How many (specialization, arch) compilations ran: a launch seen before adds none.
        self.compilations = 0

    def check_launch(self, fn: Any, args: tuple, kwargs: dict, test: str) -> None:
        """Compile ``fn``'s specialization for these launch arguments for every arch and
        check each artifact; fail the test naming the arch on any error."""
        options = {k: kwargs[k] for k in _OPTION_NAMES if k in kwargs and k not in fn.param_names}
        launch_keywords = (*_OPTION_NAMES, "target", "num_ctas", "maxnreg")
        arguments = {k: v for k, v in kwargs.items() if k in fn.param_names or k not in launch_keywords}
        spec = fn.specialize(fn.bind(args, arguments))
        key = (fn, spec.key, tuple(sorted(options.items())))
        outcomes = self._outcomes.get(key)
        if outcomes is None:
            outcomes = self._outcomes[key] = self._compile(fn, spec, args, arguments, options)
        failures = []
        unlinked = []
        for arch, error in outcomes.items():
            expected = next((e for e in EXPECTED_ERRORS if e.test == test and e.arch == arch), None)
            if expected is not None and not missing_linker(error):
                if not isinstance(error, PolytileError) or expected.message not in str(error):
                    got = "it compiled" if error is None else f"got: {error}"
                    failures.append(f"{arch}: expected the error {expected.message!r} ({expected.reason}); {got}")
            elif missing_linker(error) and not os.environ.get(REQUIRE_LLD_VARIABLE):
                unlinked.append(arch)
            elif error is not None and not _missing_device_libs(error, arch):
                failures.append(f"{arch}: {type(error).__name__}: {error}")
        if failures:
            pytest.fail(f"kernel '{fn.__name__}' ({_describe(spec)}) does not compile for every arch:\n"
                        + "\n".join(failures), pytrace=False)
        if unlinked:
            # A GPU machine without network access may have no ld.lld (./dev setup installs
            # one; CI requires it): the other archs compiled, these could not be linked.
            pytest.skip(f"compiled for every arch but {', '.join(unlinked)}: ld.lld (the linker for AMD code "
                        "objects) not found here")

    def _compile(self, fn: Any, spec: Any, args: tuple, arguments: dict, options: dict) -> dict:
        from polytile.runtime.adapters import AdaptedPiece, expand_parameters
        from polytile.target import Target

        if not spec.adapted:
            groups = {None: self.archs}
        else:
            # A plugin's argument (a tensor descriptor) passes as its adapter for each
            # target says (a Hopper descriptor adds its tensor map): lowered per arch.
            groups = {arch: (arch,) for arch in self.archs}
        outcomes = {}
        for lowered_for, archs in groups.items():
            module = fn.lower_for(lowered_for, *args, **arguments)
            results = compile_for_targets(module, archs, label=fn.__name__, **options)
            self.compilations += len(results)
            adapted = spec.adapted
            if lowered_for is not None:
                target = Target.parse(lowered_for)
                adapted = {n: AdaptedPiece(p.adapter.for_target(target), p.key) for n, p in adapted.items()}
            # The kernel's parameters: a plugin's argument passes as its parts.
            param_types = [type_ for _, type_, _, _ in expand_parameters(list(spec.arg_types), spec.arg_types,
                                                                         spec.hints, adapted)]
            outcomes.update({arch: _outcome(result, arch, param_types) for arch, result in results.items()})
        return outcomes


def _missing_device_libs(error: BaseException, arch: str) -> bool:
    """True when ``error`` is the AMD backend's "device libraries not found" error on a
    machine that has none: the kernel needs ocml or ockl (a math function, device_print),
    and saying so clearly is the documented behaviour.  ./dev setup installs them where it
    can, so CI compiles these kernels for real."""
    if not arch.startswith("amd:"):
        return False
    from polytile_amd.errors import DeviceLibsMissingError
    from polytile_amd.toolchain import find_device_libs

    return isinstance(error, DeviceLibsMissingError) and find_device_libs() is None


def _outcome(result: Any, arch: str, param_types: list) -> BaseException | None:
    if isinstance(result, BaseException):
        return result
    problem = check_artifacts(result, arch, param_types)
    return AssertionError(problem) if problem else None


def _describe(spec: Any) -> str:
    types = ", ".join(f"{name}: {type_}" for name, type_ in spec.arg_types.items())
    constexprs = ", ".join(f"{name}={value!r}" for name, value in spec.constexprs.items())
    return "; ".join(part for part in (types, constexprs) if part)


def check_artifacts(result: Any, arch: str, param_types: list) -> str:
    """What is wrong with the compiled artifacts of ``result`` for ``arch``, or ""."""
    backend, _, chip = arch.partition(":")
    name = result.metadata.get("kernel_name", "")
    artifacts = result.artifacts
    if backend == "nvidia":
        ptx = artifacts.get("ptx", "")
        if f".entry {name}(" not in ptx and f".entry {name} (" not in ptx:
            return f"the PTX has no '.entry {name}'"
        if f".target {chip}" not in ptx:
            return f"the PTX does not say '.target {chip}'"
        cubin = artifacts.get("cubin", b"")
        if cubin[:4] != b"\x7fELF" or struct.unpack_from("<H", cubin, 18)[0] != _ELF_MACHINE_CUDA:
            return "the cubin is not a CUDA ELF file"
        wanted_sm = int(chip.removeprefix("sm_").rstrip("a"))
        if cubin_sm(cubin) != wanted_sm:
            return f"the cubin is for sm_{cubin_sm(cubin)}, not {chip}"
        if name.encode() + b"\0" not in cubin:
            return f"the cubin has no symbol '{name}'"
        return ""
    if backend == "amd":
        return _check_code_object(artifacts.get("hsaco", b""), name, chip, param_types,
                                  result.metadata.get("shared_bytes", 0))
    return ""


def cubin_sm(cubin: bytes) -> int:
    """The SM number a cubin was assembled for (90 for sm_90 and sm_90a), from the ELF
    header's e_flags; ELF ABI version 8 (CUDA 12.8 and later) moved it up one byte."""
    flags = struct.unpack_from("<I", cubin, 0x30)[0]
    return (flags >> 8) & 0xFF if cubin[8] >= 8 else flags & 0xFF


def _check_code_object(hsaco: bytes, name: str, chip: str, param_types: list, shared_bytes: int) -> str:
    from polytile.aot import argument_layout
    from polytile_amd.architectures import ARCHITECTURES
    from polytile_amd.codeobject import read_code_object

    code_object = read_code_object(hsaco)
    if code_object.arch != chip:
        return f"the code object is for {code_object.arch}, not {chip}"
    kernel = code_object.kernel(name)
    _, explicit = argument_layout(param_types)
    wanted = {
        "kernel symbol": (kernel.symbol, f"{name}.kd"),
        "explicit kernarg bytes": (kernel.explicit_size, explicit),
        "wavefront size": (kernel.wavefront_size, ARCHITECTURES[chip].wavefront_size),
    }
    wrong = [f"{what} is {got}, expected {expected}" for what, (got, expected) in wanted.items() if got != expected]
    # LLVM may shrink the LDS array to what the code touches (a scalar atomic's 4-byte
    # result in a 16-byte-aligned piece becomes an i32 global): never more than polytile
    # sized, and at least something where polytile sized anything.
    lds = kernel.group_segment_fixed_size
    if lds > shared_bytes or (shared_bytes and not lds):
        wrong.append(f"LDS bytes (group segment) is {lds}, expected at most {shared_bytes} (and some)")
    if kernel.kernarg_segment_size < explicit:
        wrong.append(f"kernarg segment of {kernel.kernarg_segment_size} bytes is smaller than the parameters' "
                     f"{explicit}")
    return "; ".join(f"code object note: {w}" for w in wrong)
