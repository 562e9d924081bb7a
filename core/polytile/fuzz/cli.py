"""The command line of ``python -m polytile.fuzz``: generate kernels, run or compile them, compare, summarize.

    python -m polytile.fuzz --seed 1 --count 200                       # interpreter only
    python -m polytile.fuzz --seed 1 --count 10000 --target nvidia --jobs 16
    python -m polytile.fuzz --seed 1 --count 200 --compile-only --archs sm_80,sm_90a,gfx942

Failing kernels are shrunk and saved as pytest modules (``--save-regressions DIR``).
The exit status is 1 when any kernel mismatched or crashed.  docs/fuzzing.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from pathlib import Path

#: Every GPU arch CI compiles for (tests/language/compile_all.py's list).
ALL_ARCHS = ("nvidia:sm_80", "nvidia:sm_86", "nvidia:sm_89", "nvidia:sm_90a",
             "amd:gfx90a", "amd:gfx942", "amd:gfx950", "amd:gfx1100")


def parse_archs(text: str) -> list[str]:
    """``sm_90a,gfx942,amd:gfx950`` (or ``all``) as full targets."""
    if text.strip() == "all":
        return list(ALL_ARCHS)
    archs = []
    for item in (i.strip() for i in text.split(",") if i.strip()):
        if ":" not in item:
            item = ("nvidia:" if item.startswith("sm_") else "amd:" if item.startswith("gfx") else "") + item
        if ":" not in item:
            raise SystemExit(f"polytile.fuzz: --archs: {item!r} is not an arch; write sm_90a, gfx942 or backend:arch")
        archs.append(item)
    return archs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polytile.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the batch's seed (default 0)")
    parser.add_argument("--count", type=int, default=100, help="how many kernels (default 100)")
    parser.add_argument("--start", type=int, default=0, help="index of the first kernel (default 0)")
    parser.add_argument("--target", default="interp",
                        help="GPU target to compare the interpreter with (nvidia, nvidia:sm_90a...); "
                             "'interp' (default) only runs the interpreter")
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every kernel for --archs (no GPU needed), then run it on the interpreter")
    parser.add_argument("--archs", default="all", help="with --compile-only: comma-separated archs (default all: "
                        + ",".join(a.split(':')[1] for a in ALL_ARCHS) + ")")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--max-statements", type=int, default=10, help="statements per kernel, at most (default 10)")
    parser.add_argument("--save-regressions", type=Path, default=None, metavar="DIR",
                        help="shrink each failing kernel and save it as a pytest module in DIR")
    parser.add_argument("--shrink-limit", type=int, default=5, help="shrink at most this many failures (default 5)")
    parser.add_argument("--shrink-budget", type=float, default=120.0, metavar="SECONDS",
                        help="time to shrink one failure, at most (default 120)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the generated kernel modules to DIR (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true", help="print only failures and the summary")
    options = parser.parse_args(argv)

    archs = parse_archs(options.archs) if options.compile_only else []
    target = None if options.compile_only else options.target
    # The verifier after every pass, and no on-disk cache (ten thousand kernels, each
    # compiled once), unless the environment says otherwise; set while the run lasts
    # (workers inherit them when they start) and taken back after it.
    from .. import config

    added = {name: value for name, value in _DEFAULT_ENVIRONMENT.items() if name not in os.environ}
    os.environ.update(added)
    config.reload()
    try:
        return _run(options, target, archs)
    finally:
        for name in added:
            os.environ.pop(name, None)
        config.reload()


#: Settings a fuzz run uses unless the environment sets them.
_DEFAULT_ENVIRONMENT = {"POLYTILE_VERIFY_EACH": "1", "POLYTILE_CACHE": "0"}


def _run(options: argparse.Namespace, target: str | None, archs: list[str]) -> int:
    directory = options.keep or _temporary_directory()
    directory.mkdir(parents=True, exist_ok=True)

    indices = range(options.start, options.start + options.count)
    work = [(options.seed, i, options.max_statements, str(directory), target, archs) for i in indices]
    started = time.monotonic()
    results = []
    if options.jobs > 1:
        import multiprocessing

        # spawn: a worker must never inherit a parent's CUDA context.
        with multiprocessing.get_context("spawn").Pool(options.jobs) as pool:
            for result in pool.imap_unordered(_run_one, work, chunksize=4):
                results.append(result)
                _report(result, options.quiet, len(results), options.count)
    else:
        for item in work:
            result = _run_one(item)
            results.append(result)
            _report(result, options.quiet, len(results), options.count)
    elapsed = time.monotonic() - started

    failures = sorted((r for r in results if r[2] in ("mismatch", "crash")), key=lambda r: r[1])
    saved = []
    if options.save_regressions and failures:
        saved = _shrink_and_save(failures[:options.shrink_limit], options, directory, target, archs)
    _summary(results, elapsed, options, target, archs, saved)
    return 1 if failures else 0


def _run_one(item: tuple) -> tuple:
    seed, index, max_statements, directory, target, archs = item
    from .generator import generate
    from .runner import check

    started = time.monotonic()
    kernel = generate(seed, index, max_statements)
    outcome = check(kernel, Path(directory), target, archs)
    return (seed, index, outcome.status, outcome.where, outcome.detail, outcome.labels, time.monotonic() - started)


def _report(result: tuple, quiet: bool, done: int, total: int) -> None:
    seed, index, status, where, detail, labels, _ = result
    if status in ("mismatch", "crash"):
        print(f"[{done}/{total}] seed {seed} kernel {index}: {status} in {where} ({', '.join(labels)})\n    "
              + detail.replace("\n", "\n    "), flush=True)
    elif not quiet and done % 500 == 0:
        print(f"[{done}/{total}] ...", flush=True)


def _shrink_and_save(failures: list[tuple], options: argparse.Namespace, directory: Path, target: str | None,
                     archs: list[str]) -> list[str]:
    from .generator import generate
    from .runner import Outcome, check
    from .shrink import save_regression, shrink

    saved = []
    for seed, index, status, where, detail, labels, _ in failures:
        kernel = generate(seed, index, options.max_statements)
        failure = Outcome(status, detail, where, labels)
        compile_archs = [where.split(":", 1)[1]] if where.startswith("compile:") else archs
        small, outcome, tries = shrink(kernel, lambda k: check(k, directory, target, compile_archs), failure,
                                       budget_s=options.shrink_budget)
        path = save_regression(small, outcome, target or "interp", compile_archs, options.save_regressions)
        print(f"shrunk seed {seed} kernel {index} from {len(kernel.statements)} to {len(small.statements)} "
              f"statements in {tries} tries: {path}", flush=True)
        saved.append(str(path))
    return saved


def _summary(results: list[tuple], elapsed: float, options: argparse.Namespace, target: str | None,
             archs: list[str], saved: list[str]) -> None:
    statuses = collections.Counter(r[2] for r in results)
    places = collections.Counter((r[2], r[3]) for r in results if r[2] in ("mismatch", "crash"))
    coverage = collections.Counter(label for r in results for label in r[5])
    mode = f"compile for {','.join(a.split(':')[1] for a in archs)} + interp" if archs else \
        ("interp" if target in (None, "interp") else f"interp vs {target}")
    rows = [
        ("mode", mode),
        ("seed", f"{options.seed} (kernels {options.start}..{options.start + options.count - 1})"),
        ("kernels", str(len(results))),
        ("time", f"{elapsed:.1f} s with {options.jobs} job(s) ({len(results) / max(elapsed, 1e-9):.1f} kernels/s)"),
        ("ok", str(statuses.get("ok", 0))),
        ("mismatches", str(statuses.get("mismatch", 0))),
        ("crashes", str(statuses.get("crash", 0))),
    ]
    rows += [(f"  {status} in {where}", str(count)) for (status, where), count in sorted(places.items())]
    if saved:
        rows += [("regressions saved", str(len(saved)))]
    width = max(len(r[0]) for r in rows)
    print("\npolytile.fuzz summary")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    print("  covered: " + ", ".join(f"{label} {count}" for label, count in sorted(coverage.items())))


def _temporary_directory() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="polytile-fuzz-"))

