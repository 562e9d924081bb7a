"""The benchmark cases: one table entry per kernel.

A case says how to make its inputs on a device, how to launch its kernel (the same host
code for polytile and Triton: ``lib`` is ``bench.polytile_kernels`` or
``bench.triton_kernels``), what the right answer is (NumPy, on a host copy of the
inputs), how many bytes it must move or flops it must do, and its sizes for each size
class.  Block sizes and ``num_warps`` are chosen by the launch code, as a user would,
so both compilers get the same ones (the autotuned matmul: the same configs to tune over,
bench/matmul_configs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .devices import ITEMSIZE, Device

Size = tuple[int, ...]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def row_warps(block: int) -> int:
    """``num_warps`` for one program per row (Triton's layer norm tutorial's rule)."""
    return min(max(block // 256, 1), 8)


class Problem:
    """The arrays and scalars of one launch; ``p.x`` reads either.

    ``outputs`` are checked after a launch.  When ``rows`` is set, the arrays named in
    ``row_arrays`` have one row per program and the check reads a sample of those rows
    (rows are computed independently, so a sample checks them fully).
    """

    def __init__(self, arrays: dict[str, Any], scalars: dict[str, Any], outputs: tuple[str, ...],
                 rows: int | None = None, row_arrays: tuple[str, ...] = ()):
        self.arrays = arrays
        self.scalars = scalars
        self.outputs = outputs
        self.rows = rows
        self.row_arrays = frozenset(row_arrays)

    def __getattr__(self, name: str) -> Any:
        for table in (self.__dict__.get("arrays", {}), self.__dict__.get("scalars", {})):
            if name in table:
                return table[name]
        raise AttributeError(f"the problem has no array or scalar named {name!r}")


@dataclass(frozen=True)
class Case:
    name: str
    mode: str  # "memory" (reported in GB/s) or "matmul" (TFLOP/s)
    description: str
    dtypes: tuple[str, ...]
    sizes: dict[str, tuple[Size, ...]]  # by size class: "tiny", "small", "full"
    make: Callable[[Device, Size, str], Problem]
    launch: Callable[[Any, Problem], None]
    reference: Callable[[dict[str, np.ndarray], dict[str, Any]], dict[str, np.ndarray]]
    work: Callable[[Size, int], float]  # bytes (memory) or flops (matmul)
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype -> (rtol, atol)
    #: What to say of a result that was checked and timed (the JSON's ``detail``): the
    #: config an autotuner chose, say.  Given the kernel module.
    note: Callable[[Any], str] | None = None

    @property
    def metric(self) -> str:
        return "TFLOP/s" if self.mode == "matmul" else "GB/s"

    def rate(self, size: Size, dtype: str, ms: float) -> float:
        scale = 1e12 if self.mode == "matmul" else 1e9
        return self.work(size, ITEMSIZE[dtype]) / (ms * 1e-3) / scale

    def tolerance_for(self, dtype: str) -> tuple[float, float]:
        # The default only where the case has none (fp8 has no default).
        return self.tolerance[dtype] if dtype in self.tolerance else DEFAULT_TOLERANCE[dtype]


DEFAULT_TOLERANCE = {"f32": (1e-4, 1e-5), "f16": (1e-2, 1e-2), "bf16": (2e-2, 1e-3)}


def size_label(size: Size) -> str:
    if len(size) == 1:
        n = size[0]
        return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)
    return "x".join(str(d) for d in size)


# -- elementwise -------------------------------------------------------------------------


def _make_binary(device: Device, size: Size, dtype: str) -> Problem:
    (n,) = size
    arrays = {"x": device.randn(size, dtype, 1), "y": device.randn(size, dtype, 2), "out": device.empty(size, dtype)}
    return Problem(arrays, {"n": n, "alpha": 0.5}, outputs=("out",))


def _launch_add(lib: Any, p: Problem) -> None:
    lib.add_kernel[(cdiv(p.n, 1024),)](p.x, p.y, p.out, p.n, BLOCK_SIZE=1024, num_warps=4)


def _launch_axpy(lib: Any, p: Problem) -> None:
    lib.axpy_kernel[(cdiv(p.n, 1024),)](p.x, p.y, p.out, p.alpha, p.n, BLOCK_SIZE=1024, num_warps=4)


def _three_vectors(size: Size, itemsize: int) -> float:
    return 3 * size[0] * itemsize


def _make_copy2d(device: Device, size: Size, dtype: str) -> Problem:
    rows, cols = size
    arrays = {"x": device.randn(size, dtype, 3), "out": device.empty(size, dtype)}
    return Problem(arrays, {"rows": rows, "cols": cols}, outputs=("out",), rows=rows, row_arrays=("x", "out"))


def _launch_copy2d_descriptor(lib: Any, p: Problem) -> None:
    # Blocks of 64 x 128 through host descriptors made at every launch (on Hopper: a bulk
    # copy into shared memory per block, then stores).
    bm, bn = (64, 128) if p.cols >= 128 else (16, 16)
    src = lib.TensorDescriptor.from_tensor(p.x, [bm, bn])
    dst = lib.TensorDescriptor.from_tensor(p.out, [bm, bn])
    lib.copy2d_descriptor_kernel[(cdiv(p.rows, bm), cdiv(p.cols, bn))](src, dst, BLOCK_M=bm, BLOCK_N=bn, num_warps=4)


def _two_arrays(size: Size, itemsize: int) -> float:
    return 2 * size[0] * size[1] * itemsize


# -- row-wise ----------------------------------------------------------------------------


def _make_rows(device: Device, size: Size, dtype: str, out_shape: str) -> Problem:
    rows, cols = size
    x = device.randn(size, dtype, 3)
    out = device.empty(size if out_shape == "same" else (rows,), dtype)
    return Problem({"x": x, "out": out}, {"rows": rows, "cols": cols, "stride": device.row_stride(x)},
                   outputs=("out",), rows=rows, row_arrays=("x", "out"))


def _launch_softmax(lib: Any, p: Problem) -> None:
    block = next_power_of_2(p.cols)
    num_warps = 16 if block >= 4096 else 8 if block >= 2048 else 4  # Triton's softmax tutorial
    lib.softmax_kernel[(p.rows,)](p.out, p.x, p.stride, p.stride, p.cols, BLOCK_SIZE=block, num_warps=num_warps)


def _softmax_reference(host: dict[str, np.ndarray], scalars: dict[str, Any]) -> dict[str, np.ndarray]:
    x = host["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}


def _make_layer_norm(device: Device, size: Size, dtype: str) -> Problem:
    rows, cols = size
    x = device.randn(size, dtype, 4)
    arrays = {"x": x, "w": device.randn((cols,), dtype, 5), "b": device.randn((cols,), dtype, 6),
              "y": device.empty(size, dtype), "mean": device.empty((rows,), "f32"), "rstd": device.empty((rows,), "f32")}
    scalars = {"rows": rows, "cols": cols, "stride": device.row_stride(x), "eps": 1e-5,
               "itemsize": ITEMSIZE[dtype]}
    return Problem(arrays, scalars,
                   outputs=("y", "mean", "rstd"), rows=rows, row_arrays=("x", "y", "mean", "rstd"))


def _launch_layer_norm(lib: Any, p: Problem) -> None:
    # Triton's layer norm tutorial: rows up to 64 KB in one block, else a loop of them.
    block = min(65536 // p.itemsize, next_power_of_2(p.cols))
    lib.layer_norm_fwd_kernel[(p.rows,)](p.x, p.y, p.w, p.b, p.mean, p.rstd, p.stride, p.cols, p.eps,
                                         BLOCK_SIZE=block, num_warps=row_warps(block))


def _layer_norm_reference(host: dict[str, np.ndarray], scalars: dict[str, Any]) -> dict[str, np.ndarray]:
    x = host["x"].astype(np.float64)
    mean = x.mean(axis=1)
    rstd = 1 / np.sqrt(x.var(axis=1) + scalars["eps"])
    y = (x - mean[:, None]) * rstd[:, None] * host["w"] + host["b"]
    return {"y": y, "mean": mean, "rstd": rstd}


def _launch_row_reduce(kernel: str) -> Callable[[Any, Problem], None]:
    def launch(lib: Any, p: Problem) -> None:
        block = min(next_power_of_2(p.cols), 4096)
        getattr(lib, kernel)[(p.rows,)](p.x, p.out, p.stride, p.cols, BLOCK_SIZE=block, num_warps=row_warps(block))

    return launch


def _launch_cumsum(lib: Any, p: Problem) -> None:
    block = next_power_of_2(p.cols)
    lib.cumsum_kernel[(p.rows,)](p.x, p.out, p.stride, p.cols, BLOCK_SIZE=block, num_warps=row_warps(block))


def _rows_in_out(size: Size, itemsize: int) -> float:
    return 2 * size[0] * size[1] * itemsize


def _rows_in_column_out(size: Size, itemsize: int) -> float:
    return (size[0] * size[1] + size[0]) * itemsize


def _layer_norm_bytes(size: Size, itemsize: int) -> float:
    rows, cols = size
    return 2 * rows * cols * itemsize + 2 * cols * itemsize + 2 * rows * 4


# -- matmul ------------------------------------------------------------------------------


def _make_matmul(device: Device, size: Size, dtype: str) -> Problem:
    m, n, k = size
    a, b = device.randn((m, k), dtype, 7), device.randn((k, n), dtype, 8)
    c = device.empty((m, n), dtype)
    strides = {"stride_am": device.row_stride(a), "stride_bk": device.row_stride(b), "stride_cm": device.row_stride(c)}
    return Problem({"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k, **strides},
                   outputs=("c",), rows=m, row_arrays=("a", "c"))


def _launch_matmul(lib: Any, p: Problem) -> None:
    # Triton's tutorial configuration for fp16 on Hopper; skinny problems (decode: a few
    # rows against a large weight) get one warpgroup of 64 rows; small ones small blocks.
    if p.M >= 1024:
        bm, bn, bk, group, warps, stages = 128, 256, 64, 8, 8, 3
    elif p.N >= 1024:
        bm, bn, bk, group, warps, stages = 64, 128, 64, 8, 4, 4
    else:
        bm, bn, bk, group, warps, stages = 32, 32, 32, 2, 4, 2
    grid = (cdiv(p.M, bm) * cdiv(p.N, bn),)
    lib.matmul_kernel[grid](p.a, p.b, p.c, p.M, p.N, p.K, p.stride_am, 1, p.stride_bk, 1, p.stride_cm, 1,
                            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_warps=warps, num_stages=stages)


def _launch_matmul_four_warps(warp_specialize: bool) -> Callable[[Any, Problem], None]:
    def launch(lib: Any, p: Problem) -> None:
        # One consumer warp group, 128 x 128 x 64 blocks, four stages (the configuration
        # the pointer matmul's cp.async copies can be warp-specialised in).
        bm, bn, bk, group, warps, stages = (128, 128, 64, 8, 4, 4) if p.M >= 1024 else (64, 64, 32, 2, 4, 2)
        grid = (cdiv(p.M, bm) * cdiv(p.N, bn),)
        lib.matmul_kernel[grid](p.a, p.b, p.c, p.M, p.N, p.K, p.stride_am, 1, p.stride_bk, 1, p.stride_cm, 1,
                                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, WS=warp_specialize,
                                num_warps=warps, num_stages=stages)
    return launch


def _make_persistent_matmul(device: Device, size: Size, dtype: str) -> Problem:
    problem = _make_matmul(device, size, dtype)
    problem.scalars["programs"] = device.programs()
    return problem


def _launch_persistent_matmul(lib: Any, p: Problem) -> None:
    # The matmul's configuration; one program per SM (at most one per tile), each walking
    # the tiles with the program count as its stride (examples/persistent_matmul.py).
    bm, bn, bk, warps, stages = (128, 256, 64, 8, 3) if p.M >= 1024 else (32, 32, 32, 4, 2)
    programs = min(p.programs, cdiv(p.M, bm) * cdiv(p.N, bn))
    lib.persistent_matmul_kernel[(programs,)](p.a, p.b, p.c, p.M, p.N, p.K, p.stride_am, 1, p.stride_bk, 1,
                                              p.stride_cm, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                              NUM_PROGRAMS=programs, num_warps=warps, num_stages=stages)


def _matmul_grid(p: Problem) -> Callable[[dict[str, Any]], tuple[int]]:
    return lambda meta: (cdiv(p.M, meta["BLOCK_M"]) * cdiv(p.N, meta["BLOCK_N"]),)


def _launch_matmul_autotuned(lib: Any, p: Problem) -> None:
    # The autotuner picks the blocks, num_warps and num_stages (and the grid follows), once
    # per (M, N, K): the first launch, the one that is checked, tunes.
    lib.matmul_kernel_autotuned[_matmul_grid(p)](p.a, p.b, p.c, p.M, p.N, p.K, p.stride_am, 1, p.stride_bk, 1,
                                                 p.stride_cm, 1)


def _chosen_config(lib: Any) -> str:
    best = getattr(lib.matmul_kernel_autotuned, "best_config", None)
    return f"tuned: {best}" if best is not None else ""


def _make_matmul_fp8(device: Device, size: Size, dtype: str) -> Problem:
    """fp8 operands, f16 out.  B is an (N, K) array, given to the kernel as B's strides
    (1 along K, K along N): wgmma takes fp8 operands K-major only, and Triton's matmul
    tutorial gives its kernel fp8 B the same way (``b = b.T``)."""
    m, n, k = size
    a, b = device.randn((m, k), dtype, 7), device.randn((n, k), dtype, 8)
    c = device.empty((m, n), "f16")
    strides = {"stride_am": device.row_stride(a), "stride_bn": device.row_stride(b), "stride_cm": device.row_stride(c)}
    return Problem({"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k, **strides},
                   outputs=("c",), rows=m, row_arrays=("a", "c"))


def _launch_matmul_fp8(lib: Any, p: Problem) -> None:
    # Triton's matmul tutorial's first fp8 config for CUDA; small problems get small blocks.
    if p.M >= 1024:
        bm, bn, bk, group, warps, stages = 128, 256, 128, 8, 8, 3
    else:
        bm, bn, bk, group, warps, stages = 32, 32, 32, 2, 4, 2
    grid = (cdiv(p.M, bm) * cdiv(p.N, bn),)
    lib.matmul_kernel[grid](p.a, p.b, p.c, p.M, p.N, p.K, p.stride_am, 1, 1, p.stride_bn, p.stride_cm, 1,
                            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_warps=warps, num_stages=stages)


def _make_matmul_nk(device: Device, size: Size, dtype: str) -> Problem:
    """A (M, K), B (N, K), C (M, N): Triton's descriptor tutorials' layout."""
    m, n, k = size
    a, b = device.randn((m, k), dtype, 7), device.randn((n, k), dtype, 8)
    c = device.empty((m, n), dtype)
    return Problem({"a": a, "b": b, "c": c}, {"M": m, "N": n, "K": k}, outputs=("c",), rows=m, row_arrays=("a", "c"))


def _launch_matmul_descriptor(lib: Any, p: Problem, warp_specialize: bool = False) -> None:
    # Triton's tutorial 09 configuration for its descriptor kernel on Hopper.  The
    # descriptors are made at every launch, as the tutorial makes them (host descriptors).
    if p.M >= 1024:
        bm, bn, bk, group, warps, stages = 128, 256, 64, 8, 8, 3
    else:
        bm, bn, bk, group, warps, stages = 32, 32, 32, 2, 4, 2
    a = lib.TensorDescriptor.from_tensor(p.a, [bm, bk])
    b = lib.TensorDescriptor.from_tensor(p.b, [bn, bk])
    c = lib.TensorDescriptor.from_tensor(p.c, [bm, bn])
    grid = (cdiv(p.M, bm) * cdiv(p.N, bn),)
    lib.matmul_descriptor_kernel[grid](a, b, c, p.M, p.N, p.K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
                                       WS=warp_specialize, num_warps=warps, num_stages=stages)


def _launch_matmul_descriptor_ws(lib: Any, p: Problem) -> None:
    # The tutorial's warp_specialize=True variant of the same kernel and configuration.
    _launch_matmul_descriptor(lib, p, warp_specialize=True)


def _launch_matmul_device_descriptor(lib: Any, p: Problem) -> None:
    # The same configuration; the kernel makes its descriptors, whose tensor maps live in
    # the scratch the allocator gives at each launch (both compilers call it).
    if p.M >= 1024:
        bm, bn, bk, group, warps, stages = 128, 256, 64, 8, 8, 3
    else:
        bm, bn, bk, group, warps, stages = 32, 32, 32, 2, 4, 2
    lib.set_allocator(_scratch_allocator)
    grid = (cdiv(p.M, bm) * cdiv(p.N, bn),)
    lib.matmul_device_descriptor_kernel[grid](p.a, p.b, p.c, p.M, p.N, p.K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                              GROUP_M=group, num_warps=warps, num_stages=stages)


def _scratch_allocator(size: int, alignment: int, stream: Any) -> Any:
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


def _matmul_reference(host: dict[str, np.ndarray], scalars: dict[str, Any]) -> dict[str, np.ndarray]:
    # In float64: a float32 product over K = 8192 is itself off by more than bf16's tolerance.
    return {"c": host["a"].astype(np.float64) @ host["b"].astype(np.float64)}


def _matmul_nk_reference(host: dict[str, np.ndarray], scalars: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"c": host["a"].astype(np.float64) @ host["b"].astype(np.float64).T}  # B is (N, K)


def _matmul_flops(size: Size, itemsize: int) -> float:
    m, n, k = size
    return 2 * m * n * k


# -- attention ---------------------------------------------------------------------------


def _make_attention(device: Device, size: Size, dtype: str) -> Problem:
    """(batch, heads, seq_len, head_dim): q, k, v and out as (batch * heads * seq_len, head_dim)
    rows; the check samples query rows (each needs its head's keys and values only)."""
    batch, heads, seq_len, head_dim = size
    rows = batch * heads * seq_len
    arrays = {name: device.randn((rows, head_dim), dtype, seed) for name, seed in (("q", 11), ("k", 12), ("v", 13))}
    arrays["out"] = device.empty((rows, head_dim), dtype)
    return Problem(arrays, {"heads": batch * heads, "seq_len": seq_len, "head_dim": head_dim},
                   outputs=("out",), rows=rows, row_arrays=("q", "out"))


def _launch_attention(causal: bool) -> Callable[[Any, Problem], None]:
    def launch(lib: Any, p: Problem) -> None:
        # Triton's tutorial blocks for the forward pass on Hopper: 128 queries x 64 keys, 8 warps
        # for d = 128, 4 for d = 64; small problems get 64 x 64 and 4 warps.
        big = p.seq_len >= 1024
        block_m, warps = (128, 8 if p.head_dim >= 128 else 4) if big else (64, 4)
        grid = (cdiv(p.seq_len, block_m), p.heads)
        lib.attention_kernel[grid](p.q, p.k, p.v, p.out, 1.0 / float(np.sqrt(p.head_dim)), p.seq_len,
                                   HEAD_DIM=p.head_dim, BLOCK_M=block_m, BLOCK_N=64, CAUSAL=causal,
                                   num_warps=warps, num_stages=3 if big else 2)
    return launch


def _launch_attention_descriptor(causal: bool, warp_specialize: bool = False,
                                 overlap: bool = False) -> Callable[[Any, Problem], None]:
    def launch(lib: Any, p: Problem) -> None:
        # Descriptors made in the kernel (set_allocator).  The pointer attention's blocks,
        # except at d = 128 on long sequences: 128 x 128 blocks, three stages, Triton's
        # fastest configuration of this source in `python -m bench.attention_configs` on an
        # H200, with and without warp specialization (polytile's is two stages, 1-2% faster).
        big = p.seq_len >= 1024
        block_m, warps = (128, 8 if p.head_dim >= 128 else 4) if big else (64, 4)
        block_n, stages = (128, 3) if big and p.head_dim >= 128 else (64, 3 if big else 2)
        ws: Any = warp_specialize
        if overlap and lib.__name__.endswith("polytile_kernels"):
            # FlashAttention-3's overlap (polytile only; Triton runs its warp_specialize=True
            # beside it): one more tile outside the rings, so 128 x 128 blocks take two stages.
            import polytile.language as pl

            ws = pl.WarpSpecialize(overlap=True)
            stages = 2 if block_n == 128 else stages
        lib.set_allocator(_scratch_allocator)
        grid = (cdiv(p.seq_len, block_m), p.heads)
        lib.attention_descriptor_kernel[grid](p.q, p.k, p.v, p.out, 1.0 / float(np.sqrt(p.head_dim)), p.seq_len,
                                              p.heads * p.seq_len, HEAD_DIM=p.head_dim, BLOCK_M=block_m,
                                              BLOCK_N=block_n, CAUSAL=causal, WS=ws, num_warps=warps,
                                              num_stages=stages)
    return launch


def _attention_reference(causal: bool) -> Callable[[dict[str, np.ndarray], dict[str, Any]], dict[str, np.ndarray]]:
    def reference(host: dict[str, np.ndarray], scalars: dict[str, Any]) -> dict[str, np.ndarray]:
        seq_len, head_dim = scalars["seq_len"], scalars["head_dim"]
        rows = scalars.get("checked_rows")
        rows = np.arange(host["q"].shape[0]) if rows is None else rows
        out = np.empty((len(rows), head_dim))
        for i, row in enumerate(rows):
            head, position = divmod(int(row), seq_len)
            keys = host["k"][head * seq_len:(head + 1) * seq_len].astype(np.float64)
            values = host["v"][head * seq_len:(head + 1) * seq_len].astype(np.float64)
            scores = keys @ host["q"][i].astype(np.float64) / np.sqrt(head_dim)
            if causal:
                scores[position + 1:] = -np.inf
            weights = np.exp(scores - scores.max())
            out[i] = weights @ values / weights.sum()
        return {"out": out}
    return reference


def _attention_flops(causal: bool) -> Callable[[Size, int], float]:
    def flops(size: Size, itemsize: int) -> float:
        batch, heads, seq_len, head_dim = size
        total = 4 * batch * heads * seq_len * seq_len * head_dim  # two matmuls
        return total / 2 if causal else total
    return flops


_ATTENTION_SIZES = {"tiny": ((1, 2, 96, 64),), "small": ((4, 32, 1024, 64),),
                    "full": ((4, 32, 4096, 64), (4, 32, 4096, 128))}

# seq_len a multiple of the query block (128 from 1024 on, else 64).
_ATTENTION_DESCRIPTOR_SIZES = {"tiny": ((1, 2, 128, 64),), "small": ((4, 32, 1024, 128),),
                               "full": ((4, 32, 4096, 64), (4, 32, 4096, 128))}

_ROWS_FULL = ((4096, 1024), (16384, 4096), (32768, 16384))

CASES: dict[str, Case] = {case.name: case for case in (
    Case("vector_add", "memory", "out = x + y", ("f32", "bf16"),
         {"tiny": ((4096,),), "small": ((1 << 20,), (1 << 24,)),
          "full": ((1 << 20,), (1 << 22,), (1 << 24,), (1 << 26,), (1 << 28,))},
         _make_binary, _launch_add, lambda h, s: {"out": h["x"] + h["y"]}, _three_vectors),
    Case("axpy_odd_length", "memory", "out = alpha * x + y, length not a multiple of the block", ("f32", "bf16"),
         {"tiny": ((5000,),), "small": ((1_000_003,),), "full": ((1_000_003,), (10_000_019,), (100_000_007,))},
         _make_binary, _launch_axpy, lambda h, s: {"out": s["alpha"] * h["x"] + h["y"]}, _three_vectors),
    Case("copy2d_descriptor", "memory", "out = x in 2-D blocks through host tensor descriptors", ("f32",),
         {"tiny": ((96, 80),), "small": ((4096, 4096),), "full": ((4096, 4096), (16384, 16384))},
         _make_copy2d, _launch_copy2d_descriptor, lambda h, s: {"out": h["x"]}, _two_arrays),
    Case("softmax", "memory", "row-wise softmax, one program per row", ("f32", "bf16"),
         {"tiny": ((16, 128), (8, 300)), "small": ((4096, 128), (8192, 2048)),
          "full": ((4096, 128), (4096, 1024), (8192, 2048), (16384, 4096), (32768, 8192), (32768, 16384))},
         lambda d, s, t: _make_rows(d, s, t, "same"), _launch_softmax, _softmax_reference, _rows_in_out),
    Case("layer_norm", "memory", "layer norm forward with weight and bias, mean and 1/std saved", ("f32", "bf16"),
         {"tiny": ((8, 300),), "small": ((4096, 1024), (8192, 4096)), "full": _ROWS_FULL},
         _make_layer_norm, _launch_layer_norm, _layer_norm_reference, _layer_norm_bytes,
         tolerance={"f32": (1e-4, 1e-4)}),
    Case("row_sum", "memory", "sum of each row", ("f32", "bf16"),
         {"tiny": ((8, 300),), "small": ((4096, 1024), (16384, 4096)), "full": _ROWS_FULL},
         lambda d, s, t: _make_rows(d, s, t, "column"), _launch_row_reduce("row_sum_kernel"),
         lambda h, s: {"out": h["x"].astype(np.float64).sum(axis=1)}, _rows_in_column_out,
         tolerance={"f32": (1e-4, 1e-3), "bf16": (2e-2, 1e-2)}),
    Case("row_max", "memory", "max of each row", ("f32", "bf16"),
         {"tiny": ((8, 300),), "small": ((4096, 1024), (16384, 4096)), "full": _ROWS_FULL},
         lambda d, s, t: _make_rows(d, s, t, "column"), _launch_row_reduce("row_max_kernel"),
         lambda h, s: {"out": h["x"].max(axis=1)}, _rows_in_column_out),
    Case("cumsum", "memory", "cumulative sum along each row", ("f32", "bf16"),
         {"tiny": ((8, 300),), "small": ((8192, 256), (16384, 1024)),
          "full": ((8192, 256), (16384, 1024), (32768, 2048))},
         lambda d, s, t: _make_rows(d, s, t, "same"), _launch_cumsum,
         lambda h, s: {"out": np.cumsum(h["x"].astype(np.float64), axis=1)}, _rows_in_out,
         tolerance={"f32": (1e-4, 1e-3), "bf16": (2e-2, 1e-2)}),
    Case("matmul", "matmul", "C = A @ B, fp32 accumulation, out in the inputs' type", ("f16", "bf16"),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192), (64, 8192, 8192), (128, 8192, 8192))},
         _make_matmul, _launch_matmul, _matmul_reference, _matmul_flops,
         # fp32 accumulation over K = 8192 of terms near 1 is off by about 1e-3 where the
         # sum cancels to near 0: cuBLAS, Triton and polytile alike.
         tolerance={"f16": (1e-2, 1e-2), "bf16": (2e-2, 1e-2)}),
    Case("matmul_autotuned", "matmul", "the same matmul under @autotune, over the configs of Triton's tutorial",
         ("f16",), {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
                    "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul, _launch_matmul_autotuned, _matmul_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2)}, note=_chosen_config),
    Case("matmul_4w", "matmul", "the pointer matmul with 128 x 128 x 64 blocks, 4 warps, 4 stages", ("f16",),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul, _launch_matmul_four_warps(False), _matmul_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2)}),
    Case("matmul_4w_ws", "matmul", "the same with pl.range(..., warp_specialize=True): a producer warp group "
         "issues the cp.async copies (polytile-warpspec; Triton's own warp specialization)", ("f16",),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul, _launch_matmul_four_warps(True), _matmul_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2)}),
    Case("matmul_persistent", "matmul", "the same matmul as a persistent kernel: one program per SM walks the "
         "tiles (pl.range(..., flatten=True))", ("f16",),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_persistent_matmul, _launch_persistent_matmul, _matmul_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2)}),
    Case("matmul_descriptor", "matmul", "the same matmul through host tensor descriptors (Triton's tutorial 09 "
         "kernel: B (N, K), used as b.T; C stored through its descriptor)", ("f16", "bf16"),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul_nk, _launch_matmul_descriptor, _matmul_nk_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2), "bf16": (2e-2, 1e-2)}),
    Case("matmul_descriptor_ws", "matmul", "the same descriptor matmul with pl.range(..., warp_specialize=True): "
         "a producer warp group issues the copies (polytile-warpspec; Triton's own warp specialization)",
         ("f16", "bf16"),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul_nk, _launch_matmul_descriptor_ws, _matmul_nk_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2), "bf16": (2e-2, 1e-2)}),
    Case("matmul_device_descriptor", "matmul", "the same matmul with descriptors made in the kernel "
         "(make_tensor_descriptor; tensor maps built on the device in set_allocator's scratch)", ("f16", "bf16"),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul_nk, _launch_matmul_device_descriptor, _matmul_nk_reference, _matmul_flops,
         tolerance={"f16": (1e-2, 1e-2), "bf16": (2e-2, 1e-2)}),
    Case("matmul_fp8", "matmul", "the same matmul, fp8 e4m3 in (B K-major: (N, K)), fp32 accumulation, f16 out",
         ("e4m3",),
         {"tiny": ((96, 64, 80),), "small": ((4096, 4096, 4096),),
          "full": ((4096, 4096, 4096), (8192, 8192, 8192))},
         _make_matmul_fp8, _launch_matmul_fp8, _matmul_nk_reference, _matmul_flops,
         # The reference multiplies the fp8 values exactly (float64).  What is left is the
         # f16 rounding of the output and the accumulation: fp8 wgmma adds into the fp32
         # accumulator with fewer bits than fp32 (Triton does not promote by default), off
         # by up to a few units where K = 8192 products of about 1 sum to a few hundred.
         # A wrong tile or stride is off by tens.
         tolerance={"e4m3": (2e-2, 4.0)}),
    Case("attention", "matmul", "flash attention forward, (batch, heads, seq_len, head_dim), fp16", ("f16",),
         _ATTENTION_SIZES, _make_attention, _launch_attention(False), _attention_reference(False),
         _attention_flops(False)),
    Case("attention_causal", "matmul", "the same, causal", ("f16",),
         _ATTENTION_SIZES, _make_attention, _launch_attention(True), _attention_reference(True),
         _attention_flops(True)),
    Case("attention_descriptor", "matmul", "the same attention through descriptors made in the kernel (Triton's "
         "tutorial 06 on Hopper: bulk copies)", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(False),
         _attention_reference(False), _attention_flops(False)),
    Case("attention_descriptor_causal", "matmul", "the same, causal", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(True),
         _attention_reference(True), _attention_flops(True)),
    Case("attention_descriptor_ws", "matmul", "the descriptor attention with pl.range(..., warp_specialize=True) "
         "(polytile-warpspec; Triton's own warp specialization)", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(False, True),
         _attention_reference(False), _attention_flops(False)),
    Case("attention_descriptor_causal_ws", "matmul", "the same, causal", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(True, True),
         _attention_reference(True), _attention_flops(True)),
    Case("attention_descriptor_ws_overlap", "matmul", "the same with pl.WarpSpecialize(overlap=True): the softmax "
         "runs beside the previous p @ v (FlashAttention-3's overlap), two stages where 128x128 blocks leave no room "
         "for it with three (the _ws rows overlap where it fits; Triton with warp_specialize=True)", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(False, True, True),
         _attention_reference(False), _attention_flops(False)),
    Case("attention_descriptor_causal_ws_overlap", "matmul", "the same, causal", ("f16",),
         _ATTENTION_DESCRIPTOR_SIZES, _make_attention, _launch_attention_descriptor(True, True, True),
         _attention_reference(True), _attention_flops(True)),
)}


def cases_for(mode: str) -> list[Case]:
    return [case for case in CASES.values() if case.mode == mode]
