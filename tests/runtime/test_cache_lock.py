"""The lock per cache key: of several processes compiling one kernel at once, one
compiles and the others wait and read its entry.  Real processes, real locks."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from polytile import config
from polytile.runtime import cache_lock
from polytile.runtime.cache import CacheWarning, KernelCache

KERNEL_SOURCE = textwrap.dedent("""
    import polytile.language as pl
    from polytile.runtime import jit

    @jit
    def kernel(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, offs.to(pl.float32) * 3.0, mask=offs < n)
""")

#: A process that compiles the kernel once everyone is ready.  The compiler is slowed
#: down (COMPILE_DELAY seconds) so that all of them miss the cache at the same time,
#: as eight ranks of a job starting together do: without the lock every one compiles.
COMPILER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    import numpy as np
    from polytile import config
    import polytile.compiler

    module_dir, cache_dir, ready, go, delay = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), float(sys.argv[5])
    config.set(cache_dir=cache_dir, target="interp")
    compile_module = polytile.compiler.compile_module

    def slow_compile(*args, **kwargs):
        time.sleep(delay)
        return compile_module(*args, **kwargs)

    polytile.compiler.compile_module = slow_compile
    sys.path.insert(0, module_dir)
    import locked_kernel
    out = np.zeros(16, np.float32)
    ready.mkdir(exist_ok=True)
    (ready / str(os.getpid())).touch()
    while not go.exists():
        time.sleep(0.001)
    locked_kernel.kernel[(1,)](out, 16, BLOCK=16)
    print(json.dumps({"compiled": locked_kernel.kernel.compile_count, "read": locked_kernel.kernel.disk_hits,
                      "right": bool((out == np.arange(16) * 3).all())}))
""")


def _start_compilers(tmp_path: Path, count: int, delay: float) -> list[dict]:
    (tmp_path / "locked_kernel.py").write_text(KERNEL_SOURCE)
    script = tmp_path / "compiler.py"
    script.write_text(COMPILER)
    ready, go = tmp_path / "ready", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), str(tmp_path / "cache"), str(ready),
                               str(go), str(delay)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(count)]
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() or len(list(ready.iterdir())) < count:
            assert time.monotonic() < deadline, "the compilers did not start"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.01)
        go.touch()
        results = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, stderr
            assert "CacheWarning" not in stderr, stderr
            results.append(json.loads(stdout.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_eight_processes_compile_one_kernel_once(tmp_path):
    results = _start_compilers(tmp_path, 8, delay=0.5)
    assert all(r["right"] for r in results), results
    assert sum(r["compiled"] for r in results) == 1, results
    assert sum(r["read"] for r in results) == 7, results


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from polytile.runtime.cache_lock import KeyLock
    with KeyLock(Path(sys.argv[1]), 5.0) as lock:
        assert lock.held
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held", proc.stderr.read()
    return proc


def test_a_process_killed_holding_the_lock_leaves_no_stale_lock(tmp_path):
    path = tmp_path / "locks" / "ab" / "key.lock"
    holder = _hold_lock(path, 60)
    with pytest.warns(CacheWarning), cache_lock.KeyLock(path, 0.2) as lock:
        assert not lock.held  # held by the live process: given up after the timeout
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with cache_lock.KeyLock(path, 5.0) as lock:
        assert lock.held and lock.waited < 1.0


def test_a_holder_that_never_finishes_is_waited_for_at_most_the_timeout(tmp_path, _private_kernel_cache):
    # The kernel's key: the name of the entry a compile into another directory makes.
    with config.override(cache_dir=tmp_path / "probe-cache"):
        _compile_fresh(tmp_path, "stuck_probe")
    (metadata,) = (tmp_path / "probe-cache" / "kernels").glob("*/*/metadata.json")
    key = metadata.parent.name
    cache = KernelCache(_private_kernel_cache)
    holder = _hold_lock(cache.lock_path(key), 60)
    try:
        start = time.monotonic()
        with config.override(cache_lock_timeout=1), pytest.warns(
                CacheWarning, match=rf"kernel 'kernel': waited 1 s for another process \(pid {holder.pid} on host "
                r".+\) compiling the same kernel \(lock .+\.lock\); compiling it here as well"):
            kernel = _compile_fresh(tmp_path, "stuck_waiter")
        assert 1.0 <= time.monotonic() - start < 30
        assert kernel.compile_count == 1
    finally:
        holder.kill()
        holder.wait()
    assert cache.load(key, "interp") is not None  # written without the lock all the same


def _compile_fresh(tmp_path: Path, name: str):
    import importlib.util

    path = tmp_path / "locked_kernel_f.py"
    path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = np.zeros(16, np.float32)
    with config.override(target="interp"):
        module.kernel[(1,)](out, 16, BLOCK=16)
    assert (out == np.arange(16) * 3).all()
    return module.kernel


def test_without_fcntl_kernels_compile_and_cache_without_a_lock(tmp_path, _private_kernel_cache, monkeypatch,
                                                               recwarn):
    monkeypatch.setattr(cache_lock, "fcntl", None)  # as on Windows
    assert _compile_fresh(tmp_path, "no_fcntl_a").compile_count == 1
    assert _compile_fresh(tmp_path, "no_fcntl_b").disk_hits == 1
    assert not (_private_kernel_cache / "locks").exists()
    assert not [w for w in recwarn if w.category is CacheWarning]


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_a_file_system_that_refuses_locks_compiles_without_one(tmp_path, _private_kernel_cache, monkeypatch,
                                                             recwarn, code):
    import fcntl

    def refuse(fd, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(cache_lock, "fcntl", type("NoLocks", (), {"flock": staticmethod(refuse),
                                                                    "LOCK_EX": fcntl.LOCK_EX, "LOCK_NB": fcntl.LOCK_NB,
                                                                    "LOCK_UN": fcntl.LOCK_UN}))
    assert _compile_fresh(tmp_path, f"refused_{code}_a").compile_count == 1
    assert _compile_fresh(tmp_path, f"refused_{code}_b").disk_hits == 1
    assert not [w for w in recwarn if w.category is CacheWarning]


def test_a_lock_directory_that_cannot_be_made_is_no_error(tmp_path, _private_kernel_cache, recwarn):
    _private_kernel_cache.mkdir(parents=True)
    (_private_kernel_cache / "locks").write_text("in the way")
    assert _compile_fresh(tmp_path, "no_lock_dir_a").compile_count == 1
    assert _compile_fresh(tmp_path, "no_lock_dir_b").disk_hits == 1
    assert not [w for w in recwarn if w.category is CacheWarning]


def test_the_lock_names_its_holder_and_is_shared_between_threads_and_processes(tmp_path):
    path = tmp_path / "locks" / "cd" / "key.lock"
    with cache_lock.KeyLock(path, 5.0) as first:
        assert first.held
        assert path.read_text().startswith(f"pid {os.getpid()} on host ")
        with pytest.warns(CacheWarning, match=f"pid {os.getpid()}"), cache_lock.KeyLock(path, 0.1) as second:
            assert not second.held  # a second open file in one process is a second holder
    with cache_lock.KeyLock(path, 0.1) as third:
        assert third.held


def test_a_directory_where_the_lock_file_belongs_is_replaced(tmp_path):
    path = tmp_path / "locks" / "ef" / "key.lock"
    (path / "stray").mkdir(parents=True)
    with cache_lock.KeyLock(path, 1.0) as lock:
        assert lock.held and path.is_file()
