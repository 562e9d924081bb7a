"""The frontend: IR for small kernels, static and dynamic control flow, calls, and errors."""

import inspect

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.ir import print_ir, verify
from polytile.runtime import jit
from polytile.ir_testing import dedent

HERE = __file__


@jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out_ptr + offs, pl.load(x_ptr + offs, mask=mask), mask=mask)


def test_ir_of_a_copy_kernel():
    x = np.zeros(4, np.float32)
    assert print_ir(copy_kernel.lower(x, x, 4, BLOCK=4)) == dedent("""
        func.func @copy_kernel(%x_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32) attributes {kernel = true, pt.divisibility = [16, 16, 1], pt.equal_to_1 = [false, false, false]} {
          %0 = tile.program_id {axis = 0} : i32
          %1 = arith.constant {value = 4} : i32
          %2 = arith.muli %0, %1 : i32
          %3 = tile.arange {end = 4, start = 0} : tile<4xi32>
          %4 = tile.splat %2 : tile<4xi32>
          %offs = arith.addi %4, %3 : tile<4xi32>
          %5 = tile.splat %n : tile<4xi32>
          %mask = arith.cmpi %offs, %5 {predicate = "slt"} : tile<4xi1>
          %6 = tile.splat %out_ptr : tile<4xptr<f32>>
          %7 = tile.addptr %6, %offs : tile<4xptr<f32>>
          %8 = tile.splat %x_ptr : tile<4xptr<f32>>
          %9 = tile.addptr %8, %offs : tile<4xptr<f32>>
          %10 = tile.load %9 mask(%mask) : tile<4xf32>
          tile.store %7, %10 mask(%mask)
          func.return
        }
    """)


def test_every_op_has_the_kernel_line_as_location():
    x = np.zeros(4, np.float32)
    module = copy_kernel.lower(x, x, 4, BLOCK=4)
    first = inspect.getsourcelines(copy_kernel.fn)[1]
    for op in module.walk():
        if op.name == "builtin.module":
            continue
        assert op.location.file == HERE
        assert first <= op.location.line <= first + 5, op


def test_argument_types_follow_the_call():
    module = copy_kernel.lower(np.zeros(4, np.int8), np.zeros(4, np.float64), 2**40, BLOCK=4)
    head = print_ir(module).splitlines()[0]
    assert head.startswith("func.func @copy_kernel(%x_ptr: ptr<i8>, %out_ptr: ptr<f64>, %n: i64)")


@jit
def static_if_kernel(out_ptr, FLAG: pl.constexpr):
    if FLAG:
        pl.store(out_ptr, 1)
        return
    pl.store(out_ptr, 2)


def test_static_if_and_early_return_fold():
    out = np.zeros(1, np.int32)
    text = print_ir(static_if_kernel.lower(out, True))
    assert "scf.if" not in text and text.count("tile.store") == 1 and "value = 1" in text
    for flag, expected in ((True, 1), (False, 2)):
        static_if_kernel[(1,)](out, flag)
        assert out[0] == expected


@jit
def dynamic_if_kernel(out_ptr, n):
    if n > 3:
        v = n * 2
    else:
        v = n + 100
    pl.store(out_ptr, v)


def test_dynamic_if_yields_assigned_values():
    out = np.zeros(1, np.int32)
    text = print_ir(dynamic_if_kernel.lower(out, 5))
    assert "%v = scf.if" in text
    for n, expected in ((5, 10), (1, 101)):
        dynamic_if_kernel[(1,)](out, n)
        assert out[0] == expected


@jit
def early_return_kernel(out_ptr, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, offs)


def test_dynamic_early_return_at_kernel_top_level():
    out = np.full(8, -1, np.int32)
    early_return_kernel[(4,)](out, 8, BLOCK=4)  # programs 2 and 3 return at once (no out-of-bounds store)
    np.testing.assert_array_equal(out, np.arange(8))


@jit
def pick(a, b, FIRST: pl.constexpr):
    if FIRST:
        return a
    return b


@jit
def halves(x):
    return x // 2, x % 2


@jit
def inline_kernel(out_ptr, n):
    q, r = halves(n)
    pl.store(out_ptr, pick(q, r, True) * 10 + pick(q, r, FIRST=False))


def test_inlined_calls_with_tuples_and_static_returns():
    out = np.zeros(1, np.int32)
    assert "func.call" not in print_ir(inline_kernel.lower(out, 7))
    inline_kernel[(1,)](out, 7)
    assert out[0] == 31


@jit(noinline=True)
def scaled(ptr, i, factor):
    return pl.load(ptr + i) * factor


@jit
def noinline_kernel(x_ptr, out_ptr):
    i = pl.program_id(0)
    pl.store(out_ptr + i, scaled(x_ptr, i, 3.0) + scaled(x_ptr, i, 1.0))


def test_noinline_keeps_a_function():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    module = noinline_kernel.lower(x, out)
    verify(module)
    text = print_ir(module)
    assert "func.func @scaled(%ptr: ptr<f32>, %i: i32, %factor: f32) -> f32 attributes {noinline = true}" in text
    assert text.count("func.call") == 2 and text.count("func.func @scaled") == 1
    compiled = noinline_kernel[(4,)](x, out)
    assert "func.func @scaled" in compiled.asm["ir"]  # the inliner leaves it alone
    np.testing.assert_array_equal(out, x * 4)


@jit
def loop_carried_kernel(x_ptr, out_ptr, n):
    acc = 0
    total = pl.zeros((4,), dtype=pl.float32)
    for i in range(n):
        total += pl.load(x_ptr + i * 4 + pl.arange(0, 4))
        acc += 1
    pl.store(out_ptr + pl.arange(0, 4), total / acc)


def test_loop_carried_values():
    x = np.arange(12, dtype=np.float32)
    out = np.zeros(4, np.float32)
    text = print_ir(loop_carried_kernel.lower(x, out, 3))
    assert "%acc, %total_1 = scf.for %0, %n, %1, %2, %total : i32, tile<4xf32>" in text, text
    loop_carried_kernel[(1,)](x, out, 3)
    np.testing.assert_allclose(out, x.reshape(3, 4).mean(0))


@jit
def ternary_kernel(out_ptr, n):
    pl.store(out_ptr, 1.5 if n > 0 else 2.5)


def test_dynamic_conditional_expression():
    out = np.zeros(1, np.float32)
    for n, expected in ((1, 1.5), (0, 2.5)):
        ternary_kernel[(1,)](out, n)
        assert out[0] == expected


# --------------------------------------------------------------------------------------
# Errors: file, line, the source line and a caret, in the user's terms


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn.fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i, line.rstrip("\n")
    raise AssertionError(text)


def _check_error(fn, args, kwargs, line_text, message, caret_at=None):
    with pytest.raises(CompilationError) as info:
        fn.lower(*args, **kwargs)
    err = info.value
    line, source = _line_of(fn, line_text)
    assert err.location.file == HERE
    assert err.location.line == line
    assert err.source_line == source
    assert message in err.message, err.message
    text = str(err)
    assert f"{HERE}:{line}:" in text and source in text and "^" in text
    if caret_at is not None:
        assert err.location.column == source.index(caret_at) + 1
    return err


@jit
def undefined_name_kernel(out_ptr):
    offsets = pl.arange(0, 4)
    pl.store(out_ptr + offset, 1)


def test_undefined_name():
    _check_error(undefined_name_kernel, [np.zeros(4, np.int32)], {}, "out_ptr + offset",
                 "undefined name 'offset'; did you mean 'offsets'?", caret_at="offset,")


@jit
def branch_type_kernel(out_ptr, n):
    if n > 0:
        v = n
    else:
        v = 1.5 * n
    pl.store(out_ptr, v)


def test_type_mismatch_between_branches():
    _check_error(branch_type_kernel, [np.zeros(1, np.float32), 1], {}, "if n > 0", "'v' is int32 on one path and fp32")


@jit
def shape_kernel(out_ptr):
    a = pl.arange(0, 4) + pl.arange(0, 8)
    pl.store(out_ptr + a, 1)


def test_incompatible_shapes():
    _check_error(shape_kernel, [np.zeros(8, np.int32)], {}, "pl.arange(0, 4) + pl.arange(0, 8)",
                 "incompatible shapes [4] and [8]")


@jit
def runtime_arange_kernel(out_ptr, n):
    pl.store(out_ptr + pl.arange(0, n), 1)


def test_non_constexpr_where_one_is_required():
    _check_error(runtime_arange_kernel, [np.zeros(8, np.int32), 8], {}, "pl.arange(0, n)",
                 "arange's end must be a compile-time integer", caret_at="pl.arange")


@jit
def try_kernel(out_ptr):
    try:
        pass
    finally:
        pass


def test_unsupported_syntax():
    _check_error(try_kernel, [np.zeros(1, np.int32)], {}, "    try:", "unsupported syntax in a kernel: 'try' statements")


def helper_not_jit(x):
    return x


@jit
def plain_call_kernel(out_ptr, n):
    pl.store(out_ptr, helper_not_jit(n))


def test_calling_a_plain_python_function():
    _check_error(plain_call_kernel, [np.zeros(1, np.int32), 1], {}, "helper_not_jit(n)",
                 "cannot call 'helper_not_jit' inside a kernel")


@jit
def loop_type_kernel(out_ptr, n):
    acc = pl.zeros((4,), dtype=pl.int32)
    for i in range(n):
        acc = acc * 0.5
    pl.store(out_ptr + pl.arange(0, 4), acc)


def test_loop_carried_type_change():
    _check_error(loop_type_kernel, [np.zeros(4, np.int32), 2], {}, "for i in range(n)",
                 "'acc' changes type in the loop: int32[4] before, fp32[4] after")


@jit
def pipelined_break_kernel(out_ptr, n):
    for i in pl.range(n, num_stages=3):
        break


def test_break_in_a_pipelined_loop_is_reported():
    _check_error(pipelined_break_kernel, [np.zeros(1, np.int32), 1], {}, "pl.range(n, num_stages=3)",
                 "a loop that can 'break' runs as a 'while' loop, which takes none of pl.range's loop options: "
                 "remove num_stages or the 'break'")


@jit
def break_in_try_kernel(out_ptr, n):
    for i in range(n):
        try:
            break
        finally:
            pass


def test_break_inside_another_statement_is_reported():
    _check_error(break_in_try_kernel, [np.zeros(1, np.int32), 1], {}, "            break",
                 "'break' inside a 'try' statement is not supported in kernels")


@jit
def static_assert_kernel(out_ptr, BLOCK: pl.constexpr):
    pl.static_assert(BLOCK >= 16, "BLOCK too small")


def test_static_assert():
    _check_error(static_assert_kernel, [np.zeros(1, np.int32)], {"BLOCK": 8}, "pl.static_assert",
                 "static assertion failed: BLOCK too small")


@jit
def noinline_tile_callee(x):
    return x


noinline_tile_callee.noinline = True


@jit
def noinline_tile_kernel(out_ptr):
    pl.store(out_ptr + pl.arange(0, 4), noinline_tile_callee(pl.arange(0, 4)))


def test_noinline_takes_scalars_only():
    _check_error(noinline_tile_kernel, [np.zeros(4, np.int32)], {}, "noinline_tile_callee(pl.arange",
                 "noinline function 'noinline_tile_callee' takes scalars")


@jit
def tile_condition_kernel(x_ptr):
    x = pl.load(x_ptr + pl.arange(0, 4))
    if x > 0:
        pl.store(x_ptr + pl.arange(0, 4), x)


def test_tile_condition():
    _check_error(tile_condition_kernel, [np.zeros(4, np.int32)], {}, "if x > 0",
                 "the condition of an 'if' must be a scalar")


@jit
def dot_shape_kernel(x_ptr):
    a = pl.zeros((16, 16), pl.float32)
    b = pl.zeros((32, 16), pl.float32)
    pl.dot(a, b)


def test_dot_shape_error():
    _check_error(dot_shape_kernel, [np.zeros(4, np.int32)], {}, "pl.dot(a, b)", "inner dimensions differ")


def test_builtins_outside_a_kernel():
    with pytest.raises(CompilationError, match="only be called inside a @jit kernel"):
        pl.program_id(0)
