"""The workspace form of device tensor maps (polytile-tma; Triton's first on-device TMA
API, whose mutation analysis PyTorch PR #155380 added): the kernels run on every target,
and ``kernel.mutated_args`` names exactly the arrays written through maps in memory,
where the maps are made in helpers, at recomputed addresses and at offsets into one
workspace, and says why where it cannot decide."""

import numpy as np
import pytest

import polytile.language as pl
from polytile.runtime import jit

pytest.importorskip("polytile_tma", reason="the workspace form comes with the polytile-tma plugin")

MAP = 128  # bytes of workspace per map, as in Triton


@jit
def _create(desc, pointer, m, n, block: pl.constexpr):
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=desc, global_address=pointer,
                                                         load_size=[block, block], global_size=[m, n],
                                                         element_ty=pointer.dtype.element_ty)


# -- the PR's example: three maps in one workspace --------------------------------------


@jit
def add_kernel_on_device_tma(a_ptr, b_ptr, out_ptr, workspace, m, n, BLOCK: pl.constexpr):
    a_desc = workspace
    b_desc = workspace + 128
    out_desc = workspace + 256
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=a_desc, global_address=a_ptr,
                                                         load_size=[BLOCK, BLOCK], global_size=[m, n],
                                                         element_ty=a_ptr.dtype.element_ty)
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=b_desc, global_address=b_ptr,
                                                         load_size=[BLOCK, BLOCK], global_size=[m, n],
                                                         element_ty=b_ptr.dtype.element_ty)
    pl.extra.cuda.experimental_device_tensormap_create2d(desc_ptr=out_desc, global_address=out_ptr,
                                                         load_size=[BLOCK, BLOCK], global_size=[m, n],
                                                         element_ty=out_ptr.dtype.element_ty)
    pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(a_desc)
    pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(b_desc)
    pl.extra.cuda.experimental_tensormap_fenceproxy_acquire(out_desc)
    pm, pn = pl.program_id(0) * BLOCK, pl.program_id(1) * BLOCK
    x = pl._experimental_descriptor_load(a_desc, [pm, pn], [BLOCK, BLOCK], pl.float32)
    y = pl._experimental_descriptor_load(b_desc, [pm, pn], [BLOCK, BLOCK], pl.float32)
    pl._experimental_descriptor_store(out_desc, x + y, [pm, pn])


def _arrays():
    a = np.arange(40 * 24, dtype=np.float32).reshape(40, 24)
    return a, np.full_like(a, 0.5), np.full_like(a, -1.0), np.zeros(3 * MAP, np.int8)


def test_the_example_adds_through_maps_in_a_workspace(target):
    a, b, out, workspace = _arrays()
    add_kernel_on_device_tma[(3, 2)](a, b, out, workspace, 40, 24, BLOCK=16, target=target)
    np.testing.assert_array_equal(out, a + b)


def test_the_example_writes_only_out_and_the_workspace():
    a, b, out, workspace = _arrays()
    assert add_kernel_on_device_tma.mutated_args(a, b, out, workspace, 40, 24, BLOCK=16) == ["out_ptr", "workspace"]
    report = add_kernel_on_device_tma.mutation_report(a, b, out, workspace, 40, 24, BLOCK=16)
    assert len(report.reasons) == 1
    assert "recorded at 'workspace' + 256 bytes" in report.reasons[0] and "('out_ptr')" in report.reasons[0]


# -- where the map is made and stored through ---------------------------------------------


@jit
def _make_inlined(desc, pointer, m, n, BLOCK: pl.constexpr):
    _create(desc, pointer, m, n, BLOCK)


@jit(noinline=True)
def _make_noinline(desc, pointer, m, n, BLOCK: pl.constexpr):
    _create(desc, pointer, m, n, BLOCK)


@jit
def copy_through_workspace(src, dst, workspace, m, n, BLOCK: pl.constexpr, CASE: pl.constexpr):
    pm, pn = pl.program_id(0) * BLOCK, pl.program_id(1) * BLOCK
    if CASE == "inlined":
        _make_inlined(workspace, src, m, n, BLOCK)
        _make_inlined(workspace + 128, dst, m, n, BLOCK)
    elif CASE == "noinline":
        _make_noinline(workspace, src, m, n, BLOCK)
        _make_noinline(workspace + 128, dst, m, n, BLOCK)
    else:  # "recomputed": W + 128 written in two places
        _create(workspace, src, m, n, BLOCK)
        _create(workspace + 128, dst, m, n, BLOCK)
    block = pl._experimental_descriptor_load(workspace, [pm, pn], [BLOCK, BLOCK], pl.float32)
    # The store's address is computed again, apart from the one the map was made at.
    pl._experimental_descriptor_store(workspace + 64 + 64, block * 2, [pm, pn])


@pytest.mark.parametrize("case", ["inlined", "noinline", "recomputed"])
def test_a_store_through_the_second_map_writes_its_array_only(target, case):
    src = np.arange(40 * 24, dtype=np.float32).reshape(40, 24)
    dst = np.zeros_like(src)
    workspace = np.zeros(2 * MAP, np.int8)
    args = (src, dst, workspace, 40, 24)
    assert copy_through_workspace.mutated_args(*args, BLOCK=16, CASE=case) == ["dst", "workspace"]
    copy_through_workspace[(3, 2)](*args, BLOCK=16, CASE=case, target=target)
    np.testing.assert_array_equal(dst, src * 2)


@jit
def store_through_first_map(src, dst, workspace, m, n, BLOCK: pl.constexpr):
    # Two maps share one workspace: storing through W (src's map) writes src, not dst.
    _create(workspace, src, m, n, BLOCK)
    _create(workspace + 128, dst, m, n, BLOCK)
    pm = pl.program_id(0) * BLOCK
    block = pl._experimental_descriptor_load(workspace + 128, [pm, 0], [BLOCK, BLOCK], pl.float32)
    pl._experimental_descriptor_store(workspace, block + 1, [pm, 0])


def test_two_maps_at_different_offsets_of_one_workspace_are_told_apart(target):
    src = np.zeros((32, 16), np.float32)
    dst = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    workspace = np.zeros(2 * MAP, np.int8)
    assert store_through_first_map.mutated_args(src, dst, workspace, 32, 16, BLOCK=16) == ["src", "workspace"]
    store_through_first_map[(2,)](src, dst, workspace, 32, 16, BLOCK=16, target=target)
    np.testing.assert_array_equal(src, dst + 1)


# -- what the analysis cannot decide --------------------------------------------------------


@jit
def per_program_maps(a, b, out, workspace, m, n, BLOCK: pl.constexpr, SAME: pl.constexpr):
    # Each program its own map, at workspace + pid * 128: the same expression where the
    # map is made and stored through is one location; another expression may be any.
    pid = pl.program_id(0)
    _create(workspace + pid * 128, out, m, n, BLOCK)
    x = pl._experimental_descriptor_load(workspace + pid * 128, [pid * BLOCK, 0], [BLOCK, BLOCK], pl.float32)
    if SAME:
        pl._experimental_descriptor_store(workspace + pid * 128, x + 1, [pid * BLOCK, 0])
    else:
        pl._experimental_descriptor_store(workspace + (pid + 1) * 128 - 128, x + 1, [pid * BLOCK, 0])


def test_a_location_computed_alike_is_the_same_and_another_counts_with_a_reason():
    args = (np.zeros((32, 16), np.float32), np.zeros((32, 16), np.float32), np.zeros((32, 16), np.float32),
            np.zeros(2 * MAP, np.int8), 32, 16)
    same = per_program_maps.mutation_report(*args, BLOCK=16, SAME=True)
    assert same.written == ["out", "workspace"] and "writes through the address recorded" in same.reasons[0]
    other = per_program_maps.mutation_report(*args, BLOCK=16, SAME=False)
    # The only candidate recorded in this workspace is out's map: it counts, and says why.
    assert other.written == ["out", "workspace"]
    assert "is not known at compile time, so it counts" in other.reasons[0]


@jit
def store_through_a_map_made_elsewhere(a, out, workspace, BLOCK: pl.constexpr):
    x = pl._experimental_descriptor_load(workspace, [0, 0], [BLOCK, BLOCK], pl.float32)
    pl._experimental_descriptor_store(workspace, x, [0, 0])


def test_a_map_this_kernel_does_not_make_could_be_of_any_array():
    args = (np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32), np.zeros(MAP, np.int8))
    report = store_through_a_map_made_elsewhere.mutation_report(*args, BLOCK=16)
    assert report.written == ["a", "out", "workspace"]
    assert "records none it can see: every pointer argument counts as written" in report.reasons[0]


def test_the_autotuner_restores_exactly_what_the_analysis_reports():
    from polytile.runtime import Config, autotune

    @autotune(configs=[Config({"BLOCK": 16}, num_warps=4), Config({"BLOCK": 16}, num_warps=2)], key=["m"],
              warmup=0, rep=1)
    @jit
    def accumulate(src, dst, workspace, m, n, BLOCK: pl.constexpr):
        _create(workspace, src, m, n, BLOCK)
        _create(workspace + 128, dst, m, n, BLOCK)
        pm = pl.program_id(0) * BLOCK
        x = pl._experimental_descriptor_load(workspace, [pm, 0], [BLOCK, BLOCK], pl.float32)
        y = pl._experimental_descriptor_load(workspace + 128, [pm, 0], [BLOCK, BLOCK], pl.float32)
        pl._experimental_descriptor_store(workspace + 128, x + y, [pm, 0])

    src = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    dst = np.ones((32, 16), np.float32)
    accumulate[(2,)](src, dst, np.zeros(2 * MAP, np.int8), 32, 16)
    assert accumulate.restored_args == ["dst", "workspace"]
    np.testing.assert_array_equal(dst, 1 + src)  # one launch's worth, not one per trial


def test_the_namespace_lists_its_names_and_names_a_missing_one():
    assert {"experimental_device_tensormap_create2d", "experimental_tensormap_fenceproxy_acquire"} <= \
        set(dir(pl.extra.cuda))
    with pytest.raises(AttributeError, match=r"'pl.extra.cuda' has no attribute 'nothing_here'"):
        pl.extra.cuda.nothing_here


def test_the_docs_workspace_kernel_runs(target, tmp_path):
    import importlib.util
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[2] / "docs" / "tma.md").read_text()
    fence = "`" * 3
    blocks = re.findall(fence + r"python\n(.*?)" + fence, text, re.S)
    source = next(block for block in blocks if "def add(a_ptr" in block)
    path = tmp_path / "docs_tma_workspace.py"  # kernels are read from their file
    path.write_text("import polytile as pt\nimport polytile.language as pl\n\n" + source)
    spec = importlib.util.spec_from_file_location("docs_tma_workspace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = np.arange(40 * 24, dtype=np.float32).reshape(40, 24)
    out = np.zeros_like(a)
    workspace = np.zeros(2 * MAP, np.int8)
    assert module.add.mutated_args(a, a, out, workspace, 40, 24, BLOCK=16) == ["out_ptr", "workspace"]
    module.add[(3, 2)](a, a, out, workspace, 40, 24, BLOCK=16, target=target)
    np.testing.assert_array_equal(out, a + 1)


@jit
def records_in_a_loop(ws, a_ptr, b_ptr, n, BLOCK: pl.constexpr):
    _create(ws + 128, b_ptr, BLOCK, BLOCK, BLOCK)
    p = ws
    for _ in range(n):  # p is ws, then ws + 128: a's map overwrites b's
        _create(p, a_ptr, BLOCK, BLOCK, BLOCK)
        p += 128
    pl._experimental_descriptor_store(ws + 128, pl.full((BLOCK, BLOCK), 7.0, pl.float32), [0, 0])


def test_a_map_made_through_a_loop_carried_pointer_may_be_anywhere(target):
    ws, a, b = np.zeros(3 * MAP, np.int8), np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    report = records_in_a_loop.mutation_report(ws, a, b, 2, BLOCK=16)
    assert report.written == ["ws", "a_ptr", "b_ptr"]
    assert any("not known at compile time" in reason for reason in report.reasons)
    records_in_a_loop[(1,)](ws, a, b, 2, BLOCK=16, target=target)
    assert (a == 7).all() and not b.any()


@jit
def store_through_an_integer_address(ws, ws_address, a_ptr, b_ptr, n, BLOCK: pl.constexpr):
    _create(ws, a_ptr, BLOCK, BLOCK, BLOCK)
    _create(ws + n, b_ptr, BLOCK, BLOCK, BLOCK)
    same = ws_address.to(pl.pointer_type(pl.int8))
    pl._experimental_descriptor_store(same, pl.full((BLOCK, BLOCK), 7.0, pl.float32), [0, 0])


def test_a_map_at_an_address_of_no_known_origin_could_be_any_array():
    ws, a, b = np.zeros(3 * MAP, np.int8), np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32)
    report = store_through_an_integer_address.mutation_report(ws, ws.ctypes.data, a, b, 128, BLOCK=16)
    assert report.written == ["ws", "a_ptr", "b_ptr"]
    assert "cannot trace to a parameter" in report.reasons[0]


@jit
def load_of_another_type(ws, a_ptr, m, n, BLOCK: pl.constexpr):
    _create(ws, a_ptr, m, n, BLOCK)
    x = pl._experimental_descriptor_load(ws, [0, 0], [BLOCK, BLOCK], pl.float16)
    pl._experimental_descriptor_store(ws, x, [0, 0])


def test_a_load_of_another_element_type_than_the_map_is_an_error_naming_both():
    from polytile.errors import CompilationError

    a = np.zeros((16, 16), np.float32)
    with pytest.raises(CompilationError, match=r"pl._experimental_descriptor_load moves blocks of \[16, 16\] f16 "
                                               r"through the map made \(line \d+\) for blocks of \[16, 16\] f32"):
        load_of_another_type[(1,)](np.zeros(MAP, np.int8), a, 16, 16, BLOCK=16, target="interp")
