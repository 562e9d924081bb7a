"""The compile-all harness (compile_all.py) itself: it compiles for every arch once,
checks the artifacts, names the arch of a failure and holds the expected-error list to
its word."""

import numpy as np
import pytest

import compile_all
import polytile.language as pl
from compile_all import ArchCompiler, ExpectedError, check_artifacts, selected_archs
from polytile.runtime import jit
from polytile.ir_testing import compile_for_targets


@jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: pl.constexpr):
    offsets = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offsets < n
    pl.store(y_ptr + offsets, pl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


def _launch_arguments():
    x = np.arange(100, dtype=np.float32)
    return (x, np.zeros_like(x), 100), {"BLOCK": 128}


def test_each_specialization_compiles_once_per_arch(amd_linker):
    compiler = ArchCompiler(("nvidia:sm_80", "amd:gfx942", "amd:gfx1100"))
    args, kwargs = _launch_arguments()
    compiler.check_launch(scale_kernel, args, kwargs, "t")
    compiler.check_launch(scale_kernel, args, kwargs, "t")
    assert compiler.compilations == 3
    compiler.check_launch(scale_kernel, args, {"BLOCK": 64}, "t")
    assert compiler.compilations == 6


@pytest.fixture(scope="module")
def compiled():
    args, kwargs = _launch_arguments()
    module = scale_kernel.lower(*args, **kwargs)
    return compile_for_targets(module, ["nvidia:sm_90a", "amd:gfx90a"], label="scale_kernel")


def _param_types():
    args, kwargs = _launch_arguments()
    return list(scale_kernel.specialize(scale_kernel.bind(args, kwargs)).arg_types.values())


def test_good_artifacts_pass_the_checks(compiled, amd_linker):
    results = compiled
    for arch, result in results.items():
        assert check_artifacts(result, arch, _param_types()) == "", arch


def test_a_wrong_code_object_note_is_reported(compiled, amd_linker):
    results = compiled
    result = results["amd:gfx90a"]
    assert "explicit kernarg bytes is 20, expected 16" in check_artifacts(result, "amd:gfx90a", _param_types()[:2])
    shared = result.artifacts["shared_bytes"]
    # The code object may hold less LDS than polytile sized (LLVM shrinks an array it sees
    # partly used), never more, and some wherever polytile sized any.
    for claimed in (max(shared - 16, 0) if shared else 4096, ):
        result.artifacts["shared_bytes"] = claimed
        try:
            problem = check_artifacts(result, "amd:gfx90a", _param_types())
        finally:
            result.artifacts["shared_bytes"] = shared
        assert problem == f"code object note: LDS bytes (group segment) is {shared}, expected at most {claimed} " \
                          "(and some)"


def test_a_broken_cubin_is_reported(compiled):
    results = compiled
    result = results["nvidia:sm_90a"]
    cubin = result.artifacts["cubin"]
    result.artifacts["cubin"] = b"not an ELF"
    try:
        assert check_artifacts(result, "nvidia:sm_90a", _param_types()) == "the cubin is not a CUDA ELF file"
    finally:
        result.artifacts["cubin"] = cubin


def test_a_cubin_for_another_arch_is_reported(compiled):
    result = compiled["nvidia:sm_90a"]
    assert check_artifacts(result, "nvidia:sm_90a", _param_types()) == ""
    ptx = result.artifacts["ptx"]
    result.artifacts["ptx"] = ptx.replace(".target sm_90a", ".target sm_80")
    try:
        assert check_artifacts(result, "nvidia:sm_80", _param_types()) == "the cubin is for sm_90, not sm_80"
    finally:
        result.artifacts["ptx"] = ptx


def test_a_compile_failure_fails_naming_the_arch():
    args, kwargs = _launch_arguments()
    with pytest.raises(pytest.fail.Exception) as info:
        ArchCompiler(("nvidia:sm_80", "amd:gfx000")).check_launch(scale_kernel, args, kwargs, "t")
    message = str(info.value)
    assert "kernel 'scale_kernel'" in message
    assert "amd:gfx000: TargetError: target 'amd:gfx000': backend 'amd' has no architecture 'gfx000'" in message
    assert "nvidia:sm_80" not in message


def test_an_expected_error_is_asserted_exactly(monkeypatch):
    args, kwargs = _launch_arguments()
    expected = ExpectedError("t", "amd:gfx000", "has no architecture 'gfx000'", "not a real arch")
    monkeypatch.setattr(compile_all, "EXPECTED_ERRORS", (expected,))
    ArchCompiler(("amd:gfx000",)).check_launch(scale_kernel, args, kwargs, "t")
    wrong = ExpectedError("t", "amd:gfx000", "some other error", "not a real arch")
    monkeypatch.setattr(compile_all, "EXPECTED_ERRORS", (wrong,))
    with pytest.raises(pytest.fail.Exception, match="expected the error 'some other error'"):
        ArchCompiler(("amd:gfx000",)).check_launch(scale_kernel, args, kwargs, "t")


def test_an_expected_error_that_does_not_happen_fails(monkeypatch):
    args, kwargs = _launch_arguments()
    stale = ExpectedError("t", "nvidia:sm_80", "cannot", "hardware lacks it")
    monkeypatch.setattr(compile_all, "EXPECTED_ERRORS", (stale,))
    with pytest.raises(pytest.fail.Exception, match=r"nvidia:sm_80: expected the error 'cannot' \(hardware lacks it\); "
                                                    "it compiled"):
        ArchCompiler(("nvidia:sm_80",)).check_launch(scale_kernel, args, kwargs, "t")


def test_the_arch_list_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(compile_all.ARCHS_VARIABLE, raising=False)
    assert selected_archs() == compile_all.DEFAULT_ARCHS
    monkeypatch.setenv(compile_all.ARCHS_VARIABLE, " amd:gfx942, nvidia:sm_90a ")
    assert selected_archs() == ("amd:gfx942", "nvidia:sm_90a")
    monkeypatch.setenv(compile_all.ARCHS_VARIABLE, "gfx942")
    with pytest.raises(pytest.UsageError, match="gfx942 is not a target"):
        selected_archs()


def test_compile_for_targets_leaves_the_frontend_module_alone(amd_linker):
    from polytile.ir import print_ir

    args, kwargs = _launch_arguments()
    module = scale_kernel.lower(*args, **kwargs)
    before = print_ir(module, print_locations=True)
    results = compile_for_targets(module, ["amd:gfx950", "nvidia:sm_89"], label="scale_kernel")
    assert print_ir(module, print_locations=True) == before
    assert [str(result.target) for result in results.values()] == ["amd:gfx950", "nvidia:sm_89"]


def test_launch_options_reach_every_arch(amd_linker):
    # debug=True keeps device_assert (dropped otherwise, as in Triton): every backend
    # must lower it, AMD through ockl's printf and a trap.
    from test_debug import assert_kernel

    args = (np.array([1, 2, 3, 4], np.int32), 4)
    compiler = ArchCompiler(compile_all.DEFAULT_ARCHS)
    compiler.check_launch(assert_kernel, args, {"BLOCK": 4, "debug": True}, "t")
    compiler.check_launch(assert_kernel, args, {"BLOCK": 4}, "t")
    assert compiler.compilations == 2 * len(compile_all.DEFAULT_ARCHS)
    module = assert_kernel.lower(*args, BLOCK=4)
    from polytile_amd.errors import DeviceLibsMissingError
    from polytile_amd.toolchain import find_device_libs

    for debug in (True, False):
        result = compile_for_targets(module, ["amd:gfx942"], label="assert_kernel", debug=debug)["amd:gfx942"]
        if debug and find_device_libs() is None:
            # No ockl here: the assert's printf cannot be linked, and the error says so.
            assert isinstance(result, DeviceLibsMissingError) and "ockl" in str(result)
            continue
        assert ("llvm.trap" in result.artifacts["llvm_ir"]) is debug


def _no_linker(monkeypatch):
    from polytile_amd import assemble
    from polytile_amd.errors import ToolNotFoundError

    def missing():
        raise ToolNotFoundError("ld.lld (the linker for AMD code objects)", ["the test's empty PATH"], "install lld")

    monkeypatch.setattr(assemble, "find_lld", missing)


def test_archs_without_a_linker_skip_visibly_unless_ci_requires_it(monkeypatch):
    # A GPU machine without network access may lack ld.lld: the NVIDIA archs still compile
    # and are checked; the AMD ones are named in the skip.  CI (PT_REQUIRE_LLD) fails.
    args, kwargs = _launch_arguments()
    _no_linker(monkeypatch)
    monkeypatch.delenv("PT_REQUIRE_LLD", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"compiled for every arch but amd:gfx942: ld.lld"):
        ArchCompiler(("nvidia:sm_80", "amd:gfx942")).check_launch(scale_kernel, args, kwargs, "t")
    monkeypatch.setenv("PT_REQUIRE_LLD", "1")
    with pytest.raises(pytest.fail.Exception, match=r"amd:gfx942: ToolNotFoundError: ld.lld"):
        ArchCompiler(("nvidia:sm_80", "amd:gfx942")).check_launch(scale_kernel, args, kwargs, "t2")


def test_a_files_compile_all_tests_share_one_xdist_group(target, request):
    # ./dev test runs on several worker processes (pytest-xdist, --dist loadgroup), each
    # with its own ArchCompiler: a file's compile-all tests, which launch the same kernels,
    # must go to one worker so that no kernel is compiled twice for an arch.
    group = request.node.get_closest_marker("xdist_group")
    if request.node.get_closest_marker("compile_all") is None:
        assert group is None
    else:
        assert group is not None and group.args == ("compile_all-test_compile_all.py",)
