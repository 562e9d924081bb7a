"""Builds ``polytile_tma._descriptor`` (``_descriptor.c``): the fields of a host
TensorDescriptor and what a launch passes for one, in C, so that making descriptors for
every launch stays cheap.  The module is optional: where it cannot be built (no C
compiler, no Python headers) the install still succeeds and descriptors are keyed in
Python (``polytile_tma.host.NATIVE`` says which).  It carries the SHA-256 of its source,
so that an editable install whose ``_descriptor.c`` changed since is not used stale."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "polytile_tma" / "_descriptor.c"


class BuildOptional(build_ext):
    """build_ext that never fails the install (the Python path does the same work)."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - any compiler or setup failure: key descriptors in Python
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self.warn(f"polytile-tma: {ext.name} was not built ({reason}); host descriptors will be keyed in "
                      "Python (a few microseconds more per descriptor and launch). Install a C compiler and the "
                      "Python headers (Debian: apt-get install gcc python3-dev), then reinstall polytile-tma.")


descriptor = Extension(
    "polytile_tma._descriptor",
    sources=[os.path.relpath(SOURCE, HERE)],
    define_macros=[("POLYTILE_DESCRIPTOR_SOURCE_DIGEST", f'"{hashlib.sha256(SOURCE.read_bytes()).hexdigest()}"')],
    extra_compile_args=["-O2"] if os.name != "nt" else [],
    optional=True,
)

setup(ext_modules=[descriptor], cmdclass={"build_ext": BuildOptional})
