"""``python -m bench.triton_suite``: run Triton's language tests against polytile (or
Triton itself, for the baseline), and compare the two runs.

    # Triton's own interpreter on this machine (the baseline), then polytile's:
    python -m bench.triton_suite run TRITON/python/test/unit/language/test_core.py --triton --out triton.json
    python -m bench.triton_suite run TRITON/python/test/unit/language/test_core.py --out polytile.json
    # On a GPU machine: --target nvidia --device cuda (and --triton --device cuda for Triton's)
    python -m bench.triton_suite report polytile.json triton.json

The test file is never changed: ``import triton`` finds the shim package (``shim/``)
first on the path.  ``run`` needs pytest-xdist for ``-n``; it writes every test's outcome
and first error line as JSON."""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .groups import group_of, internal_tests, is_internals

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def run(args: argparse.Namespace) -> int:
    tests = Path(args.tests).resolve()
    env = dict(os.environ)
    paths = [str(REPO)] if args.triton else [str(HERE / "shim"), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TRITON_SUITE_RESULTS"] = str(Path(args.out).resolve())
    if args.triton:
        if args.target == "interp":
            env["TRITON_INTERPRET"] = "1"
    else:
        env["POLYTILE_TARGET"] = args.target
        env.pop("TRITON_INTERPRET", None)
    device = args.device or ("cpu" if args.target == "interp" else "cuda")
    command = [sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider", "-p",
               "bench.triton_suite.recorder", "--device", device]
    if args.workers:
        command += ["-n", str(args.workers)]
    if args.k:
        command += ["-k", args.k]
    if args.test_timeout:
        import importlib.util

        if importlib.util.find_spec("pytest_timeout") is None:
            raise SystemExit("--test-timeout needs pytest-timeout (pip install pytest-timeout)")
        command += [f"--timeout={args.test_timeout:g}"]
    # Triton's conftest (the --device option, its fixtures) sits above the test file.
    root = next((d for d in tests.parents if (d / "conftest.py").is_file() and d != tests.parent), tests.parent)
    command += ["--rootdir", str(root)]
    if args.offset and not 0 <= args.offset < args.sample:
        raise SystemExit(f"--offset must be from 0 to {args.sample - 1} (one of the --sample {args.sample} parts), "
                         f"got {args.offset}")
    if args.sample > 1:
        chosen = sample(command, env, root, args.sample, args.offset)
        print(f"sample: {len(chosen)} tests (one in {args.sample} of each test function's cases, from case "
              f"{args.offset})", flush=True)
        listing = Path(args.out).resolve().with_suffix(".tests.txt")
        listing.write_text("".join(f"{test}\n" for test in chosen))
        command = [part for part in command if part != str(tests)] + chosen
    print("$", " ".join(command), flush=True)
    code = _call(command, env, root, args.time_limit)
    out = Path(args.out)
    if out.is_file():  # which test functions touch Triton's internals, for the report
        results = json.loads(out.read_text())
        results["__internals__"] = internal_tests(tests.read_text())
        out.write_text(json.dumps(results, indent=0, sort_keys=True))
    return code


def _call(command: list[str], env: dict, root: Path, time_limit: float | None) -> int:
    """Run pytest; past ``time_limit`` seconds interrupt it as Ctrl-C would, so that it
    stops and writes what it has (the report counts the tests not run as missing)."""
    process = subprocess.Popen(command, env=env, cwd=str(root))
    try:
        return process.wait(timeout=time_limit)
    except subprocess.TimeoutExpired:
        print(f"time limit ({time_limit:g} s) reached: interrupting the run", flush=True)
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


def sample(command: list[str], env: dict, root: Path, every: int, offset: int = 0) -> list[str]:
    """One in ``every`` of each test function's collected cases, from case ``offset``:
    the same tests on every machine and for both tools (collection order is the
    parametrization's), every test function represented (with offset 0, its first case),
    and the ``every`` offsets together the whole file."""
    serial = [part for i, part in enumerate(command) if part != "-n" and (i == 0 or command[i - 1] != "-n")]
    listed = subprocess.run(serial + ["--collect-only"], env=env, cwd=str(root), capture_output=True,
                            text=True)
    tests = [line.strip() for line in listed.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if not tests:
        raise SystemExit(f"collecting the tests found none:\n{listed.stdout[-2000:]}{listed.stderr[-2000:]}")
    seen: collections.Counter = collections.Counter()
    chosen = []
    for test in tests:
        function = test.split("[", 1)[0]
        if seen[function] % every == offset:
            chosen.append(test)
        seen[function] += 1
    return chosen


def _merged(paths: str) -> dict:
    """The results of one tool: one JSON file, or several (comma-separated: parts of a
    run, ``--sample K --offset J``) merged."""
    merged: dict = {}
    for path in paths.split(","):
        results = json.loads(Path(path).read_text())
        internals = results.pop("__internals__", None)
        merged.update(results)
        if internals is not None:
            merged["__internals__"] = sorted(set(merged.get("__internals__", [])) | set(internals))
    return merged


def report(args: argparse.Namespace) -> int:
    ours = _merged(args.polytile)
    theirs = _merged(args.triton)
    functions = ours.pop("__internals__", None)
    theirs.pop("__internals__", None)
    passed_by_triton = {test for test, (outcome, _) in theirs.items() if outcome == "passed"}
    internals = {test for test in passed_by_triton if ours.get(test, ["missing", ""])[0] != "passed"
                 and is_internals(test, ours.get(test, ["", ""])[1], functions)}
    counted = passed_by_triton - internals
    passed = {test for test in counted if ours.get(test, ["missing", ""])[0] == "passed"}
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for test in sorted(counted - passed):
        outcome, message = ours.get(test, ["missing", "not run"])
        groups[group_of(message) if outcome == "failed" else f"{outcome}: {group_of(message)}"].append(test)
    total = len(counted)
    print(f"Triton passes {len(passed_by_triton)} tests; {len(internals)} of them test Triton's internals "
          f"(counted apart).")
    print(f"polytile passes {len(passed)} of the other {total}: {100 * len(passed) / max(total, 1):.1f}%.")
    print(f"polytile also passes {sum(1 for t, (o, _) in ours.items() if o == 'passed' and t not in passed_by_triton)} "
          f"tests Triton does not pass here.\n")
    print("| tests | failing group | example |\n|---|---|---|")
    for name, tests in sorted(groups.items(), key=lambda item: -len(item[1]))[:args.groups]:
        print(f"| {len(tests)} | {name.replace('|', '/')} | `{tests[0].split('::')[-1][:60]}` |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.triton_suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run a Triton test file against polytile (or Triton)")
    run_parser.add_argument("tests", help="Triton's test file, e.g. python/test/unit/language/test_core.py")
    run_parser.add_argument("--triton", action="store_true", help="run Triton itself (the baseline)")
    run_parser.add_argument("--target", default="interp", help="interp (default) or nvidia")
    run_parser.add_argument("--device", help="the tests' --device (default: cpu for interp, else cuda)")
    run_parser.add_argument("-n", "--workers", type=int, default=0, help="pytest-xdist workers")
    run_parser.add_argument("-k", help="pytest's -k expression")
    run_parser.add_argument("--sample", type=int, default=1, metavar="K",
                            help="run one in K of each test function's cases (the same on every machine; "
                                 "the list goes beside --out as .tests.txt)")
    run_parser.add_argument("--offset", type=int, default=0, metavar="J",
                            help="with --sample K, the part to run: cases J, J + K, J + 2K... of each test "
                                 "function (0 to K - 1; the K parts are the whole file)")
    run_parser.add_argument("--test-timeout", type=float, metavar="SECONDS",
                            help="fail a test that runs longer (pytest-timeout; Triton's interpreter stalls on a "
                                 "few tests for many minutes)")
    run_parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                            help="interrupt the run after this long, keeping what it measured")
    run_parser.add_argument("--out", required=True, help="where the JSON results go")
    report_parser = commands.add_parser("report", help="compare polytile's results with Triton's")
    report_parser.add_argument("polytile", help="polytile's results (JSON; parts of one run comma-separated)")
    report_parser.add_argument("triton", help="Triton's results, likewise")
    report_parser.add_argument("--groups", type=int, default=30, help="how many failing groups to list")
    args = parser.parse_args(argv)
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
