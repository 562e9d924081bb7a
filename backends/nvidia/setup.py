"""Builds the native launch module, ``polytile_nvidia._launch``, when polytile-nvidia is
installed (pip install, editable installs and wheels alike; the rest is in pyproject.toml).

The module is a plain CPython extension: no CUDA headers, no CUDA library at build time
(the driver's entry points are handed to it at run time).  It is optional: where it
cannot be built (no C compiler, no Python headers) the install still succeeds, NVIDIA
kernels launch through cuda-bindings, and ``polytile info`` says why, from the marker
file written here next to where the module would be.

The module carries the SHA-256 of the sources it was built from (``_launch.c``, then the
headers it includes from its own directory), so that the backend can tell an installed
module from an older source (an editable install whose ``_launch.c`` was edited since).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "polytile_nvidia"
SOURCE = PACKAGE / "_launch.c"
#: Written next to the module when it could not be built; read by polytile_nvidia.driver.
UNBUILT_MARKER = "_launch.unbuilt"


def source_digest(source: Path) -> str:
    """The SHA-256 of ``source`` followed by each header it includes with ``#include
    "name"`` from its own directory, in order (polytile_nvidia.driver computes the same)."""
    text = source.read_bytes()
    names = re.findall(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, re.MULTILINE)
    digest = hashlib.sha256(text)
    for name in names:
        digest.update((source.parent / name.decode()).read_bytes())
    return digest.hexdigest()


class BuildLaunchModule(build_ext):
    """build_ext that never fails the install: a module it cannot build leaves a marker
    saying why (next to where the module would be, in the build folder and, for an
    in-place or editable build, in the package), and one it built removes the marker."""

    def build_extension(self, ext: Extension) -> None:
        marker = Path(self.get_ext_fullpath(ext.name)).with_name(UNBUILT_MARKER)
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any compiler or setup failure: launch through cuda-bindings
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self.warn(f"polytile-nvidia: the native launch module was not built ({reason}); NVIDIA kernels will "
                      "launch through cuda-bindings (slower per launch). Install a C compiler and the Python "
                      "headers (Debian: apt-get install gcc python3-dev), then reinstall polytile-nvidia.")
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"the C compiler failed on {SOURCE.name} at install: {reason}\n")
            return
        if marker.exists():
            marker.unlink()

    def copy_extensions_to_source(self) -> None:
        super().copy_extensions_to_source()  # copies only what was built (the module is optional)
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            inplace_file, regular_file = (Path(f) for f in self._get_inplace_equivalent(build_py, ext))
            built_marker, inplace_marker = (f.with_name(UNBUILT_MARKER) for f in (regular_file, inplace_file))
            if built_marker.exists():
                inplace_file.unlink(missing_ok=True)  # an older build must not pass for this one
                inplace_marker.write_text(built_marker.read_text())
            else:
                inplace_marker.unlink(missing_ok=True)


launch = Extension(
    "polytile_nvidia._launch",
    sources=[os.path.relpath(SOURCE, HERE)],
    depends=[os.path.relpath(PACKAGE / "_dispatch.h", HERE)],
    define_macros=[("POLYTILE_LAUNCH_SOURCE_DIGEST", f'"{source_digest(SOURCE)}"')],
    extra_compile_args=["-O2"] if os.name != "nt" else [],
    optional=True,  # see BuildLaunchModule
)

setup(ext_modules=[launch], cmdclass={"build_ext": BuildLaunchModule})
