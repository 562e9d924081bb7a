"""``python -m bench``: parse the command line, run the modes, print and save the results."""

from __future__ import annotations

import argparse
import datetime
import difflib
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .cases import CASES, cases_for
from .devices import TIMING_PLANS, Device, open_device
from .overhead import run_compile, run_launch
from .report import Report, format_table, plot
from .throughput import run_cases

MODES = ("memory", "matmul", "launch", "compile")
SIZE_CLASSES = ("tiny", "small", "full")


class UsageError(Exception):
    """A command line that cannot run here; the message says why, in the user's terms."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Time polytile and, when it is installed, Triton on the same kernels and sizes.",
        epilog="Exit status: 0 when every result was checked and timed, 1 when a result was wrong or a kernel "
        "failed (the table says which), 2 for a bad command line.")
    parser.add_argument("mode", nargs="?", default="all", choices=(*MODES, "all"),
                        help="what to measure: memory-bound kernels (GB/s), the fp16 matmul (TFLOP/s), host time "
                        "per launch, compile and import time, or all of them (default)")
    parser.add_argument("--target", default="auto",
                        help="'nvidia' (the first NVIDIA GPU, torch arrays), 'nvidia:<arch>', 'interp' (the "
                        "interpreter, NumPy arrays) or 'auto' (default: nvidia when torch sees a GPU)")
    parser.add_argument("--sizes", choices=SIZE_CLASSES, default=None,
                        help="problem sizes: 'full' (the issue's sizes; default on a GPU), 'small' (a quick subset) "
                        "or 'tiny' (seconds on the interpreter; the default there)")
    parser.add_argument("--kernels", nargs="+", metavar="NAME", default=None,
                        help=f"only these kernels of the memory and matmul modes: {', '.join(CASES)}")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="also draw the rates to FILE (needs matplotlib)")
    parser.add_argument("--no-triton", action="store_true", help="time polytile only, even if Triton is installed")
    parser.add_argument("--cpu", type=_cpu, metavar="N", default=None,
                        help="the launch mode pins each timed process to CPU N (Linux), so that the spread between "
                             "processes is not the scheduler's; both compilers alike (default: not pinned)")
    parser.add_argument("--processes", type=_positive, metavar="N", default=None,
                        help="the launch mode times each compiler in N fresh processes, each with an empty cache "
                        "(default: 10; 2 at the tiny sizes)")
    return parser


def _cpu(text: str) -> int:
    """A CPU this process may run on (Linux: ``os.sched_getaffinity``)."""
    import os

    if not hasattr(os, "sched_setaffinity"):
        raise argparse.ArgumentTypeError("pinning to a CPU needs Linux (os.sched_setaffinity)")
    allowed = sorted(os.sched_getaffinity(0))
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value not in allowed:
        raise argparse.ArgumentTypeError(f"must be a CPU this process may run on ({allowed[0]}-{allowed[-1]}), "
                                         f"not {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of processes, 1 or more, not {text!r}")
    return value


def _torch_sees_a_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_target(requested: str) -> str:
    """The polytile target string for ``--target``."""
    from polytile import Target, TargetError

    if requested == "auto":
        requested = "nvidia" if _torch_sees_a_gpu() else "interp"
    try:
        parsed = Target.parse(requested, where="--target")
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    if parsed.backend not in ("nvidia", "interp"):
        raise UsageError(f"--target {requested}: the harness runs on 'nvidia' (torch arrays) or 'interp' (NumPy)")
    if requested != "nvidia":
        return requested
    from polytile.plugins.manager import get_plugin_manager

    devices = get_plugin_manager().backends.describe_devices()
    for target, _ in devices:
        if target.backend == "nvidia":
            return str(target)
    found = ", ".join(description for _, description in devices) or "none"
    raise UsageError(f"--target nvidia: polytile finds no NVIDIA GPU (active devices: {found}); "
                     "see `polytile info`")


def select_cases(mode: str, kernels: Sequence[str] | None) -> list[Any]:
    if kernels:
        for name in kernels:
            if name not in CASES:
                close = difflib.get_close_matches(name, CASES, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise UsageError(f"--kernels: there is no kernel '{name}'{hint} (there are: {', '.join(CASES)})")
    return [case for case in cases_for(mode) if not kernels or case.name in kernels]


def load_compilers(device: Device, want_triton: bool) -> tuple[dict[str, Any], str]:
    """The kernel modules to time, by compiler name, and what became of Triton, in words."""
    from . import polytile_kernels

    compilers: dict[str, Any] = {"polytile": polytile_kernels}
    if not want_triton:
        return compilers, "not asked for (--no-triton)"
    if device.backend != "nvidia":
        return compilers, f"not run: Triton has no {device.backend} target"
    try:
        from . import triton_kernels
    except ImportError as exc:
        return compilers, f"not installed ({exc})"
    compilers["triton"] = triton_kernels
    try:  # the vendor libraries' column (cuBLAS, SDPA), where torch has them
        import torch  # noqa: F401

        from . import torch_kernels
    except ImportError:
        return compilers, "timed"
    compilers["torch"] = torch_kernels
    return compilers, "timed"


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _versions(device: Device, compilers: dict[str, Any]) -> dict[str, str]:
    import polytile

    versions = {"polytile": polytile.__version__}
    if "triton" in compilers:
        import triton

        versions["triton"] = triton.__version__
    versions.update(device.versions())
    versions["python"] = platform.python_version()
    return versions


def run(mode: str = "all", *, target: str = "auto", sizes: str | None = None, kernels: Sequence[str] | None = None,
        triton: bool = True, compilers: dict[str, Any] | None = None, processes: int | None = None,
        cpu: int | None = None, progress: Callable[[str], None] = lambda line: None) -> Report:
    """Run ``mode`` and return the report; the API behind ``python -m bench``.

    ``compilers`` replaces the kernel modules timed in the memory, matmul and launch
    modes (tests pass a deliberately wrong one); the compile mode always uses the real ones.
    ``processes``: how many fresh processes the launch mode times each compiler in;
    ``cpu``: the CPU they are pinned to (None: not pinned).
    """
    from polytile import config

    modes = MODES if mode == "all" else (mode,)
    chosen = resolve_target(target)
    cases = {m: select_cases(m, kernels) for m in ("memory", "matmul") if m in modes}
    with config.override(target=chosen):
        device = open_device(chosen.split(":")[0])
        size_class = sizes or ("tiny" if device.backend == "interp" else "full")
        triton_status = "replaced by the caller"
        if compilers is None:
            compilers, triton_status = load_compilers(device, triton)
        plan = TIMING_PLANS[size_class]
        meta: dict[str, Any] = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device.name(), "target": chosen, "sizes": size_class, "modes": list(modes),
            "triton": triton_status, "versions": _versions(device, compilers), "platform": platform.platform(),
            "commit": _commit(), "copy_bandwidth_gbs": None, "launch_cpu": cpu,
        }
        report = Report(meta)
        if "memory" in modes:
            progress("measuring the device copy bandwidth")
            meta["copy_bandwidth_gbs"] = device.copy_bandwidth_gbs(size_class)
            meta["copy_method"] = f"{device.library} copy of {'4 MiB' if size_class == 'tiny' else '1 GiB'}"
        for m in ("memory", "matmul"):
            if m in modes:
                report.rows += run_cases(cases[m], size_class, device, compilers, plan, progress)
        # Launch and compile time are the compilers' own: the vendor libraries (modules
        # with CASES, serving some cases only) have no kernels there.
        compilers_only = {name: lib for name, lib in compilers.items() if not hasattr(lib, "CASES")}
        if "launch" in modes:
            progress("launch overhead (fresh child processes)")
            report.rows += run_launch(device, compilers_only, size_class, chosen, processes, cpu)
        if "compile" in modes:
            progress("compile and import time (child processes)")
            report.rows += run_compile(device, compilers_only, size_class, chosen)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def progress(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)

    try:
        report = run(args.mode, target=args.target, sizes=args.sizes, kernels=args.kernels,
                     triton=not args.no_triton, processes=args.processes, cpu=args.cpu, progress=progress)
    except UsageError as exc:
        parser.error(str(exc))
    except RuntimeError as exc:  # no torch, no GPU: the device cannot be opened
        print(f"python -m bench: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(report))
    if args.json:
        report.write_json(args.json)
        print(f"\nwrote {args.json}")
    if args.plot:
        try:
            plot(report, args.plot)
        except RuntimeError as exc:
            print(f"python -m bench: error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}")
    return 1 if report.failed() else 0
