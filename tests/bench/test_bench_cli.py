"""``python -m bench`` end to end on the interpreter at tiny sizes: every mode runs, every
result is checked, and the JSON holds what the table shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bench
from bench.cases import CASES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tmp.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "all", "--target", "interp", "--sizes", "tiny", "--no-triton",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    return done, json.loads(out.read_text()) if out.exists() else None


def test_all_modes_run_and_pass(full_run):
    done, report = full_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert report is not None
    assert report["schema"] == 1
    assert {row["mode"] for row in report["rows"]} == {"memory", "matmul", "launch", "compile"}


def test_json_meta_names_the_device_and_versions(full_run):
    _, report = full_run
    meta = report["meta"]
    assert meta["target"] == "interp"
    assert meta["sizes"] == "tiny"
    assert meta["modes"] == ["memory", "matmul", "launch", "compile"]
    assert meta["triton"] == "not asked for (--no-triton)"
    assert set(meta["versions"]) >= {"polytile", "numpy", "python"}
    assert "triton" not in meta["versions"]
    assert meta["copy_bandwidth_gbs"] > 0
    assert meta["date"] and meta["device"]


def test_every_kernel_size_and_dtype_has_a_row(full_run):
    _, report = full_run
    got = {(r["kernel"], r["dtype"], tuple(r["shape"])) for r in report["rows"] if r["mode"] in ("memory", "matmul")}
    want = {(c.name, d, s) for c in CASES.values() for s in c.sizes["tiny"] for d in c.dtypes}
    assert got == want


def test_rows_hold_checked_timed_results(full_run):
    _, report = full_run
    for row in report["rows"]:
        assert set(row["results"]) == {"polytile"}, row
        result = row["results"]["polytile"]
        assert row["ratio"] is None  # no Triton to compare with
        if row["dtype"] in ("bf16", "e4m3"):  # NumPy holds neither
            assert result["status"] == "skipped"
            assert f"numpy arrays cannot hold {row['dtype']}" in result["detail"]
            continue
        assert result["status"] == "ok", row
        assert result["value"] > 0 and result["samples"] >= 1
        if row["metric"] == "GB/s":
            expected = 100 * result["value"] / report["meta"]["copy_bandwidth_gbs"]
            assert row["percent_of_copy"] == pytest.approx(expected)
        else:
            assert row["percent_of_copy"] is None


def test_metrics_per_mode(full_run):
    _, report = full_run
    metrics = {(r["mode"], r["metric"]) for r in report["rows"]}
    assert metrics == {("memory", "GB/s"), ("matmul", "TFLOP/s"), ("launch", "us/launch"), ("compile", "ms")}
    kernels = [r["kernel"] for r in report["rows"] if r["mode"] == "compile"]
    assert kernels == ["import (fresh process)", "vector_add cold compile to first launch",
                       "vector_add warm disk cache, first launch after import"]


def test_the_table_is_printed(full_run):
    done, _ = full_run
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("kernel"))
    assert header.split() == ["kernel", "dtype", "size", "polytile", "triton", "ratio", "%", "copy", "BW"]
    assert any(line.startswith("vector_add") and "GB/s" in line for line in lines)
    assert any(line.startswith("matmul") and "TFLOP/s" in line for line in lines)
    assert "[1] skipped: numpy arrays cannot hold bf16 (the interp target)" in lines


def test_unknown_kernel_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["memory", "--target", "interp", "--kernels", "softmaxx"])
    assert exit_info.value.code == 2
    assert "there is no kernel 'softmaxx'; did you mean 'softmax'?" in capsys.readouterr().err


def test_a_target_the_harness_cannot_run_on_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["memory", "--target", "amd:gfx942"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--target amd:gfx942: the harness runs on 'nvidia' (torch arrays) or 'interp' (NumPy)" in err


def test_the_launch_processes_can_be_pinned_to_a_cpu(tmp_path, monkeypatch):
    """--cpu N pins each timed child to CPU N; the children report where they ran."""
    import os

    from bench import overhead

    seen = []
    real_run = overhead.subprocess.run

    def run(args, **kwargs):
        if kwargs.get("preexec_fn") is not None:
            seen.append(kwargs["preexec_fn"])
        return real_run(args, **kwargs)

    monkeypatch.setattr(overhead.subprocess, "run", run)
    cpu = min(os.sched_getaffinity(0))
    report = bench.run("launch", target="interp", sizes="tiny", triton=False, processes=2, cpu=cpu)
    assert report.meta["launch_cpu"] == cpu and len(seen) == 2
    assert all(r.results["polytile"].status == "ok" for r in report.rows)
    with pytest.raises(SystemExit):
        bench.main(["launch", "--target", "interp", "--cpu", "100000"])
