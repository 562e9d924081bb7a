"""``python -m bench.triton_suite`` end to end on a small Triton-style test file (with its
own conftest, as Triton's has): the shim answers ``import triton`` with polytile's
modules, the recorder writes every outcome, and the report counts what Triton passes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
import pytest


def pytest_addoption(parser):
    parser.addoption("--device", action="store", default="cuda")


@pytest.fixture
def device(request):
    return request.config.getoption("--device")
'''

TESTS = '''
import numpy as np
import pytest
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def add_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)


def test_the_language_is_polytiles(device):
    import polytile.language as pl

    assert tl is pl and libdevice.tanh is pl.extra.libdevice.tanh and device == "cpu"


@pytest.mark.parametrize("n", [8, 16])
def test_add(n):
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    add_kernel[(1,)](x, out, N=n)
    assert (out == x + 1).all()


def test_fails():
    assert 1 == 2, "results differ"


def test_internal():
    triton.compile("kernel.ttir")
'''


def _suite(tmp_path: Path) -> Path:
    """A Triton-style test tree (python/test with its conftest) holding TESTS."""
    suite = tmp_path / "python" / "test"
    (suite / "unit").mkdir(parents=True)
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "unit" / "test_small.py").write_text(textwrap.dedent(TESTS))
    return suite


def test_a_triton_style_file_runs_against_polytile_and_is_reported(tmp_path):
    suite = _suite(tmp_path)
    ours = tmp_path / "polytile.json"
    done = subprocess.run([sys.executable, "-m", "bench.triton_suite", "run", str(suite / "unit" / "test_small.py"),
                           "--out", str(ours)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    results = json.loads(ours.read_text())
    assert results.pop("__internals__") == ["test_internal"]  # the test functions that use Triton's internals
    outcomes = {test.split("::")[-1]: outcome for test, (outcome, _) in results.items()}
    assert outcomes == {"test_the_language_is_polytiles": "passed", "test_add[8]": "passed",
                        "test_add[16]": "passed", "test_fails": "failed", "test_internal": "failed"}, done.stdout
    # As if Triton passed all five here: one is counted apart, one fails.
    theirs = tmp_path / "triton.json"
    theirs.write_text(json.dumps({test: ["passed", ""] for test in results}))
    shown = subprocess.run([sys.executable, "-m", "bench.triton_suite", "report", str(ours), str(theirs)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "Triton passes 5 tests; 1 of them test Triton's internals (counted apart)." in shown
    assert "polytile passes 3 of the other 4: 75.0%." in shown
    assert "| 1 | results differ from NumPy | `test_fails` |" in shown


def test_a_sample_takes_one_in_k_of_each_function_and_lists_them(tmp_path):
    suite = _suite(tmp_path)
    ours = tmp_path / "polytile.json"
    done = subprocess.run([sys.executable, "-m", "bench.triton_suite", "run", str(suite / "unit" / "test_small.py"),
                           "--sample", "2", "--time-limit", "240", "--out", str(ours)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "sample: 4 tests (one in 2 of each test function's cases, from case 0)" in done.stdout, done.stdout + done.stderr
    results = json.loads(ours.read_text())
    results.pop("__internals__")
    # Every function keeps its first case; test_add's second case is left out.
    assert sorted(test.split("::")[-1] for test in results) == [
        "test_add[8]", "test_fails", "test_internal", "test_the_language_is_polytiles"]
    listed = (tmp_path / "polytile.tests.txt").read_text().split()
    assert sorted(test.split("::")[-1] for test in listed) == sorted(test.split("::")[-1] for test in results)


def test_the_parts_of_a_sample_are_the_whole_file_and_reports_merge_them(tmp_path):
    suite = _suite(tmp_path)
    parts = []
    for offset in (0, 1):
        out = tmp_path / f"part{offset}.json"
        done = subprocess.run([sys.executable, "-m", "bench.triton_suite", "run", str(suite / "unit" / "test_small.py"),
                               "--sample", "2", "--offset", str(offset), "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert out.is_file(), done.stdout + done.stderr
        parts.append(out)
    names = [sorted(t.split("::")[-1] for t in json.loads(p.read_text()) if t != "__internals__") for p in parts]
    # Part 1 holds each function's second case: only test_add has one.
    assert names == [["test_add[8]", "test_fails", "test_internal", "test_the_language_is_polytiles"], ["test_add[16]"]]
    theirs = tmp_path / "triton.json"
    theirs.write_text(json.dumps({test: ["passed", ""] for p in parts for test in json.loads(p.read_text())
                                  if test != "__internals__"}))
    shown = subprocess.run([sys.executable, "-m", "bench.triton_suite", "report", f"{parts[0]},{parts[1]}", str(theirs)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "Triton passes 5 tests; 1 of them test Triton's internals (counted apart)." in shown
    assert "polytile passes 3 of the other 4: 75.0%." in shown
    bad = subprocess.run([sys.executable, "-m", "bench.triton_suite", "run", str(suite / "unit" / "test_small.py"),
                          "--sample", "2", "--offset", "2", "--out", str(tmp_path / "x.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--offset must be from 0 to 1 (one of the --sample 2 parts), got 2" in bad.stderr


def test_a_per_test_timeout_is_pytest_timeouts(tmp_path):
    import importlib.util

    suite = _suite(tmp_path)
    done = subprocess.run([sys.executable, "-m", "bench.triton_suite", "run", str(suite / "unit" / "test_small.py"),
                           "-k", "test_add", "--test-timeout", "60", "--out", str(tmp_path / "out.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    if importlib.util.find_spec("pytest_timeout") is None:
        assert done.returncode != 0 and "--test-timeout needs pytest-timeout (pip install pytest-timeout)" in done.stderr
    else:
        assert "--timeout=60" in done.stdout and json.loads((tmp_path / "out.json").read_text())
