"""The JIT runtime: launching, grids, the specialization cache, Triton-style aliasing."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import LaunchError, cdiv, jit, next_power_of_2

ROOT = Path(__file__).resolve().parents[2]


@jit
def fill_kernel(out_ptr, value, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, value, mask=offs < n)


def test_host_helpers():
    assert cdiv(10, 4) == 3 and cdiv(8, 4) == 2
    assert [next_power_of_2(n) for n in (0, 1, 2, 3, 5, 64, 65)] == [1, 1, 2, 4, 8, 64, 128]


def test_tuple_and_callable_grids():
    out = np.zeros(100, np.float32)
    fill_kernel[(cdiv(100, 32),)](out, 2.0, 100, BLOCK=32)
    assert (out == 2.0).all()
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (cdiv(meta["n"], meta["BLOCK"]),)

    fill_kernel[grid](out, 3.0, 100, BLOCK=16)
    assert (out == 3.0).all()
    assert seen["BLOCK"] == 16 and seen["n"] == 100


def test_specialization_cache_hits_and_recompiles():
    @jit
    def k(out_ptr, value, BLOCK: pl.constexpr):
        pl.store(out_ptr + pl.arange(0, BLOCK), value)

    out32, out64 = np.zeros(16, np.float32), np.zeros(16, np.float64)
    k[(1,)](out32, 1.0, BLOCK=16)
    k[(1,)](out32, 2.0, BLOCK=16)          # same key: a cache hit
    assert k.compile_count == 1
    k[(1,)](out32, 2.0, BLOCK=8)           # a new constexpr value recompiles
    assert k.compile_count == 2
    k[(1,)](out64, 2.0, BLOCK=16)          # a new array dtype recompiles
    assert k.compile_count == 3
    k[(1,)](out32, 7, BLOCK=16)            # an int instead of a float: another specialization
    assert k.compile_count == 4 and (out32 == 7).all()
    k[(1,)](out32, 2**40, BLOCK=16)        # i64 is not i32
    assert k.compile_count == 5


def test_bool_and_int_constexprs_are_distinct():
    @jit
    def k(out_ptr, C: pl.constexpr):
        pl.store(out_ptr, C + 1 if isinstance(C, bool) else C * 10)

    out = np.zeros(1, np.int32)
    k[(1,)](out, True)
    assert out[0] == 2
    k[(1,)](out, 1)
    assert out[0] == 10
    assert k.compile_count == 2


SCALE = pl.constexpr(3)


@jit
def global_kernel(out_ptr):
    pl.store(out_ptr, SCALE * 2)


def test_constexpr_globals_recompile_when_changed():
    global SCALE
    out = np.zeros(1, np.int32)
    global_kernel[(1,)](out)
    assert out[0] == 6
    SCALE = pl.constexpr(5)
    try:
        global_kernel[(1,)](out)
        assert out[0] == 10 and global_kernel.compile_count == 2
    finally:
        SCALE = pl.constexpr(3)


def test_launch_errors_name_the_kernel_and_argument():
    with pytest.raises(LaunchError, match="'fill_kernel': argument 'out_ptr' is list"):
        fill_kernel[(1,)]([1, 2], 1.0, 2, BLOCK=2)
    with pytest.raises(LaunchError, match="missing a required argument: 'n'"):
        fill_kernel[(1,)](np.zeros(2, np.float32), 1.0, BLOCK=2)
    with pytest.raises(LaunchError, match="grid must be a tuple"):
        fill_kernel["x"](np.zeros(2, np.float32), 1.0, 2, BLOCK=2)
    with pytest.raises(LaunchError, match=r"launch it with fill_kernel\[grid\]"):
        fill_kernel(np.zeros(2, np.float32), 1.0, 2, BLOCK=2)


def test_interpreter_errors_point_at_the_kernel_line():
    from polytile.interpreter.executor import InterpreterError

    out = np.zeros(4, np.float32)
    with pytest.raises(InterpreterError) as info:
        fill_kernel[(1,)](out, 1.0, 100, BLOCK=8)  # the mask lets lanes past the array's end
    assert info.value.location.file == __file__
    assert "fill_kernel" in str(info.value)


def test_launch_options_are_accepted():
    out = np.zeros(8, np.float32)
    fill_kernel[(1,)](out, 1.0, 8, BLOCK=8, num_warps=8, num_stages=2)
    assert (out == 1).all()


TRITON_STYLE = '''
import numpy as np
import polytile.runtime as triton
import polytile.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


x = np.random.rand(1000).astype(np.float32)
y = np.random.rand(1000).astype(np.float32)
output = np.empty_like(x)
n_elements = output.size
grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
assert np.array_equal(output, x + y)
print("ok")
'''


def test_triton_kernel_runs_with_only_imports_changed(tmp_path):
    script = tmp_path / "triton_style.py"
    script.write_text(textwrap.dedent(TRITON_STYLE))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("name", ["vector_add", "softmax", "matmul"])
def test_examples_run(name, monkeypatch):
    from tests.examples.loading import load_example

    assert load_example(name).main()


def test_changing_the_disabled_plugins_drops_the_kernels_compiled_in_this_process():
    # Another set of plugins may compile other code (a pass plugin disabled, say).
    from polytile import config

    out = np.zeros(8, np.float32)
    fill_kernel[(1,)](out, 1.0, 8, BLOCK=8)
    assert fill_kernel.cache and fill_kernel._hot
    with config.override(disabled_plugins=["polytile-example-pass-that-is-not-installed"]):
        assert not fill_kernel.cache and not fill_kernel._hot
        fill_kernel[(1,)](out, 3.0, 8, BLOCK=8)
    assert out[0] == 3.0


def test_changing_a_setting_the_compiled_code_depends_on_drops_the_kernels_compiled_in_this_process():
    # A kernel compiled under one assembler or register budget is not reused under
    # another (the on-disk cache keys such settings; the in-memory caches are dropped).
    pytest.importorskip("polytile_nvidia")
    from polytile import config

    out = np.zeros(8, np.float32)
    fill_kernel[(1,)](out, 1.0, 8, BLOCK=8)
    with config.override(dump_ir=False):  # the compiled code does not depend on it
        assert fill_kernel.cache and fill_kernel._hot
    with config.override(nvidia_assembler="ptxas"):  # declared recompiles=True by polytile-nvidia
        assert not fill_kernel.cache and not fill_kernel._hot
        fill_kernel[(1,)](out, 3.0, 8, BLOCK=8)
        assert fill_kernel.cache
    assert not fill_kernel.cache  # back to the old value: dropped again
    fill_kernel[(1,)](out, 4.0, 8, BLOCK=8)
    assert out[0] == 4.0


def test_a_misspelled_keyword_is_named_before_the_parameter_it_leaves_missing():
    with pytest.raises(LaunchError, match=r"unexpected keyword argument 'BLOK'.*did you mean 'BLOCK'"):
        fill_kernel[(1,)](np.zeros(8, np.float32), 1.0, 8, BLOK=8)


def test_compile_fills_in_the_defaults_of_constexpr_parameters():
    # As a launch does: kernel.compile(...) without SCALE compiles it with SCALE = 3.
    import polytile.language as pl
    from polytile.ir import types as t
    from polytile.runtime import jit

    @jit
    def scaled(x_ptr, BLOCK: pl.constexpr, SCALE: pl.constexpr = 3):
        offs = pl.arange(0, BLOCK)
        pl.store(x_ptr + offs, pl.load(x_ptr + offs) * SCALE)

    from polytile.ir import print_ir

    types = {"x_ptr": t.PointerType(t.f32)}
    left_out = scaled.compile(types, {"BLOCK": 8}, target="interp")
    given = scaled.compile(types, {"BLOCK": 8, "SCALE": 3}, target="interp")
    assert print_ir(left_out.module) == print_ir(given.module) and "value = 3" in print_ir(given.module)


def test_a_kernel_compiled_while_a_setting_it_depends_on_changed_is_compiled_again_and_not_kept(monkeypatch):
    # Another thread's config.set during the compile: the kernel made under the old value
    # is neither kept in memory nor stored on disk; the launch compiles again under the new.
    pytest.importorskip("polytile_nvidia")
    from polytile import config

    @jit
    def racing(out_ptr, BLOCK: pl.constexpr):
        pl.store(out_ptr + pl.arange(0, BLOCK), 1.0)

    original = type(racing)._build
    stored = []
    changes = iter(["ptxas"])

    def build(self, *args, **kwargs):
        compiled, entry = original(self, *args, **kwargs)
        value = next(changes, None)
        if value is not None:
            config.set(nvidia_assembler=value)  # as another thread would, mid-compile
        return compiled, entry

    from polytile.runtime.cache import KernelCache

    store = KernelCache.store
    monkeypatch.setattr(KernelCache, "store", lambda cache, entry: (stored.append(entry), store(cache, entry))[1])
    monkeypatch.setattr(type(racing), "_build", build)
    try:
        out = np.zeros(8, np.float32)
        racing[(1,)](out, BLOCK=8)
        assert (out == 1.0).all() and racing.compile_count == 2
        assert len(stored) == 1 and len(racing.cache) == 1  # the first compile's entry is not stored
        racing[(1,)](out, BLOCK=8)  # the kernel of the new value, kept
        assert racing.compile_count == 2 and racing._hot
    finally:
        config.reset("nvidia_assembler")


@pytest.mark.parametrize("target", ["interp", "nvidia:sm_90a", "amd:gfx942"])
def test_warmup_compiles_without_launching_and_the_launch_reuses_it(target):
    if target != "interp":
        pytest.importorskip("polytile_amd" if target.startswith("amd") else "polytile_nvidia")

    @jit
    def warmed(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 1.0, mask=offs < n)

    out = np.zeros(8, np.float32)
    compiled = warmed.warmup(out, 8, BLOCK=8, grid=(1,), target=target, num_warps=2)
    assert (out == 0).all() and warmed.compile_count == 1 and compiled.target.backend == target.split(":")[0]
    assert warmed.warmup(out, 8, BLOCK=8, target=target, num_warps=2) is compiled  # from the cache
    if target == "interp":
        warmed[(1,)](out, 8, BLOCK=8, target=target, num_warps=2)
        assert warmed.compile_count == 1 and (out == 1).all()
    with pytest.raises(LaunchError, match="missing a required argument: 'n'"):
        warmed.warmup(out, BLOCK=8, target=target)


def test_warmup_takes_element_types_for_arrays_as_tritons():
    # kernel.warmup(torch.float32, ...): a pointer to that type, assumed 16-byte aligned.
    @jit
    def typed(x_ptr, y_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(y_ptr + offs, pl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    compiled = typed.warmup(np.float32, pl.float32, 8, BLOCK=8, grid=(1,), target="interp")
    assert typed.compile_count == 1 and "ptr<f32>" in str(compiled.module)
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    typed[(1,)](x, y, 8, BLOCK=8, target="interp")  # aligned float32 arrays: the same kernel
    assert typed.compile_count == 1 and (y == x).all()


def test_autotuned_and_heuristic_kernels_warm_up():
    import polytile as pt

    @pt.heuristics({"BLOCK": lambda args: 8})
    @jit
    def by_heuristic(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 1.0, mask=offs < n)

    @pt.autotune(configs=[pt.Config({"BLOCK": 8}), pt.Config({"BLOCK": 16}, num_warps=2)], key=["n"])
    @jit
    def tuned(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, 1.0, mask=offs < n)

    out = np.zeros(16, np.float32)
    assert by_heuristic.warmup(out, 8, grid=(1,), target="interp") is not None
    compiled = tuned.warmup(out, 8, grid=(1,), target="interp")
    assert len(compiled) == 2 and tuned.fn.compile_count == 2 and tuned.cache == {} and not out.any()
    assert tuned.num_warmups == 25  # the timing's warm-up, Triton's name


@jit
def cooperative_copy(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out_ptr + offs, pl.load(x_ptr + offs))


def test_launch_cooperative_grid_is_refused_where_no_backend_launches_cooperatively():
    # A cooperative launch promises every program resident at once (a grid-wide barrier
    # relies on it); the interpreter runs programs one after another and cannot.
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    from polytile.errors import ConfigError

    with pytest.raises(ConfigError, match=r"launch option launch_cooperative_grid=True is not available on target "
                                             r"'interp'.*launches every program of the grid at once"):
        cooperative_copy[(2,)](x, out, BLOCK=16, launch_cooperative_grid=True, target="interp")
    cooperative_copy[(2,)](x, out, BLOCK=16, launch_cooperative_grid=False, target="interp")  # the neutral value
    assert (out == x).all()


def test_launch_cooperative_grid_is_an_nvidia_option():
    from polytile_nvidia.backend import NvidiaBackend

    options = NvidiaBackend().parse_options({"launch_cooperative_grid": True})
    assert options.launch_cooperative_grid is True


@jit
def multiply_add(x_ptr, out_ptr, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    x = pl.load(x_ptr + offs)
    pl.store(out_ptr + offs, x * 1.5 + 1.0)


@pytest.mark.parametrize("fusion", [True, False])
def test_enable_fp_fusion_is_a_launch_option_of_every_target(fusion):
    # Triton's option (on by default); the interpreter never fuses, which either value
    # allows, so it takes both and computes a * b + c with two roundings.
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    from polytile.errors import ConfigError

    with pytest.raises(ConfigError, match="option 'enable_fp_fusion' of backend 'interp' must be True or False, got 2"):
        multiply_add[(1,)](x, out, BLOCK=16, enable_fp_fusion=2, target="interp")
    compiled = multiply_add[(1,)](x, out, BLOCK=16, enable_fp_fusion=fusion, target="interp")
    assert compiled.options.enable_fp_fusion is fusion
    assert (out == x * np.float32(1.5) + np.float32(1.0)).all()


@pytest.mark.parametrize("target", ["interp", "nvidia:sm_90a", "amd:gfx942"])
def test_num_warps_not_a_power_of_two_is_refused_as_in_triton(target):
    # Triton raises an AssertionError ("must be a power of 2"); polytile's error is both
    # that and a ConfigError.
    from polytile.errors import ConfigError

    backend = None
    if target.startswith("nvidia"):
        backend = pytest.importorskip("polytile_nvidia.backend").NvidiaBackend()
    elif target.startswith("amd"):
        backend = pytest.importorskip("polytile_amd.backend").AmdBackend()
    x = np.zeros(16, np.float32)
    for error in (AssertionError, ConfigError):
        with pytest.raises(error, match=r"option 'num_warps' must be a power of 2 \(1, 2, 4, 8, \.\.\.\), got 3"):
            if backend is None:
                multiply_add[(1,)](x, x, BLOCK=16, num_warps=3, target="interp")
            else:
                backend.parse_options({"num_warps": 3})
