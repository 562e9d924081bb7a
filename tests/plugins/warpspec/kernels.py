"""Kernels the warp-specialization tests compile and run: Triton's tutorial-09 descriptor
matmul with ``pl.range(..., warp_specialize=WS)``, with host descriptors and with
descriptors made in the kernel, and the pointer version (cp.async copies); its
persistent form (the hint on the loop over tiles); attention."""

from __future__ import annotations

import polytile.language as pl
from polytile.runtime import jit


@jit
def matmul_descriptors(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                       BLOCK_K: pl.constexpr, GROUP_M: pl.constexpr, WS: pl.constexpr):
    pid = pl.program_id(axis=0)
    num_pid_m = pl.cdiv(M, BLOCK_M)
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = pid_m * BLOCK_M
    offs_bn = pid_n * BLOCK_N
    accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    for k in pl.range(pl.cdiv(K, BLOCK_K), warp_specialize=WS):
        offs_k = k * BLOCK_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = pl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@jit
def matmul_device_descriptors(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                              BLOCK_K: pl.constexpr, WS: pl.constexpr):
    a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
    b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
    c_desc = pl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    offs_am = pl.program_id(axis=0) * BLOCK_M
    offs_bn = pl.program_id(axis=1) * BLOCK_N
    accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    for k in pl.range(pl.cdiv(K, BLOCK_K), warp_specialize=WS):
        a = a_desc.load([offs_am, k * BLOCK_K])
        b = b_desc.load([offs_bn, k * BLOCK_K])
        accumulator = pl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@jit
def matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr,
                      BLOCK_K: pl.constexpr, NUM_PROGRAMS: pl.constexpr, WS: pl.constexpr, FLATTEN: pl.constexpr,
                      HOST: pl.constexpr = False):
    # Tutorial 09's persistent kernel: each program walks the output tiles from its own,
    # NUM_PROGRAMS apart, the hint on that loop; descriptors made in the kernel, or (HOST)
    # a_ptr, b_ptr and c_ptr are host descriptors.
    if HOST:
        a_desc, b_desc, c_desc = a_ptr, b_ptr, c_ptr
    else:
        a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK_M, BLOCK_K])
        b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK_N, BLOCK_K])
        c_desc = pl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BLOCK_M, BLOCK_N])
    num_pid_n = pl.cdiv(N, BLOCK_N)
    num_tiles = pl.cdiv(M, BLOCK_M) * num_pid_n
    k_tiles = pl.cdiv(K, BLOCK_K)
    for tile_id in pl.range(pl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN, warp_specialize=WS):
        offs_am = (tile_id // num_pid_n) * BLOCK_M
        offs_bn = (tile_id % num_pid_n) * BLOCK_N
        accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([offs_am, ki * BLOCK_K])
            b = b_desc.load([offs_bn, ki * BLOCK_K])
            accumulator = pl.dot(a, b.T, accumulator)
        c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@jit
def matmul_pointers(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BLOCK_M: pl.constexpr,
                    BLOCK_N: pl.constexpr, BLOCK_K: pl.constexpr, WS: pl.constexpr):
    offs_m = pl.program_id(axis=0) * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_n = pl.program_id(axis=1) * BLOCK_N + pl.arange(0, BLOCK_N)
    offs_k = pl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    accumulator = pl.zeros((BLOCK_M, BLOCK_N), dtype=pl.float32)
    for k in pl.range(0, pl.cdiv(K, BLOCK_K), warp_specialize=WS):
        a = pl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = pl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        accumulator = pl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    pl.store(c_ptrs, accumulator.to(pl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@jit
def attend(q, k_desc, v_desc, start, offs_m, offs_n, seq_len, qk_scale, m_i, l_i, acc, CAUSAL: pl.constexpr):
    # One block of keys and values of flash attention (Triton's tutorial 06): the scores,
    # the running max and sum, the output rescaled and accumulated.
    k = k_desc.load([start, 0])
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
    v = v_desc.load([start, 0])
    acc = pl.dot(p.to(pl.float16), v, acc * alpha[:, None])
    return m_new, l_i, acc


@jit
def attention_descriptors(q_ptr, k_ptr, v_ptr, out_ptr, scale, rows, seq_len, HEAD_DIM: pl.constexpr,
                          BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, CAUSAL: pl.constexpr, WS: pl.constexpr,
                          Q_POINTERS: pl.constexpr = False):
    # Flash attention forward (Triton's tutorial 06 on Hopper): q, k, v and out are
    # (batch * heads * seq_len, HEAD_DIM) rows; each program reads its head through
    # descriptors of that head's rows made here, so that blocks past seq_len are partial
    # (zeros read, rows past the end not written).
    head = pl.program_id(1) * seq_len * HEAD_DIM
    q_desc = pl.make_tensor_descriptor(q_ptr + head, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = pl.make_tensor_descriptor(k_ptr + head, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = pl.make_tensor_descriptor(v_ptr + head, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = pl.make_tensor_descriptor(out_ptr + head, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    block = pl.program_id(0)
    offs_m = block * BLOCK_M + pl.arange(0, BLOCK_M)
    offs_n = pl.arange(0, BLOCK_N)
    if Q_POINTERS:  # the same rows through pointers: stored in shared memory for wgmma, not read from a slot
        dims = pl.arange(0, HEAD_DIM)
        q = pl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + dims[None, :], mask=offs_m[:, None] < seq_len,
                    other=0.0)
    else:
        q = q_desc.load([block * BLOCK_M, 0])
    m_i = pl.full((BLOCK_M,), float("-inf"), pl.float32)
    l_i = pl.zeros((BLOCK_M,), dtype=pl.float32)
    acc = pl.zeros((BLOCK_M, HEAD_DIM), dtype=pl.float32)
    qk_scale = scale * 1.4426950408889634
    end = pl.minimum((block + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
    for start in pl.range(0, end, BLOCK_N, warp_specialize=WS):
        m_i, l_i, acc = attend(q, k_desc, v_desc, start, offs_m, offs_n, seq_len, qk_scale, m_i, l_i, acc, CAUSAL)
    o_desc.store([block * BLOCK_M, 0], (acc / l_i[:, None]).to(pl.float16))


@jit
def attention_persistent(q_ptr, k_ptr, v_ptr, out_ptr, scale, seq_len, HEAD_DIM: pl.constexpr,
                         BLOCK_M: pl.constexpr, BLOCK_N: pl.constexpr, CAUSAL: pl.constexpr,
                         NUM_PROGRAMS: pl.constexpr, WS: pl.constexpr):
    # The attention above as a persistent kernel over the query blocks of one head: the
    # hint on the loop over blocks, the K/V loop (two dots, p @ v from registers) inside.
    q_desc = pl.make_tensor_descriptor(q_ptr, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = pl.make_tensor_descriptor(k_ptr, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = pl.make_tensor_descriptor(v_ptr, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = pl.make_tensor_descriptor(out_ptr, [seq_len, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    qk_scale = scale * 1.4426950408889634
    offs_n = pl.arange(0, BLOCK_N)
    for block in pl.range(pl.program_id(0), pl.cdiv(seq_len, BLOCK_M), NUM_PROGRAMS, warp_specialize=WS):
        offs_m = block * BLOCK_M + pl.arange(0, BLOCK_M)
        q = q_desc.load([block * BLOCK_M, 0])
        m_i = pl.full((BLOCK_M,), float("-inf"), pl.float32)
        l_i = pl.zeros((BLOCK_M,), dtype=pl.float32)
        acc = pl.zeros((BLOCK_M, HEAD_DIM), dtype=pl.float32)
        end = pl.minimum((block + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len
        for start in range(0, end, BLOCK_N):
            m_i, l_i, acc = attend(q, k_desc, v_desc, start, offs_m, offs_n, seq_len, qk_scale, m_i, l_i, acc, CAUSAL)
        o_desc.store([block * BLOCK_M, 0], (acc / l_i[:, None]).to(pl.float16))


@jit
def matmul_from_a_loaded_start(a_ptr, b_ptr, c_ptr, starts_ptr, M, N, K, BLOCK: pl.constexpr):
    # The loop's first iteration comes from memory through a tile: the consumers' warps
    # make it, so the producer could not: not split.
    a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK, 64])
    b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK, 64])
    first = pl.sum(pl.load(starts_ptr + pl.arange(0, 16)))
    accumulator = pl.zeros((BLOCK, BLOCK), dtype=pl.float32)
    for k in pl.range(first, pl.cdiv(K, 64), warp_specialize=True):
        accumulator = pl.dot(a_desc.load([0, k * 64]), b_desc.load([0, k * 64]).T, accumulator)
    pl.store(c_ptr + pl.arange(0, BLOCK)[:, None] * N + pl.arange(0, BLOCK)[None, :], accumulator.to(pl.float16))


@jit
def matmul_after_a_store(a_ptr, b_ptr, c_ptr, flags_ptr, M, N, K, BLOCK: pl.constexpr, TILE_STORE: pl.constexpr):
    a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BLOCK, 64])
    b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BLOCK, 64])
    if TILE_STORE:
        pl.store(flags_ptr + pl.arange(0, 16), pl.zeros((16,), pl.int32))  # the consumers' warps store it
    else:
        pl.store(flags_ptr + pl.program_id(0), 1)  # every warp stores it, before the split
    accumulator = pl.zeros((BLOCK, BLOCK), dtype=pl.float32)
    for k in pl.range(pl.cdiv(K, 64), warp_specialize=True):
        accumulator = pl.dot(a_desc.load([0, k * 64]), b_desc.load([0, k * 64]).T, accumulator)
    pl.store(c_ptr + pl.arange(0, BLOCK)[:, None] * N + pl.arange(0, BLOCK)[None, :], accumulator.to(pl.float16))
