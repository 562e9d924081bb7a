"""``bench/triton_kernels.py`` with polytile standing in for Triton, as Triton users write
``import polytile as triton``: the Triton kernels the bench times run on the interpreter,
so each of them is checked without Triton or a GPU.

The file is executed under its own name, with its import lines changed and nothing
else (so line numbers, and the kernel sources polytile reads from the file, are the
file's); the module is made once per process.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

TRITON_KERNELS = Path(__file__).resolve().parents[2] / "bench" / "triton_kernels.py"

#: Triton's import lines and what they become.
IMPORTS = {"import triton\n": "import polytile as triton\n",
           "import triton.language as tl\n": "import polytile.language as tl\n",
           "from triton.tools.tensor_descriptor import": "from polytile.tools.tensor_descriptor import",
           "from triton import set_allocator": "from polytile import set_allocator"}


@functools.cache
def triton_kernels_on_polytile() -> ModuleType:
    source = TRITON_KERNELS.read_text()
    for line, replacement in IMPORTS.items():
        assert source.count(line) == 1, f"{TRITON_KERNELS} should have the line {line!r} once"
        source = source.replace(line, replacement)
    module = ModuleType("bench.triton_kernels_on_polytile", "bench/triton_kernels.py, run by polytile")
    module.__file__ = str(TRITON_KERNELS)
    module.__package__ = "bench"  # its relative imports (the autotune configs) are the bench's
    exec(compile(source, str(TRITON_KERNELS), "exec"), module.__dict__)  # noqa: S102 - our own file
    return module
