"""Where the AMD toolchain is on this machine: ld.lld and the ROCm device libraries.

Nothing here imports llvmlite or hip: ``AmdBackend.versions()`` (the compile cache key)
asks these questions on every compilation and must stay cheap.

ld.lld is found, first match wins, at: the setting ``amd_lld`` (``POLYTILE_AMD_LLD``; a
path or a command name; it must exist when set), ``<rocm_path>/llvm/bin/ld.lld`` and
``<rocm_path>/lib/llvm/bin/ld.lld``, the same under ``/opt/rocm``, ``ld.lld`` on ``PATH``,
then the highest ``ld.lld-NN`` on ``PATH`` and ``/usr/lib/llvm-NN/bin/ld.lld`` (Debian's
versioned packages).

The device libraries (the directory holding ``ocml.bc``) are found at: the setting
``amd_device_libs`` (it must hold ocml.bc when set), ``<rocm_path>/amdgcn/bitcode`` and
``<rocm_path>/lib/llvm/lib/clang/*/lib/amdgcn/bitcode``, the same under ``/opt/rocm`` and
``/opt/rocm-*`` (highest version first), then Debian's ``rocm-device-libs`` directories.

When something is not found, the error lists every place tried.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

from polytile import config
from polytile.errors import ConfigError

from .errors import ToolNotFoundError

_VERSIONED = re.compile(r"^ld\.lld-(\d+)$")
_DEBIAN_LLVM = re.compile(r"/llvm-(\d+)/bin/ld\.lld$")
_LLD_HINT = ("install lld (Debian/Ubuntu: apt-get install lld, or lld-19 or newer), or set 'amd_lld' "
             "(POLYTILE_AMD_LLD) to the ld.lld to use, or 'rocm_path' (ROCM_PATH) to a ROCm installation")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _configured_lld() -> Path | None:
    value = config.get("amd_lld")
    if value is None:
        return None
    found = shutil.which(str(value))
    if found is None or not _executable(Path(found)):
        raise ConfigError(f"setting 'amd_lld' (from {config.source_of('amd_lld')}) is {str(value)!r}, which is not an "
                          "executable file or a command on PATH; point it at ld.lld, or unset it to let polytile "
                          "search ROCm and PATH")
    return Path(found)


def _versioned_on_path() -> list[tuple[int, Path]]:
    found = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            match = _VERSIONED.match(name)
            if match and _executable(Path(directory, name)):
                found.append((int(match.group(1)), Path(directory, name)))
    for path in glob_paths("/usr/lib/llvm-*/bin/ld.lld"):
        match = _DEBIAN_LLVM.search(str(path))
        if match and _executable(path):
            found.append((int(match.group(1)), path))
    return sorted(found, key=lambda item: -item[0])


def glob_paths(pattern: str) -> list[Path]:
    return [Path(p) for p in glob.glob(pattern)]


def find_lld() -> Path:
    """The ld.lld to link with (see the module docstring); ToolNotFoundError lists the
    places tried."""
    configured = _configured_lld()
    if configured is not None:
        return configured
    looked = []
    rocm = config.get("rocm_path")
    roots = ([(Path(rocm), f"rocm_path, from {config.source_of('rocm_path')}")] if rocm else []) + \
        [(Path("/opt/rocm"), "ROCm installation")]
    for root, why in roots:
        for relative in ("llvm/bin/ld.lld", "lib/llvm/bin/ld.lld"):
            looked.append(f"{root / relative} ({why})")
            if _executable(root / relative):
                return root / relative
    plain = shutil.which("ld.lld")
    looked.append("ld.lld on PATH")
    if plain is not None:
        return Path(plain)
    looked.append("ld.lld-NN on PATH and /usr/lib/llvm-NN/bin/ld.lld (the highest NN)")
    versioned = _versioned_on_path()
    if versioned:
        return versioned[0][1]
    raise ToolNotFoundError("ld.lld (the linker for AMD code objects)", looked, _LLD_HINT)


@functools.lru_cache(maxsize=8)
def lld_version(path: Path) -> str:
    """``ld.lld --version``'s version number ("22.1.0"), or its first line."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc.__class__.__name__})"
    line = (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else ""
    match = re.search(r"LLD (\S+)", line)
    return match.group(1) if match else line or "unknown"


def toolchain_versions() -> dict[str, str]:
    """``{"ld.lld": "22.1.0"}``, or ``{"ld.lld": "not found"}`` (compiling then fails,
    saying where it looked)."""
    try:
        return {"ld.lld": lld_version(find_lld())}
    except (ToolNotFoundError, ConfigError):
        return {"ld.lld": "not found"}


OCML = "ocml.bc"

#: Device library directories of system packages (Debian and Ubuntu's rocm-device-libs).
SYSTEM_DIRECTORIES = ("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/amdgcn/bitcode",
                      "/usr/share/amdgcn/bitcode")
ROCM_ROOTS = ("/opt/rocm", "/opt/rocm-*")

_INSTALL_HINT = ("install ROCm's device libraries (the ROCm 'rocm-device-libs' package, or Debian's "
                 "'rocm-device-libs'), or point the setting 'amd_device_libs' (POLYTILE_AMD_DEVICE_LIBS) at the "
                 "directory holding ocml.bc, or 'rocm_path' (ROCM_PATH) at the ROCm installation")


def _version_key(path: str) -> tuple:
    suffix = path.rstrip("/").rsplit("-", 1)[-1]
    return tuple(int(p) if p.isdigit() else -1 for p in suffix.split("."))


def _candidates(rocm_path: Path | None) -> list[tuple[Path, str]]:
    places: list[tuple[Path, str]] = []
    roots = [(rocm_path, f"rocm_path, from {config.source_of('rocm_path')}")] if rocm_path else []
    for pattern in ROCM_ROOTS:
        matches = sorted(glob.glob(pattern), key=_version_key, reverse=True) if glob.has_magic(pattern) else [pattern]
        roots += [(Path(m), "ROCm installation") for m in matches]
    for root, why in roots:
        places.append((root / "amdgcn" / "bitcode", why))
        # ROCm 6 also keeps them next to its clang.
        for clang in sorted(glob.glob(str(root / "lib/llvm/lib/clang/*")), key=_version_key, reverse=True):
            places.append((Path(clang) / "lib" / "amdgcn" / "bitcode", why))
    places += [(Path(d), "system package") for d in SYSTEM_DIRECTORIES]
    return places


@functools.lru_cache(maxsize=8)
def _search(configured: Path | None, rocm_path: Path | None) -> tuple[Path | None, tuple[str, ...]]:
    if configured is not None:
        if not (configured / OCML).is_file():
            problem = "does not exist" if not configured.exists() else f"has no {OCML}"
            raise ConfigError(f"setting 'amd_device_libs' (from {config.source_of('amd_device_libs')}) is "
                              f"{str(configured)!r}, which {problem}; point it at the directory holding {OCML}, or "
                              "unset it to let polytile search ROCm")
        return configured, ()
    looked = []
    for directory, why in _candidates(rocm_path):
        looked.append(f"{directory / OCML} ({why})")
        if (directory / OCML).is_file():
            return directory, tuple(looked)
    return None, tuple(looked)


def find_device_libs() -> Path | None:
    """The directory holding ``ocml.bc``, or None when there is none."""
    return _search(config.get("amd_device_libs"), config.get("rocm_path"))[0]


def not_found_error() -> ToolNotFoundError:
    return ToolNotFoundError("the ROCm device libraries (ocml.bc)",
                             list(_search(config.get("amd_device_libs"), config.get("rocm_path"))[1]), _INSTALL_HINT)




__all__ = ["OCML", "find_device_libs", "find_lld", "lld_version", "not_found_error", "toolchain_versions"]
