"""The table, the ratio, the percent of copy bandwidth, the JSON and the plot's errors."""

from __future__ import annotations

import json
import sys

import pytest

from bench.report import Measurement, Report, Row, format_table, plot

META = {"device": "NVIDIA H100 80GB HBM3", "target": "nvidia:sm_90a", "date": "2026-11-22T00:00:00+00:00",
        "versions": {"polytile": "0.1.0", "triton": "3.6.0"}, "copy_bandwidth_gbs": 3000.0,
        "copy_method": "torch copy of 1 GiB"}


def row(kernel, metric, polytile, triton=None, dtype="f32", size="2^20"):
    results = {"polytile": polytile}
    if triton is not None:
        results["triton"] = triton
    return Row("memory" if metric == "GB/s" else "launch", kernel, dtype, size, [1 << 20], metric, results)


def ok(value):
    return Measurement("ok", value=value, ms=1.0, samples=10)


def test_ratio_is_polytile_speed_over_triton_speed():
    assert row("vector_add", "GB/s", ok(1500.0), ok(3000.0)).ratio() == pytest.approx(0.5)
    # For times, less is faster: 2 us against Triton's 8 us is 4 times as fast.
    assert row("launch", "us/launch", ok(2.0), ok(8.0)).ratio() == pytest.approx(4.0)
    assert row("vector_add", "GB/s", ok(1500.0)).ratio() is None
    assert row("vector_add", "GB/s", ok(1500.0), Measurement.failed("error", "boom")).ratio() is None


def test_percent_of_copy_bandwidth_is_for_rates_in_bytes_only():
    assert row("vector_add", "GB/s", ok(1500.0)).percent_of_copy(3000.0) == pytest.approx(50.0)
    assert row("launch", "us/launch", ok(2.0)).percent_of_copy(3000.0) is None
    assert row("vector_add", "GB/s", ok(1500.0)).percent_of_copy(None) is None


def test_table_layout():
    report = Report(dict(META), [
        row("vector_add", "GB/s", ok(2700.0), ok(2800.0)),
        row("softmax", "GB/s", Measurement.failed("mismatch", "output 'out' differs"), ok(2000.0), size="4096x128"),
        row("launch, tuple grid", "us/launch", ok(2.5), ok(12.0), size="10000 launches"),
    ])
    lines = format_table(report).splitlines()
    assert lines[0] == ("polytile benchmarks on NVIDIA H100 80GB HBM3 (target nvidia:sm_90a), "
                        "2026-11-22T00:00:00+00:00")
    assert lines[1] == "versions: polytile 0.1.0, triton 3.6.0"
    assert lines[2] == "device copy bandwidth: 3000 GB/s (bytes read + written by torch copy of 1 GiB)"
    header, rule, *body = lines[4:9]
    assert header.split() == ["kernel", "dtype", "size", "polytile", "triton", "ratio", "%", "copy", "BW"]
    assert set(rule.replace(" ", "")) == {"-"}
    # Every line of the table is as wide as its rule, the numbers right-aligned.
    assert all(len(line) == len(rule) for line in body)
    assert body[0].split() == ["vector_add", "f32", "2^20", "2700", "GB/s", "2800", "GB/s", "0.96x", "90%"]
    assert body[1].split() == ["softmax", "f32", "4096x128", "MISMATCH", "[1]", "2000", "GB/s", "-", "-"]
    assert body[2].split() == ["launch,", "tuple", "grid", "f32", "10000", "launches", "2.5", "us/launch", "12.0",
                               "us/launch", "4.80x", "-"]
    assert lines[9] == ""
    assert "[1] softmax f32 4096x128 polytile: mismatch: output 'out' differs" in lines


def test_failures_get_one_note_each_and_skips_share_one():
    skipped = Measurement.failed("skipped", "numpy arrays cannot hold bf16 (the interp target)")
    report = Report(dict(META), [
        row("a", "GB/s", skipped, dtype="bf16"), row("b", "GB/s", skipped, dtype="bf16"),
        row("c", "GB/s", Measurement.failed("error", "first")),
        row("d", "GB/s", Measurement.failed("error", "second")),
    ])
    table = format_table(report)
    assert table.count("SKIPPED [1]") == 2
    assert "ERROR [2]" in table and "ERROR [3]" in table
    assert "[1] skipped: numpy arrays cannot hold bf16 (the interp target)" in table
    assert "[3] d f32 2^20 polytile: error: second" in table


def test_json_round_trip(tmp_path):
    report = Report(dict(META), [row("vector_add", "GB/s", ok(1500.0), ok(3000.0))])
    path = tmp_path / "out.json"
    report.write_json(path)
    data = json.loads(path.read_text())
    assert data["schema"] == 1
    assert data["meta"] == META
    (item,) = data["rows"]
    assert item["ratio"] == pytest.approx(0.5)
    assert item["percent_of_copy"] == pytest.approx(50.0)
    assert item["results"]["triton"] == {"status": "ok", "value": 3000.0, "ms": 1.0, "samples": 10, "detail": ""}


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    report = Report(dict(META), [row("vector_add", "GB/s", ok(1500.0))])
    with pytest.raises(RuntimeError, match=r"--plot needs matplotlib, which is not installed \(pip install"):
        plot(report, tmp_path / "out.png")


def test_a_long_failure_keeps_its_first_lines_under_the_table():
    message = "internal compiler error in pass 'x'\nIt was raised at a.py:1\nThis is a bug\nline 4\nline 5"
    report = Report(dict(META), [row("vector_add", "GB/s", Measurement.failed("error", message))])
    table = format_table(report)
    assert ("[1] vector_add f32 2^20 polytile: error: internal compiler error in pass 'x'\n"
            "    It was raised at a.py:1\n    This is a bug\n    (2 more lines: --json keeps the whole message)") in table
    assert "line 4" not in table
    assert report.to_json()["rows"][0]["results"]["polytile"]["detail"] == message


def test_the_vendor_column_appears_with_torch_results():
    # torch (cuBLAS, SDPA) serves the matmul mode's cases only: its column and its ratio
    # show where some row has it, "-" in the others; the JSON keeps the ratio too.
    mm = Row("matmul", "matmul", "f16", "8192x8192x8192", [8192] * 3, "TFLOP/s",
             {"polytile": ok(600.0), "triton": ok(620.0), "torch": ok(750.0)})
    attention = Row("matmul", "attention", "f16", "4x32x4096x64", [4, 32, 4096, 64], "TFLOP/s",
                    {"polytile": ok(300.0), "triton": ok(380.0)})
    report = Report(dict(META), [mm, attention])
    lines = format_table(report).splitlines()
    header, _, first, second = lines[4:8]
    assert header.split() == ["kernel", "dtype", "size", "polytile", "triton", "ratio", "torch", "vs", "torch",
                              "%", "copy", "BW"]
    assert first.split() == ["matmul", "f16", "8192x8192x8192", "600", "TFLOP/s", "620", "TFLOP/s", "0.97x", "750",
                             "TFLOP/s", "0.80x", "-"]
    assert second.split()[-3:] == ["-", "-", "-"]
    data = report.to_json()
    assert data["rows"][0]["ratio_to_torch"] == pytest.approx(0.8)
    assert "ratio_to_torch" not in data["rows"][1]


def test_a_module_that_serves_some_cases_only_is_skipped_for_the_others():
    from types import SimpleNamespace

    import bench.polytile_kernels as polytile_kernels
    from bench.cases import CASES
    from bench.devices import TIMING_PLANS, NumpyDevice
    from bench.throughput import run_cases

    library = SimpleNamespace(CASES=frozenset({"matmul"}))  # no add_kernel: launching it would fail
    rows = run_cases([CASES["vector_add"]], "tiny", NumpyDevice(), {"polytile": polytile_kernels, "lib": library},
                     TIMING_PLANS["tiny"])
    assert rows and all(set(row.results) == {"polytile"} for row in rows if row.dtype == "f32")


def test_a_launch_row_says_under_the_table_how_polytiles_launches_went():
    # A slow launch row then shows in the text whether it left the native dispatcher.
    measured = Measurement("ok", value=26.0, ms=0.026, samples=6, low=22.5, high=36.1,
                           processes=[{"us": 26.0, "native": 0, "python": 51000}] * 6,
                           detail="6 of 6 processes made timed launches through Python: 51000 native launcher pending")
    report = Report(dict(META), [row("launch, tuple grid", "us/launch", measured, ok(13.7), size="10000 launches")])
    lines = format_table(report).splitlines()
    assert ("launch, tuple grid, polytile: 6 of 6 processes made timed launches through Python: "
            "51000 native launcher pending") in lines
