"""What the compile cache key says of the NVIDIA toolchain: the assembler that will run
and its version, remembered in the cache directory.

Finding out loads libnvJitLink (its Python bindings import cuda.pathfinder: about 50 ms)
or runs ``ptxas --version``, while a fresh process launching a kernel from the disk cache
needs nothing but the key.  So the answer is kept under a fingerprint of everything that
decides it, and this module stays small: a launch from the cache imports neither the
assemblers (:mod:`.assemble`) nor the code generator.
"""

from __future__ import annotations

import os
from pathlib import Path

from polytile import config
from polytile.errors import PolytileError

from .toolkit import find_ptxas


def toolchain_versions() -> dict[str, str]:
    """What enters the compile cache key: the assembler that will run, with its version.

    Never raises: a machine without an assembler still computes keys (and fails later,
    when it assembles, with the full explanation).  Remembered in the cache directory
    under :func:`_toolchain_fingerprint`, and worked out again whenever that changes.
    """
    use_memo = bool(config.get("cache"))
    fingerprint = _toolchain_fingerprint() if use_memo else ""
    memo = _memo_path(fingerprint) if use_memo else None
    found = _read_memo(memo) if memo is not None else None
    if found is not None:
        return found
    import subprocess  # imported here, as the assembler is: a launch from the disk cache runs neither

    from . import assemble

    try:
        name = assemble.select_assembler()
        found = {"nvidia-assembler": f"{name} {assemble.ASSEMBLERS[name].version()}"}
        if name == "nvjitlink" and config.get("nvidia_assembler") == "auto":
            # What assembles a kernel whose PTX needs whole-program compilation.
            found["nvidia-whole-program-assembler"] = assemble.whole_program_assembler() or "none"
    except (PolytileError, OSError, subprocess.SubprocessError) as exc:
        # Not remembered: the next process explains (or finds) the assembler afresh.
        return {"nvidia-assembler": f"unavailable ({type(exc).__name__})"}
    if memo is not None:
        _write_memo(memo, found)
    return found


#: Changes whenever what the memo holds does, so that no process reads an older answer
#: (2: the whole-program assembler joined the key).
_MEMO_FORMAT = 2
#: Distributions that can bring libnvJitLink or ptxas, or change how they are found.
_TOOLCHAIN_DISTRIBUTION_PREFIXES = ("nvidia-", "cuda-")
#: Environment variables cuda.pathfinder and the dynamic linker read to find libnvJitLink.
_TOOLCHAIN_ENVIRONMENT = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX")
#: Rewritten by ldconfig whenever a system library (a toolkit's libnvJitLink) is installed.
_LINKER_CACHE = "/etc/ld.so.cache"


def _toolchain_fingerprint() -> str:
    """A hash of what decides :func:`toolchain_versions`: the settings, the environment
    the libraries are searched with, the versions of the CUDA wheels, the dynamic
    linker's cache, and the ptxas that would run (path and modification time)."""
    import hashlib
    import sys

    from polytile.plugins.distributions import distributions

    parts = [f"memo format {_MEMO_FORMAT}", sys.executable, sys.prefix, *sys.path]
    parts += [f"{name}={config.get(name)}" for name in ("nvidia_assembler", "cuda_home", "ptxas_path")]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _TOOLCHAIN_ENVIRONMENT]
    parts += sorted(f"{d.name}=={d.version}" for d in distributions() if d.key.startswith(_TOOLCHAIN_DISTRIBUTION_PREFIXES))
    parts.append(_stamp(Path(_LINKER_CACHE)))
    try:
        parts.append(_stamp(find_ptxas()))
    except PolytileError:
        parts.append("no ptxas")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _stamp(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return f"{path}: missing"
    return f"{path}: {info.st_mtime_ns} {info.st_size}"


def _memo_directory() -> Path:
    return Path(config.get("cache_dir")) / "toolchains"


def _memo_path(fingerprint: str) -> Path:
    return _memo_directory() / f"nvidia-{fingerprint[:32]}.json"


def _read_memo(path: Path) -> dict[str, str] | None:
    import json

    try:
        found = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    valid = (isinstance(found, dict) and "nvidia-assembler" in found
             and set(found) <= {"nvidia-assembler", "nvidia-whole-program-assembler"}
             and all(isinstance(value, str) for value in found.values()))
    return found if valid else None


def _write_memo(path: Path, versions: dict[str, str]) -> None:
    """Written atomically; a cache directory we cannot write only costs the next process the probe."""
    import json

    from polytile.runtime.cache_files import write_atomic  # created as the umask says, like the kernels

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(versions).encode("utf-8"))
    except OSError:
        pass


def forget_toolchain_versions() -> None:
    """Remove what the cache directory remembers (after installing a toolchain, in tests)."""
    import shutil

    shutil.rmtree(_memo_directory(), ignore_errors=True)
