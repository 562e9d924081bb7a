"""Finding files of the CUDA toolkit (ptxas, libdevice) on a machine.

A toolkit can be in many places: a setting, ``cuda_home``, the ``nvidia-cuda-nvcc`` wheel
in site-packages (``nvidia/cu13/`` since CUDA 13, ``nvidia/cuda_nvcc/`` before), or a
system installation under ``/usr/local/cuda*``.  When nothing is found, the user needs to
see every place that was tried, so each search records them in a :class:`Search`.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Callable, Iterable

from polytile import config
from polytile.errors import ConfigError, PolytileError

#: Subdirectories of site-packages where NVIDIA's wheels put the toolkit, newest layout first.
WHEEL_ROOTS = ("nvidia/cu13", "nvidia/cuda_nvcc")

#: System toolkit roots, as glob patterns; within one pattern, the highest version wins.
COMMON_CUDA_ROOTS = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda", "/usr/lib/cuda")


class ToolkitNotFoundError(PolytileError):
    """A CUDA toolkit file could not be found; the message lists every place tried."""

    def __init__(self, what: str, looked: list[str], hint: str):
        self.what = what
        self.looked = list(looked)
        places = "\n".join(f"  - {place}" for place in looked) or "  (nowhere: no place was configured)"
        super().__init__(f"{what} not found; looked in:\n{places}\n{hint}")


class Search:
    """The candidates tried for one file, in order, so that a miss can list them."""

    def __init__(self, what: str, accept: Callable[[Path], bool] = Path.is_file):
        self.what = what
        self.looked: list[str] = []
        self._accept = accept

    def try_path(self, path: Path, why: str) -> Path | None:
        self.looked.append(f"{path} ({why})")
        return path if self._accept(path) else None

    def note(self, text: str) -> None:
        self.looked.append(text)

    def fail(self, hint: str) -> ToolkitNotFoundError:
        return ToolkitNotFoundError(self.what, self.looked, hint)


def configured_file(setting: str, what: str, accept: Callable[[Path], bool] = Path.is_file) -> Path | None:
    """The file a path setting names, or None when it is unset.

    A set path that is not there is an error naming the setting and where its value came
    from: silently searching elsewhere would hide a typo in the user's configuration.
    """
    value = config.get(setting)
    if value is None:
        return None
    path = Path(value)
    if not accept(path):
        problem = "does not exist" if not path.exists() else f"is not a usable {what}"
        raise ConfigError(f"setting '{setting}' (from {config.source_of(setting)}) is {str(path)!r}, which {problem}; "
                          f"point it at {what}, or unset it to let polytile search the CUDA toolkit")
    return path


def cuda_home() -> Path | None:
    value = config.get("cuda_home")
    return Path(value) if value is not None else None


def cuda_home_source() -> str:
    return f"cuda_home, from {config.source_of('cuda_home')}"


def wheel_directories(relative: str) -> list[Path]:
    """``<site>/<wheel root>/<relative>`` for every sys.path entry holding NVIDIA wheels."""
    found = []
    for entry in _sys_path_directories():
        if (entry / "nvidia").is_dir():
            found.extend(entry / root / relative for root in WHEEL_ROOTS)
    return found


def common_roots() -> list[Path]:
    roots: list[Path] = []
    for pattern in COMMON_CUDA_ROOTS:
        matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
        roots.extend(Path(m) for m in sorted(matches, key=_version_key, reverse=True))
    return _unique(roots)


def search_wheels(search: Search, relative: str, name: str) -> Path | None:
    directories = wheel_directories(relative)
    if not directories:
        search.note("the nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc): no nvidia/ package on sys.path")
    for directory in directories:
        found = search.try_path(directory / name, "nvidia-cuda-nvcc wheel")
        if found is not None:
            return found
    return None


def search_common_roots(search: Search, relative: str, name: str) -> Path | None:
    for root in common_roots():
        found = search.try_path(root / relative / name, "system CUDA toolkit")
        if found is not None:
            return found
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_ptxas() -> Path:
    """The ptxas to run: the setting ``ptxas_path``, ``<cuda_home>/bin``, the
    nvidia-cuda-nvcc wheel, PATH, then ``/usr/local/cuda*/bin``."""
    import shutil

    configured = configured_file("ptxas_path", "the ptxas executable", _is_executable)
    if configured is not None:
        return configured
    search = Search("ptxas", _is_executable)
    home = cuda_home()
    if home is not None:
        found = search.try_path(home / "bin" / "ptxas", cuda_home_source())
        if found is not None:
            return found
    else:
        search.note("cuda_home: not set (POLYTILE_CUDA_HOME, CUDA_HOME, CUDA_PATH)")
    found = search_wheels(search, "bin", "ptxas")
    if found is not None:
        return found
    on_path = shutil.which("ptxas")
    if on_path is not None:
        return Path(on_path)
    search.note("PATH: no ptxas")
    found = search_common_roots(search, "bin", "ptxas")
    if found is not None:
        return found
    raise search.fail("Install the CUDA toolkit or the nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc), "
                      "set cuda_home (POLYTILE_CUDA_HOME or CUDA_HOME), or set ptxas_path (POLYTILE_PTXAS).")


def _sys_path_directories() -> list[Path]:
    return _unique(Path(p) for p in sys.path if p and os.path.isdir(p))


def _version_key(path: str) -> tuple:
    # /usr/local/cuda-12.10 must sort above /usr/local/cuda-12.9: compare numbers, not text.
    suffix = path.rsplit("-", 1)[-1]
    return tuple(int(part) if part.isdigit() else -1 for part in suffix.split("."))


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: set[Path] = set()
    result = []
    for path in paths:
        if path not in seen:
            seen.add(path)
            result.append(path)
    return result
