"""Triton's ``triton.testing`` names: timing and checking kernels.

``do_bench``, ``do_bench_cudagraph``, ``Benchmark``, ``perf_report`` and
``assert_close`` take the arguments Triton's do and return what they return, so a
benchmark script ports by changing its imports::

    from polytile.testing import do_bench, perf_report, Benchmark   # was: triton.testing

Where torch with a CUDA device is installed they time with CUDA events (as Triton);
without one (the interpreter, NumPy) with the host clock.  torch, pandas and
matplotlib are imported only when a function needs them.

The helpers for testing passes (IR text in, IR text out) are :mod:`polytile.ir_testing`;
their old names here still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Benchmark", "Mark", "assert_close", "do_bench", "do_bench_cudagraph", "perf_report"]

_RETURN_MODES = ("min", "max", "mean", "median", "all")


def _summary(times: list[float], quantiles: Sequence[float] | None, return_mode: str) -> Any:
    """What Triton's do_bench returns for ``times`` (milliseconds)."""
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: use one of {', '.join(_RETURN_MODES)}")
    if quantiles is not None:
        ordered = sorted(times)
        found = [_quantile(ordered, q) for q in quantiles]
        return found[0] if len(found) == 1 else found
    if return_mode == "all":
        return list(times)
    return {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}[return_mode](times)


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile with linear interpolation (torch.quantile's default)."""
    if not 0 <= q <= 1:
        raise ValueError(f"quantiles must be in [0, 1], got {q}")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _cuda_torch() -> Any:
    """torch, when it is imported (or importable) and has a CUDA device; else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # a torch without CUDA support
        return None


def _clear_grads(grad_to_none: Any) -> None:
    for tensor in grad_to_none or ():
        tensor.grad = None


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Any = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """The time one call of ``fn`` takes, in milliseconds (Triton's ``do_bench``).

    ``fn`` runs for about ``warmup`` ms first, then about ``rep`` ms of timed calls (the
    count estimated from five calls), each after clearing the L2 cache (a 256 MiB write)
    on a GPU.  ``grad_to_none``: tensors whose ``.grad`` is reset before each call.
    Returns the ``quantiles`` of the times (a list; one value alone for one quantile),
    else their min, max, mean (the default), median or all of them (``return_mode``).
    """
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: use one of {', '.join(_RETURN_MODES)}")
    torch = _cuda_torch()
    if torch is None:
        return _bench_on_host(fn, warmup, rep, grad_to_none, quantiles, return_mode)
    fn()
    torch.cuda.synchronize()
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-6)
    warmups, repeats = max(1, int(warmup / estimate)), max(1, int(rep / estimate))
    for _ in range(warmups):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for i in range(repeats):
        _clear_grads(grad_to_none)
        cache.zero_()  # the same L2 state for every call
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return _summary([s.elapsed_time(e) for s, e in zip(starts, ends)], quantiles, return_mode)


def _bench_on_host(fn: Callable[[], Any], warmup: float, rep: float, grad_to_none: Any,
                   quantiles: Sequence[float] | None, return_mode: str) -> Any:
    """do_bench with the host clock: for the interpreter and other host code."""
    fn()
    begin = time.perf_counter()
    for _ in range(5):
        fn()
    estimate = max((time.perf_counter() - begin) * 1000 / 5, 1e-6)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate))):
        _clear_grads(grad_to_none)
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1000)
    return _summary(times, quantiles, return_mode)


def do_bench_cudagraph(fn: Callable[[], Any], rep: float = 20, grad_to_none: Any = None,
                       quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """``do_bench`` with the calls captured in a CUDA graph, so that launch overhead is
    left out (Triton's ``do_bench_cudagraph``); milliseconds per call.  Needs torch with
    a CUDA device."""
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: use one of {', '.join(_RETURN_MODES)}")
    torch = _cuda_torch()
    if torch is None:
        raise RuntimeError("do_bench_cudagraph needs torch with a CUDA device (it captures the calls in a CUDA "
                           "graph); use do_bench to time code on the host")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()  # compiles and loads the kernels outside the capture
        _clear_grads(grad_to_none)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-6)
        calls = max(1, int(rep / estimate))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                _clear_grads(grad_to_none)
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / calls)
    return _summary(times, quantiles, return_mode)


def assert_close(x: Any, y: Any, atol: float | None = None, rtol: float | None = None, err_msg: str = "") -> None:
    """Check ``x`` and ``y`` (arrays, tensors on any device, or numbers) agree within
    ``atol`` (default 1e-2) and ``rtol`` (default 0), each a number or a function of
    ``x``'s dtype, as Triton's ``assert_close``; an
    ``AssertionError`` saying where they differ otherwise."""
    import numpy as np

    def host(value: Any) -> Any:
        if hasattr(value, "detach"):  # a torch tensor, on any device; bf16 has no NumPy dtype
            value = value.detach()
            if str(getattr(value, "dtype", "")) in ("torch.bfloat16",) or "float8" in str(value.dtype):
                value = value.float()
            return value.cpu().numpy()
        return np.asarray(value)

    dtype = getattr(x, "dtype", None)
    atol = 1e-2 if atol is None else (atol(dtype) if callable(atol) else atol)  # Triton: a function of the dtype
    rtol = 0 if rtol is None else (rtol(dtype) if callable(rtol) else rtol)
    x, y = host(x), host(y)
    if x.dtype == np.bool_ or y.dtype == np.bool_:
        np.testing.assert_array_equal(x, y, err_msg=err_msg)
        return
    np.testing.assert_allclose(x, y, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)


@dataclass
class Benchmark:
    """One benchmark of a :func:`perf_report` (Triton's fields): ``fn`` runs for every
    value of ``x_vals`` (bound to ``x_names``) and every value of ``line_vals`` (bound to
    ``line_arg``), with ``args`` besides; each ``line_vals`` entry is a line of the plot,
    named by ``line_names``."""

    x_names: list[str]
    x_vals: list[Any]
    line_arg: str
    line_vals: list[Any]
    line_names: list[str]
    plot_name: str
    args: dict[str, Any] = field(default_factory=dict)
    xlabel: str = ""
    ylabel: str = ""
    x_log: bool = False
    y_log: bool = False
    styles: list[tuple[str, str]] | None = None

    def __post_init__(self) -> None:
        if len(self.line_names) != len(self.line_vals):
            raise ValueError(f"Benchmark {self.plot_name!r}: {len(self.line_vals)} line_vals but "
                             f"{len(self.line_names)} line_names; name every line")


class Mark:
    """What :func:`perf_report` makes of a function: ``run()`` measures it."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | Sequence[Benchmark]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def _rows(self, bench: Benchmark, **kwargs: Any) -> tuple[list[str], list[list[Any]]]:
        """Triton's table: every x name, then each line's value and, where the function
        returns (value, min, max), its ``-min`` and ``-max`` columns."""
        rows, ranged = [], False
        for x in bench.x_vals:
            if isinstance(x, (list, tuple)):
                if len(x) != len(bench.x_names):
                    raise ValueError(f"Benchmark {bench.plot_name!r}: x value {x!r} has {len(x)} entries for "
                                     f"{len(bench.x_names)} x_names")
                values = list(x)
            else:
                values = [x] * len(bench.x_names)
            bound = dict(zip(bench.x_names, values))
            row = list(values)
            for line in bench.line_vals:
                result = self.fn(**bound, **{bench.line_arg: line}, **bench.args, **kwargs)
                if isinstance(result, (list, tuple)):
                    ranged = True
                    value, low, high = (list(result) + [None, None])[:3]
                else:
                    value = low = high = result
                row.append((value, low, high))
            rows.append(row)
        names = list(bench.x_names)
        columns = names + [f"{n}{s}" for n in bench.line_names for s in (("", "-min", "-max") if ranged else ("",))]
        flat = [row[:len(names)] + [v for cell in row[len(names):] for v in (cell if ranged else cell[:1])]
                for row in rows]
        return columns, flat

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "", return_df: bool = False,
            **kwargs: Any) -> Any:
        """Measure every benchmark; print its table (``print_data``), plot it
        (``show_plots``, ``save_path``: a directory for PNG and CSV files; needs
        matplotlib), and return the tables (pandas DataFrames where pandas is installed,
        else (columns, rows)) with ``return_df``."""
        import os

        benches = [self.benchmarks] if isinstance(self.benchmarks, Benchmark) else list(self.benchmarks)
        tables = []
        for bench in benches:
            columns, rows = self._rows(bench, **kwargs)
            table = _table(columns, rows)
            if print_data:
                print(f"{bench.plot_name}:")
                print(table if not isinstance(table, tuple) else _plain(columns, rows))
            if show_plots or save_path:
                _plot(bench, columns, rows, show_plots, save_path)
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as out:
                    out.write(",".join(map(str, columns)) + "\n")
                    out.writelines(",".join(map(str, row)) + "\n" for row in rows)
            tables.append(table)
        if return_df:
            return tables[0] if len(tables) == 1 else tables
        return None


def _table(columns: list[str], rows: list[list[Any]]) -> Any:
    try:
        import pandas
    except ImportError:
        return columns, rows
    return pandas.DataFrame(rows, columns=columns)


def _plain(columns: list[str], rows: list[list[Any]]) -> str:
    cells = [list(map(str, columns))] + [[f"{v:.6g}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)


def _plot(bench: Benchmark, columns: list[str], rows: list[list[Any]], show: bool, save_path: str) -> None:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError(f"perf_report: plotting {bench.plot_name!r} needs matplotlib ({exc}); pass "
                           "show_plots=False and no save_path to print the table only") from None
    import os

    figure, axes = plt.subplots()
    xs = [row[0] for row in rows]
    for i, name in enumerate(bench.line_names):
        style = bench.styles[i] if bench.styles else None
        axes.plot(xs, [row[columns.index(name)] for row in rows], label=name,
                  **({"color": style[0], "linestyle": style[1]} if style else {}))
    axes.set_xlabel(bench.xlabel or bench.x_names[0])
    axes.set_ylabel(bench.ylabel)
    axes.set_xscale("log" if bench.x_log else "linear")
    axes.set_yscale("log" if bench.y_log else "linear")
    axes.legend()
    axes.set_title(bench.plot_name)
    if save_path:
        os.makedirs(save_path, exist_ok=True)
        figure.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show:
        plt.show()
    plt.close(figure)


def perf_report(benchmarks: Benchmark | Sequence[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Decorate a function that measures one configuration (returning a number, or a
    (value, min, max) tuple) into a :class:`Mark` whose ``run()`` measures every
    configuration of ``benchmarks`` (Triton's ``perf_report``)."""
    return lambda fn: Mark(fn, benchmarks)


# The IR-test helpers that lived here (polytile.ir_testing now), for code written before.
_MOVED = ("apply_passes", "compile_for_targets", "dedent", "roundtrip")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from . import ir_testing

        warnings.warn(f"polytile.testing.{name} moved to polytile.ir_testing.{name} (polytile.testing now has "
                      "Triton's testing names)", DeprecationWarning, stacklevel=2)
        return getattr(ir_testing, name)
    raise AttributeError(f"module 'polytile.testing' has no attribute {name!r}")
