"""The benchmark kernels in polytile, written the way a user writes them.

``bench/triton_kernels.py`` holds the same kernels in Triton, line for line (only the
imports differ).  The harness launches both through the same host code in
``bench/cases.py``, so the two compilers get the same algorithm, the same block sizes
and the same ``num_warps``.
"""

import polytile as pt
import polytile.language as pl


@pt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: pl.constexpr):
    pid = pl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = pl.load(x_ptr + offsets, mask=mask)
    y = pl.load(y_ptr + offsets, mask=mask)
    pl.store(out_ptr + offsets, x + y, mask=mask)


@pt.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: pl.constexpr):
    pid = pl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + pl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = pl.load(x_ptr + offsets, mask=mask).to(pl.float32)
    y = pl.load(y_ptr + offsets, mask=mask).to(pl.float32)
    pl.store(out_ptr + offsets, alpha * x + y, mask=mask)


@pt.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    cols = pl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = pl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(pl.float32)
    x = x - pl.max(x, axis=0)
    numerator = pl.exp(x)
    denominator = pl.sum(numerator, axis=0)
    pl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=mask)


@pt.jit
def layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n_cols, eps,
                          BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = pl.zeros((BLOCK_SIZE,), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        acc += pl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(pl.float32)
    mean = pl.sum(acc, axis=0) / n_cols
    acc = pl.zeros((BLOCK_SIZE,), dtype=pl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        x = pl.load(x_ptr + cols, mask=cols < n_cols, other=0.0).to(pl.float32)
        d = pl.where(cols < n_cols, x - mean, 0.0)
        acc += d * d
    var = pl.sum(acc, axis=0) / n_cols
    rstd = 1 / pl.sqrt(var + eps)
    pl.store(mean_ptr + row, mean)
    pl.store(rstd_ptr + row, rstd)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + pl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        w = pl.load(w_ptr + cols, mask=mask).to(pl.float32)
        b = pl.load(b_ptr + cols, mask=mask).to(pl.float32)
        x = pl.load(x_ptr + cols, mask=mask, other=0.0).to(pl.float32)
        pl.store(y_ptr + cols, (x - mean) * rstd * w + b, mask=mask)


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
def cumsum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: pl.constexpr):
    row = pl.program_id(axis=0)
    cols = pl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = pl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(pl.float32)
    pl.store(out_ptr + row * stride + cols, pl.cumsum(x, axis=0), mask=mask)


@pt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, BLOCK_K: pl.constexpr, GROUP_M: pl.constexpr):
    # Programs walk the output in groups of GROUP_M block rows, so that the blocks of A
    # and B a group reads stay in L2 (Triton's matmul tutorial).
    pid = pl.program_id(axis=0)
    num_pid_m = pl.cdiv(M, BLOCK_M)
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + pl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + pl.arange(0, BLOCK_N)) % N
    offs_k = pl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    for k in range(pl.cdiv(K, BLOCK_K)):
        a = pl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = pl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = pl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + pl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    pl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@pt.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, scale, seq_len,
                     HEAD_DIM: pl.constexpr, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, CAUSAL: pl.constexpr):
    # Flash attention forward (examples/flash_attention.py): q, k, v and out are
    # (batch * heads * seq_len, HEAD_DIM) rows; one program per block of queries of a head.
    block = pl.program_id(0)
    head = pl.program_id(1)
    offs_m = block * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_n = pl.arange(0, BLOCK_N)
    offs_d = pl.arange(0, HEAD_DIM)
    base = head * seq_len * HEAD_DIM
    q = pl.load(q_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len,
                other=0.0)
    m_i = pl.full((BLOCK_M,), float("-inf"), pl.float32)
    l_i = pl.zeros((BLOCK_M,), dtype=pl.float32)
    acc = pl.zeros((BLOCK_M, HEAD_DIM), dtype=pl.float32)
    qk_scale = scale * 1.4426950408889634
    end = pl.minimum((block + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
    for start in range(0, end, BLOCK_N):
        cols = start + offs_n
        k = pl.load(k_ptr + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < seq_len,
                    other=0.0)
        qk = pl.dot(q, k)
        keep = cols[None, :] < seq_len
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = pl.where(keep, qk * qk_scale, float("-inf"))
        m_new = pl.maximum(m_i, pl.max(qk, axis=1))
        p = pl.exp2(qk - m_new[:, None])
        alpha = pl.exp2(m_i - m_new)
        l_i = l_i * alpha + pl.sum(p, axis=1)
        v = pl.load(v_ptr + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < seq_len,
                    other=0.0)
        acc = pl.dot(p.to(pl.float16), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    pl.store(out_ptr + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(pl.float16),
             mask=offs_m[:, None] < seq_len)
