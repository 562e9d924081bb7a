"""Descriptor matmuls written against Triton's API, as Triton's tutorial 09 (persistent
matmul) writes its descriptor variants: host descriptors made with a dummy block and set
by the autotuner's pre-hook, a persistent loop with ``tl.range(..., flatten=,
warp_specialize=)`` and a subtiled epilogue (reshape, permute, split), and descriptors
made in the kernel with ``tl.make_tensor_descriptor`` and ``triton.set_allocator``.

This file imports Triton.  The tests (tests/plugins/tma/test_tutorial_port.py and
test_gpu_bulk.py) and ``python -m bench.descriptor_tutorial`` run it as is with Triton
and with its import lines changed to polytile's and nothing else, so every line below
is also a line a Triton user keeps when porting.  The host functions take the output
array from the caller: torch tensors on a GPU, NumPy arrays on the interpreter."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def configs(pre_hook=None, subtile=(False, True)):
    return [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8,
                           "EPILOGUE_SUBTILE": s}, num_stages=stages, num_warps=warps, pre_hook=pre_hook)
            for bm, bn, bk, stages, warps in CONFIGS for s in subtile]


#: Block sizes, stages and warps the autotuner tries (one, so that both compilers time the
#: same tiles; each with the whole and the subtiled epilogue where the kernel has both).
CONFIGS = [(128, 256, 64, 3, 8)]


def set_block_shapes(nargs):
    # The descriptors were made with a dummy block; each config sets its own.
    bm, bn, bk = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn // 2] if nargs.get("EPILOGUE_SUBTILE", False) else [bm, bn]


@triton.jit
def tile_of(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def store_tile(c_desc, accumulator, offs_cm, offs_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
               EPILOGUE_SUBTILE: tl.constexpr):
    dtype = c_desc.dtype
    if EPILOGUE_SUBTILE:
        # Two halves of the tile, stored one after the other: half the shared memory.
        acc = tl.reshape(accumulator, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2))
        acc = tl.permute(acc, (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([offs_cm, offs_cn], acc0.to(dtype))
        c_desc.store([offs_cm, offs_cn + BLOCK_SIZE_N // 2], acc1.to(dtype))
    else:
        c_desc.store([offs_cm, offs_cn], accumulator.to(dtype))


@triton.autotune(configs=configs(set_block_shapes, subtile=(False,)), key=["M", "N", "K", "WARP_SPECIALIZE"])
@triton.jit
def matmul_kernel_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                      WARP_SPECIALIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = tile_of(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(k_tiles, warp_specialize=WARP_SPECIALIZE):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = tl.dot(a, b.T, accumulator)
    store_tile(c_desc, accumulator, offs_am, offs_bn, BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE)


@triton.jit
def persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                     BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                     NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr):
    # Each program walks the output tiles from its own, NUM_SMS apart.
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_of(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        store_tile(c_desc, accumulator, offs_am, offs_bn, BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE)


@triton.autotune(configs=configs(set_block_shapes), key=["M", "N", "K", "WARP_SPECIALIZE", "FLATTEN"])
@triton.jit
def matmul_kernel_tma_persistent(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                                 BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                                 GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                                 NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr):
    persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
                     EPILOGUE_SUBTILE, NUM_SMS, WARP_SPECIALIZE, FLATTEN)


@triton.autotune(configs=configs(), key=["M", "N", "K", "WARP_SPECIALIZE", "FLATTEN"])
@triton.jit
def matmul_kernel_descriptor_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                                        BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                                        GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                                        NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                                        FLATTEN: tl.constexpr):
    # The descriptors made in the kernel: tensor maps in the allocator's scratch.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N // 2 if EPILOGUE_SUBTILE else
                                                    BLOCK_SIZE_N])
    persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
                     EPILOGUE_SUBTILE, NUM_SMS, WARP_SPECIALIZE, FLATTEN)


def dummy_descriptors(a, b, c):
    # Made with a dummy block: the autotuner's pre-hook sets each config's block shapes.
    dummy_block = [1, 1]
    return (TensorDescriptor.from_tensor(a, dummy_block), TensorDescriptor.from_tensor(b, dummy_block),
            TensorDescriptor.from_tensor(c, dummy_block))


def matmul_tma(a, b, c, warp_specialize=False, **launch):
    """c = a @ b.T through host descriptors (b is N x K)."""
    M, K = a.shape
    N = b.shape[0]
    a_desc, b_desc, c_desc = dummy_descriptors(a, b, c)

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)

    matmul_kernel_tma[grid](a_desc, b_desc, c_desc, M, N, K, WARP_SPECIALIZE=warp_specialize, **launch)
    return c


def matmul_tma_persistent(a, b, c, num_sms, warp_specialize=False, flatten=True, **launch):
    M, K = a.shape
    N = b.shape[0]
    a_desc, b_desc, c_desc = dummy_descriptors(a, b, c)

    def grid(META):
        return (min(num_sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),)

    matmul_kernel_tma_persistent[grid](a_desc, b_desc, c_desc, M, N, K, NUM_SMS=num_sms,
                                       WARP_SPECIALIZE=warp_specialize, FLATTEN=flatten, **launch)
    return c


def matmul_descriptor_persistent(a, b, c, num_sms, alloc_fn, warp_specialize=False, flatten=True, **launch):
    M, K = a.shape
    N = b.shape[0]
    # Descriptors made in the kernel need global scratch for their tensor maps.
    triton.set_allocator(alloc_fn)

    def grid(META):
        return (min(num_sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),)

    matmul_kernel_descriptor_persistent[grid](a, b, c, M, N, K, NUM_SMS=num_sms, WARP_SPECIALIZE=warp_specialize,
                                              FLATTEN=flatten, **launch)
    return c
