"""Indexing and creation builtins: program_id, num_programs, arange, full, zeros,
zeros_like, full_like, cast / .to (with bitcast), cdiv, hints, static_range, range,
static_assert and static_print, against NumPy."""

import textwrap

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.runtime import jit

ALL = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16, np.float32,
       np.float64]


def pl_dtype(dtype):
    return {"bool": pl.int1}.get(np.dtype(dtype).name) or getattr(pl, np.dtype(dtype).name)


@jit
def grid_kernel(out_ptr):
    x, y, z = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    nx, ny, nz = pl.num_programs(0), pl.num_programs(1), pl.num_programs(2)
    flat = (z * ny + y) * nx + x
    pl.store(out_ptr + flat * 4 + pl.arange(0, 4), pl.join(pl.join(x, z), pl.join(y, nx * ny * nz)).reshape(4))  # [[x, y], [z, n]]


@pytest.mark.parametrize("grid", [(3,), (2, 3), (2, 1, 3)])
def test_program_id_and_num_programs_in_three_dimensions(target, grid):
    full_grid = tuple(grid) + (1,) * (3 - len(grid))
    out = np.full((int(np.prod(full_grid)), 4), -1, np.int32)
    grid_kernel[grid](out, target=target)
    nx, ny, nz = full_grid
    expected = [[x, y, z, nx * ny * nz] for z in range(nz) for y in range(ny) for x in range(nx)]
    np.testing.assert_array_equal(out, expected)


@jit
def arange_kernel(out_ptr, START: pl.constexpr, END: pl.constexpr):
    r = pl.arange(START, END)
    pl.static_assert(r.dtype == pl.int32)
    pl.store(out_ptr + r - START, r)


@pytest.mark.parametrize("start, end", [(0, 1), (0, 64), (5, 13), (-4, 4)])
def test_arange(target, start, end):
    out = np.zeros(end - start, np.int32)
    arange_kernel[(1,)](out, START=start, END=end, target=target)
    np.testing.assert_array_equal(out, np.arange(start, end))


@jit
def scalar_full_kernel(out_ptr, scalar):
    # Shape (): scalar tensors, as Triton's tl.full((), ...) (its tests build scalars so).
    x = pl.full((), 32, dtype=pl.int32)
    pl.static_assert(len(x.shape) == 0)
    z = pl.zeros((), pl.float32) + scalar
    pl.store(out_ptr, (x + 1).to(pl.float32))
    pl.store(out_ptr + 1, z * pl.full((), scalar, pl.int8).to(pl.float32))


def test_full_of_shape_nothing_is_a_scalar(target):
    out = np.zeros(2, np.float32)
    scalar_full_kernel[(1,)](out, 3, target=target)
    assert out.tolist() == [33.0, 9.0]


@jit
def full_kernel(out_ptr, like_ptr, scalar, VALUE: pl.constexpr, DT: pl.constexpr, M: pl.constexpr,
                N: pl.constexpr):
    offs = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    size = M * N
    f = pl.full((M, N), VALUE, DT)
    pl.static_assert(f.dtype == DT)
    pl.store(out_ptr + offs, f)
    pl.store(out_ptr + size + offs, pl.zeros([M, N], dtype=DT))
    like = pl.load(like_ptr + offs)
    pl.store(out_ptr + 2 * size + offs, pl.zeros_like(like))
    pl.store(out_ptr + 3 * size + offs, pl.full_like(like, VALUE))
    pl.store(out_ptr + 4 * size + offs, pl.full((M, N), scalar, DT))  # a run-time scalar value
    pl.static_assert(pl.full_like(like, 1, dtype=pl.float64).dtype == pl.float64)
    pl.static_assert(pl.zeros_like(like).dtype == like.dtype)


@pytest.mark.parametrize("shape", [(1, 8), (4, 16)])
@pytest.mark.parametrize("dtype", ALL + [np.bool_])
def test_full_zeros_and_likes(target, dtype, shape):
    value = True if dtype is np.bool_ else (2.5 if np.dtype(dtype).kind == "f" else 7)
    out = np.full((5,) + shape, 99 if dtype is not np.bool_ else True, dtype)
    like = np.ones(shape, dtype)
    full_kernel[(1,)](out, like, 3, VALUE=value, DT=pl_dtype(dtype), M=shape[0], N=shape[1], target=target)
    expected = np.stack([np.full(shape, value, dtype), np.zeros(shape, dtype), np.zeros(shape, dtype),
                         np.full(shape, value, dtype), np.full(shape, 3, dtype)])
    np.testing.assert_array_equal(out, expected)


@jit
def cast_kernel(x_ptr, out_ptr, n, DST: pl.constexpr, BITCAST: pl.constexpr, METHOD: pl.constexpr,
                BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    mask = offs < n
    x = pl.load(x_ptr + offs, mask=mask)
    if METHOD == "to":
        y = x.to(DST, bitcast=BITCAST)
    else:
        y = pl.cast(x, DST, bitcast=BITCAST)
    pl.static_assert(y.dtype == DST)
    pl.store(out_ptr + offs, y, mask=mask)


def _cast_source(src, dst, n):
    """Values of ``src`` that ``dst`` can hold (out-of-range float-to-int is undefined)."""
    s, d = np.dtype(src), np.dtype(dst)
    values = np.arange(n) * 3 - 20
    if s.kind == "u" or d.kind == "u":
        values = np.abs(values)
    if s.kind == "f":
        values = values + 0.75 * np.sign(values)  # fractions: float-to-int truncates toward zero
    if d.kind in "iu" and np.iinfo(d).max < 127 or s.kind in "iu" and np.iinfo(s).max < 127:
        values = np.clip(values, -100, 100)
    return values.astype(src)


@pytest.mark.parametrize("src, method, n", [(src, ("to", "cast")[i % 2], (45, 16)[i % 2])
                                            for i, src in enumerate(ALL + [np.bool_])])
def test_casts_between_every_dtype(target, src, method, n):
    x = _cast_source(src, np.int8, n) if src is not np.bool_ else np.arange(n) % 3 == 0
    for dst in ALL + [np.bool_]:
        source = x if src is np.bool_ else _cast_source(src, dst, n)
        out = np.zeros(n, dst)
        cast_kernel[(1,)](source, out, n, DST=pl_dtype(dst), BITCAST=False, METHOD=method, BLOCK=64, target=target)
        expected = source != 0 if dst is np.bool_ else source.astype(dst)
        np.testing.assert_array_equal(out, expected, err_msg=f"{np.dtype(src).name} -> {np.dtype(dst).name}")


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.uint64),
                                      (np.float16, np.int16), (np.int16, np.uint16), (np.uint8, np.int8)])
def test_bitcast(target, src, dst):
    x = np.random.default_rng(0).uniform(-1000, 1000, 37).astype(src)
    out = np.zeros(37, dst)
    cast_kernel[(1,)](x, out, 37, DST=pl_dtype(dst), BITCAST=True, METHOD="to", BLOCK=64, target=target)
    np.testing.assert_array_equal(out, x.view(dst))


def test_bitcast_needs_one_width(target):
    with pytest.raises(CompilationError, match="bitcast needs types of one bit width, got fp32 .32 bits. and "
                                               "int64 .64 bits."):
        cast_kernel[(1,)](np.zeros(4, np.float32), np.zeros(4, np.int64), 4, DST=pl.int64, BITCAST=True,
                          METHOD="to", BLOCK=4, target=target)


@jit
def cdiv_kernel(out_ptr, n, BLOCK: pl.constexpr):
    pl.static_assert(pl.cdiv(BLOCK, 3) == (BLOCK + 2) // 3)  # compile time with constexprs
    pl.store(out_ptr, pl.cdiv(n, BLOCK))
    pl.store(out_ptr + 1, pl.cdiv(n, 7))
    pl.store(out_ptr + 2 + pl.arange(0, 4), pl.cdiv(pl.arange(0, 4) + n, 2))


@pytest.mark.parametrize("n", [1, 16, 17, 100])
def test_cdiv(target, n):
    out = np.zeros(6, np.int32)
    cdiv_kernel[(1,)](out, n, BLOCK=16, target=target)
    assert out.tolist() == [-(-n // 16), -(-n // 7)] + [-(-(i + n) // 2) for i in range(4)]


@jit
def hints_kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    offs = pl.max_contiguous(pl.multiple_of(offs, BLOCK), BLOCK)
    n = pl.multiple_of(n, 1)
    base = pl.max_constancy(pl.program_id(0) * BLOCK + pl.arange(0, BLOCK) * 0, BLOCK)
    mask = (offs < n) & (base < n)
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def test_hints_keep_values_and_reach_the_ir(target):
    x = np.arange(50, dtype=np.float32)
    out = np.zeros_like(x)
    hints_kernel[(4,)](x, out, 50, BLOCK=16, target=target)
    np.testing.assert_array_equal(out, x * 2)
    text = str(hints_kernel.lower(x, out, 50, BLOCK=16))
    assert "pt.multiple_of = 16" in text and "pt.max_contiguous = 16" in text and "pt.max_constancy = 16" in text


@jit
def loops_kernel(out_ptr, n, STEP: pl.constexpr):
    acc = 0
    for i in pl.static_range(1, 10, STEP):
        acc += i
    pl.store(out_ptr, acc)
    total = pl.zeros((4,), pl.float32)
    for i in pl.range(0, n, 3, num_stages=3, loop_unroll_factor=2, flatten=True):
        total += i
    pl.store(out_ptr + 1 + pl.arange(0, 4), total.to(pl.int32))


@pytest.mark.parametrize("n", [0, 7, 12])
def test_static_range_and_range(target, n):
    out = np.zeros(5, np.int32)
    loops_kernel[(1,)](out, n, STEP=4, target=target)
    assert out.tolist() == [sum(range(1, 10, 4))] + [sum(range(0, n, 3))] * 4


@jit
def unrolled_kernel(x_ptr, out_ptr, n, scale, UNROLL: pl.constexpr, NO_LICM: pl.constexpr):
    # Triton's loop options: the results do not change (docs/language.md says what they do).
    offs = pl.arange(0, 16)
    acc = pl.zeros((16,), pl.float32)
    for i in pl.range(n, loop_unroll_factor=UNROLL, disable_licm=NO_LICM):
        acc += pl.load(x_ptr + i * 16 + offs) * (scale * 2.0)  # scale * 2.0: loop-invariant
    pl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("unroll, no_licm", [(None, False), (0, False), (1, True), (4, False), (3, True),
                                             (np.int64(2), np.True_), (None, np.False_), (2, 1)])
@pytest.mark.parametrize("n", [0, 1, 7, 13])
def test_range_loop_options_keep_the_results(target, unroll, no_licm, n):
    x = np.arange(16 * 13, dtype=np.float32).reshape(13, 16) / 7
    out = np.zeros(16, np.float32)
    unrolled_kernel[(1,)](x, out, n, 1.5, UNROLL=unroll, NO_LICM=no_licm, target=target)
    np.testing.assert_allclose(out, (x[:n] * 3.0).sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("options, message", [
    ("loop_unroll_factor=-1", r"pl.range\(loop_unroll_factor=-1\): use an integer of at least 0"),
    ("loop_unroll_factor=2.5", r"pl.range\(loop_unroll_factor=2.5\): use an integer of at least 0"),
    ("num_stages=True", r"pl.range\(num_stages=True\): use an integer of at least 0"),
    ("loop_unroll_factor=n", r"pl.range\(loop_unroll_factor=...\) must be a compile-time constant"),
    ("warp_specialize='yes'", r"pl.range\(warp_specialize='yes'\): use True, False or a pl.WarpSpecialize"),
    ("flatten=2", r"pl.range\(flatten=2\): use True or False"),
    ("disable_licm=pl.WarpSpecialize()", r"pl.range\(disable_licm=pl.WarpSpecialize\(.*\)\): use True or False"),
    ("disable_licm=n > 2", r"pl.range\(disable_licm=...\) must be a compile-time constant"),
])
def test_range_loop_options_are_checked(options, message, tmp_path):
    import importlib.util

    source = textwrap.dedent(f"""
        import polytile.language as pl
        from polytile.runtime import jit

        @jit
        def bad(out_ptr, n):
            for i in pl.range(n, {options}):
                pl.store(out_ptr + i, 1.0)
    """)
    path = tmp_path / "bad_range.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("bad_range", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match=message):
        module.bad[(1,)](np.zeros(4, np.float32), 4, target="interp")


@jit
def countdown_kernel(out_ptr, start, stop, STEP: pl.constexpr):
    # A weighted sum, so that both the values and their order show.
    total = 0
    k = 1
    for i in range(start, stop, STEP):
        total += i * k
        k += 1
    pl.store(out_ptr, total)
    pl.store(out_ptr + 1, k - 1)


@pytest.mark.parametrize("start, stop, step", [(9, 0, -2), (10, 0, -3), (3, -4, -1), (0, 5, -1), (5, 5, -2),
                                               (-2, -11, -4), (0, 10, 3)])
def test_range_with_a_constant_step(target, start, stop, step):
    out = np.zeros(2, np.int32)
    countdown_kernel[(1,)](out, start, stop, STEP=step, target=target)
    values = list(range(start, stop, step))
    assert out.tolist() == [sum(v * (j + 1) for j, v in enumerate(values)), len(values)]


@jit
def static_kernel(x_ptr, BLOCK: pl.constexpr):
    pl.static_assert(BLOCK >= 16, f"BLOCK must be at least 16, got {BLOCK}")
    pl.static_print("compiling for BLOCK =", BLOCK)
    pl.store(x_ptr + pl.arange(0, BLOCK), 1.0)


def test_static_assert_and_static_print(target, capsys):
    x = np.zeros(16, np.float32)
    static_kernel[(1,)](x, BLOCK=16, target=target)
    assert x.tolist() == [1.0] * 16
    assert "compiling for BLOCK = 16" in capsys.readouterr().out
    with pytest.raises(CompilationError, match="static assertion failed: BLOCK must be at least 16, got 8") as info:
        static_kernel[(1,)](x, BLOCK=8, target=target)
    assert "test_creation.py" in str(info.value)


@pytest.mark.parametrize("body, message", [
    ("pl.arange(0, 12)", "arange's range must be a power of 2, got 12"),
    ("pl.arange(4, 4)", "arange's end (4) must be greater than its start (4)"),
    ("pl.program_id(3)", "program_id axis must be 0, 1, or 2 but got 3"),
    ("pl.full((4, 0), 1, pl.int32)", "has a dimension that is not positive"),
    ("pl.zeros((4,), 'float32')", "dtype must be a dtype such as pl.float32"),
    ("pl.static_assert(pl.program_id(0) == 0)", "pl.static_assert needs a compile-time condition"),
])
def test_creation_errors(target, body, message, tmp_path):
    import importlib.util

    path = tmp_path / "bad_creation.py"
    path.write_text("import polytile.language as pl\nfrom polytile.runtime import jit\n\n@jit\n"
                    f"def bad(x_ptr):\n    {body}\n")
    spec = importlib.util.spec_from_file_location("bad_creation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.bad[(1,)](np.zeros(4, np.float32), target=target)
    assert message in str(info.value) and "bad_creation.py:6" in str(info.value)
