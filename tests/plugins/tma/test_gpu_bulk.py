"""Host tensor descriptors on a Hopper GPU: loads through bulk tensor copies (pipelined
into rings, or staged through one-slot buffers) against torch, at and past the edges of
the arrays, for both orientations of B and both paddings."""

from __future__ import annotations

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import jit

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: F401  (a fixture)

torch = pytest.importorskip("torch", reason="the GPU descriptor tests hold their arrays in torch tensors")

pytestmark = pytest.mark.gpu


@pytest.fixture
def hopper(nvidia_gpu):  # noqa: F811
    arch = nvidia_gpu.target.arch
    if int("".join(c for c in arch[3:] if c.isdigit())) < 90:
        pytest.skip(f"bulk tensor copies need a Hopper GPU (sm_90a); the first GPU is {arch}")
    return nvidia_gpu


@jit
def descriptor_matmul(a_desc, b_desc, c_desc, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr,
                      B_T: pl.constexpr):
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        if B_T:
            b = b_desc.load([pid_n * BN, k]).T
        else:
            b = b_desc.load([k, pid_n * BN])
        acc = pl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("num_stages", [1, 3])
@pytest.mark.parametrize("shape, blocks, num_warps", [
    ((256, 256, 256), (128, 128, 64), 4),
    ((200, 136, 104), (128, 128, 64), 4),    # every edge tile partial, K too (rows of 16-byte multiples)
    ((384, 512, 192), (128, 256, 64), 8),    # B rows of 512 bytes: four column blocks per fill
    ((96, 80, 72), (64, 32, 32), 4),         # 64-byte swizzle
])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_descriptor_matmul_matches_torch(hopper, b_t, num_stages, shape, blocks, num_warps, dtype):
    from polytile_tma.host import TensorDescriptor

    m, n, k = shape
    bm, bn, bk = blocks
    kind = getattr(torch, dtype)
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=kind)
    b = torch.randn(n, k, device="cuda", dtype=kind) if b_t else torch.randn(k, n, device="cuda", dtype=kind)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=kind)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk] if b_t else [bk, bn])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
    descriptor_matmul[grid](a_desc, b_desc, c_desc, m, n, k, BM=bm, BN=bn, BK=bk, B_T=b_t, num_warps=num_warps,
                            num_stages=num_stages)
    expected = a.float() @ (b.float().T if b_t else b.float())
    torch.testing.assert_close(c.float(), expected, atol=5e-2, rtol=2e-2)


@jit
def copy_block(src, dst, BM: pl.constexpr, BN: pl.constexpr):
    pm, pn = pl.program_id(0), pl.program_id(1)
    dst.store([pm * BM, pn * BN], src.load([pm * BM - 3, pn * BN - 8]))


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_a_staged_load_reads_the_padding_outside_the_array(hopper, padding):
    # Offsets 3 rows and 8 columns before each block: the first blocks start outside.
    from polytile_tma.host import TensorDescriptor

    x = torch.arange(37 * 48, device="cuda", dtype=torch.float32).reshape(37, 48)
    y = torch.full((64, 64), -1.0, device="cuda")
    copy_block[(2, 2)](TensorDescriptor.from_tensor(x, [32, 32], padding=padding),
                       TensorDescriptor.from_tensor(y, [32, 32]), BM=32, BN=32)
    expected = np.full((64, 64), 0.0 if padding == "zero" else np.nan, np.float32)
    expected[3:40, 8:56] = np.arange(37 * 48, dtype=np.float32).reshape(37, 48)
    np.testing.assert_array_equal(y.cpu().numpy(), expected)


def test_a_new_base_at_the_same_shape_is_read_through_a_new_map(hopper):
    # Maps are cached per address: relaunching with another base must read that base.
    from polytile_tma.host import TensorDescriptor

    y = torch.zeros((32, 32), device="cuda")
    for value in (1.0, 2.0, 3.0):
        x = torch.full((32, 32), value, device="cuda")
        copy_block[(1, 1)](TensorDescriptor.from_tensor(x, [32, 32]), TensorDescriptor.from_tensor(y, [32, 32]),
                           BM=32, BN=32)
        assert y[31, 31].item() == value and y[3, 8].item() == value


# -- blocks of rank 1, 3 and 5 -------------------------------------------------------------------


@pytest.mark.parametrize("rank", [1, 3, 5])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_blocks_of_other_ranks_move_as_bulk_copies(hopper, rank, dtype):
    # The kernels and the reference of the PTX test (which shows they compile to bulk copies
    # of that rank for sm_90a): reads before and past the edges.
    from polytile_tma.host import TensorDescriptor
    from tests.plugins.tma.test_bulk import RANKED, _ranked_reference

    kernel, shape, block, grid, meta = RANKED[rank]
    kind = getattr(torch, dtype)
    x = torch.arange(int(np.prod(shape)), device="cuda").reshape(shape).to(kind)
    y = torch.full(shape, -1, device="cuda", dtype=kind)
    kernel[grid](TensorDescriptor.from_tensor(x, block), TensorDescriptor.from_tensor(y, block), **meta)
    expected = _ranked_reference(rank, x.cpu().float().numpy())
    np.testing.assert_array_equal(y.cpu().float().numpy(), expected)


@jit
def add_3d(x_desc, y_desc, B1: pl.constexpr):
    j = pl.program_id(0)
    y_desc.atomic_add([0, j * B1, 0], x_desc.load([0, j * B1, 0]))


def test_a_3d_bulk_reduction_adds_and_drops_what_falls_outside(hopper):
    from polytile_tma.host import TensorDescriptor

    x = torch.randn(2, 72, 64, device="cuda")
    y = torch.ones(2, 72, 64, device="cuda")
    add_3d[(2,)](TensorDescriptor.from_tensor(x, [2, 64, 64]), TensorDescriptor.from_tensor(y, [2, 64, 64]), B1=64)
    torch.testing.assert_close(y, x + 1)


@pytest.mark.parametrize("num_stages", [1, 3])
def test_a_batched_matmul_through_3d_descriptors_matches_torch(hopper, num_stages):
    from polytile_tma.host import TensorDescriptor
    from tests.plugins.tma.test_bulk import batched_matmul

    torch.manual_seed(0)
    a = torch.randn(3, 200, 192, device="cuda", dtype=torch.float16)
    b = torch.randn(3, 136, 192, device="cuda", dtype=torch.float16)
    c = torch.full((3, 200, 136), float("nan"), device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(a, [1, 128, 64]), TensorDescriptor.from_tensor(b, [1, 128, 64]),
             TensorDescriptor.from_tensor(c, [1, 128, 128])]
    batched_matmul[(2, 2, 3)](*descs, 192, BM=128, BN=128, BK=64, num_stages=num_stages)
    torch.testing.assert_close(c.float(), a.float() @ b.float().transpose(1, 2), atol=5e-2, rtol=2e-2)


# -- Triton's descriptor matmuls, ported by changing their imports -----------------------------


@pytest.mark.parametrize("variant", ["matmul_tma", "matmul_tma_persistent", "matmul_descriptor_persistent"])
def test_the_ported_descriptor_matmuls_match_triton_s_own(hopper, variant):
    import importlib.util

    from tests.plugins.tma.test_tutorial_port import SOURCE, ported

    pytest.importorskip("triton", reason="the comparison runs Triton beside polytile")
    spec = importlib.util.spec_from_file_location("triton_descriptor_matmuls", SOURCE)
    original = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(original)
    torch.manual_seed(0)
    m, n, k = 1000, 776, 520
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    expected = a.float() @ b.float().T
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count

    def alloc(size, alignment, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    extra = {"matmul_tma": (), "matmul_tma_persistent": (num_sms,),
             "matmul_descriptor_persistent": (num_sms, alloc)}[variant]
    for module in (original, ported()):
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        getattr(module, variant)(a, b, c, *extra)
        torch.testing.assert_close(c.float(), expected, atol=0.1, rtol=0.02)


@pytest.mark.parametrize("flatten", [False, True])
def test_a_persistent_descriptor_matmul_matches_torch(hopper, flatten):
    # Five tiles for two programs, every edge tile partial: the next tile's copies are in
    # flight during this tile's store (flatten=True), and the last tile issues none.
    from polytile_tma.host import TensorDescriptor
    from tests.plugins.tma.test_bulk import persistent_matmul

    torch.manual_seed(0)
    m, n, k = 200, 304, 232  # rows of 464 and 608 bytes: multiples of 16, as TMA needs
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64]),
             TensorDescriptor.from_tensor(c, [128, 128])]
    persistent_matmul[(2,)](*descs, m, n, k, NP=2, BM=128, BN=128, BK=64, FLATTEN=flatten, IN_PLACE=False,
                            num_warps=8, num_stages=3)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=5e-2, rtol=2e-2)
