"""What a saved regression test (tests/fuzz/regressions/test_*.py) calls: the kernel is
defined in the test module itself, :class:`Case` says how to launch it, and
:func:`run_case` runs it on one target and fails the test on a crash or a mismatch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .program import Array, Kernel, Statement
from .runner import OK, check_function, compile_for


@dataclass
class Case:
    kernel: Any  # the JIT function
    family: str
    sizes: dict
    blocks: dict
    num_warps: int
    seed: int
    index: int
    arrays: list

    def model(self) -> Kernel:
        arrays = tuple(Array(*fields) for fields in self.arrays)
        kernel = Kernel(self.seed, self.index, self.family, dict(self.sizes), dict(self.blocks),
                        num_warps=self.num_warps)
        kernel.statements = [Statement([], arrays=arrays)]
        return kernel


def run_case(case: Case, target: str) -> None:
    """Run ``case`` on ``target``: "interp" (the interpreter alone), a GPU target such as
    "nvidia" (interp and GPU outputs compared; skipped without torch and a GPU), or
    "compile:<backend>:<arch>" (compiled for that arch, then run on the interpreter)."""
    import pytest

    model = case.model()
    if target.startswith("compile:"):
        # Raised, not caught: a missing ld.lld then skips the test (tests/conftest.py).
        for error in compile_for(case.kernel, model, [target.split(":", 1)[1]]).values():
            if isinstance(error, BaseException):
                raise error
        target = "interp"
    elif target != "interp":
        torch = pytest.importorskip("torch", reason="the GPU run moves the arrays to the device with torch")
        if not torch.cuda.is_available():
            pytest.skip("torch cannot use a GPU here")
    outcome = check_function(case.kernel, model, target, [])
    if outcome.status != OK:
        pytest.fail(f"{outcome.status} in {outcome.where}: {outcome.detail}", pytrace=False)
