"""PTX to cubin: nvJitLink in process, or the ptxas executable.

The setting ``nvidia_assembler`` chooses.  At its default ('auto') nvJitLink links in
process when libnvJitLink loads, and ptxas runs otherwise (no ``nvidia-nvjitlink`` wheel,
no toolkit library: a development machine with only a toolkit still compiles); the
assembler in use enters the cache key.  A user who chose 'nvjitlink' gets an error when
it cannot load, since they asked for it.

nvJitLink compiles PTX as relocatable code (``ptxas -c``), and there ptxas ignores
``setmaxnreg`` "to maintain compatibility across compilation units" (C7504): a
warp-specialised kernel's consumers would keep the launch's register count and spill.
So at 'auto' a kernel whose PTX reallocates registers goes through the ptxas executable
(whole-program compilation) when one is found; without one, or with 'nvjitlink' chosen,
it is linked anyway and a warning says what is lost and how to get it back.

An assembler failure is a :class:`PTXAssemblyError` that names the kernel, gives the
assembler's own messages, and quotes the PTX lines they point at.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from polytile import config
from polytile.errors import ConfigError, PolytileError

from .toolchain import forget_toolchain_versions
from .toolchain import toolchain_versions  # noqa: F401 - long found here, by callers and tests
from .toolkit import find_ptxas

#: Lines of PTX shown around each line an assembler message points at.
_CONTEXT_LINES = 1
#: At most this many offending lines are quoted; later errors are usually consequences.
_MAX_QUOTED = 5
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


class PTXAssemblyError(PolytileError):
    """The assembler rejected the PTX of a kernel.

    ``log`` is the assembler's output, ``lines`` the PTX line numbers it points at, and
    ``ptx`` the whole input, for whoever wants to reproduce the failure by hand.
    """

    def __init__(self, kernel: str, arch: str, assembler: str, log: str, ptx: str):
        self.kernel = kernel
        self.arch = arch
        self.assembler = assembler
        self.log = log
        self.ptx = ptx
        self.lines = referenced_lines(log, ptx)
        text = f"kernel '{kernel}': {assembler} failed to assemble its PTX for {arch}:\n"
        text += "\n".join(f"  {line}" for line in log.strip().splitlines()) or "  (the assembler printed nothing)"
        if self.lines:
            text += "\n" + quote_ptx(ptx, self.lines)
        super().__init__(text)


class AssemblerUnavailableError(PolytileError):
    """The chosen assembler cannot run on this machine (library or executable missing)."""


@dataclass(frozen=True)
class AssembleFlags:
    """What the assemblers are asked to do, before each spells it its own way."""

    opt_level: int = 3
    maxnreg: int | None = None
    fmad: bool = True
    lineinfo: bool = False

    @classmethod
    def from_options(cls, options: Any) -> "AssembleFlags":
        """From :class:`~polytile_nvidia.backend.NvidiaOptions` (None: the defaults)."""
        if options is None:
            return cls()
        return cls(maxnreg=getattr(options, "maxnreg", None), fmad=getattr(options, "enable_fp_fusion", True),
                   lineinfo=bool(getattr(options, "debug", False)))


@dataclass(frozen=True)
class Assembled:
    """A cubin and what the assembler said while making it: its verbose report (registers,
    stack, spill stores and loads per function) and remarks about speed."""

    cubin: bytes
    log: str = ""
    #: Which assembler made it: 'nvjitlink' or 'ptxas'.
    assembler: str = ""


def assemble_ptx(ptx: str, arch: str, *, kernel_name: str, options: Any = None,
                 assembler: str | None = None) -> Assembled:
    """Assemble ``ptx`` for ``arch`` (``"sm_90a"``) into a cubin, with the assembler's report.

    ``options`` is the kernel's ``NvidiaOptions`` (maxnreg, enable_fp_fusion, debug) or
    None; ``assembler`` ('auto', 'nvjitlink', 'ptxas') overrides the setting
    ``nvidia_assembler``.  Raises :class:`PTXAssemblyError` when the PTX is rejected and
    :class:`AssemblerUnavailableError` when no assembler can run.
    """
    flags = AssembleFlags.from_options(options)
    name = select_assembler(assembler, ptx=ptx, kernel_name=kernel_name)
    return ASSEMBLERS[name].assemble(ptx, arch, flags, kernel_name)


#: PTX that ptxas honours only when it compiles the whole program: what, and the pattern.
_WHOLE_PROGRAM_FEATURES = (("setmaxnreg (register reallocation between warp groups)",
                            re.compile(r"^\s*setmaxnreg\.", re.MULTILINE)),)


def whole_program_feature(ptx: str) -> str | None:
    """What in ``ptx`` only whole-program compilation honours (relocatable compilation,
    which nvJitLink does, drops it), or None."""
    for what, pattern in _WHOLE_PROGRAM_FEATURES:
        if pattern.search(ptx):
            return what
    return None


def ptx_to_cubin(ptx: str, arch: str, *, kernel_name: str, options: Any = None, assembler: str | None = None) -> bytes:
    """The cubin of :func:`assemble_ptx`."""
    return assemble_ptx(ptx, arch, kernel_name=kernel_name, options=options, assembler=assembler).cubin


def ptxas_report(ptx: str, arch: str, *, kernel_name: str, options: Any = None) -> str:
    """ptxas's verbose report of ``ptx`` (registers, stack, spills), for when the cubin came
    from nvJitLink and its info log does not hold the kernel's report: on an H200 host
    with CUDA 13.0's nvJitLink (2026-11-26), some links in a test process returned a log
    without it, for a reason not yet understood.  "" when no ptxas runs here or it
    rejects the PTX."""
    try:
        return ASSEMBLERS["ptxas"].assemble(ptx, arch, AssembleFlags.from_options(options), kernel_name).log
    except (PolytileError, OSError):
        return ""


def select_assembler(explicit: str | None = None, *, ptx: str | None = None, kernel_name: str = "") -> str:
    """The assembler that will run: 'nvjitlink' or 'ptxas' (see the module docstring).
    With ``ptx``, the one for that PTX: the ptxas executable at 'auto' where the PTX needs
    whole-program compilation (:func:`whole_program_feature`) and ptxas is found."""
    choice = explicit if explicit is not None else config.get("nvidia_assembler")
    if choice not in ("auto", *ASSEMBLERS):
        raise ConfigError(f"unknown NVIDIA assembler {choice!r}; use 'auto', " + " or ".join(map(repr, ASSEMBLERS)))
    if choice == "ptxas":
        return "ptxas"
    problem = nvjitlink_problem()
    if problem is None:
        feature = whole_program_feature(ptx) if ptx is not None else None
        if feature is not None:
            if choice == "auto" and whole_program_assembler() is not None:
                return "ptxas"
            _warn_relocatable(kernel_name, feature, chosen=choice != "auto",
                              why=None if choice != "auto" else _whole_program_problem())
        return "nvjitlink"
    if choice == "nvjitlink":
        where = "the assembler= argument" if explicit is not None else config.source_of("nvidia_assembler")
        raise AssemblerUnavailableError(
            f"nvidia_assembler is 'nvjitlink' (from {where}), but nvJitLink cannot be used: {problem}. "
            "Install it (pip install nvidia-nvjitlink), or set nvidia_assembler to 'ptxas' "
            "(POLYTILE_NVIDIA_ASSEMBLER=ptxas) to run the ptxas executable instead")
    return "ptxas"


def whole_program_assembler() -> str | None:
    """The ptxas executable 'auto' runs for PTX that needs whole-program compilation, with
    its version ("ptxas 13.0.88"), or None when none is found, or the one found is older
    than nvJitLink (it may not know the PTX ISA version LLVM wrote for nvJitLink: a CUDA
    12.0 ptxas on the PATH beside CUDA 13.0's nvJitLink, say)."""
    return None if _whole_program_problem() is not None else f"ptxas {ptxas_version()}"


def _whole_program_problem() -> str | None:
    """Why 'auto' has no ptxas for whole-program compilation, in words, or None."""
    try:
        version = ptxas_version()
    except (PolytileError, OSError):
        return "no ptxas executable was found (the CUDA toolkit's, or pip install nvidia-cuda-nvcc)"
    try:
        linker = ASSEMBLERS["nvjitlink"].version()
    except (PolytileError, OSError):
        return None

    def release(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())

    if release(version) < release(linker):
        return (f"the ptxas found ({find_ptxas()}, {version}) is older than nvJitLink ({linker}), whose PTX it may "
                "not read")
    return None


_warned_relocatable: set = set()


def _warn_relocatable(kernel_name: str, feature: str, *, chosen: bool, why: str | None = None) -> None:
    import warnings

    if kernel_name in _warned_relocatable:
        return
    _warned_relocatable.add(kernel_name)
    why = "nvidia_assembler is 'nvjitlink'" if chosen else (why or "no ptxas executable was found")
    fix = ("set nvidia_assembler to 'auto' or 'ptxas'" if chosen else
           "install a ptxas as new as nvJitLink, or set ptxas_path (POLYTILE_PTXAS) to one")
    warnings.warn(f"kernel '{kernel_name}': its PTX uses {feature}, which nvJitLink's relocatable "
                  f"compilation ignores (ptxas C7504), so its warp groups keep the launch's register count "
                  f"and may spill; {why}. To compile it whole, {fix}.", RuntimeWarning, stacklevel=4)


# -- nvJitLink -------------------------------------------------------------------------


def _load_nvjitlink() -> Any:
    import cuda.bindings.nvjitlink as nvjitlink

    # The bindings import without the library; the first call is what loads it.
    nvjitlink.version()
    return nvjitlink


@functools.lru_cache(maxsize=None)
def _nvjitlink() -> tuple[Any, str | None]:
    try:
        return _load_nvjitlink(), None
    except ImportError as exc:
        return None, f"cuda-bindings is not installed ({exc})"
    except (RuntimeError, OSError) as exc:  # cuda-pathfinder raises a RuntimeError subclass
        return None, f"libnvJitLink could not be loaded ({' '.join(str(exc).split())})"
    except Exception as exc:  # nvJitLinkError derives from Exception only
        return None, f"libnvJitLink failed: {type(exc).__name__}: {exc}"


def nvjitlink_problem() -> str | None:
    """Why nvJitLink cannot be used here, or None if it can."""
    return _nvjitlink()[1]


class NvJitLinkAssembler:
    name = "nvjitlink"

    def flags(self, arch: str, flags: AssembleFlags) -> list[str]:
        # -verbose: ptxas's report of registers, stack and spills, into the info log.
        spelled = [f"-arch={arch}", f"-O{flags.opt_level}", "-verbose"]
        if flags.maxnreg is not None:
            spelled.append(f"-maxrregcount={flags.maxnreg}")
        if not flags.fmad:
            # nvJitLink's own -fma applies to LTO input only; PTX goes through ptxas.
            spelled.append("-Xptxas=--fmad=false")
        if flags.lineinfo:
            spelled.append("-lineinfo")
        return spelled

    def assemble(self, ptx: str, arch: str, flags: AssembleFlags, kernel_name: str) -> Assembled:
        nvjitlink, problem = _nvjitlink()
        if nvjitlink is None:
            raise AssemblerUnavailableError(f"kernel '{kernel_name}': nvJitLink cannot be used: {problem}")
        options = self.flags(arch, flags)
        data = ptx.encode()
        handle = nvjitlink.create(len(options), options)
        try:
            try:
                nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"{kernel_name}.ptx")
                nvjitlink.complete(handle)
            except nvjitlink.nvJitLinkError as exc:
                log = _nvjitlink_log(nvjitlink, handle) or str(exc)
                raise PTXAssemblyError(kernel_name, arch, "nvJitLink", log, ptx) from None
            cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, cubin)
            return Assembled(bytes(cubin), _nvjitlink_log(nvjitlink, handle, info=True), self.name)
        finally:
            nvjitlink.destroy(handle)

    def version(self) -> str:
        nvjitlink, problem = _nvjitlink()
        if nvjitlink is None:
            raise AssemblerUnavailableError(f"nvJitLink cannot be used: {problem}")
        major, minor = nvjitlink.version()
        return f"{major}.{minor}"


def _nvjitlink_log(nvjitlink: Any, handle: int, info: bool = False) -> str:
    """The error log, or with ``info`` the info log (what -verbose reports)."""
    size = (nvjitlink.get_info_log_size if info else nvjitlink.get_error_log_size)(handle)
    if not size:
        return ""
    log = bytearray(size)
    (nvjitlink.get_info_log if info else nvjitlink.get_error_log)(handle, log)
    return log.rstrip(b"\0").decode(errors="replace")


# -- ptxas -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _ptxas_version(path: str, mtime_ns: int) -> str:
    import subprocess

    result = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"\bV(\d+(?:\.\d+)+)", result.stdout) or re.search(r"release (\d+\.\d+)", result.stdout)
    if result.returncode != 0 or match is None:
        raise AssemblerUnavailableError(f"{path} --version did not report a version "
                                        f"(exit status {result.returncode}): {(result.stdout + result.stderr).strip()}")
    return match.group(1)


def ptxas_version(path: Path | None = None) -> str:
    """The version of ``path`` (default: :func:`find_ptxas`), like ``"13.0.88"``."""
    path = path or find_ptxas()
    return _ptxas_version(str(path), path.stat().st_mtime_ns)


class PtxasAssembler:
    name = "ptxas"

    def flags(self, arch: str, flags: AssembleFlags) -> list[str]:
        # --verbose: the report of registers, stack and spills, on its output.
        spelled = [f"--gpu-name={arch}", f"-O{flags.opt_level}", "--verbose"]
        if flags.maxnreg is not None:
            spelled.append(f"--maxrregcount={flags.maxnreg}")
        if not flags.fmad:
            spelled.append("--fmad=false")
        if flags.lineinfo:
            spelled.append("--generate-line-info")
        return spelled

    def assemble(self, ptx: str, arch: str, flags: AssembleFlags, kernel_name: str) -> Assembled:
        import subprocess

        from polytile.gpu.scratch import scratch_directory

        ptxas = find_ptxas()
        with scratch_directory("polytile-ptxas-", kernel=kernel_name, tool="ptxas",
                               error=AssemblerUnavailableError) as scratch:
            source = scratch / "kernel.ptx"
            target = scratch / "kernel.cubin"
            source.write_text(ptx)
            command = [str(ptxas), *self.flags(arch, flags), "--output-file", str(target), str(source)]
            try:
                result = subprocess.run(command, capture_output=True, text=True, check=False)
            except OSError as exc:
                raise AssemblerUnavailableError(f"kernel '{kernel_name}': could not run {ptxas}: {exc}") from None
            if result.returncode != 0 or not target.is_file():
                # The scratch path means nothing to the user; name the kernel instead.
                log = (result.stderr + result.stdout).replace(str(source), f"{kernel_name}.ptx")
                if not log.strip():
                    log = f"exit status {result.returncode}"
                raise PTXAssemblyError(kernel_name, arch, f"ptxas ({ptxas})", log, ptx)
            log = (result.stdout + result.stderr).replace(str(source), f"{kernel_name}.ptx")
            return Assembled(target.read_bytes(), log, self.name)

    def version(self) -> str:
        return ptxas_version()


#: Assemblers by the value of the setting ``nvidia_assembler``.
ASSEMBLERS: Mapping[str, Any] = {"nvjitlink": NvJitLinkAssembler(), "ptxas": PtxasAssembler()}


# -- error text ------------------------------------------------------------------------


def referenced_lines(log: str, ptx: str) -> list[int]:
    """PTX line numbers an assembler log points at ("..., line 12; error : ..."), in order."""
    count = ptx.count("\n") + 1
    lines: list[int] = []
    for match in _LINE_REFERENCE.finditer(log):
        number = int(match.group(1))
        if 1 <= number <= count and number not in lines:
            lines.append(number)
    return lines[:_MAX_QUOTED]


def quote_ptx(ptx: str, lines: list[int]) -> str:
    """The PTX lines ``lines`` with their numbers and a line of context each side; ``>``
    marks the lines the assembler named."""
    source = ptx.splitlines()
    shown = sorted({n for line in lines for n in range(line - _CONTEXT_LINES, line + _CONTEXT_LINES + 1)
                    if 1 <= n <= len(source)})
    width = len(str(shown[-1])) if shown else 1
    out = ["PTX " + ("line " if len(lines) == 1 else "lines ") + ", ".join(map(str, lines)) + ":"]
    previous = None
    for n in shown:
        if previous is not None and n != previous + 1:
            out.append("    " + "." * width)
        out.append(f"  {'>' if n in lines else ' '} {n:>{width}} | {source[n - 1]}")
        previous = n
    return "\n".join(out)


def clear_caches() -> None:
    """Forget what was found about the toolchain (for tests, and after installing one),
    in this process and in the cache directory."""
    _nvjitlink.cache_clear()
    _ptxas_version.cache_clear()
    forget_toolchain_versions()
