"""Finding libdevice, the bitcode library of CUDA math functions (``__nv_expf``, ...).

Places tried, first found wins:

1. the setting ``libdevice_path`` (``POLYTILE_LIBDEVICE``): it must exist when set;
2. ``<cuda_home>/nvvm/libdevice/`` (``POLYTILE_CUDA_HOME``, ``CUDA_HOME``, ``CUDA_PATH``);
3. the ``nvidia-cuda-nvcc`` wheel: ``<site-packages>/nvidia/cu13/nvvm/libdevice/`` (CUDA 13)
   or ``<site-packages>/nvidia/cuda_nvcc/nvvm/libdevice/`` (CUDA 12);
4. the toolkit of the ``ptxas`` on PATH (``<bin>/../nvvm/libdevice/``);
5. ``/usr/local/cuda``, ``/usr/local/cuda-*`` (newest first), ``/opt/cuda``, ``/usr/lib/cuda``;
   and Debian's ``/usr/lib/nvidia-cuda-toolkit/libdevice/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import toolkit

LIBDEVICE = "libdevice.10.bc"
_RELATIVE = "nvvm/libdevice"
#: Debian's nvidia-cuda-toolkit package does not use the toolkit's own layout.
DEBIAN_DIRECTORIES = ("/usr/lib/nvidia-cuda-toolkit/libdevice",)

_HINT = ("Install the CUDA toolkit or the nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc), "
         "set cuda_home (POLYTILE_CUDA_HOME or CUDA_HOME) to the toolkit's root, "
         "or set libdevice_path (POLYTILE_LIBDEVICE) to the file itself.")


def find_libdevice() -> Path:
    """The path of ``libdevice.10.bc``; :class:`~.toolkit.ToolkitNotFoundError` lists where it looked."""
    configured = toolkit.configured_file("libdevice_path", "a libdevice bitcode file (libdevice.10.bc)")
    if configured is not None:
        return configured
    search = toolkit.Search(LIBDEVICE)
    home = toolkit.cuda_home()
    if home is not None:
        found = search.try_path(home / _RELATIVE / LIBDEVICE, toolkit.cuda_home_source())
        if found is not None:
            return found
    else:
        search.note("cuda_home: not set (POLYTILE_CUDA_HOME, CUDA_HOME, CUDA_PATH)")
    found = toolkit.search_wheels(search, _RELATIVE, LIBDEVICE)
    if found is not None:
        return found
    ptxas = shutil.which("ptxas")
    if ptxas is not None:
        root = Path(ptxas).resolve().parent.parent
        found = search.try_path(root / _RELATIVE / LIBDEVICE, f"toolkit of the ptxas on PATH, {ptxas}")
        if found is not None:
            return found
    found = toolkit.search_common_roots(search, _RELATIVE, LIBDEVICE)
    if found is not None:
        return found
    for directory in DEBIAN_DIRECTORIES:
        found = search.try_path(Path(directory) / LIBDEVICE, "Debian's nvidia-cuda-toolkit")
        if found is not None:
            return found
    raise search.fail(_HINT)
