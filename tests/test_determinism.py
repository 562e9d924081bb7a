"""Compiles are deterministic: the same kernel gives the same IR text, PTX, cubin and HSACO
bytes whatever the process's ``PYTHONHASHSEED`` (a set or dict iterated in hash order
anywhere in the compiler would show here as a diff).

Each compile runs in a child process (this file run as a script) under a different hash
seed; the children report the SHA-256 of every stage's IR and of every artifact, and the
test asserts they are all equal.  The kernels cover a dot, a reduction, a scan, atomics
and a noinline call.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polytile as pt
import polytile.language as pl

ALL_TARGETS = ("nvidia:sm_80", "nvidia:sm_90a", "amd:gfx942", "amd:gfx1100")
#: The targets a child compiles for (the test leaves out AMD where no ld.lld links HSACO).
TARGETS = tuple(os.environ.get("PT_DETERMINISM_TARGETS", ",".join(ALL_TARGETS)).split(","))
HASH_SEEDS = ("0", "1", "12345")


@pt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    rows = pl.program_id(0) * BM + pl.arange(0, BM)
    cols = pl.program_id(1) * BN + pl.arange(0, BN)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, pl.cdiv(K, BK)):
        ks = k * BK + pl.arange(0, BK)
        a = pl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = pl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = pl.dot(a, b, acc)
    pl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@pt.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: pl.constexpr):
    row = pl.program_id(0)
    cols = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = pl.exp(x - pl.max(x, axis=0))
    total = pl.cumsum(e, axis=0)
    pl.store(out_ptr + row * n_cols + cols, e / pl.sum(e, axis=0) + total * 0.0, mask=cols < n_cols)


@pt.jit(noinline=True)
def scaled_load(p, i, scale):
    return pl.load(p + i) * scale


@pt.jit
def call_kernel(x_ptr, out_ptr, hist_ptr, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    s = scaled_load(x_ptr, pid, 2.0)
    x = pl.load(x_ptr + offs, mask=mask, other=0.0)
    pl.atomic_add(hist_ptr + (offs % 8), 1, mask=mask)
    if s > 0:
        x = x + s
    pl.store(out_ptr + offs, x, mask=mask)


def _kernels():
    import numpy as np

    f16, f32, i32 = np.zeros(4, np.float16), np.zeros(4, np.float32), np.zeros(4, np.int32)
    return [
        (matmul_kernel, (f16, f16, f32, 64, 64, 64), {"BM": 32, "BN": 32, "BK": 32}),
        (softmax_kernel, (f32, f32, 100), {"BLOCK": 128}),
        (call_kernel, (f32, f32, i32, 1000), {"BLOCK": 256}),
    ]


def fingerprints() -> dict[str, str]:
    """SHA-256 of every stage's IR and every artifact of every kernel and target."""
    from polytile.compiler import compile_module

    digests: dict[str, str] = {}

    def add(key: str, data: str | bytes) -> None:
        digests[key] = hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()

    for fn, args, meta in _kernels():
        module = fn.lower(*args, **meta)
        from polytile.ir import print_ir

        add(f"{fn.__name__}/frontend", print_ir(module))
        for target in TARGETS:
            result = compile_module(module.clone(), target, label=fn.__name__, record_stages=True)
            for stage in result.stages:
                add(f"{fn.__name__}/{target}/ir-after-{stage.name}", stage.ir)
            for key, value in sorted(result.artifacts.items()):
                if key in ("ptx", "llvm_ir") or isinstance(value, bytes):
                    add(f"{fn.__name__}/{target}/{key}", value)
    return digests


def _available_targets() -> tuple[str, ...]:
    from polytile_amd.errors import ToolNotFoundError
    from polytile_amd.toolchain import find_lld

    from tests.toolchains import REQUIRE_LLD_VARIABLE, ptxas_or_skip

    ptxas_or_skip()
    try:
        find_lld()
    except ToolNotFoundError:
        if os.environ.get(REQUIRE_LLD_VARIABLE):
            raise
        return tuple(t for t in ALL_TARGETS if not t.startswith("amd:"))
    return ALL_TARGETS


def _children(tmp_path: Path, targets: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The digests of one child per hash seed (run at once: each compiles for a while)."""
    root = Path(__file__).resolve().parents[1]
    running = {}
    for seed in HASH_SEEDS:
        env = {**os.environ, "PYTHONHASHSEED": seed, "POLYTILE_CACHE": "0",
               "PT_DETERMINISM_TARGETS": ",".join(targets)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH", "")]))
        out = tmp_path / f"digests-{seed}.json"
        process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(out)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        running[seed] = (process, out)
    results = {}
    for seed, (process, out) in running.items():
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"the child with PYTHONHASHSEED={seed} failed:\n{output[-3000:]}"
        results[seed] = json.loads(out.read_text())
    return results


def test_compiles_are_byte_identical_across_hash_seeds(tmp_path):
    targets = _available_targets()
    runs = _children(tmp_path, targets)
    first = runs[HASH_SEEDS[0]]
    # Every kind of output is there for every kernel (a missing artifact would make the
    # comparison vacuous).
    for fn, _, _ in _kernels():
        assert f"{fn.__name__}/frontend" in first
        for target in targets:
            kinds = ("ptx", "cubin") if target.startswith("nvidia") else ("hsaco",)
            for kind in kinds:
                assert f"{fn.__name__}/{target}/{kind}" in first, f"no {kind} for {fn.__name__} on {target}"
            assert any(k.startswith(f"{fn.__name__}/{target}/ir-after-") for k in first)
    for seed, digests in runs.items():
        differing = sorted(k for k in first.keys() | digests.keys() if first.get(k) != digests.get(k))
        assert not differing, f"PYTHONHASHSEED={seed} changed: {', '.join(differing)}"


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(fingerprints(), indent=1, sort_keys=True))
