"""N processes compiling the same kernel at once into one empty on-disk cache: how many
compile it, how long until all have it, and how much CPU they spent, with and without
the lock per cache key.

    python bench/cache_contention.py                          # 8 processes, nvidia:sm_90a and interp
    python bench/cache_contention.py --processes 16 --rounds 5 --targets interp

No GPU is needed: the NVIDIA kernel is compiled for ``nvidia:sm_90a`` (through ptxas
or nvJitLink, whichever the backend finds), not launched.  Each child imports polytile
and the kernel, says it is ready, and waits; the parent starts them all at once (a file
appears) as the ranks of a job do.  ``no lock`` runs the children with locking turned
off (as where ``fcntl`` is missing), which is how every process behaved before the lock:
each one that misses the cache compiles.

Reported per mode (median over the rounds, each round with a new empty cache):
``compiles`` (the sum over the processes), ``wall`` (from the start signal until the
last process has its kernel), ``cpu compile`` (the CPU time the processes spent from the
signal until they had the kernel, summed) and ``cpu total`` (the children's whole CPU
time, imports included, from ``getrusage(RUSAGE_CHILDREN)``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path

    target, cache_dir, ready, go, locked = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5] == "1"
    from polytile import config
    from polytile.ir import types as t
    import polytile.runtime.cache_lock

    if not locked:
        polytile.runtime.cache_lock.fcntl = None
    config.set(cache_dir=cache_dir)
    from bench.polytile_kernels import layer_norm_fwd_kernel as kernel

    f32 = t.PointerType(t.f32)
    arg_types = {"x_ptr": f32, "y_ptr": f32, "w_ptr": f32, "b_ptr": f32, "mean_ptr": f32, "rstd_ptr": f32,
                 "stride": t.i32, "n_cols": t.i32, "eps": t.f32}
    (ready / str(os.getpid())).touch()
    while not go.exists():
        time.sleep(0.0005)
    cpu = time.process_time()
    kernel.compile(arg_types, {"BLOCK_SIZE": 1024}, target=target)
    done = time.time()
    print(json.dumps({"compiled": kernel.compile_count, "read": kernel.disk_hits, "done": done,
                      "cpu": time.process_time() - cpu}))
""")


def one_round(target: str, processes: int, locked: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="polytile-contention-") as scratch:
        scratch_dir = Path(scratch)
        ready, go = scratch_dir / "ready", scratch_dir / "go"
        ready.mkdir()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, target, str(scratch_dir / "cache"), str(ready),
                                   str(go), "1" if locked else "0"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(processes)]
        try:
            while len(list(ready.iterdir())) < processes:
                failed = [p for p in procs if p.poll() is not None]
                if failed:
                    raise SystemExit(f"a child failed before starting:\n{failed[0].communicate()[1]}")
                time.sleep(0.01)
            start = time.time()
            go.touch()
            results = []
            for proc in procs:
                stdout, stderr = proc.communicate(timeout=600)
                if proc.returncode != 0:
                    raise SystemExit(f"a child failed:\n{stderr}")
                results.append(json.loads(stdout.strip().splitlines()[-1]))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "compiles": sum(r["compiled"] for r in results),
        "reads": sum(r["read"] for r in results),
        "wall_ms": 1000 * (max(r["done"] for r in results) - start),
        "cpu_compile_ms": 1000 * sum(r["cpu"] for r in results),
        "cpu_total_ms": 1000 * ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--targets", nargs="+", default=["nvidia:sm_90a", "interp"])
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    rows = []
    for target in args.targets:
        for locked in (False, True):
            rounds = [one_round(target, args.processes, locked) for _ in range(args.rounds)]
            row = {"target": target, "mode": "lock" if locked else "no lock", "processes": args.processes,
                   "rounds": args.rounds}
            for field in rounds[0]:
                row[field] = statistics.median(r[field] for r in rounds)
            rows.append(row)
    print(f"{os.cpu_count()} CPUs, {args.processes} processes, median of {args.rounds} rounds, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'target':<15} {'mode':<8} {'compiles':>8} {'wall ms':>9} {'cpu compile ms':>15} {'cpu total ms':>13}")
    for row in rows:
        print(f"{row['target']:<15} {row['mode']:<8} {row['compiles']:>8.0f} {row['wall_ms']:>9.0f} "
              f"{row['cpu_compile_ms']:>15.0f} {row['cpu_total_ms']:>13.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
