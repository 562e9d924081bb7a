"""Descriptors made in the kernel on a Hopper GPU: tensor maps built on the device in
the scratch ``polytile.set_allocator`` gives, against torch, at and past the edges of
the arrays, both paddings, and the masked fallback where a map cannot be proven valid."""

from __future__ import annotations

import pytest

import polytile
import polytile.language as pl
from polytile.errors import LaunchError
from polytile.gpu.global_scratch import BYTES_KEY
from polytile.runtime import jit

torch = pytest.importorskip("torch", reason="the GPU descriptor tests hold their arrays in torch tensors")

from tests.backends.nvidia.fake_cuda import nvidia_gpu  # noqa: E402, F401  (a fixture)
from tests.plugins.tma.test_device_maps import device_matmul  # noqa: E402  (the kernel the PTX tests check)
from tests.plugins.tma.test_gpu_bulk import hopper  # noqa: E402, F401  (a fixture)

pytestmark = pytest.mark.gpu


@pytest.fixture
def allocations():
    """An allocator that records what it was asked, set for the test and unset after."""
    from polytile.runtime.allocator import get_allocator

    asked = []

    def alloc(size, alignment, stream):
        asked.append((size, alignment))
        return torch.empty(size, dtype=torch.int8, device="cuda")

    saved = get_allocator()
    polytile.set_allocator(alloc)
    yield asked
    polytile.set_allocator(saved)


@pytest.mark.parametrize("shape, blocks", [
    ((256, 256, 256), (128, 128, 64)),
    ((200, 144, 112), (128, 128, 64)),   # every edge tile partial, K too (all three with maps)
    ((200, 136, 104), (128, 128, 64)),   # strides not known to be multiples of 16: masked
    ((96, 80, 72), (64, 32, 32)),        # 64-byte swizzle
])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_device_descriptor_matmul_matches_torch(hopper, allocations, shape, blocks, dtype):
    m, n, k = shape
    bm, bn, bk = blocks
    kind = getattr(torch, dtype)
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=kind)
    b = torch.randn(n, k, device="cuda", dtype=kind)
    c = torch.full((m, n), 7.0, device="cuda", dtype=kind)
    grid = (triton_cdiv(m, bm), triton_cdiv(n, bn))
    compiled = device_matmul[grid](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.1, rtol=0.02)
    # A map of 128 bytes per descriptor whose row stride the launch knows to be a
    # multiple of 16 elements (the specialization's hint), for every program of the grid;
    # the others keep masked accesses.
    maps = sum(stride % 16 == 0 for stride in (k, k, n))
    assert compiled.metadata.get(BYTES_KEY, 0) == 128 * maps
    assert allocations == ([(128 * maps * grid[0] * grid[1], 128)] if maps else [])


def triton_cdiv(a, b):
    return (a + b - 1) // b


@jit
def copy_tiles(x_ptr, y_ptr, M, N, SX, SY, BM: pl.constexpr, BN: pl.constexpr, PAD: pl.constexpr):
    src = pl.make_tensor_descriptor(x_ptr, [M, N], [SX, 1], [BM, BN], padding_option=PAD)
    dst = pl.make_tensor_descriptor(y_ptr, [M + BM, N + BN], [SY, 1], [BM, BN])
    pm, pn = pl.program_id(0) * BM, pl.program_id(1) * BN
    dst.store([pm, pn], src.load([pm, pn]) * 2)


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("rows, columns, stride", [
    (100, 72, 80),     # partial tiles at both edges, padded; rows of 80 f32
    (64, 40, 48),
    # A stride the launch does not know to be a multiple of 16 elements: the source's map
    # is not provably valid, so its loads stay masked (the same results).
    (64, 40, 44),
])
def test_a_device_map_pads_loads_and_drops_stores_past_the_edges(hopper, allocations, pad, rows, columns, stride):
    bm, bn = 32, 32
    x = torch.randn(rows, stride, device="cuda", dtype=torch.float32)
    y = torch.full((rows + bm, columns + bn + 8), -1.0, device="cuda", dtype=torch.float32)
    grid = (triton_cdiv(rows, bm), triton_cdiv(columns, bn))
    compiled = copy_tiles[grid](x, y, rows, columns, stride, y.stride(0), BM=bm, BN=bn, PAD=pad)
    torch.cuda.synchronize()
    assert compiled.metadata.get(BYTES_KEY, 0) == 128 * ((stride % 16 == 0) + (y.stride(0) % 16 == 0))
    covered_rows, covered_columns = grid[0] * bm, grid[1] * bn
    expected = torch.full_like(y, -1.0)
    block = torch.full((covered_rows, covered_columns), float("nan") if pad == "nan" else 0.0, device="cuda")
    block[:rows, :columns] = x[:, :columns] * 2
    expected[:covered_rows, :covered_columns] = block
    torch.testing.assert_close(y, expected, equal_nan=True)


@jit
def copy_per_program(x_ptr, y_ptr, B: pl.constexpr):
    # One 16 x 16 block per program of a 3-D grid, at (z, y, x) block coordinates of a
    # (Z*16, Y*16, X*16) array flattened to 2-D rows: every program's map is its own.
    px, py, pz = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    nx, ny = pl.num_programs(0), pl.num_programs(1)
    rows, columns = pl.num_programs(2) * ny * B, nx * B
    src = pl.make_tensor_descriptor(x_ptr, [rows, columns], [columns, 1], [B, B])
    dst = pl.make_tensor_descriptor(y_ptr, [rows, columns], [columns, 1], [B, B])
    row = (pz * ny + py) * B
    dst.store([row, px * B], src.load([row, px * B]) + pz * 100 + py * 10 + px)


def test_every_program_of_a_3d_grid_builds_its_map_in_its_own_slice(hopper, allocations):
    grid, b = (3, 2, 4), 16
    x = torch.randn(grid[2] * grid[1] * b, grid[0] * b, device="cuda", dtype=torch.float32)
    y = torch.zeros_like(x)
    compiled = copy_per_program[grid](x, y, B=b)
    torch.cuda.synchronize()
    assert compiled.metadata[BYTES_KEY] == 256 and allocations == [(256 * 24, 128)]
    expected = x.clone()
    for pz in range(grid[2]):
        for py in range(grid[1]):
            for px in range(grid[0]):
                row = (pz * grid[1] + py) * b
                expected[row:row + b, px * b:(px + 1) * b] += pz * 100 + py * 10 + px
    torch.testing.assert_close(y, expected)


def test_without_an_allocator_the_launch_says_how_to_set_one(hopper):
    from polytile.runtime.allocator import get_allocator

    saved = get_allocator()
    polytile.set_allocator(None)
    try:
        a = torch.zeros(128, 64, device="cuda", dtype=torch.float16)
        with pytest.raises(LaunchError, match=r"kernel 'device_matmul' needs 384 bytes of global scratch .* "
                                              r"polytile\.set_allocator\("):
            device_matmul[(1, 1)](a, a, a, 128, 128, 64, BM=128, BN=128, BK=64)
    finally:
        polytile.set_allocator(saved)


@jit
def reduce_blocks(x_ptr, y_ptr, M, N, BM: pl.constexpr, BN: pl.constexpr, KIND: pl.constexpr):
    # Every program of grid axis 2 combines the same block: the reductions must be atomic.
    src = pl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = pl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    pm, pn = pl.program_id(0) * BM, pl.program_id(1) * BN
    value = src.load([pm, pn])
    if KIND == "add":
        dst.atomic_add([pm, pn], value)
    elif KIND == "min":
        dst.atomic_min([pm, pn], value)
    elif KIND == "max":
        dst.atomic_max([pm, pn], value)
    elif KIND == "and":
        dst.atomic_and([pm, pn], value)
    elif KIND == "or":
        dst.atomic_or([pm, pn], value)
    else:
        dst.atomic_xor([pm, pn], value)


@jit
def reduce_host_blocks(x_desc, y_desc, KIND: pl.constexpr):
    pm, pn = pl.program_id(0) * x_desc.block_shape[0], pl.program_id(1) * x_desc.block_shape[1]
    value = x_desc.load([pm, pn])
    if KIND == "add":
        y_desc.atomic_add([pm, pn], value)
    else:
        y_desc.atomic_max([pm, pn], value)


@pytest.mark.parametrize("kind, dtype, bulk", [
    ("add", "float32", True), ("add", "float16", True), ("add", "bfloat16", True), ("add", "int32", True),
    ("min", "int32", True), ("max", "int64", True), ("or", "int32", True), ("xor", "int32", True),
    ("min", "float16", True), ("max", "bfloat16", True),  # Triton 3.6 gives descriptors these two floats
    ("and", "int64", False),  # not through a map of i64 (see BULK_REDUCTIONS): the masked atomics
])
def test_device_descriptor_reductions_are_bulk_reductions_that_drop_what_falls_outside(hopper, allocations, kind,
                                                                                       dtype, bulk):
    m, n, bm, bn, repeats = 100, 80, 32, 32, 3
    kind_dtype = getattr(torch, dtype)
    torch.manual_seed(1)
    if kind_dtype.is_floating_point:
        x = torch.randn(m, n, device="cuda").to(kind_dtype)
        y = torch.randn(m, n, device="cuda").to(kind_dtype)
    else:
        x = torch.randint(-1000, 1000, (m, n), device="cuda", dtype=kind_dtype)
        y = torch.randint(-1000, 1000, (m, n), device="cuda", dtype=kind_dtype)
    expected = y.clone()
    for _ in range(repeats):
        expected = {"add": lambda a: a + x, "min": lambda a: torch.minimum(a, x), "max": lambda a: torch.maximum(a, x),
                    "and": lambda a: a & x, "or": lambda a: a | x, "xor": lambda a: a ^ x}[kind](expected)
    grid = (triton_cdiv(m, bm), triton_cdiv(n, bn), repeats)
    compiled = reduce_blocks[grid](x, y, m, n, BM=bm, BN=bn, KIND=kind)
    torch.cuda.synchronize()
    assert compiled.metadata[BYTES_KEY] == (256 if bulk else 128)  # the destination's map only for a bulk one
    tolerance = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 2e-2)}.get(dtype, (1e-5, 1e-5))
    torch.testing.assert_close(y, expected, atol=tolerance[0], rtol=tolerance[1])


@pytest.mark.parametrize("kind", ["add", "max"])
def test_host_descriptor_reductions_are_bulk_reductions(hopper, kind):
    from polytile_tma.host import TensorDescriptor

    m, n = 96, 72
    x = torch.randint(-50, 50, (m, n), device="cuda", dtype=torch.int32)
    y = torch.randint(-50, 50, (m, n), device="cuda", dtype=torch.int32)
    expected = y + x if kind == "add" else torch.maximum(y, x)
    grid = (triton_cdiv(m, 64), triton_cdiv(n, 16))
    reduce_host_blocks[grid](TensorDescriptor.from_tensor(x, [64, 16]), TensorDescriptor.from_tensor(y, [64, 16]),
                             KIND=kind)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)


def test_relaunches_go_through_the_native_dispatcher_which_asks_the_allocator_each_time(hopper, allocations):
    from polytile_nvidia.launcher import launch_counts

    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    before = launch_counts(device_matmul).native
    for _ in range(6):
        device_matmul[(2, 2)](a, a, c, 256, 256, 128, BM=128, BN=128, BK=64)
    torch.cuda.synchronize()
    assert launch_counts(device_matmul).native - before >= 3  # planned after the first launches
    assert allocations[-6:] == [(3 * 128 * 4, 128)] * 6  # one allocation per launch, on either path
    torch.testing.assert_close(c.float(), a.float() @ a.float().T, atol=0.1, rtol=0.02)


def test_a_3d_descriptor_made_in_the_kernel_copies_each_head(hopper, allocations):
    from tests.plugins.tma.test_device_maps import copy_3d

    x = torch.randn(4, 136, 64, device="cuda", dtype=torch.float16)  # the last block of rows is partial
    y = torch.zeros_like(x)
    copy_3d[(4, 3)](x, y, 4, 136, BL=64, D=64)
    torch.testing.assert_close(y, x + 1)
    assert allocations == [(128 * 2 * 4 * 3, 128)]  # two maps per program, built in scratch


@jit
def add_one_1d(x_ptr, y_ptr, N, B: pl.constexpr):
    x = pl.make_tensor_descriptor(x_ptr, [N], [1], [B])
    y = pl.make_tensor_descriptor(y_ptr, [N], [1], [B])
    y.store([pl.program_id(0) * B], x.load([pl.program_id(0) * B]) + 1)


def test_a_1d_descriptor_made_in_the_kernel_is_a_1d_map(hopper, allocations):
    x = torch.randn(1000, device="cuda")
    y = torch.zeros(1024, device="cuda")
    add_one_1d[(4,)](x, y, 1000, B=256)
    torch.testing.assert_close(y[:1000], x + 1)
    assert torch.all(y[1000:] == 0)  # past the end: the copy engine drops the store
    assert allocations == [(128 * 2 * 4, 128)]


def test_a_1d_map_of_a_run_that_is_no_multiple_of_16_bytes(hopper):
    # 1001 f32: a host map whose one stride entry (the driver reads it, rounded up to 16
    # bytes) is not the run's own length.
    from polytile_tma.host import TensorDescriptor
    from tests.plugins.tma.test_bulk import RANKED

    kernel, _, block, _, meta = RANKED[1]
    x = torch.arange(1001, device="cuda", dtype=torch.float32)
    y = torch.full((1001,), -1.0, device="cuda")
    kernel[(4,)](TensorDescriptor.from_tensor(x, block), TensorDescriptor.from_tensor(y, block), **meta)
    expected = torch.cat([torch.zeros(8, device="cuda"), x[:-8]]) * 2  # each block read 8 before it
    torch.testing.assert_close(y, expected)
