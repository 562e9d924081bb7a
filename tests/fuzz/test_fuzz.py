"""The differential fuzzer (polytile.fuzz) in CI.

A fixed-seed batch, chosen from the first kernels of :data:`SEED` so that together they
use every statement kind the generator has, is compiled for every GPU arch of CI
(``PT_TEST_ARCHS`` chooses others, as in tests/language) with the verifier after every
pass: no crash, every artifact present.  The whole batch also runs on the interpreter.
The fuzzer's own parts (comparison, shrinking, saved regressions, the command line) are
tested on small cases.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from polytile import config
from polytile.fuzz import cli
from polytile.fuzz.generator import KINDS, generate
from polytile.fuzz.program import Array
from polytile.fuzz.runner import CRASH, MISMATCH, OK, Outcome, check, compare_array
from polytile.fuzz.shrink import regression_source, shrink

SEED = 2026
POOL = 300


def _covering_batch() -> list[int]:
    """Indices among the first :data:`POOL` kernels that cover every statement label,
    picked greedily (each pick adds the most labels not yet covered)."""
    labels = {i: set(generate(SEED, i).labels) for i in range(POOL)}
    wanted = set().union(*labels.values())
    chosen: list[int] = []
    covered: set[str] = set()
    while covered != wanted:
        best = max(labels, key=lambda i: (len(labels[i] - covered), -i))
        chosen.append(best)
        covered |= labels[best]
    return sorted(chosen)


BATCH = _covering_batch()


def _archs() -> list[str]:
    text = os.environ.get("PT_TEST_ARCHS", "").strip()
    return cli.parse_archs(text) if text and text != "all" else list(cli.ALL_ARCHS)


@pytest.fixture
def verify_each(monkeypatch):
    monkeypatch.setenv("POLYTILE_VERIFY_EACH", "1")
    monkeypatch.setenv("POLYTILE_CACHE", "0")
    config.reload()
    assert config.get("verify_each") is True


def test_the_batch_covers_every_statement_kind():
    labels = {label.split("-")[0] for i in BATCH for label in generate(SEED, i).labels}
    kinds = {kind.split("_")[0] for kind in KINDS} - {"lowp"} | {"lowp", "store", "noinline"}
    assert kinds <= labels, f"not covered: {kinds - labels}"
    assert len(BATCH) <= 30, "the CI batch grew: keep it under a minute on two cores"


#: Batch kernels that hit a known bug, each written down as a strict xfail in
#: tests/fuzz/regressions: the archs (by prefix) it fails on, and what the error says.
#: Checked strictly: once the bug is fixed the test says so and the entry must go.
KNOWN_BUGS: dict = {}


@pytest.mark.compile_all
@pytest.mark.parametrize("index", BATCH)
def test_batch_compiles_for_every_arch(index, tmp_path, verify_each):
    archs = _archs()
    known = KNOWN_BUGS.get(index) if importlib.util.find_spec("polytile_lds") is not None else None
    failing = [a for a in archs if known and a.startswith(known[0])]
    kernel = generate(SEED, index)
    outcome = check(kernel, tmp_path, "interp", [a for a in archs if a not in failing])
    assert outcome.status == OK, f"kernel {index} ({', '.join(outcome.labels)}): {outcome.where}: {outcome.detail}"
    for arch in failing:
        outcome = check(kernel, tmp_path, "interp", [arch])
        assert outcome.status == CRASH and known[1] in outcome.detail, (
            f"kernel {index} on {arch}: the known bug ({known[2]}) did not happen; got {outcome.status} "
            f"{outcome.detail[:300]}: is it fixed? Then remove it from KNOWN_BUGS")


def test_batch_runs_on_the_interpreter(tmp_path):
    failures = []
    for index in BATCH:
        outcome = check(generate(SEED, index), tmp_path, "interp", [])
        if outcome.status != OK:
            failures.append(f"kernel {index}: {outcome.where}: {outcome.detail}")
    assert not failures, "\n".join(failures)


def test_generation_is_deterministic():
    assert generate(5, 17).source() == generate(5, 17).source()
    assert generate(5, 17).source() != generate(5, 18).source()


# --------------------------------------------------------------------------------------
# Comparing


def test_integers_and_exact_floats_must_agree_bit_for_bit():
    ints = Array("o", "i32", "out", "V")
    assert compare_array(ints, np.array([1, 2, 3], np.int32), np.array([1, 2, 3], np.int32)) == ""
    assert "1 of 3 elements differ; first at (2,)" in compare_array(ints, np.array([1, 2, 3], np.int32),
                                                                    np.array([1, 2, 4], np.int32))
    exact = Array("o", "f32", "out", "V", error=0.0)
    one_ulp = np.nextafter(np.float32(1), np.float32(2))
    assert compare_array(exact, np.array([1.0], np.float32), np.array([one_ulp], np.float32))
    assert compare_array(exact, np.array([np.nan], np.float32), np.array([np.nan], np.float32)) == ""


def test_inexact_floats_are_compared_with_their_bound():
    sum_ = Array("o", "f32", "out", "S", error=1e-3)
    assert compare_array(sum_, np.array([10.0], np.float32), np.array([10.0015], np.float32)) == ""
    assert compare_array(sum_, np.array([10.0], np.float32), np.array([10.01], np.float32))


def test_low_precision_outputs_are_compared_as_numbers():
    bf16 = Array("o", "bf16", "out", "V", error=0.0)
    one, two = np.array([0x3F80], np.uint16), np.array([0x4000], np.uint16)
    assert compare_array(bf16, one, one) == ""
    assert "interp" in compare_array(bf16, one, two)


# --------------------------------------------------------------------------------------
# Shrinking and saved regressions


def test_shrink_keeps_only_what_the_failure_needs(tmp_path):
    kernel = generate(SEED, next(i for i in range(POOL) if "where" in generate(SEED, i).labels
                                 and len(generate(SEED, i).statements) >= 6))

    def fake_check(candidate):
        # "Fails" while a where statement is left: the shrinker must keep it (and what
        # it reads) and drop everything else it can.
        if any(s.label == "where" for s in candidate.statements):
            return Outcome(MISMATCH, "fake", "compare")
        return Outcome(OK)

    small, outcome, tries = shrink(kernel, fake_check, Outcome(MISMATCH, "fake", "compare"))
    assert outcome.status == MISMATCH and tries > 0
    assert len(small.statements) < len(kernel.statements)
    assert [s.label for s in small.statements].count("where") == 1
    defined = set()
    for statement in small.statements:  # still a valid kernel: nothing reads a dropped value
        assert set(statement.uses) <= defined, statement.lines
        if statement.defines is not None:
            defined.add(statement.defines.name)
    assert min(small.sizes.get("n", 1), small.sizes.get("M", 1)) == 1


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"fuzz_regression_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("xfail", [None, "a known bug"])
def test_a_saved_regression_is_a_runnable_test(tmp_path, xfail):
    kernel = generate(SEED, BATCH[0])
    failure = Outcome(MISMATCH, "out3 differs", "compare", kernel.labels)
    path = tmp_path / f"test_{kernel.name}.py"
    path.write_text(regression_source(kernel, failure, "nvidia", [], xfail))
    module = _import(path)
    test = getattr(module, f"test_{kernel.name}")
    marks = {p.values[0]: [m.name for m in p.marks] for p in test.pytestmark[0].args[1] if hasattr(p, "marks")}
    assert "gpu" in marks["nvidia"]
    assert ("xfail" in marks["nvidia"]) == bool(xfail)
    test("interp")  # runs the kernel on the interpreter; raises on a crash


def test_a_compile_crash_is_saved_with_its_arch(tmp_path):
    kernel = generate(SEED, BATCH[0])
    source = regression_source(kernel, Outcome(CRASH, "boom", "compile:amd:gfx942"), "interp", ["amd:gfx942"])
    assert '"compile:amd:gfx942"' in source


# --------------------------------------------------------------------------------------
# The command line


def test_the_command_line_runs_a_batch_and_summarizes(capsys, tmp_path):
    status = cli.main(["--seed", str(SEED), "--count", "3", "--quiet", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "polytile.fuzz summary" in out
    for row, value in (("kernels", 3), ("ok", 3), ("mismatches", 0), ("crashes", 0)):
        assert re.search(rf"^  {row} +{value}$", out, re.MULTILINE), (row, out)
    assert len(list(tmp_path.glob("fuzz_*.py"))) == 3


def test_archs_are_spelled_as_short_names_or_targets():
    assert cli.parse_archs("sm_90a, gfx942,amd:gfx950") == ["nvidia:sm_90a", "amd:gfx942", "amd:gfx950"]
    assert cli.parse_archs("all") == list(cli.ALL_ARCHS)
    with pytest.raises(SystemExit, match="not an arch"):
        cli.parse_archs("h100")


# --------------------------------------------------------------------------------------
# The bf16/fp8 emulation the interpreter runs (a GPU run compares it bit for bit with
# the hardware's conversions; here it is checked against rounding computed in float64)


def _reference_rounding(x: np.ndarray, mantissa_bits: int, min_exponent: int) -> np.ndarray:
    x = x.astype(np.float64)
    exponent = np.maximum(np.floor(np.log2(np.where(x == 0, 1.0, np.abs(x)))), min_exponent)
    quantum = np.exp2(exponent - mantissa_bits)
    return (np.round(x / quantum) * quantum).astype(np.float32)  # np.round: half to even


def test_the_interpreters_bf16_and_fp8_rounding_is_round_to_nearest_even(tmp_path):
    from polytile.fuzz import lowp

    source = "import polytile as pt\nimport polytile.language as pl\n" + lowp.HELPERS + '''

@pt.jit
def rounding(x_ptr, bf16_ptr, e4m3_ptr, e5m2_ptr, e5m2_bits_ptr, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(bf16_ptr + offs, round_bf16(x))
    pl.store(e4m3_ptr + offs, round_fp8(x, -6, 3))
    pl.store(e5m2_ptr + offs, round_fp8(x, -14, 2))
    pl.store(e5m2_bits_ptr + offs, f32_to_e5m2_bits(x))
'''
    path = tmp_path / "rounding.py"
    path.write_text(source)
    module = _import(path)
    rng = np.random.default_rng(0)
    # Random magnitudes across the normal and subnormal ranges of fp8, ties included
    # (multiples of half the spacing), both signs.
    x = np.concatenate([
        rng.uniform(-400, 400, 2048), rng.uniform(-1e-2, 1e-2, 1024),
        np.arange(-64, 64) * 2.0 ** -11, np.arange(-64, 64) * 0.0625, [0.0, -0.0, 1.0, 448.0, 300.0],
    ]).astype(np.float32)
    x = np.resize(x, (len(x) + 255) // 256 * 256).astype(np.float32)
    outputs = [np.zeros_like(x) for _ in range(3)] + [np.zeros(x.shape, np.uint8)]
    module.rounding[(len(x) // 256,)](x, *outputs, BLOCK=256, target="interp")
    bf16, e4m3, e5m2, e5m2_bits = outputs
    bits = x.view(np.uint32)
    expected_bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    assert np.array_equal(bf16, _reference_rounding(x, 7, -126)) and np.array_equal(bf16, expected_bf16)
    assert np.array_equal(e4m3, _reference_rounding(x, 3, -6))
    assert np.array_equal(e5m2, _reference_rounding(x, 2, -14))
    decoded = (e5m2_bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    assert np.array_equal(decoded, e5m2)


def test_the_interpreters_fp8_and_bf16_decoding_covers_every_finite_code(tmp_path):
    from polytile.fuzz import lowp

    source = "import polytile as pt\nimport polytile.language as pl\n" + lowp.HELPERS + '''

@pt.jit
def decode(codes_ptr, bf16_ptr, e4m3_ptr, e5m2_ptr):
    offs = pl.arange(0, 256)
    codes = pl.load(codes_ptr + offs)
    pl.store(bf16_ptr + offs, bf16_bits_to_f32((codes.to(pl.uint16) << 8) | 0x5))
    pl.store(e4m3_ptr + offs, e4m3_bits_to_f32(codes))
    pl.store(e5m2_ptr + offs, e5m2_bits_to_f32(codes))
'''
    path = tmp_path / "decode.py"
    path.write_text(source)
    module = _import(path)
    codes = np.arange(256, dtype=np.uint8)
    bf16, e4m3, e5m2 = (np.zeros(256, np.float32) for _ in range(3))
    module.decode[(1,)](codes, bf16, e4m3, e5m2, target="interp")
    sign = np.where(codes >> 7, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 7
    expected = sign * np.where(exponent == 0, mantissa * 2.0 ** -9, (1 + mantissa / 8) * 2.0 ** (exponent - 7.0))
    finite = (codes & 0x7F) != 0x7F  # e4m3fn's only NaN codes
    assert np.array_equal(e4m3[finite], expected[finite].astype(np.float32))
    halves = ((codes.astype(np.uint16) << 8).view(np.float16)).astype(np.float32)
    assert np.array_equal(e5m2[np.isfinite(halves)], halves[np.isfinite(halves)])
    words = ((codes.astype(np.uint32) << 8) | 0x5) << 16
    finite_bf16 = np.isfinite(words.view(np.float32))
    assert np.array_equal(bf16[finite_bf16], words.view(np.float32)[finite_bf16])


def test_the_command_line_leaves_the_environment_as_it_found_it(tmp_path, monkeypatch):
    monkeypatch.delenv("POLYTILE_VERIFY_EACH", raising=False)
    monkeypatch.delenv("POLYTILE_CACHE", raising=False)
    assert cli.main(["--seed", str(SEED), "--count", "1", "--quiet", "--keep", str(tmp_path)]) == 0
    assert "POLYTILE_VERIFY_EACH" not in os.environ and "POLYTILE_CACHE" not in os.environ
