"""Tensor descriptors made in the kernel (``pl.make_tensor_descriptor``, polytile-tma)
against NumPy on every target, and the errors a kernel author gets for misusing them."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit

pytest.importorskip("polytile_tma", reason="tensor descriptors come with the polytile-tma plugin")


@jit
def copy2d(x, y, M, N, BM: pl.constexpr, BN: pl.constexpr, PAD: pl.constexpr):
    src = pl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN], padding_option=PAD)
    # The destination holds whole blocks: it shows what the load read outside the array.
    dst = pl.make_tensor_descriptor(y, [M + BM, N + BN], [N + BN, 1], [BM, BN])
    pm, pn = pl.program_id(0), pl.program_id(1)
    dst.store([pm * BM, pn * BN], src.load([pm * BM, pn * BN]))


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_a_load_at_the_edges_reads_the_padding_outside_the_array(target, pad):
    m, n, bm, bn = 7, 20, 4, 16
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    y = np.full((m + bm, n + bn), -1, np.float32)
    copy2d[(-(-m // bm), -(-n // bn))](x, y, m, n, BM=bm, BN=bn, PAD=pad, target=target)
    expected = np.full((m + bm, n + bn), -1, np.float32)
    blocks = np.full((-(-m // bm) * bm, -(-n // bn) * bn), np.nan if pad == "nan" else 0, np.float32)
    blocks[:m, :n] = x
    expected[:blocks.shape[0], :blocks.shape[1]] = blocks
    np.testing.assert_array_equal(y, expected)


@jit
def scale_in_place(x, M, N, SX, BM: pl.constexpr, BN: pl.constexpr):
    desc = pl.make_tensor_descriptor(x, [M, N], [SX, 1], [BM, BN])
    pm, pn = pl.program_id(0), pl.program_id(1)
    desc.store([pm * BM, pn * BN], desc.load([pm * BM, pn * BN]) * 2)


def test_a_store_at_the_edges_writes_only_inside_the_array(target):
    # The descriptor covers 7 x 20 of a 9 x 32 buffer: a store past its shape would show
    # in the rest of the buffer.
    buffer = np.arange(9 * 32, dtype=np.int32).reshape(9, 32)
    expected = buffer.copy()
    expected[:7, :20] *= 2
    scale_in_place[(2, 2)](buffer, 7, 20, 32, BM=4, BN=16, target=target)
    np.testing.assert_array_equal(buffer, expected)


@jit
def copy_nd(x, y, S0, S1, S2, S3, S4, RANK: pl.constexpr, B: pl.constexpr):
    if RANK == 1:
        sx = pl.make_tensor_descriptor(x, [S0], [1], [B[0]])
        sy = pl.make_tensor_descriptor(y, [S0], [1], [B[0]])
        sy.store([pl.program_id(0) * B[0]], sx.load([pl.program_id(0) * B[0]]) + 1)
    elif RANK == 2:
        sx = pl.make_tensor_descriptor(x, [S0, S1], [S1, 1], [B[0], B[1]])
        sy = pl.make_tensor_descriptor(y, [S0, S1], [S1, 1], [B[0], B[1]])
        off = [0, pl.program_id(0) * B[1]]
        sy.store(off, sx.load(off) + 1)
    elif RANK == 3:
        shape = [S0, S1, S2]
        strides = [S1 * S2, S2, 1]
        sx = pl.make_tensor_descriptor(x, shape, strides, [B[0], B[1], B[2]])
        sy = pl.make_tensor_descriptor(y, shape, strides, [B[0], B[1], B[2]])
        off = [0, 0, pl.program_id(0) * B[2]]
        sy.store(off, sx.load(off) + 1)
    elif RANK == 4:
        shape = [S0, S1, S2, S3]
        strides = [S1 * S2 * S3, S2 * S3, S3, 1]
        sx = pl.make_tensor_descriptor(x, shape, strides, [B[0], B[1], B[2], B[3]])
        sy = pl.make_tensor_descriptor(y, shape, strides, [B[0], B[1], B[2], B[3]])
        off = [0, 0, 0, pl.program_id(0) * B[3]]
        sy.store(off, sx.load(off) + 1)
    else:
        shape = [S0, S1, S2, S3, S4]
        strides = [S1 * S2 * S3 * S4, S2 * S3 * S4, S3 * S4, S4, 1]
        sx = pl.make_tensor_descriptor(x, shape, strides, [B[0], B[1], B[2], B[3], B[4]])
        sy = pl.make_tensor_descriptor(y, shape, strides, [B[0], B[1], B[2], B[3], B[4]])
        off = [0, 0, 0, 0, pl.program_id(0) * B[4]]
        sy.store(off, sx.load(off) + 1)


@pytest.mark.parametrize("shape,block", [((37,), (16,)), ((3, 37), (4, 16)), ((2, 3, 21), (2, 4, 8)),
                                         ((2, 1, 3, 21), (2, 1, 4, 8)), ((1, 2, 2, 3, 21), (1, 2, 2, 4, 8))])
def test_every_rank_from_one_to_five(target, shape, block):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = np.zeros_like(x)
    sizes = list(shape) + [1] * (5 - len(shape))
    copy_nd[(-(-shape[-1] // block[-1]),)](x, y, *sizes, RANK=len(shape), B=block, target=target)
    np.testing.assert_array_equal(y, x + 1)


@jit
def reduce_kernel(x, v, M, N, KIND: pl.constexpr, BM: pl.constexpr, BN: pl.constexpr):
    desc = pl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN])
    rows = pl.arange(0, BM)[:, None]
    cols = pl.arange(0, BN)[None, :]
    values = pl.load(v + rows * BN + cols)
    off = [pl.program_id(0) * BM, 0]
    if KIND == "add":
        desc.atomic_add(off, values)
    elif KIND == "min":
        desc.atomic_min(off, values)
    elif KIND == "max":
        desc.atomic_max(off, values)
    elif KIND == "and":
        desc.atomic_and(off, values)
    elif KIND == "or":
        desc.atomic_or(off, values)
    else:
        desc.atomic_xor(off, values)


_COMBINE = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor}


@pytest.mark.parametrize("kind,dtype", [("add", np.float32), ("add", np.int32), ("min", np.int32), ("max", np.int32),
                                        ("min", np.uint32), ("and", np.int32), ("or", np.int32), ("xor", np.int32),
                                        ("min", np.float16), ("max", np.float16)])  # f16 and bf16 too, as in Triton
def test_atomic_reductions_combine_each_element_once_inside_the_array(target, kind, dtype):
    m, n, bm, bn = 6, 8, 4, 8
    rng = np.random.default_rng(7)
    low = -100 if dtype == np.float16 else 0  # floats of both signs
    x = rng.integers(low, 100, (m, n)).astype(dtype)
    v = rng.integers(low, 100, (bm, bn)).astype(dtype)
    expected = x.copy()
    for start in range(0, m, bm):  # each program combines v into its rows (the last block is cut)
        rows = min(bm, m - start)
        expected[start:start + rows] = _COMBINE[kind](expected[start:start + rows], v[:rows])
    reduce_kernel[(-(-m // bm),)](x, v, m, n, KIND=kind, BM=bm, BN=bn, target=target)
    np.testing.assert_array_equal(x, expected)


@jit
def gather_scatter(x, y, rows, M, N, R: pl.constexpr, BN: pl.constexpr):
    src = pl.make_tensor_descriptor(x, [M, N], [N, 1], [1, BN])
    dst = pl.make_tensor_descriptor(y, [M, N], [N, 1], [1, BN])
    picked = pl.load(rows + pl.arange(0, R))
    col = pl.program_id(0) * BN
    dst.scatter(src.gather(picked, col) * 10, pl.arange(0, R), col)


def test_gather_reads_the_given_rows_and_scatter_writes_them(target):
    m, n, r, bn = 9, 20, 4, 16
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    rows = np.array([8, 0, 11, 3], np.int32)  # row 11 is outside: it reads zero
    y = np.full((m, n), -1, np.float32)
    gather_scatter[(-(-n // bn),)](x, y, rows, m, n, R=r, BN=bn, target=target)
    expected = np.full((m, n), -1, np.float32)
    for i, row in enumerate(rows):
        expected[i] = x[row] * 10 if row < m else 0
    np.testing.assert_array_equal(y, expected)


@jit
def properties(x, out, M, N, BM: pl.constexpr, BN: pl.constexpr):
    desc = pl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN])
    shape = desc.shape
    strides = desc.strides
    pl.store(out + 0, shape[0])
    pl.store(out + 1, shape[1])
    pl.store(out + 2, strides[0].to(pl.int32))
    pl.store(out + 3, strides[1].to(pl.int32))
    pl.static_assert(desc.block_shape == [BM, BN])
    pl.static_assert(desc.dtype == pl.float16)
    pl.store(out + 4, desc.load([0, 0]).shape[1])


def test_shape_strides_block_shape_and_dtype(target):
    x = np.zeros((5, 24), np.float16)
    out = np.zeros(5, np.int32)
    properties[(1,)](x, out, 5, 24, BM=2, BN=8, target=target)
    np.testing.assert_array_equal(out, [5, 24, 24, 1, 8])


@jit
def writes_through_a_descriptor(x, y, n, B: pl.constexpr):
    src = pl.make_tensor_descriptor(x, [n], [1], [B])
    dst = pl.make_tensor_descriptor(y, [n], [1], [B])
    dst.store([0], src.load([0]))


def test_a_store_through_a_descriptor_marks_its_base_as_written():
    x, y = np.zeros(16, np.float32), np.zeros(16, np.float32)
    assert writes_through_a_descriptor.mutated_args(x, y, 16, B=16) == ["y"]


@jit
def writes_through_descriptor_ops(x, y, z, w, rows, n, KIND: pl.constexpr):
    # Each kind of write through a descriptor made in the kernel, reading through another.
    src = pl.make_tensor_descriptor(x, [n, n], [n, 1], [8, 8])
    block = src.load([0, 0])
    if KIND == "scatter":
        dst = pl.make_tensor_descriptor(y, [n, n], [n, 1], [1, 8])
        dst.scatter(block, pl.load(rows + pl.arange(0, 8)), 0)
    elif KIND == "atomic_add":
        dst = pl.make_tensor_descriptor(z, [n, n], [n, 1], [8, 8])
        dst.atomic_add([0, 0], block)
    else:  # atomic_max, through a host descriptor-like made one of integers
        dst = pl.make_tensor_descriptor(w, [n, n], [n, 1], [8, 8])
        dst.atomic_max([0, 0], block.to(pl.int32))


@pytest.mark.parametrize("kind, written", [("scatter", ["y"]), ("atomic_add", ["z"]), ("atomic_max", ["w"])])
def test_scatters_and_atomics_through_a_descriptor_mark_its_base_as_written(kind, written):
    x, y, z = (np.zeros((8, 8), np.float32) for _ in range(3))
    w, rows = np.zeros((8, 8), np.int32), np.arange(8, dtype=np.int32)
    assert writes_through_descriptor_ops.mutated_args(x, y, z, w, rows, 8, KIND=kind) == written


@jit
def beyond_the_array(x, n, B: pl.constexpr):
    desc = pl.make_tensor_descriptor(x, [n], [1], [B])
    desc.store([0], desc.load([0]) + 1)


def test_the_interpreter_names_an_element_past_the_array_the_descriptor_claims():
    x = np.zeros(8, np.float32)
    from polytile.errors import InterpreterError

    with pytest.raises(InterpreterError, match=r"accesses index 8, out of bounds of argument 'x' \(8 elements of "
                                               r"float32\) \(at element 8 of the pointer tile\)"):
        beyond_the_array[(1,)](x, 16, B=16, target="interp")


# -- errors ---------------------------------------------------------------------------------


@jit
def misuse(x, n, CASE: pl.constexpr):
    if CASE == "rank6":
        pl.make_tensor_descriptor(x, [n] * 6, [1] * 6, [1] * 6)
    elif CASE == "padding":
        pl.make_tensor_descriptor(x, [n], [1], [8], padding_option="inf")
    elif CASE == "base":
        pl.make_tensor_descriptor(n, [n], [1], [8])
    elif CASE == "stride":
        pl.make_tensor_descriptor(x, [n, n], [n, 2], [8, 8])
    elif CASE == "gather":
        pl.make_tensor_descriptor(x, [n, n], [n, 1], [2, 8]).gather(pl.arange(0, 4), 0)
    elif CASE == "store_shape":
        pl.make_tensor_descriptor(x, [n], [1], [8]).store([0], pl.zeros((4,), pl.float32))
    elif CASE == "and_float":
        pl.make_tensor_descriptor(x, [n], [1], [8]).atomic_and([0], 1.0)
    elif CASE == "offsets":
        pl.make_tensor_descriptor(x, [n, n], [n, 1], [8, 8]).load([0])
    elif CASE == "wide_shape":
        pl.make_tensor_descriptor(x, [n.to(pl.int64)], [1], [8])
    elif CASE == "wide_offset":
        pl.make_tensor_descriptor(x, [n], [1], [8]).load([2**31 + 8])
    elif CASE == "min_float":
        pl.make_tensor_descriptor(x, [n], [1], [8]).atomic_min([0], 1.0)


@pytest.mark.parametrize("case,message", [
    ("rank6", "a descriptor has rank 1 to 5"),
    ("padding", "unknown padding_option 'inf'"),
    ("base", "needs a pointer scalar as its base"),
    ("stride", r"the last dimension must be contiguous \(stride 1\), got strides\[1\] = 2"),
    ("gather", r"needs a 2-D descriptor whose block is one row \(block_shape \[1, N\]\)"),
    ("store_shape", r"the value has shape \[4\] but the descriptor moves blocks of \[8\]"),
    ("and_float", "desc.atomic_and combines integers; this descriptor holds fp32"),
    ("offsets", "desc.load's offsets has 1 entries for a block of rank 2"),
    ("wide_shape", r"pl.make_tensor_descriptor's shape\[0\] has type int64; a descriptor's shape and offsets are "
                   r"32-bit"),
    ("wide_offset", r"desc.load's offsets\[0\] = 2147483656 does not fit in 32 bits"),
    ("min_float", "desc.atomic_min through a descriptor combines integers, float16 and bfloat16 \\(Triton's rule"),
])
def test_misuse_is_a_compilation_error_naming_it(case, message):
    x = np.zeros(64, np.float32)
    with pytest.raises(CompilationError, match=message):
        misuse[(1,)](x, 8, CASE=case, target="interp")


# -- docs/tma.md ----------------------------------------------------------------------------


def _docs_blocks() -> list[str]:
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[2] / "docs" / "tma.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _docs_block(marker: str) -> str:
    """The one python block of docs/tma.md that contains ``marker``."""
    found = [block for block in _docs_blocks() if marker in block]
    assert len(found) == 1, f"docs/tma.md has {len(found)} python blocks with {marker!r}"
    return found[0]


def test_the_docs_allocator_snippet_sets_an_allocator_that_gives_bytes(monkeypatch):
    import sys
    import types

    from polytile.runtime.allocator import get_allocator, set_allocator

    made = []
    fake_torch = types.SimpleNamespace(int8="int8", empty=lambda size, dtype, device: made.append((size, dtype, device)))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    saved = get_allocator()
    try:
        exec(compile(_docs_block("polytile.set_allocator("), "docs/tma.md", "exec"), {})
        get_allocator()(384, 128, None)
    finally:
        set_allocator(saved)
    assert made == [(384, "int8", "cuda")]


def test_the_docs_kernel_runs(target, tmp_path):
    import importlib.util

    source = _docs_block("def add_one")
    path = tmp_path / "docs_tma_kernel.py"  # kernels are read from their file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("docs_tma_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.arange(37 * 45, dtype=np.float32).reshape(37, 45)
    y = np.zeros_like(x)
    module.add_one[(3, 2)](x, y, 37, 45, BM=16, BN=32, target=target)
    np.testing.assert_array_equal(y, x + 1)


def test_the_docs_host_descriptors_build():
    a = np.zeros((128, 64), np.float16)
    b = np.zeros((64, 32), np.float32)
    scope = {"a": a, "b": b, "M": 64, "K": 32}
    exec(_docs_block("b_desc = TensorDescriptor(b"), scope)
    assert scope["a_desc"].block_shape == [64, 64] and scope["b_desc"].padding == "nan"


# -- host descriptors as kernel arguments ------------------------------------------------------


@jit
def copy_through_host_descriptors(src, dst, BM: pl.constexpr, BN: pl.constexpr):
    m, n = pl.program_id(0) * BM, pl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) * 2 + 1)


def _host(target, array):
    """``array`` where a kernel on ``target`` reads it: NumPy on the interpreter and when
    compiling for every arch, a torch tensor on a GPU (copied back by the test)."""
    if target == "nvidia":
        import torch

        return torch.from_numpy(array).cuda()
    return array


def _back(value, array):
    if not isinstance(value, np.ndarray):
        array[...] = value.cpu().numpy()


def test_host_descriptors_pass_to_kernels(target):
    from polytile_tma.host import TensorDescriptor

    x = np.arange(37 * 48, dtype=np.float32).reshape(37, 48)
    y = np.full((37, 48), -1, np.float32)
    xs, ys = _host(target, x), _host(target, y)
    a, b = TensorDescriptor.from_tensor(xs, [16, 32]), TensorDescriptor.from_tensor(ys, [16, 32])
    copy_through_host_descriptors[(3, 2)](a, b, BM=16, BN=32, target=target)
    _back(ys, y)
    np.testing.assert_array_equal(y, x * 2 + 1)


def test_a_host_descriptor_of_part_of_an_array_writes_only_that_part(target):
    from polytile_tma.host import TensorDescriptor

    x = np.arange(40 * 64, dtype=np.float16).reshape(40, 64)
    y = np.zeros((40, 64), np.float16)
    xs, ys = _host(target, x), _host(target, y)
    # The top-left 20 x 24 of each, in 16 x 16 blocks: the rest of y stays zero.
    a = TensorDescriptor(xs, [20, 24], [64, 1], [16, 16])
    b = TensorDescriptor(ys, [20, 24], [64, 1], [16, 16])
    copy_through_host_descriptors[(2, 2)](a, b, BM=16, BN=16, target=target)
    _back(ys, y)
    expected = np.zeros_like(y)
    expected[:20, :24] = x[:20, :24] * 2 + 1
    np.testing.assert_array_equal(y, expected)


def test_a_store_through_a_host_descriptor_marks_the_argument_as_written():
    from polytile_tma.host import TensorDescriptor

    x, y = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    a, b = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    assert copy_through_host_descriptors.mutated_args(a, b, BM=16, BN=16) == ["dst"]


def test_block_shape_dtype_and_hints_are_part_of_the_specialization():
    from polytile_tma.host import TensorDescriptor

    x = np.zeros((64, 64), np.float32)
    key = copy_through_host_descriptors.specialize
    bind = copy_through_host_descriptors.bind
    desc = TensorDescriptor.from_tensor

    def spec(a, b):
        return key(bind((a, b), {"BM": 16, "BN": 16})).key

    same = spec(desc(x, [16, 16]), desc(x, [16, 16]))
    assert spec(desc(np.ones((64, 64), np.float32), [16, 16]), desc(x, [16, 16])) == same  # the data does not
    assert spec(desc(x, [16, 32]), desc(x, [16, 16])) != same                              # the block does
    assert spec(desc(x.astype(np.float16), [16, 16]), desc(x, [16, 16])) != same          # the dtype does
    assert spec(desc(x, [16, 16], padding="nan"), desc(x, [16, 16])) != same              # the padding does
    assert spec(desc(np.zeros((60, 64), np.float32), [16, 16]), desc(x, [16, 16])) != same  # shape % 16 does


def test_a_descriptor_broken_after_it_was_made_is_a_launch_error_naming_the_argument():
    from polytile.errors import LaunchError
    from polytile_tma.host import TensorDescriptor

    x, y = np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    a, b = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    copy_through_host_descriptors[(1, 1)](a, b, BM=16, BN=16, target="interp")  # a launch that works
    b.strides = [16, 2]  # a dataclass can be changed after its checks: the next launch is not the same kernel
    with pytest.raises(LaunchError, match=r"kernel 'copy_through_host_descriptors': argument 'dst' \(a "
                                          r"TensorDescriptor\): the last stride \(strides\[1\]\) is 2, not 1"):
        copy_through_host_descriptors[(1, 1)](a, b, BM=16, BN=16, target="interp")


def test_the_autotuner_restores_what_a_descriptor_argument_accumulates_into():
    from polytile.runtime import Config, autotune
    from polytile_tma.host import TensorDescriptor

    # dst += src: every trial would add once more if the tuner did not put dst's base back.
    @autotune(configs=[Config({"BM": 16}, num_warps=4), Config({"BM": 16}, num_warps=2)], key=["n"], warmup=0,
              rep=1)
    @jit
    def accumulate(src, dst, n, BM: pl.constexpr):
        rows = pl.program_id(0) * BM
        dst.atomic_add([rows, 0], src.load([rows, 0]))

    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    out = np.ones((32, 16), np.float32)
    accumulate[(2,)](TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(out, [16, 16]), 32)
    assert accumulate.restored_args == ["dst"]
    np.testing.assert_array_equal(out, 1 + x)  # exactly one real launch's worth


def test_the_docs_host_descriptor_kernel_runs(target, tmp_path):
    import importlib.util

    source = _docs_block("def scale")
    path = tmp_path / "docs_tma_host.py"
    path.write_text("import polytile as pt\nimport polytile.language as pl\n"
                    "from polytile_tma.host import TensorDescriptor\n\n" + source.split("\nscale[")[0] + "\n")
    spec = importlib.util.spec_from_file_location("docs_tma_host", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scope = {"pt": module.pt, "scale": module.scale, "TensorDescriptor": module.TensorDescriptor, "M": 100, "N": 72}
    x = np.arange(100 * 72, dtype=np.float32).reshape(100, 72)
    y = np.zeros_like(x)
    scope["x"], scope["y"] = _host(target, x), _host(target, y)
    launch = "scale[" + source.split("\nscale[")[1]
    exec(launch.replace("BM=64, BN=64)", "BM=64, BN=64, target=target)"), {**scope, "target": target})
    _back(scope["y"], y)
    np.testing.assert_array_equal(y, x * 2)


@jit
def descriptor_misuse(x, n, CASE: pl.constexpr):
    d = pl.make_tensor_descriptor(x, [n], [1], [8])
    if CASE == "add":
        pl.store(x + pl.arange(0, 8), d + 1)
    elif CASE == "where":
        pl.store(x + pl.arange(0, 8), pl.where(n > 1, d, d))
    else:
        pl.store(x + pl.arange(0, 8), _load_first(d))


@jit(noinline=True)
def _load_first(d):
    return d.load([0])


@pytest.mark.parametrize("case,message", [
    ("add", r"'\+': a !tma.desc<tile<8xf32>, zero> value is not a tile or a number"),
    ("where", r"a tile operation: a !tma.desc<tile<8xf32>, zero> value is not a tile or a number"),
    ("noinline", r"argument 'd' is a !tma.desc<tile<8xf32>, zero> value: pass it to a @jit helper that is inlined"),
])
def test_a_descriptor_used_as_a_tile_is_an_error_naming_it(case, message):
    with pytest.raises(CompilationError, match=message):
        descriptor_misuse[(1,)](np.zeros(8, np.float32), 8, CASE=case, target="interp")


def test_a_host_descriptor_of_a_strided_view_reads_and_writes_the_view():
    # Every other row and the columns from 8 on: the descriptor addresses the view
    # through its own strides inside the memory it lies in.
    from polytile_tma.host import TensorDescriptor

    big_x = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    big_y = np.zeros((64, 48), np.float32)
    x, y = big_x[::2, 8:], big_y[::2, 8:]
    a, b = TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(y, [16, 16])
    copy_through_host_descriptors[(2, 3)](a, b, BM=16, BN=16, target="interp")
    expected = np.zeros_like(big_y)
    expected[::2, 8:] = x * 2 + 1
    np.testing.assert_array_equal(big_y, expected)
