"""The launch and compile modes: host time per launch, compile time, import time.

Launch: ``kernel[grid](x, y, out, n, BLOCK_SIZE=1024)`` (three arrays and an int) many
times in a Python loop, timed with ``perf_counter`` after a warm-up, in chunks of
:data:`LAUNCH_CHUNK` launches with the device synchronized between chunks (outside the
timing: a full launch queue would time the GPU, not the host); host microseconds per
launch.  The result is checked first, in this process; the timing runs in fresh Python
processes (:data:`LAUNCH_PROCESSES`, ``--processes``), each with an empty on-disk cache
of its own, as a fresh container or CI job starts: each process's median over
:data:`LAUNCH_ROUNDS` rounds is one sample, and the row holds the median of the
processes, with the fastest and the slowest (``low``, ``high``).  polytile's children also
report how their launches went (``polytile_nvidia.launcher.launch_counts``): a process
whose launches did not go through the native dispatcher shows there.

Compile: fresh Python processes, so that nothing is cached in memory.  A cold compile
gets an empty on-disk cache (a new temporary directory), a warm start the directory a
cold compile filled.  The child takes its own times: the array library is imported and
the inputs made first (that cost is not the compiler's), then the compiler is imported,
then the kernel module imported and the kernel launched and synchronized.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .cases import CASES, cdiv
from .devices import Device
from .report import ERROR, MISMATCH, OK, Measurement, Row
from .throughput import describe_error

LAUNCHES = {"tiny": 200, "small": 2000, "full": 10_000}
LAUNCH_ROUNDS = 5
#: Fresh processes the launch mode times each compiler in, by size class.
LAUNCH_PROCESSES = {"tiny": 2, "small": 10, "full": 10}
#: Launches timed back to back before the device is synchronized (outside the timing):
#: few enough that the driver's queue of pending launches never fills, so that a launch
#: never waits for the GPU and the time measured is the host's.
LAUNCH_CHUNK = 200
COMPILE_REPEATS = {"tiny": 1, "small": 3, "full": 5}
IMPORT_REPEATS = {"tiny": 1, "small": 5, "full": 5}
#: Triton's own variable for its cache directory (not a polytile setting).
TRITON_CACHE_VARIABLE = "TRITON_CACHE_DIR"
CHILD_TIMEOUT_S = 300

# -- launch overhead ---------------------------------------------------------------------


def _check_launch(kernel: Any, grid: Any, args: tuple[Any, ...], out: Any, expected: np.ndarray,
                  device: Device) -> Measurement | None:
    """None when one launch gives the right result; else the failed measurement."""
    device.fill_nan(out)
    try:
        kernel[grid](*args, BLOCK_SIZE=1024)
        device.synchronize()
    except Exception as exc:  # noqa: BLE001 - reported in the row, as in the other modes
        return Measurement.failed(ERROR, describe_error(exc))
    got = device.host(out)
    if not np.allclose(got, expected, rtol=1e-5, atol=1e-5):
        return Measurement.failed(MISMATCH, "the 4-argument vector add kernel gave a wrong result; not timed")
    return None


def warm_up(kernel: Any, grid: Any, args: tuple[Any, ...], launches: int, synchronize: Any) -> None:
    """A tenth as many launches as are timed (at least 10), untimed."""
    for _ in range(max(10, launches // 10)):
        kernel[grid](*args, BLOCK_SIZE=1024)
    synchronize()


def time_launches(kernel: Any, grid: Any, args: tuple[Any, ...], launches: int, synchronize: Any) -> list[float]:
    """Host microseconds per ``kernel[grid](*args, BLOCK_SIZE=1024)`` in each of
    :data:`LAUNCH_ROUNDS` rounds of ``launches`` (after :func:`warm_up`)."""
    samples = []
    collecting = gc.isenabled()
    # As timeit does: a garbage collection in one round would be counted as launch time.
    gc.collect()
    gc.disable()
    try:
        for _ in range(LAUNCH_ROUNDS):
            # _host_time's loop, written out: a lambda per launch would be timed too.
            total, done = 0.0, 0
            while done < launches:
                chunk = min(LAUNCH_CHUNK, launches - done)
                synchronize()
                start = time.perf_counter()
                for _ in range(chunk):
                    kernel[grid](*args, BLOCK_SIZE=1024)
                total += time.perf_counter() - start
                done += chunk
            synchronize()
            samples.append(total / launches * 1e6)
    finally:
        if collecting:
            gc.enable()
    return samples


#: The grids the launch mode times, by row name (the child processes rebuild them by name).
LAUNCH_GRIDS = ("tuple grid", "callable grid")


def _launch_grid(name: str) -> Any:
    if name == "tuple grid":
        return (1,)
    return lambda meta: (cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)


_LAUNCH_CHILD = "import sys; from bench.overhead import launch_child; launch_child(sys.argv[1:])"


def launch_child(argv: list[str]) -> None:
    """A launch-mode child process: ``compiler module backend launches``; prints one JSON
    line, per grid: the host µs per launch and, for polytile on NVIDIA, how the timed
    launches went (native dispatcher or Python, and why)."""
    import importlib

    from .devices import open_device

    compiler, module, backend, launches = argv[0], argv[1], argv[2], int(argv[3])
    device = open_device(backend)
    n = 1024
    x, y, out = device.randn((n,), "f32", 1), device.randn((n,), "f32", 2), device.empty((n,), "f32")
    expected = device.host(x) + device.host(y)
    kernel = importlib.import_module(module).add_kernel
    result: dict[str, Any] = {}
    for name in LAUNCH_GRIDS:
        grid = _launch_grid(name)
        failed = _check_launch(kernel, grid, (x, y, out, n), out, expected, device)
        if failed is not None:
            result[name] = {"error": f"{failed.status}: {failed.detail}"}
            continue
        warm_up(kernel, grid, (x, y, out, n), launches, device.synchronize)
        before = _launch_counts(compiler, backend, kernel)
        rounds = time_launches(kernel, grid, (x, y, out, n), launches, device.synchronize)
        # Every round is kept: a slow process shows whether it was slow throughout.
        entry: dict[str, Any] = {"us": statistics.median(rounds), "rounds": [round(r, 3) for r in rounds],
                                 "cpu": _current_cpu()}
        after = _launch_counts(compiler, backend, kernel)
        if before is not None and after is not None:
            entry["native"] = after.native - before.native
            entry["python"] = after.python - before.python
            entry["why"] = {k: v - before.why.get(k, 0) for k, v in after.why.items() if v != before.why.get(k, 0)}
        result[name] = entry
    print(json.dumps(result))


def _current_cpu() -> int | None:
    """The CPU this process last ran on (Linux), or None."""
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def precompile_sources() -> None:
    """Write the bytecode of polytile's packages, the bench's and the examples', as a pip install does.

    With ``PYTHONDONTWRITEBYTECODE`` set (GPU machines and containers often set it) and
    an editable install, every fresh child process would otherwise compile polytile's
    sources again, tens of milliseconds that a user's installed copy never pays, counted
    in its import, compile and launch times.  Triton's installed copy has its bytecode.
    """
    import compileall
    import importlib

    for name in ("polytile", "polytile_nvidia", "polytile_amd", "polytile_lds", "bench"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for directory in getattr(module, "__path__", []):
            compileall.compile_dir(directory, quiet=1, workers=1)
    # The examples, which hold the bench's kernels (the vector add the children launch among them).
    from .polytile_kernels import EXAMPLES_DIR

    compileall.compile_dir(EXAMPLES_DIR, maxlevels=0, quiet=1, workers=1)


def _launch_counts(compiler: str, backend: str, kernel: Any) -> Any:
    if compiler != "polytile" or backend != "nvidia":
        return None
    from polytile_nvidia.launcher import launch_counts

    return launch_counts(kernel)


def _process_summary(processes: list[dict[str, Any]]) -> str:
    """What the polytile children said of their launches, in words (the JSON's ``detail``)."""
    native = [p for p in processes if "native" in p]
    if not native:
        return ""
    slow = [p for p in native if p["python"]]
    if not slow:
        return f"every timed launch of every process went through the native dispatcher ({len(native)} processes)"
    why: dict[str, int] = {}
    for p in slow:
        for reason, count in p["why"].items():
            why[reason] = why.get(reason, 0) + count
    return (f"{len(slow)} of {len(native)} processes made timed launches through Python: "
            + ", ".join(f"{count} {reason}" for reason, count in why.items()))


def _host_time(launch: Any, launches: int, synchronize: Any) -> float:
    """Host microseconds per call of ``launch()`` over ``launches`` calls, timed in chunks
    of :data:`LAUNCH_CHUNK` with the device synchronized between chunks (the time of the
    ``launch`` call itself, about 0.05 µs, is included)."""
    total = 0.0
    done = 0
    while done < launches:
        chunk = min(LAUNCH_CHUNK, launches - done)
        synchronize()
        start = time.perf_counter()
        for _ in range(chunk):
            launch()
        total += time.perf_counter() - start
        done += chunk
    synchronize()
    return total / launches * 1e6


def run_launch(device: Device, compilers: dict[str, Any], size_class: str, target: str | None = None,
               processes: int | None = None, cpu: int | None = None) -> list[Row]:
    """The launch rows: each compiler's kernel checked here, then timed in ``processes``
    fresh processes (default :data:`LAUNCH_PROCESSES`), each with an empty cache, and each
    pinned to CPU ``cpu`` when one is given (so that the spread between processes is the
    launch path's, not the scheduler's moving them between cores)."""
    import types

    n = 1024
    x, y, out = device.randn((n,), "f32", 1), device.randn((n,), "f32", 2), device.empty((n,), "f32")
    expected = device.host(x) + device.host(y)
    launches = LAUNCHES[size_class]
    processes = processes or LAUNCH_PROCESSES[size_class]
    precompile_sources()
    rows = {name: Row("launch", f"launch, {name}", "f32", f"{launches} launches", [launches], "us/launch")
            for name in LAUNCH_GRIDS}
    for compiler, lib in compilers.items():
        failed = {name: _check_launch(lib.add_kernel, _launch_grid(name), (x, y, out, n), out, expected, device)
                  for name in LAUNCH_GRIDS}
        if not isinstance(lib, types.ModuleType):
            for name in LAUNCH_GRIDS:
                failed[name] = failed[name] or Measurement.failed(
                    ERROR, "the launch mode times kernels in fresh processes, which import them: pass a module")
        if all(failed.values()):
            for name in LAUNCH_GRIDS:
                rows[name].results[compiler] = failed[name]
            continue
        timed = _launch_processes(compiler, lib.__name__, device.backend, target or device.backend, launches,
                                  processes, cpu)
        for name in LAUNCH_GRIDS:
            rows[name].results[compiler] = failed[name] or timed[name]
    return list(rows.values())


def _launch_processes(compiler: str, module: str, backend: str, target: str, launches: int,
                      processes: int, cpu: int | None = None) -> dict[str, Measurement]:
    per_grid: dict[str, list[dict[str, Any]]] = {name: [] for name in LAUNCH_GRIDS}
    with tempfile.TemporaryDirectory(prefix="polytile-bench-launch-") as scratch:
        try:
            for i in range(processes):
                env = child_environment(compiler, target, os.path.join(scratch, f"cache{i}"))
                result = json.loads(_run_child(["-c", _LAUNCH_CHILD, compiler, module, backend, str(launches)], env,
                                               cpu=cpu))
                for name in LAUNCH_GRIDS:
                    if "error" in result[name]:
                        status, _, detail = result[name]["error"].partition(": ")
                        failed = Measurement.failed(status, f"in fresh process {i + 1}: {detail}")
                        return {grid: failed for grid in LAUNCH_GRIDS}
                    per_grid[name].append(result[name])
        except ChildFailed as exc:
            failed = Measurement.failed(ERROR, str(exc))
            return {name: failed for name in LAUNCH_GRIDS}
    measured = {}
    for name, results in per_grid.items():
        values = [r["us"] for r in results]
        value = statistics.median(values)
        measured[name] = Measurement(OK, value=value, ms=value * 1e-3, samples=len(values), low=min(values),
                                     high=max(values), processes=results, detail=_process_summary(results))
    return measured


# -- compile and import time -------------------------------------------------------------

_CHILD = r"""
import time
start = time.perf_counter()
import json, sys
compiler, library, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if library == "torch":
    import torch
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    expected = (x + y).cpu().numpy()
    torch.cuda.synchronize()
    sync, host = torch.cuda.synchronize, lambda a: a.cpu().numpy()
else:
    import numpy as np
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = np.empty_like(x)
    expected = x + y
    sync, host = (lambda: None), (lambda a: a)
before_import = time.perf_counter()
if compiler == "polytile":
    import polytile
else:
    import triton
imported = time.perf_counter()
if compiler == "polytile":
    from bench import polytile_kernels as kernels
else:
    from bench import triton_kernels as kernels
kernels.add_kernel[(-(-n // 1024),)](x, y, out, n, BLOCK_SIZE=1024, num_warps=4)
sync()
launched = time.perf_counter()
import numpy
print(json.dumps({"import_ms": (imported - before_import) * 1e3, "first_launch_ms": (launched - imported) * 1e3,
                  "ok": bool(numpy.allclose(host(out), expected, rtol=1e-5, atol=1e-5))}))
"""

_IMPORT_CHILD = "import time; t = time.perf_counter(); import {0}; print((time.perf_counter() - t) * 1e3)"


#: The compilers the child processes know how to import.
_KERNEL_MODULES = ("polytile", "triton")


class ChildFailed(Exception):
    pass


def child_environment(compiler: str, target: str, cache_dir: str | None) -> dict[str, str]:
    """The parent's environment, with ``bench`` importable, the target chosen and the
    compiler's on-disk cache in ``cache_dir``."""
    from polytile import config

    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    # The setting table names the variables, so the harness never spells polytile's.
    env[config.SETTINGS["target"].env[0]] = target
    if cache_dir is not None:
        variable = config.SETTINGS["cache_dir"].env[0] if compiler == "polytile" else TRITON_CACHE_VARIABLE
        env[variable] = cache_dir
    return env


def _run_child(args: list[str], env: dict[str, str], cpu: int | None = None) -> str:
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    try:
        done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S, check=False, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"the child process did not finish in {CHILD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-12:])
        raise ChildFailed(f"the child process exited with status {done.returncode}:\n{tail}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise ChildFailed("the child process printed nothing")
    return lines[-1]


def _first_launches(compiler: str, target: str, library: str, n: int, repeats: int) -> tuple[Measurement, Measurement]:
    """(cold compile, warm start) for one compiler: medians over ``repeats`` processes."""
    cold, warm = [], []
    with tempfile.TemporaryDirectory(prefix="polytile-bench-") as scratch:
        try:
            for i in range(repeats):
                cache = os.path.join(scratch, f"cold{i}")
                result = json.loads(_run_child(["-c", _CHILD, compiler, library, str(n)],
                                               child_environment(compiler, target, cache)))
                if not result["ok"]:
                    wrong = Measurement.failed(MISMATCH, "vector add gave a wrong result in the child process")
                    return wrong, wrong
                cold.append(result["first_launch_ms"])
            for _ in range(repeats):
                result = json.loads(_run_child(["-c", _CHILD, compiler, library, str(n)],
                                               child_environment(compiler, target, cache)))
                warm.append(result["first_launch_ms"])
        except ChildFailed as exc:
            failed = Measurement.failed(ERROR, str(exc))
            return failed, failed
    return (Measurement(OK, value=statistics.median(cold), ms=statistics.median(cold), samples=len(cold)),
            Measurement(OK, value=statistics.median(warm), ms=statistics.median(warm), samples=len(warm)))


def _import_time(compiler: str, target: str, repeats: int) -> Measurement:
    samples = []
    try:
        for _ in range(repeats):
            samples.append(float(_run_child(["-c", _IMPORT_CHILD.format(compiler)],
                                            child_environment(compiler, target, None))))
    except ChildFailed as exc:
        return Measurement.failed(ERROR, str(exc))
    return Measurement(OK, value=statistics.median(samples), ms=statistics.median(samples), samples=len(samples))


def run_compile(device: Device, compilers: dict[str, Any], size_class: str, target: str) -> list[Row]:
    """Import time, cold compile and warm start, for each compiler (by name: the child
    processes import the real kernel modules)."""
    n = CASES["vector_add"].sizes[size_class][0][0]
    size = f"n={n}"
    imports = Row("compile", "import (fresh process)", "-", "-", [], "ms")
    cold = Row("compile", "vector_add cold compile to first launch", "f32", size, [n], "ms")
    warm = Row("compile", "vector_add warm disk cache, first launch after import", "f32", size, [n], "ms")
    precompile_sources()
    for name in (name for name in compilers if name in _KERNEL_MODULES):
        imports.results[name] = _import_time(name, target, IMPORT_REPEATS[size_class])
        cold.results[name], warm.results[name] = _first_launches(name, target, device.library, n,
                                                                 COMPILE_REPEATS[size_class])
    return [imports, cold, warm]


# -- where the host time of a launch goes (NVIDIA) ------------------------------------------


def launch_breakdown(launches: int = 10_000) -> list[tuple[str, float]]:
    """Host microseconds per call of each layer of a polytile launch on the first NVIDIA
    GPU (the 4-argument vector add on torch tensors), and Triton's when installed: for
    finding which layer to make cheaper.  ``python -m bench.overhead`` prints it."""
    import torch
    from polytile_nvidia import driver
    from polytile_nvidia.launcher import Launcher

    from . import polytile_kernels

    n = 1024
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    kernel = polytile_kernels.add_kernel
    compiled = kernel[(4,)](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    assert torch.allclose(out, x + y), "the vector add kernel gave a wrong result"
    native = compiled.launcher
    args = (x, y, out, n)
    native((4, 1, 1), args)
    saved = driver._state.native, driver._state.native_chosen
    driver._state.native, driver._state.native_chosen = None, True
    try:
        bindings = Launcher(native.image, native.kernel_name, list(zip(native.packer.names, native.packer.types)),
                            num_warps=native.num_warps, shared=native.shared)
        bindings((4, 1, 1), args)
    finally:
        driver._state.native, driver._state.native_chosen = saved
    grid = (4,)
    callable_grid = lambda meta: (cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)  # noqa: E731
    layers: list[tuple[str, Any]] = [
        ("kernel[grid](...), tuple grid", lambda: kernel[grid](x, y, out, n, BLOCK_SIZE=1024)),
        ("kernel[grid](...), callable grid", lambda: kernel[callable_grid](x, y, out, n, BLOCK_SIZE=1024)),
        ("launcher(grid, args), native", lambda: native((4, 1, 1), args)),
        ("launcher(grid, args), cuda-bindings", lambda: bindings((4, 1, 1), args)),
        ("packer.pack(args) (general path only)", lambda: native.packer.pack(args)),
        ("torch current stream", lambda: torch._C._cuda_getCurrentRawStream(0)),
    ]
    if native._plan is not None:
        plan, table, launch, counts = native._plan, native._table, native._native.launch, native._counts
        layers.append(("native launch(...) alone", lambda: launch(plan, table, args, 4, 1, 1, None, counts)))
    try:
        from . import triton_kernels

        triton_kernels.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
        layers.append(("Triton kernel[grid](...)",
                       lambda: triton_kernels.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)))
    except Exception as exc:  # noqa: BLE001 - Triton is optional here
        print(f"(Triton not timed: {describe_error(exc)})")
    results = []
    gc.collect()
    gc.disable()
    try:
        for name, call in layers:
            for _ in range(launches // 10):
                call()
            samples = [_host_time(call, launches, torch.cuda.synchronize) for _ in range(LAUNCH_ROUNDS)]
            results.append((name, statistics.median(samples)))
    finally:
        gc.enable()
    return results


if __name__ == "__main__":
    from polytile_nvidia import driver as _driver

    for _name, _us in launch_breakdown():
        print(f"{_name:<42} {_us:6.2f} us")
    print(f"launch path: {_driver.launch_path()}")
