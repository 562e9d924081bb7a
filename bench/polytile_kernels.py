"""The benchmark kernels in polytile, written the way a user writes them.

A kernel that is also an example is the example's own: ``examples/NAME.py`` holds it
once, runs it against NumPy (``python examples/NAME.py``) and the bench times it.  Such a
kernel is loaded from its example when it is first asked for (``polytile_kernels.add_kernel``
loads ``examples/vector_add.py`` only), so the launch and compile modes' child processes,
which time importing the kernel module, import one small example as before they imported
this file.  The kernels only the bench needs are written below.

``bench/triton_kernels.py`` holds the same kernels in Triton, line for line (a test
compares them: tests/bench/test_bench_kernels.py).  The harness launches both through
the same host code in ``bench/cases.py``, so the two compilers get the same algorithm,
the same block sizes and the same ``num_warps``.
"""

import importlib.util
import sys
from pathlib import Path

import polytile as pt
import polytile.language as pl
from polytile.tools.tensor_descriptor import TensorDescriptor  # noqa: F401  (the launch code's, via the module)
from polytile import set_allocator  # noqa: F401  (the launch code's, via the module)

from .matmul_configs import AUTOTUNE_CONFIGS

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"

#: The kernels the examples hold: name -> the example (examples/NAME.py).  The bench
#: launches ``matmul_kernel`` with B a (K, N) array or, for fp8, an (N, K) one given as
#: B's strides (1 along K, K along N), as Triton's matmul tutorial gives it fp8 B.
FROM_EXAMPLES = {
    "add_kernel": "vector_add",
    "softmax_kernel": "softmax",
    "layer_norm_fwd_kernel": "layer_norm",
    "cumsum_kernel": "cumsum",
    "matmul_kernel": "matmul",
    "persistent_matmul_kernel": "persistent_matmul",
    "attention_kernel": "flash_attention",
}


def load_example(name: str):
    """``examples/NAME.py`` as a module (once per process), as ``python examples/NAME.py``
    finds its neighbour ``_device``: with the examples' directory on ``sys.path``."""
    module_name = f"bench_example_{name}"
    if module_name not in sys.modules:
        if str(EXAMPLES_DIR) not in sys.path:
            sys.path.append(str(EXAMPLES_DIR))
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return sys.modules[module_name]


def __getattr__(name: str):
    """An example's kernel, or one made from it, loaded when first asked for (PEP 562)."""
    if name in FROM_EXAMPLES:
        kernel = getattr(load_example(FROM_EXAMPLES[name]), name)
    elif name in DERIVED:
        kernel = DERIVED[name]()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = kernel
    return kernel


def __dir__():
    return sorted({*globals(), *FROM_EXAMPLES, *DERIVED})


@pt.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: pl.constexpr):
    pid = pl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = pl.load(x_ptr + offsets, mask=mask).to(pl.float32)
    y = pl.load(y_ptr + offsets, mask=mask).to(pl.float32)
    pl.store(out_ptr + offsets, alpha * x + y, mask=mask)


@pt.jit
def row_sum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    x_ptr += row * stride
    acc = pl.zeros((BLOCK_SIZE,), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        acc += pl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(pl.float32)
    pl.store(out_ptr + row, pl.sum(acc, axis=0))


@pt.jit
def row_max_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    x_ptr += row * stride
    acc = pl.full((BLOCK_SIZE,), -float("inf"), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        x = pl.load(x_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(pl.float32)
        acc = pl.maximum(acc, x)
    pl.store(out_ptr + row, pl.max(acc, axis=0))


@pt.jit
def matmul_descriptor_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                             BLOCK_K: pl.constexpr, GROUP_M: pl.constexpr,
                             WS: pl.constexpr = False):
    # Triton's tutorial 09 (persistent matmul), its host-descriptor kernel matmul_kernel_tma:
    # B is an (N, K) array, loaded as N x K blocks and used transposed.
    pid = pl.program_id(axis=0)
    num_pid_m = pl.cdiv(M, BLOCK_M)
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    k_tiles = pl.cdiv(K, BLOCK_K)
    offs_am = pid_m * BLOCK_M
    offs_bn = pid_n * BLOCK_N
    accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    # WS: the tutorial's warp-specialised variant (tl.range(..., warp_specialize=True)).
    for k in pl.range(k_tiles, warp_specialize=WS):
        offs_k = k * BLOCK_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = pl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@pt.jit
def matmul_device_descriptor_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                                    BLOCK_K: pl.constexpr, GROUP_M: pl.constexpr):
    # The same kernel with its descriptors made on the device (Triton's tutorial 09's
    # device-descriptor form, not persistent): a tensor map per descriptor in the
    # launch's scratch (set_allocator).
    a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    c_desc = pl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    pid = pl.program_id(axis=0)
    num_pid_m = pl.cdiv(M, BLOCK_M)
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    k_tiles = pl.cdiv(K, BLOCK_K)
    offs_am = pid_m * BLOCK_M
    offs_bn = pid_n * BLOCK_N
    accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    for k in range(k_tiles):
        offs_k = k * BLOCK_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = pl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@pt.jit
def copy2d_descriptor_kernel(src_desc, dst_desc, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr):
    pid_m = pl.program_id(axis=0)
    pid_n = pl.program_id(axis=1)
    dst_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], src_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N]))


def _matmul_kernel_autotuned():
    # The example's matmul under @autotune, as a Triton user writes it: the configs of
    # Triton's matmul tutorial (bench/matmul_configs.py), tuned once per (M, N, K).
    return pt.autotune(configs=[pt.Config(meta, num_warps=warps, num_stages=stages)
                                for meta, warps, stages in AUTOTUNE_CONFIGS],
                       key=["M", "N", "K"])(load_example("matmul").matmul_kernel)


#: Kernels made from an example's kernel, when first asked for.
DERIVED = {"matmul_kernel_autotuned": _matmul_kernel_autotuned}


@pt.jit
def attention_descriptor_kernel(q_ptr, k_ptr, v_ptr, out_ptr, scale, seq_len, rows, HEAD_DIM: pl.constexpr,
                                BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, CAUSAL: pl.constexpr,
                                WS: pl.constexpr = False):
    # The same attention through descriptors made in the kernel (Triton's tutorial 06 on
    # Hopper): q, k, v and out are (batch * heads * seq_len, HEAD_DIM) rows; seq_len a
    # multiple of BLOCK_M (a query block stays in its head); keys past seq_len are masked.
    q_desc = pl.make_tensor_descriptor(q_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = pl.make_tensor_descriptor(k_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = pl.make_tensor_descriptor(v_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = pl.make_tensor_descriptor(out_ptr, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    block = pl.program_id(0)
    base = pl.program_id(1) * seq_len
    offs_m = block * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_n = pl.arange(0, BLOCK_N)
    q = q_desc.load([base + block * BLOCK_M, 0])
    m_i = pl.full((BLOCK_M,), float("-inf"), pl.float32)
    l_i = pl.zeros((BLOCK_M,), dtype=pl.float32)
    acc = pl.zeros((BLOCK_M, HEAD_DIM), dtype=pl.float32)
    qk_scale = scale * 1.4426950408889634
    end = pl.minimum((block + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
    for start in pl.range(0, end, BLOCK_N, warp_specialize=WS):
        k = k_desc.load([base + start, 0])
        qk = pl.dot(q, k.T)
        cols = start + offs_n
        keep = cols[None, :] < seq_len
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = pl.where(keep, qk * qk_scale, float("-inf"))
        m_new = pl.maximum(m_i, pl.max(qk, axis=1))
        p = pl.exp2(qk - m_new[:, None])
        alpha = pl.exp2(m_i - m_new)
        l_i = l_i * alpha + pl.sum(p, axis=1)
        v = v_desc.load([base + start, 0])
        acc = pl.dot(p.to(pl.float16), v, acc * alpha[:, None])
        m_i = m_new
    o_desc.store([base + block * BLOCK_M, 0], (acc / l_i[:, None]).to(pl.float16))
