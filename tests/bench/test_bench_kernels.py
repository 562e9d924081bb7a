"""The Triton kernels are the polytile kernels: same text but for the module names, so
the two compilers are compared on the same algorithm."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def code(path: Path) -> str:
    """The file after its docstring."""
    return path.read_text().split('"""', 2)[2]


def test_triton_kernels_are_the_polytile_kernels_renamed():
    ours = code(BENCH / "polytile_kernels.py")
    renamed = (ours.replace("import polytile as pt", "import triton")
               .replace("import polytile.language as pl", "import triton.language as tl")
               .replace("@pt.jit", "@triton.jit"))
    renamed = re.sub(r"\bpl\.", "tl.", renamed)
    assert renamed == code(BENCH / "triton_kernels.py")


def test_the_kernels_are_written_with_the_public_api():
    ours = code(BENCH / "polytile_kernels.py")
    imports = [line for line in ours.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["import polytile as pt", "import polytile.language as pl"]
