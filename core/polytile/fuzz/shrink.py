"""Shrinking a failing kernel to a minimal one, and saving it as a regression test.

:func:`shrink` is delta debugging over the kernel's statements (removing a statement
removes those that read its value, so every candidate is a valid kernel), then over its
sizes (smaller ``n``/``M``/``N``/``K``, fewer loop trips).  A candidate is kept when it
fails the same way: the same status at the same place (``crash`` in ``compile:sm_90a``,
say, or ``mismatch``).
"""

from __future__ import annotations

import time
from dataclasses import astuple
from pathlib import Path
from typing import Callable

from .program import Kernel
from .runner import Outcome

Check = Callable[[Kernel], Outcome]


def same_failure(first: Outcome, second: Outcome) -> bool:
    return second.status == first.status and second.where == first.where


def shrink(kernel: Kernel, check: Check, failure: Outcome, budget_s: float = 120.0,
           max_tries: int = 400) -> tuple[Kernel, Outcome, int]:
    """The smallest kernel found that still fails like ``failure``, its outcome, and how
    many candidates were tried."""
    deadline = time.monotonic() + budget_s
    tries = 0
    best, best_outcome = kernel, failure

    def fails(candidate: Kernel) -> Outcome | None:
        nonlocal tries
        tries += 1
        outcome = check(candidate)
        return outcome if same_failure(failure, outcome) else None

    def out_of_budget() -> bool:
        return tries >= max_tries or time.monotonic() > deadline

    # Statements: ddmin-style, chunks halving down to single statements.
    chunk = max(1, len(best.statements) // 2)
    while chunk >= 1 and not out_of_budget():
        start, progressed = 0, False
        while start < len(best.statements) and not out_of_budget():
            candidate = best.without(set(range(start, start + chunk)))
            if candidate.statements and len(candidate.statements) < len(best.statements):
                outcome = fails(candidate)
                if outcome is not None:
                    best, best_outcome, progressed = candidate, outcome, True
                    continue  # same start: the next chunk moved here
            start += chunk
        if not progressed:
            chunk //= 2
    # Sizes: try the smallest first.
    for name in ("n", "M", "N", "K", "trips"):
        if name not in best.sizes or out_of_budget():
            continue
        value = best.sizes[name]
        low = 0 if name == "trips" else 1
        for smaller in sorted({low, low + 1, value // 2, value - 1}):
            if low <= smaller < value and not out_of_budget():
                candidate = best.with_sizes(**{name: smaller})
                outcome = fails(candidate)
                if outcome is not None:
                    best, best_outcome = candidate, outcome
                    break
    return best, best_outcome, tries


def regression_source(kernel: Kernel, outcome: Outcome, target: str, archs: list[str],
                      xfail_reason: str | None = None) -> str:
    """A pytest module that reproduces ``kernel``'s failure: it runs on the interpreter
    always, on ``target`` when marked ``gpu``, and compiles for ``archs`` if the failure
    was a compile crash."""
    module = kernel.source()
    body = module.split("\n", 3)[3]  # the generated imports are written below
    arrays = ",\n    ".join(repr(astuple(a)) for a in kernel.arrays)
    # The end of the report says what went wrong (a traceback's last lines, not its carets).
    said = [line.strip() for line in outcome.detail.splitlines() if line.strip() and set(line.strip()) != {"^"}]
    detail = " ".join(" ".join(said[-3:]).split())[-400:].replace('"""', "'''").replace("\\", "/")
    compile_archs = [outcome.where.split(":", 1)[1]] if outcome.where.startswith("compile:") else []
    params = ['"interp"']
    gpu_marks = "pytest.mark.gpu"
    if xfail_reason:
        gpu_marks = f"pytest.mark.gpu, pytest.mark.xfail(strict=True, reason={xfail_reason!r})"
    if compile_archs:
        marks = "" if not xfail_reason else f", marks=pytest.mark.xfail(strict=True, reason={xfail_reason!r})"
        params.append(f'pytest.param("compile:{compile_archs[0]}"{marks})')
        gpu_marks = "pytest.mark.gpu"  # the GPU run is not what failed
    gpu_target = target if target not in ("interp", None) else "nvidia"
    params.append(f'pytest.param("{gpu_target}", marks=[{gpu_marks}])')
    return f'''"""Fuzz regression {kernel.name}: {outcome.status} in {outcome.where}.

Found by ``python -m polytile.fuzz --seed {kernel.seed} --start {kernel.index} --count 1`` and shrunk
to this kernel.  What was seen: {detail}
"""

import pytest

import polytile as pt
import polytile.language as pl
from polytile.fuzz.regression import Case, run_case

{body.strip()}


CASE = Case(
    kernel={kernel.name},
    family={kernel.family!r},
    sizes={kernel.sizes!r},
    blocks={kernel.blocks!r},
    num_warps={kernel.num_warps},
    seed={kernel.seed},
    index={kernel.index},
    arrays=[
    {arrays},
    ],
)


@pytest.mark.parametrize("target", [{", ".join(params)}])
def test_{kernel.name}(target):
    run_case(CASE, target)
'''


def save_regression(kernel: Kernel, outcome: Outcome, target: str, archs: list[str], directory: Path,
                    xfail_reason: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"test_{kernel.name}.py"
    path.write_text(regression_source(kernel, outcome, target, archs, xfail_reason))
    return path
