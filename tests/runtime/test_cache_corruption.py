"""Corrupting a real cache entry, file by file and bit by bit (the probe of issue 21).

Every corruption must be either detected (one CacheWarning naming the kernel, the entry
and the problem; one compilation; the right result; the entry rewritten as it was) or
provably harmless (the entry reads back equal to what was written, and is used).  No raw
exception may escape.  Two entries are probed: an interpreter kernel, launched, and an
NVIDIA kernel compiled for sm_90a without a GPU (it needs ptxas, as CI has).

Every byte of metadata.json and every 5th byte of the IR and the cubin (one bit each)
go through the cache's reader, which is fast; a deterministic sample of positions, and
every position the issue names (the digits of num_warps and shared_bytes, the binaries'
list, the target), go through a whole launch or compile, which recompiles.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from polytile import config
from polytile.runtime.cache import CacheWarning, EntryProblem, KernelCache

KERNEL_SOURCE = textwrap.dedent("""
    import polytile.language as pl
    from polytile.runtime import jit

    @jit
    def kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
        mask = offs < n
        pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)
""")

TARGETS = ["interp", "nvidia:sm_90a"]
#: How many evenly spaced positions of each file go through a whole compile.
SAMPLED_POSITIONS = {"interp": 20, "nvidia:sm_90a": 8}


def _import_kernel(directory: Path, name: str):
    import importlib.util

    path = directory / "corrupted_kernel.py"
    if not path.exists():
        path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


class Probe:
    """One compiled entry, a pristine copy of it, and a way to load the kernel again."""

    def __init__(self, target: str, directory: Path, cache_dir: Path):
        self.target = target
        self.cache_dir = cache_dir
        self.directory = directory
        self.attempts = 0
        self.x = np.arange(200, dtype=np.float32)
        self.reference = self.attempt()
        assert self.kernel.compile_count == 1
        (metadata,) = (cache_dir / "kernels").glob("*/*/metadata.json")
        self.entry = metadata.parent
        self.key = self.entry.name
        self.pristine = directory / "pristine"
        shutil.copytree(self.entry, self.pristine)
        self.files = {p.name: p.read_bytes() for p in sorted(self.pristine.iterdir())}
        assert set(self.files) == ({"metadata.json", "kernel.ir"} | ({"cubin.bin"} if target != "interp" else set()))

    def attempt(self):
        """Compile (or load) the kernel as a new process would (a new module, nothing
        in memory); check what came back.  ``self.kernel`` is the JIT function used."""
        self.attempts += 1
        self.kernel = _import_kernel(self.directory, f"corrupted_{self.target.replace(':', '_')}_{self.attempts}")
        if self.target == "interp":
            out = np.zeros_like(self.x)
            compiled = self.kernel[(2,)](self.x, out, 200, BLOCK=128)
            np.testing.assert_array_equal(out, self.x * 2 + 1)
            return compiled
        from polytile.ir import types as t

        arg_types = {"x_ptr": t.PointerType(t.f32), "out_ptr": t.PointerType(t.f32), "n": t.i32}
        return self.kernel.compile(arg_types, {"BLOCK": 128}, target=self.target)

    def restore(self) -> None:
        for path in (self.entry.parent, self.entry):
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                path.unlink()
        shutil.rmtree(self.entry, ignore_errors=True)
        shutil.copytree(self.pristine, self.entry)

    def check(self, label: str, corrupt) -> str:
        """Corrupt the entry, load the kernel; "detected" or "harmless" (or a failed assert)."""
        self.restore()
        corrupt(self.entry)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = self.attempt()  # an exception here is a raw error escaping: the test fails
        cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
        compiled_now = self.kernel.compile_count
        if self.target != "interp":
            assert compiled.binaries == self.reference.binaries, label
            assert compiled.metadata == self.reference.metadata, label
        assert compiled.name == self.reference.name, label
        healed = {p.name: p.read_bytes() for p in sorted(self.entry.iterdir()) if not p.name.endswith(".tmp")}
        assert healed == self.files, f"{label}: the entry was not rewritten as it was"
        if cache_warnings:
            assert len(cache_warnings) == 1 and compiled_now == 1, label
            message = str(cache_warnings[0].message)
            assert "kernel 'kernel'" in message and str(self.entry) in message and "damaged (" in message, message
            assert not compiled.from_disk, label
            return "detected"
        # Not reported: it must have been a plain hit of an entry equal to the pristine one.
        assert compiled_now == 0 and self.kernel.disk_hits == 1 and compiled.from_disk, label
        return "harmless"


@pytest.fixture(params=TARGETS)
def probe(request, tmp_path, _private_kernel_cache):
    target = request.param
    overrides = {"target": "interp"} if target == "interp" else {"nvidia_assembler": "ptxas"}
    if target != "interp":
        from tests.toolchains import ptxas_or_skip

        ptxas_or_skip()
    with config.override(**overrides):
        yield Probe(target, tmp_path, _private_kernel_cache)


def _flip(name: str, position: int, bit: int):
    def corrupt(entry: Path) -> None:
        data = bytearray((entry / name).read_bytes())
        data[position] ^= 1 << bit
        (entry / name).write_bytes(bytes(data))

    return corrupt


def _named_positions(metadata: bytes) -> list[int]:
    """Positions the issue names: the digits of num_warps and shared_bytes (4 -> 6 is one
    bit), the binaries' list ("cubin" -> "cubio" left a kernel with no cubin), the target,
    the format and a parameter's name."""
    text = metadata.decode()
    positions = []
    for needle, offset in (('"num_warps": ', 0), ('"shared_bytes": ', 0), ('"cubin"', -2), ('"target": "', 0),
                           ('"format": ', 0), ('"out_ptr"', -2)):
        at = text.find(needle)
        if at >= 0:
            positions.append(at + len(needle) + offset)
    return positions


def test_every_bit_flip_is_detected_or_reads_back_equal(probe):
    """The cache's reader over every byte of metadata.json (one bit each, the bit cycling
    with the position) and every bit of the bytes the issue names; over every 5th byte
    of the IR and the cubin, whose checksum is in the metadata: fast, no compiling."""
    cache = KernelCache(probe.cache_dir)
    original = cache.read(probe.key, probe.target)
    outcomes = {"detected": 0, "harmless": 0}
    for name, data in probe.files.items():
        stride = 1 if name == "metadata.json" else 5
        positions = [(p, p % 8) for p in range(0, len(data), stride)]
        if name == "metadata.json":
            positions += [(p, bit) for p in _named_positions(data) for bit in range(8)]
        for position, bit in positions:
            corrupted = bytearray(data)
            corrupted[position] ^= 1 << bit
            (probe.entry / name).write_bytes(bytes(corrupted))
            try:
                entry = cache.read(probe.key, probe.target)
            except EntryProblem as problem:
                assert str(problem), (name, position, bit)
                outcomes["detected"] += 1
            else:
                assert entry is not None, (name, position, bit)
                assert (entry.name, entry.ir, entry.binaries, entry.metadata) == (
                    original.name, original.ir, original.binaries, original.metadata), (name, position, bit)
                outcomes["harmless"] += 1
        (probe.entry / name).write_bytes(data)
    # Every file is covered by a checksum: nothing a single bit changes reads back equal.
    assert outcomes["harmless"] == 0 and outcomes["detected"] > 500, outcomes


def test_sampled_bit_flips_through_a_whole_launch_heal_the_entry(probe):
    outcomes = {"detected": 0, "harmless": 0}
    for name, data in probe.files.items():
        count = SAMPLED_POSITIONS[probe.target]
        positions = {round(i * (len(data) - 1) / (count - 1)) for i in range(count)}
        if name == "metadata.json":
            positions |= set(_named_positions(data))
        for position in sorted(positions):
            bit = (position * 5) % 8
            outcomes[probe.check(f"{name}[{position}] bit {bit}", _flip(name, position, bit))] += 1
    assert outcomes["harmless"] == 0, outcomes


@pytest.mark.parametrize("probe", ["nvidia:sm_90a"], indirect=True)
def test_the_issues_num_warps_flip_is_detected(probe):
    text = probe.files["metadata.json"].decode()
    position = text.index('"num_warps": 4') + len('"num_warps": ')

    def four_to_six(entry: Path) -> None:
        (entry / "metadata.json").write_text(text[:position] + "6" + text[position + 1:])

    assert probe.check("num_warps 4 -> 6", four_to_six) == "detected"
    assert probe.attempt().metadata["num_warps"] == 4


def _replace_with_directory(name: str):
    def corrupt(entry: Path) -> None:
        (entry / name).unlink()
        (entry / name).mkdir()
        (entry / name / "stray").write_text("x")

    return corrupt


def _replace_with_fifo(name: str):
    def corrupt(entry: Path) -> None:
        (entry / name).unlink()
        os.mkfifo(entry / name)

    return corrupt


def _truncate(name: str):
    def corrupt(entry: Path) -> None:
        data = (entry / name).read_bytes()
        (entry / name).write_bytes(data[: len(data) // 2])

    return corrupt


def _entry_becomes_a_file(entry: Path) -> None:
    shutil.rmtree(entry)
    entry.write_text("not a directory")


def _shard_becomes_a_file(entry: Path) -> None:
    shutil.rmtree(entry.parent)
    entry.parent.write_text("not a directory")


def test_a_non_file_where_a_file_should_be_is_replaced_not_recompiled_for_ever(probe):
    cases = {"entry is a file": _entry_becomes_a_file}
    for name in probe.files:
        cases[f"{name} is a directory"] = _replace_with_directory(name)
        cases[f"{name} is empty"] = _truncate(name)
        if hasattr(os, "mkfifo"):
            cases[f"{name} is a FIFO"] = _replace_with_fifo(name)
    for label, corrupt in cases.items():
        assert probe.check(label, corrupt) == "detected", label
        # Healed: the next process reads the entry, no warning, no compile.
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)
            assert probe.attempt().from_disk, label
        assert probe.kernel.compile_count == 0, label


def test_a_shard_directory_that_became_a_file_is_replaced(probe):
    probe.restore()
    _shard_becomes_a_file(probe.entry)
    with pytest.warns(CacheWarning, match="parent of .* is not a directory"):
        assert not probe.attempt().from_disk
    assert probe.attempt().from_disk
    assert json.loads((probe.entry / "metadata.json").read_text())["target"] == probe.target


@pytest.mark.parametrize("text", [
    b"[" * 100000 + b"]" * 100000,  # RecursionError in json
    b'{"format": ' + b"9" * 5000 + b"}",  # beyond int's digit limit
    b'{"format": 2, "format": 2}',
    b"\xff\xfe{}",
    b"[]",
    b"",
    b"null",
])
def test_hostile_metadata_text_is_detected(probe, text):
    def replace(entry: Path) -> None:
        (entry / "metadata.json").write_bytes(text)

    assert probe.check(repr(text[:20]), replace) == "detected"
