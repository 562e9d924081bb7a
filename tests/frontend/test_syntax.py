"""Python syntax in kernels: each construct works as in Triton, or is a CompilationError
that names it, at its line, with a caret; nothing is silently dropped."""

import importlib.util

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.errors import CompilationError
from polytile.ir import print_ir
from polytile.runtime import jit

_COUNTER = iter(range(10**6))


def _kernel(tmp_path, body, params="x_ptr, n"):
    """A kernel ``bad`` whose body (after loading ``x``, a 4-element tile, and ``s``, a
    scalar) is ``body``; the construct under test is on line 8 of its file."""
    name = f"syntax_case_{next(_COUNTER)}"
    path = tmp_path / f"{name}.py"
    lines = "\n".join("    " + line for line in body.splitlines())
    path.write_text("import polytile.language as pl\nfrom polytile.runtime import jit\n\n@jit\n"
                    f"def bad({params}):\n    x = pl.load(x_ptr + pl.arange(0, 4))\n    s = pl.load(x_ptr)\n{lines}\n")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bad, str(path)


@pytest.mark.parametrize("body, message", [
    ("try:\n    pass\nexcept Exception:\n    pass", "'try' statements"),
    ("f = lambda v: v + 1", "lambdas"),
    ("t = [i for i in range(3)]", "list comprehensions"),
    ("t = {i for i in range(3)}", "set comprehensions"),
    ("t = {i: i for i in range(3)}", "dict comprehensions"),
    ("t = tuple(i for i in range(3))", "generator expressions"),
    ("global GLOBAL_NAME", "'global'"),
    ("del x", "'del'"),
    ("a, *b = (1, 2, 3)", "starred assignment"),
    ("if (m := n) > 0:\n    pass", "':=' expressions"),
    ("def inner():\n    pass", "nested function definitions"),
    ("raise ValueError('no')", "'raise'"),
])
def test_unsupported_constructs_are_named_errors(tmp_path, body, message):
    kernel, path = _kernel(tmp_path, body)
    with pytest.raises(CompilationError) as info:
        kernel.lower(np.zeros(4, np.float32), 4)
    err = info.value
    assert message in err.message, err.message
    assert err.location.file == path and err.location.line == 8
    assert "^" in str(err)


@pytest.mark.parametrize("body, message, caret_at", [
    # Triton raises on these too.
    ("v = 0 < x < 1", "a chained comparison ('0 < x < 1') needs scalars", "0 <"),
    ("v = 1 if x > 0 else 2", "the condition of a conditional expression must be a scalar", "x > 0"),
    ("pl.static_print(f'x is {x}')", "an f-string can only format compile-time values; 'x' is known only", "x}"),
    ("print(x)", "print() in a kernel prints at run time, as pl.device_print(prefix, *values)", "print"),
    ("print('x', x, sep=',')", "print() in a kernel takes no 'sep' argument", "print"),
    ("v = pl.maximum(*x)", "cannot iterate over a tensor", "pl.maximum"),
    ("v = max(x)", "max() of run-time values takes two or more values (it is pl.maximum)", "max"),
    ("assert s > 0, s", "the message of an 'assert' on run-time values must be a string", "s\n"),
    ("assert n == 3, 'n is not 3'", "assertion failed: n is not 3", "assert"),
])
def test_constructs_that_are_errors_as_in_triton(tmp_path, body, message, caret_at):
    kernel, path = _kernel(tmp_path, body, params="x_ptr, n: pl.constexpr")
    with pytest.raises(CompilationError) as info:
        kernel.lower(np.zeros(4, np.float32), 4)
    err = info.value
    assert message in err.message, err.message
    assert err.location.line == 8
    source = body.splitlines()[0] + "\n"
    assert err.location.column == 4 + source.index(caret_at) + 1


# --------------------------------------------------------------------------------------
# Constructs that work as in Triton


@jit
def assert_kernel(x_ptr, n):
    x = pl.load(x_ptr)
    assert x > 0, "x must be positive"  # run-time: pl.device_assert, as Triton
    assert n == n  # the same, on a run-time scalar comparison


def test_assert_on_run_time_values_is_a_device_assert():
    text = print_ir(assert_kernel.lower(np.ones(1, np.float32), 3))
    assert text.count("tile.assert") == 2 and 'message = "x must be positive"' in text
    assert_kernel[(1,)](np.ones(1, np.float32), 3)


@jit
def bool_ops_kernel(out_ptr, n, FLAG: pl.constexpr):
    pl.store(out_ptr + 0, n or 0)         # a constant that does not decide drops out (Triton): n
    pl.store(out_ptr + 1, FLAG and n)     # FLAG is False: the result is False, n is not evaluated
    pl.store(out_ptr + 2, (n > 2) and (n < 10))
    pl.store(out_ptr + 3, 0 < n < 10)     # chained comparison on scalars
    pl.store(out_ptr + 4, 1 > 2 > undefined_name)  # noqa: F821 - a false link stops the chain, as Python


def test_bool_ops_and_chained_comparisons_on_scalars():
    out = np.full(5, -1, np.int32)
    bool_ops_kernel[(1,)](out, 7, False)
    np.testing.assert_array_equal(out, [7, 0, 1, 1, 0])
    bool_ops_kernel[(1,)](out, 0, False)
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 0])


@jit
def tensor_bool_ops_kernel(x_ptr, out_ptr, n, FLAG: pl.constexpr):
    offs = pl.arange(0, 8)
    x = pl.load(x_ptr + offs)
    keep = (offs < n) and (x % 2 != 0)    # Triton: element by element (logical_and), broadcast
    pl.store(out_ptr + offs, keep)
    pl.store(out_ptr + 8 + offs, (x > 4) or (offs == 0))
    pl.store(out_ptr + 16 + offs, (n > 3) and (x > 2))  # a run-time scalar broadcast against a tensor
    pl.store(out_ptr + 24 + offs, FLAG or (x > 6))       # FLAG is True: the result is True
    pl.store(out_ptr + 32 + offs, x and (offs > 1))      # a non-boolean tensor counts where it is not 0


def test_and_or_on_tensors_work_element_by_element_as_in_triton():
    x = np.array([0, 1, 2, 3, 4, 5, 6, 7], np.int32)
    out = np.full(40, -1, np.int8)
    tensor_bool_ops_kernel[(1,)](x, out, 5, True)
    offs = np.arange(8)
    np.testing.assert_array_equal(out[:8], (offs < 5) & (x % 2 != 0))
    np.testing.assert_array_equal(out[8:16], (x > 4) | (offs == 0))
    np.testing.assert_array_equal(out[16:24], x > 2)
    np.testing.assert_array_equal(out[24:32], 1)
    np.testing.assert_array_equal(out[32:], (x != 0) & (offs > 1))


@jit
def helper_with_keyword_only(x, *, scale, shift=1):
    return x * scale + shift


@jit(noinline=True)
def noinline_with_keyword_only(x, *, scale):
    return x * scale


@jit
def calls_kernel(out_ptr, n):
    pair = (n, 3)
    pl.store(out_ptr + 0, helper_with_keyword_only(n, scale=2))
    pl.store(out_ptr + 1, noinline_with_keyword_only(n, scale=3))
    pl.store(out_ptr + 2, pl.maximum(*pair))                      # star-args of a compile-time tuple
    pl.store(out_ptr + 3, helper_with_keyword_only(*(n,), scale=1, shift=0))
    pl.store(out_ptr + 4, min(n, 4, 10))                           # pl.minimum on run-time values, as Triton
    pl.store(out_ptr + 5, max(n, 6))


def test_keyword_only_and_star_arguments_and_min_max():
    out = np.zeros(6, np.int32)
    calls_kernel[(1,)](out, 5)
    np.testing.assert_array_equal(out, [11, 15, 5, 5, 4, 6])


@jit
def print_kernel(x_ptr, BLOCK: pl.constexpr):
    x = pl.load(x_ptr + pl.arange(0, BLOCK))
    print("x", x)  # as Triton: a run-time print (pl.device_print)
    if x.dtype.is_floating():  # dtype predicates are compile-time calls
        pl.static_print(f"{'floating'!r} {BLOCK:03d}")


def test_print_is_device_print_and_f_strings_format_compile_time_values(capsys):
    text = print_ir(print_kernel.lower(np.zeros(2, np.float32), BLOCK=2))
    assert 'tile.print' in text and 'prefix = "x "' in text
    assert capsys.readouterr().out == "'floating' 002\n"


@jit
def numbers_as_tensors_kernel(out_ptr, lo, hi, B: pl.constexpr):
    # Triton makes an assigned literal a tensor: numbers answer tensor attributes.
    acc = 0
    acc = acc.to(pl.int64)
    for i in range(lo, hi):
        acc += i
    value = 1
    pl.static_assert(value.dtype == pl.int32)
    pl.static_assert((1 << 40).dtype == pl.int64 and (2.5).dtype == pl.float32 and True.dtype == pl.int1)
    pl.store(out_ptr + pl.arange(0, B), pl.full([B], value, dtype=value.dtype) + acc)


def test_numbers_answer_tensor_attributes():
    out = np.zeros(4, np.int64)
    numbers_as_tensors_kernel[(1,)](out, 2 ** 35, 2 ** 35 + 3, B=4)
    assert out.tolist() == [3 * 2 ** 35 + 3 + 1] * 4


@jit
def isinstance_of_run_time_values(x_ptr, out_ptr):
    offs = pl.arange(0, 2)
    low, high = pl.split(pl.load(x_ptr + offs))
    pl.static_assert(isinstance(low, pl.tensor) and not isinstance(low, pl.dtype))
    pl.static_assert(low.shape == [] and isinstance(low.dtype, pl.dtype))
    pl.store(out_ptr, high - low)


def test_isinstance_of_a_run_time_value_is_known_while_compiling():
    # What a value is does not depend on its run-time contents (Triton's test_split_to_scalar).
    out = np.zeros(1, np.int32)
    isinstance_of_run_time_values[(1,)](np.array([3, 10], np.int32), out, target="interp")
    assert out[0] == 7

    @jit
    def class_at_run_time(x_ptr):
        x = pl.load(x_ptr)
        pl.static_assert(isinstance(x, x))

    with pytest.raises(CompilationError, match=r"Python's isinstance\(\) works on compile-time values only"):
        class_at_run_time[(1,)](np.zeros(1, np.int32), target="interp")


@jit
def shapes_as_lists(x_ptr, out_ptr, M: pl.constexpr, N: pl.constexpr):
    rows = pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :]
    x = pl.load(x_ptr + rows)
    pl.static_assert(x.shape == [M, N] and x.shape == (M, N) and x.shape != [N, M])
    pl.static_assert(x.shape[1:] == [N] and x.shape[:1] == [M] and pl.sum(x).shape == [])
    y = pl.reshape(pl.reshape(x, x.shape + [1]), [1] + x.shape[1:] + x.shape[:1])
    pl.store(out_ptr + rows, pl.reshape(y, x.shape))


def test_a_shape_behaves_as_the_list_triton_gives():
    # Triton's shapes are lists: compared with lists, sliced, extended with lists.
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = np.zeros_like(x)
    shapes_as_lists[(1,)](x, out, M=4, N=8, target="interp")
    assert (out == x).all()


def test_indexing_a_tensor_with_a_number_is_an_error_in_tritons_words():
    @jit
    def index_with_a_number(x_ptr):
        x = pl.load(x_ptr + pl.arange(0, 4))
        pl.store(x_ptr, x[0])

    with pytest.raises(CompilationError, match=r"unsupported tensor index: tensors can be indexed only with None and "
                                               r"':' \(to add or keep dimensions\), got"):
        index_with_a_number[(1,)](np.zeros(4, np.float32), target="interp")


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "nvidia:sm_80", "amd:gfx942"])
def test_and_or_on_tensors_compile_for_gpus(target):
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    from polytile.compiler import compile_module

    module = tensor_bool_ops_kernel.lower(np.zeros(8, np.int32), np.zeros(40, np.int8), 5, True)
    assert compile_module(module, target, num_warps=4).context.artifacts["llvm_ir"]


@jit
def logical_methods_kernel(x_ptr, out_ptr):
    offs = pl.arange(0, 8)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, (x > 2).logical_and(x < 6))
    pl.store(out_ptr + 8 + offs, x.logical_or(offs == 7))


def test_tensor_logical_and_or_methods():
    x = np.array([0, 1, 2, 3, 4, 5, 6, 0], np.int32)
    out = np.full(16, -1, np.int8)
    logical_methods_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out[:8], (x > 2) & (x < 6))
    np.testing.assert_array_equal(out[8:], (x != 0) | (np.arange(8) == 7))



# --------------------------------------------------------------------------------------
# 'with' over kernel context managers


class _Marker(pl.KernelContext):
    """Emits a device_print at the block's start and end (what a profiler's scope would
    record), and gives its name to 'as'."""

    def __init__(self, name):
        self.name = pl.constexpr(name).value

    def __enter__(self):
        pl.device_print(f"enter {self.name}")
        return self.name

    def __exit__(self, *exc_info):
        pl.device_print(f"exit {self.name}")


@jit
def with_kernel(x_ptr, n):
    x = pl.load(x_ptr + pl.arange(0, 4))
    with _Marker("outer") as name:
        pl.static_assert(name == "outer")
        for i in range(n):
            with _Marker("inner"), _Marker("innermost"):
                if i == 1:
                    continue  # leaves both blocks through their exits
                x = x + 1
    pl.store(x_ptr + pl.arange(0, 4), x)


def test_with_runs_enter_and_exit_around_its_block_in_order(capfd):
    text = print_ir(with_kernel.lower(np.zeros(4, np.float32), 3))
    prints = re.findall(r'prefix = "(\w+ \w+)', text)
    assert prints == ["enter outer", "enter inner", "enter innermost", "exit innermost", "exit inner", "exit outer"]
    x = np.zeros(4, np.float32)
    with_kernel[(1,)](x, 3, target="interp")
    np.testing.assert_array_equal(x, 2)  # i = 0 and 2; i = 1 continued
    lines = [line.split(") ", 1)[1] for line in capfd.readouterr().out.splitlines()]
    assert lines == ["enter outer", *["enter inner", "enter innermost", "exit innermost", "exit inner"] * 3,
                     "exit outer"]


@pytest.mark.parametrize("body, message", [
    ("with pl.arange(0, 4):\n    pass", "a 'with' statement in a kernel takes a kernel context manager (a "
                                         "polytile.language.KernelContext, such as a plugin's scope), got"),
    ("with open('f') as f:\n    pass", "undefined name 'open'"),  # no Python context manager runs
    ("with x:\n    pass", "takes a kernel context manager (a polytile.language.KernelContext, such as a plugin's "
                          "scope), got a run-time value"),
])
def test_with_takes_only_kernel_context_managers(tmp_path, body, message):
    kernel, path = _kernel(tmp_path, body)
    with pytest.raises(CompilationError) as info:
        kernel.lower(np.zeros(4, np.float32), 4)
    assert message in info.value.message, info.value.message


@jit
def with_return_kernel(x_ptr):
    with _Marker("scope"):
        return


def test_a_return_inside_with_is_refused():
    with pytest.raises(CompilationError, match="'return' inside a 'with' block is not supported: the block's exit "
                                               "would not run"):
        with_return_kernel.lower(np.zeros(4, np.float32))


@pytest.mark.parametrize("target", ["nvidia:sm_90a", "amd:gfx942"])
def test_with_blocks_compile_for_gpus(target):
    pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")
    from polytile.compiler import compile_module

    module = with_kernel.lower(np.zeros(4, np.float32), 3)
    assert compile_module(module, target, num_warps=4).context.artifacts["llvm_ir"].count("vprintf" if "nvidia" in target
                                                                                           else "printf") >= 1


@jit
def with_jump_kernel(out_ptr, n):
    acc = 0
    for i in range(n):
        if i % 2 == 0:
            with _Marker("even"):
                continue  # the block always jumps: the rest moves to the else branch
        else:
            y = i * 10
        acc += y
    pl.store(out_ptr, acc)


def test_a_with_block_that_always_jumps_counts_as_a_jump():
    out = np.zeros(1, np.int32)
    with_jump_kernel[(1,)](out, 5, target="interp")
    assert out[0] == 10 + 30


def test_and_of_pointer_tensors_says_what_it_takes(tmp_path):
    kernel, path = _kernel(tmp_path, "v = (x_ptr + pl.arange(0, 4)) and (x > 0)")
    with pytest.raises(CompilationError, match="'and' of tensors takes numbers and booleans, got a tensor of"):
        kernel.lower(np.zeros(4, np.float32), 4)
