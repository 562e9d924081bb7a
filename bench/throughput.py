"""The memory and matmul modes: every case at every size and dtype, for each compiler.

Each compiler's result is checked against NumPy before it is timed; a wrong result is
reported as a mismatch and never timed, so a fast wrong kernel cannot make the table.
"""

from __future__ import annotations

import statistics
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .cases import Case, Problem, Size, size_label
from .devices import Device, TimingPlan
from .report import ERROR, MISMATCH, OK, SKIPPED, Measurement, Row

#: Row-wise outputs are checked on at most this many rows (the first, the last and an
#: even spread between them).
CHECKED_ROWS = 512


def sample_rows(rows: int) -> np.ndarray | None:
    if rows <= CHECKED_ROWS:
        return None
    quarter = CHECKED_ROWS // 4
    spread = np.linspace(quarter, rows - quarter - 1, CHECKED_ROWS - 2 * quarter).astype(np.int64)
    return np.unique(np.concatenate([np.arange(quarter), spread, np.arange(rows - quarter, rows)]))


def describe_error(exc: BaseException) -> str:
    """The exception in one paragraph: polytile's errors already name the kernel, the line
    and what is wrong; anything else gets its innermost frame too."""
    text = str(exc).strip() or type(exc).__name__
    if not type(exc).__module__.startswith("polytile"):
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        text = f"{type(exc).__name__}: {text}{where}"
    return text


def check(case: Case, problem: Problem, dtype: str, device: Device) -> str | None:
    """None when every output matches the reference, else what differs, in words."""
    rows = sample_rows(problem.rows) if problem.rows is not None else None

    def host(name: str) -> np.ndarray:
        return device.host(problem.arrays[name], rows if name in problem.row_arrays else None)

    inputs = {name: host(name) for name in problem.arrays if name not in problem.outputs}
    # The reference of a row-sampled case may need to know which rows it was given.
    expected = case.reference(inputs, {**problem.scalars, "checked_rows": rows})
    rtol, atol = case.tolerance_for(dtype)
    for name in problem.outputs:
        got, want = host(name), expected[name]
        if got.shape != want.shape:
            return f"output '{name}' has shape {got.shape}, the reference {want.shape}"
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            if rows is not None and name in problem.row_arrays:
                first = (int(rows[first[0]]), *first[1:])
            return (f"output '{name}' differs from NumPy at {int(bad.sum())} of {bad.size} checked elements; "
                    f"first at index {first}: got {float(got[bad][0])!r}, expected {float(want[bad][0])!r} "
                    f"(rtol {rtol:g}, atol {atol:g})")
    return None


def prepare(case: Case, problem: Problem, dtype: str, lib: Any, device: Device) -> Measurement | None:
    """Launch once and check: None when the result is right, else the failed result."""
    for name in problem.outputs:
        device.fill_nan(problem.arrays[name])
    try:
        case.launch(lib, problem)
        device.synchronize()
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile or launch is a row of the table
        return Measurement.failed(ERROR, describe_error(exc))
    try:
        wrong = check(case, problem, dtype, device)
    except Exception as exc:  # noqa: BLE001 - so is a result that cannot be read back
        return Measurement.failed(ERROR, f"checking the result failed: {describe_error(exc)}")
    if wrong is not None:
        return Measurement.failed(MISMATCH, wrong)
    return None


def time_round(case: Case, problem: Problem, lib: Any, device: Device, plan: TimingPlan) -> list[float] | Measurement:
    """One round's times (ms) of ``case.launch``, or the failed result."""
    try:
        return device.time_ms(lambda: case.launch(lib, problem), plan)
    except Exception as exc:  # noqa: BLE001
        return Measurement.failed(ERROR, f"failed while timing: {describe_error(exc)}")


def measure(case: Case, problem: Problem, dtype: str, size: Size, lib: Any, device: Device,
            plan: TimingPlan) -> Measurement:
    """Launch once, check, then time: one compiler's result for one row (one round)."""
    return measure_all(case, problem, dtype, size, {"lib": lib}, device, plan)["lib"]


def measure_all(case: Case, problem: Problem, dtype: str, size: Size, libs: dict[str, Any], device: Device,
                plan: TimingPlan) -> dict[str, Measurement]:
    """Each compiler's result for one row: each launched once and checked, then the
    checked ones timed in turn, ``plan.rounds`` times; a rate is the median of its rounds."""
    results: dict[str, Measurement] = {}
    for name, lib in libs.items():
        failed = prepare(case, problem, dtype, lib, device)
        if failed is not None:
            results[name] = failed
    per_round: dict[str, list[float]] = {name: [] for name in libs if name not in results}
    counts = dict.fromkeys(per_round, 0)
    for _ in range(max(plan.rounds, 1)):
        for name in list(per_round):
            samples = time_round(case, problem, libs[name], device, plan)
            if isinstance(samples, Measurement):
                results[name] = samples
                del per_round[name]
                continue
            per_round[name].append(statistics.median(samples))
            counts[name] += len(samples)
    for name, medians in per_round.items():
        ms = statistics.median(medians)
        note = case.note(libs[name]) if case.note is not None else ""
        results[name] = Measurement(OK, value=case.rate(size, dtype, ms), ms=ms, samples=counts[name], detail=note,
                                    rounds=[case.rate(size, dtype, m) for m in medians] if len(medians) > 1 else [])
    return {name: results[name] for name in libs}


def run_cases(cases: Iterable[Case], size_class: str, device: Device, compilers: dict[str, Any],
              plan: TimingPlan, progress: Callable[[str], None] = lambda line: None) -> list[Row]:
    """Rows for every size and dtype of ``cases``; ``compilers`` maps "polytile" and
    maybe "triton" to their kernel modules (tests pass others)."""
    rows = []
    for case in cases:
        for size in case.sizes[size_class]:
            for dtype in case.dtypes:
                row = Row(case.mode, case.name, dtype, size_label(size), list(size), case.metric)
                rows.append(row)
                if dtype not in device.dtypes:
                    reason = f"{device.library} arrays cannot hold {dtype} (the {device.backend} target)"
                    row.results = {name: Measurement.failed(SKIPPED, reason) for name in compilers}
                    continue
                progress(f"{case.name} {dtype} {row.size}")
                problem = case.make(device, size, dtype)
                # A library module may serve some cases only.
                libs = {name: lib for name, lib in compilers.items()
                        if getattr(lib, "CASES", None) is None or case.name in lib.CASES}
                row.results.update(measure_all(case, problem, dtype, size, libs, device, plan))
                del problem  # the largest sizes need the memory back before the next
    return rows


__all__ = ["CHECKED_ROWS", "MISMATCH", "OK", "check", "measure", "measure_all", "prepare", "run_cases", "sample_rows",
           "time_round"]
