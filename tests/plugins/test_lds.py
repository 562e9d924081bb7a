"""The LDS sizing plugin (plugins/lds, distribution polytile-lds) on the AMD pipeline:
limits per architecture, remedies, the code object check, occupancy, and the AMD
backend without it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.compiler import compile_module
from polytile.errors import OutOfResourcesError, PassFailure
from polytile.plugins.manager import get_plugin_manager
from polytile.target import Target
from polytile_amd.errors import OutOfResourcesError as AmdOutOfResourcesError
from polytile_lds import REMEDIES, REMEDY_ORDER, occupancy, passes, remedies


@pt.jit
def transpose(x, out, M: pl.constexpr, N: pl.constexpr):
    # The transpose moves every element to another thread, through LDS: M * N * 4 bytes
    # plus padding.
    r = pl.arange(0, M)[:, None]
    c = pl.arange(0, N)[None, :]
    v = pl.load(x + r * N + c)
    pl.store(out + pl.arange(0, N)[:, None] * M + pl.arange(0, M)[None, :], pl.trans(v))


@pt.jit
def add(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs) + 1.0)


def compile_amd(kernel, arch, **meta):
    f = np.zeros(1 << 16, np.float32)
    return compile_module(kernel.lower(f, f, **meta), f"amd:{arch}", num_warps=4)


def raised(excinfo):
    error = excinfo.value
    return error.__cause__ if isinstance(error, PassFailure) and error.__cause__ else error


def test_the_plugin_is_installed_and_inserts_its_passes():
    records = {r.distribution: r for r in get_plugin_manager().plugins()}
    assert "polytile-lds" in records
    result = compile_amd(add, "gfx942", BLOCK=256)
    names = [p.name for stage in result.pipeline.stages for p in stage.passes]
    assert names.index("lds-fit") == names.index("allocate-shared") + 1
    assert names.index("lds-verify") == names.index("link-hsaco") + 1


def test_other_backends_are_left_alone():
    f = np.zeros(1024, np.float32)
    result = compile_module(add.lower(f, f, BLOCK=256), "nvidia:sm_90a")
    assert "lds-fit" not in [p.name for stage in result.pipeline.stages for p in stage.passes]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_a_kernel_over_64_kb_fits_after_its_transpose_goes_in_rounds(arch):
    # The transpose alone needs 128 * 256 * 4 = 128 KB of LDS (plus padding) in one go.
    result = compile_amd(transpose, arch, M=128, N=256)
    trans = next(op for op in result.module.walk() if op.name == "tile.trans")
    assert trans.attributes["gpu.scratch_rounds"] >= 2
    lds = result.context.artifacts["lds"]
    declared = result.context.artifacts["amd_code_object"]["group_segment_fixed_size"]
    assert declared == lds["bytes"] == result.context.artifacts["shared_bytes"]
    assert 128 * 256 * 4 // trans.attributes["gpu.scratch_rounds"] <= declared <= 65536


def test_the_transpose_in_rounds_moves_every_element_on_the_simulator():
    from gpu.llvm_cta import run_kernel

    # 64 x 128 f64: 64 KB plus padding in one go, two rounds of half that here.
    x = np.arange(64 * 128, dtype=np.float64)
    out = np.zeros_like(x)
    result = compile_module(transpose.lower(x, out, M=64, N=128), "amd:gfx942", num_warps=4)
    artifacts = result.context.artifacts
    assert artifacts["amd_code_object"]["group_segment_fixed_size"] == artifacts["shared_bytes"] <= 65536
    run_kernel(artifacts, [x, out], 4, 64)
    np.testing.assert_array_equal(out.reshape(128, 64), x.reshape(64, 128).T)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx1100"])
def test_a_kernel_over_64_kb_without_remedies_fails_naming_kernel_need_and_limit(arch, monkeypatch):
    monkeypatch.setattr(passes, "REMEDIES", {})
    with pytest.raises(Exception) as info:
        compile_amd(transpose, arch, M=128, N=256)
    error = raised(info)
    assert isinstance(error, OutOfResourcesError)
    assert (error.kernel, error.resource, error.limit, error.remedies_tried) == ("transpose", "LDS", 65536, ())
    assert error.need > 128 * 256 * 4
    assert f"kernel 'transpose' needs {error.need} bytes of LDS" in str(error)
    assert f"more than the 65536 bytes {arch} gives a workgroup" in str(error)


BUFFER_KERNEL = """
func.func @staged(%a: tile<128x256xf32, {blocked}>) attributes {{kernel = true}} {{
  %0 = gpu.local_alloc source(%a) : !gpu.buffer<128x256xf32, {shared}>
  %1 = gpu.local_load %0 : tile<128x256xf32, {blocked}>
  func.return
}}
"""


def test_a_buffer_over_64_kb_fails_after_the_remedies_naming_them():
    from polytile.backend import BackendOptions
    from polytile.gpu.allocation import AllocateShared
    from polytile.passes.pass_base import PassContext
    from polytile.ir_testing import apply_passes, dedent

    text = dedent(BUFFER_KERNEL).format(
        blocked="#gpu.blocked<size_per_thread = [1, 4], threads_per_warp = [8, 8], warps_per_cta = [4, 1], "
                "order = [1, 0]>",
        shared="#gpu.shared<vector = 1, per_phase = 1, max_phase = 1, order = [1, 0]>")
    context = PassContext(target=Target("amd", "gfx942"), options=BackendOptions(num_warps=4))
    with pytest.raises(OutOfResourcesError) as info:
        apply_passes(text, AllocateShared(), passes.LdsFit(), context=context)
    error = info.value
    assert (error.kernel, error.need, error.limit) == ("staged", 128 * 256 * 4, 65536)
    assert error.remedies_tried == ("conversions-in-rounds",)
    assert str(error).startswith("error: kernel 'staged' needs 131072 bytes of LDS, more than the 65536 bytes gfx942 "
                                 "gives a workgroup (after trying: conversions-in-rounds); use smaller blocks")


def test_remedies_go_cheapest_first_whatever_the_registration_order():
    def fewer_stages(module, kernel, context):
        return False

    registered = {"mine": fewer_stages, "conversions-in-rounds": fewer_stages, "fewer-pipeline-stages": fewer_stages}
    assert [name for name, _ in remedies.in_order(registered)] == [*REMEDY_ORDER, "mine"]


def test_gfx950_has_160_kb():
    result = compile_amd(transpose, "gfx950", M=128, N=256)
    lds = result.context.artifacts["lds"]
    assert lds["bytes"] == result.context.artifacts["shared_bytes"] > 128 * 256 * 4
    assert lds["limit"] == 163840
    assert result.context.artifacts["amd_code_object"]["group_segment_fixed_size"] == lds["bytes"]
    # One 132 KB workgroup per CU: 4 waves of 64 on 4 SIMDs, one wave each.
    assert (lds["by_lds"], lds["waves_per_simd"], lds["limited_by"]) == (1, 1, "lds")


def test_remedies_are_tried_in_order_until_the_kernel_fits(monkeypatch):
    calls = []

    def no_help(module, kernel, context):
        calls.append("no-help")
        return False

    def drop_transpose(module, kernel, context):
        # A test stand-in for a real remedy: make the kernel need no LDS.
        calls.append("drop-transpose")
        for op in [op for op in kernel.walk() if op.name == "tile.trans"]:
            op.result.replace_all_uses_with(op.operands[0])
            op.erase()
        return True

    monkeypatch.setattr(passes, "REMEDIES", {"no-help": no_help, "drop-transpose": drop_transpose})
    result = compile_amd(transpose, "gfx942", M=128, N=128)
    assert calls == ["no-help", "drop-transpose"]
    assert result.context.artifacts["lds"]["bytes"] == 0


def test_the_error_lists_the_remedies_tried(monkeypatch):
    monkeypatch.setattr(passes, "REMEDIES", {"fewer-stages": lambda module, kernel, context: False})
    with pytest.raises(Exception) as info:
        compile_amd(transpose, "gfx942", M=128, N=256)
    assert "(after trying: fewer-stages)" in str(raised(info))


def test_a_code_object_that_disagrees_with_the_allocation_is_an_internal_error(monkeypatch):
    from polytile_amd import codegen

    size_lds = codegen.size_lds
    monkeypatch.setattr(codegen, "size_lds", lambda text, size: size_lds(text, size + 16))
    with pytest.raises(Exception, match="the code object declares .* bytes of LDS but the memory stage allocated"):
        compile_amd(transpose, "gfx942", M=32, N=32)


def test_a_code_object_with_less_lds_than_allocated_is_accepted(monkeypatch):
    """LLVM drops LDS no instruction reaches (a scan of a constant: fuzz seed 2026 kernel 171)."""
    from polytile_amd import codegen

    size_lds = codegen.size_lds
    monkeypatch.setattr(codegen, "size_lds", lambda text, size: size_lds(text, max(size - 16, 0)))
    result = compile_amd(transpose, "gfx942", M=32, N=32)
    assert result.context.artifacts["lds"]["bytes"] == result.context.artifacts["amd_code_object"][
        "group_segment_fixed_size"]


def test_compile_metadata_gets_lds_and_occupancy():
    # The metadata a launcher and the on-disk cache keep (CompileResult.metadata).
    metadata = compile_amd(transpose, "gfx942", M=64, N=64).metadata
    info = metadata["amd_code_object"]
    lds = metadata["lds"]
    assert lds["bytes"] == info["group_segment_fixed_size"] == metadata["shared_bytes"] > 64 * 64 * 4
    assert lds["limit"] == 65536 and 1 <= lds["waves_per_simd"] <= 8
    assert lds == passes.lds_record("gfx942", info)
    assert json.loads(json.dumps(metadata["lds"])) == lds


def test_occupancy_of_a_kernel_using_agprs_counts_them_once():
    # A 128x128x64 fp16 matmul on gfx942 keeps its accumulators in AGPRs: the code object
    # says .vgpr_count 512 (256 VGPRs + 256 AGPRs) and .agpr_count 256.  One wave fits.
    info = {"group_segment_fixed_size": 0, "vgpr_count": 512, "agpr_count": 256, "max_flat_workgroup_size": 256,
            "wavefront_size": 64}
    record = passes.lds_record("gfx942", info)
    assert (record["waves_per_simd"], record["by_vgprs"], record["limited_by"]) == (1, 1, "vgprs")


@pytest.mark.parametrize("arch, lds, vgprs, group, wave, expected", [
    ("gfx942", 0, 32, 256, 64, (8, 8, 8, "hardware")),
    ("gfx942", 0, 128, 256, 64, (4, 8, 4, "vgprs")),
    ("gfx942", 0, 168, 256, 64, (3, 8, 3, "vgprs")),  # 168 -> 168 (granule 8): 512 // 168
    ("gfx942", 0, 512, 256, 64, (1, 8, 1, "vgprs")),  # 256 VGPRs + 256 AGPRs: the whole file
    ("gfx942", 32768, 32, 256, 64, (2, 2, 8, "lds")),  # two workgroups of 4 waves on 4 SIMDs
    ("gfx942", 33792, 32, 64, 64, (1, 1, 8, "lds")),  # one workgroup of one wave: one SIMD holds it
    ("gfx950", 32768, 32, 256, 64, (5, 5, 8, "lds")),
    ("gfx1100", 16384, 48, 128, 32, (8, 8, 16, "lds")),
])
def test_occupancy_model(arch, lds, vgprs, group, wave, expected):
    estimate = occupancy(arch, lds_bytes=lds, vgprs=vgprs, workgroup_size=group, wavefront_size=wave)
    assert (estimate.waves_per_simd, estimate.by_lds, estimate.by_vgprs, estimate.limited_by) == expected


def test_without_the_plugin_the_amd_backend_still_compiles_and_guards_its_limit():
    with config.override(disabled_plugins=["polytile-lds"]):
        result = compile_amd(add, "gfx942", BLOCK=256)
        assert "lds" not in result.context.artifacts and result.context.artifacts["hsaco"]
        with pytest.raises(Exception) as info:
            compile_amd(transpose, "gfx942", M=128, N=256)
    error = raised(info)
    assert isinstance(error, AmdOutOfResourcesError) and error.limit == 65536
    # Built in: conversions in rounds; the pipelining pass's slot stays free until it registers.
    assert list(REMEDIES) == ["conversions-in-rounds"]


UNINSTALLED = '''
import json, sys

# polytile-lds uninstalled: discovery (polytile's own scan of the installed
# distributions) does not see it, and its package cannot be imported.
from polytile.plugins import distributions
entry_points = distributions.entry_points
def without_lds(group):
    return [ep for ep in entry_points(group) if distributions.normalize(ep.dist.name) != "polytile-lds"]
distributions.entry_points = without_lds
sys.modules["polytile_lds"] = None

import numpy as np
from polytile.compiler import compile_module
from polytile.errors import OutOfResourcesError
from polytile.plugins.manager import get_plugin_manager
import polytile as pt
import polytile.language as pl

@pt.jit
def add(x, out, BLOCK: pl.constexpr):
    offs = pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs) + 1.0)

@pt.jit
def transpose(x, out, M: pl.constexpr, N: pl.constexpr):
    v = pl.load(x + pl.arange(0, M)[:, None] * N + pl.arange(0, N)[None, :])
    pl.store(out + pl.arange(0, N)[:, None] * M + pl.arange(0, M)[None, :], pl.trans(v))

f = np.zeros(1 << 16, np.float32)
result = compile_module(add.lower(f, f, BLOCK=256), "amd:gfx942", num_warps=4)
report = {"distributions": sorted(r.distribution for r in get_plugin_manager().plugins()),
          "passes": [p.name for stage in result.pipeline.stages for p in stage.passes],
          "hsaco": result.artifacts["hsaco"][:4].decode("latin-1"),
          "lds_artifact": "lds" in result.artifacts}
try:
    compile_module(transpose.lower(f, f, M=128, N=256), "amd:gfx942", num_warps=4)
except Exception as error:
    error = error.__cause__ or error
    report["over_limit"] = [type(error).__name__, isinstance(error, OutOfResourcesError), str(error)]
print(json.dumps(report))
'''


def test_uninstalled_the_amd_backend_still_compiles_and_guards_its_limit(tmp_path):
    # Not merely disabled: in a fresh process whose entry points lack polytile-lds and
    # where `import polytile_lds` fails.
    import subprocess
    import sys

    script = tmp_path / "uninstalled.py"
    script.write_text(UNINSTALLED)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "polytile-amd" in report["distributions"] and "polytile-lds" not in report["distributions"]
    assert "lds-fit" not in report["passes"] and "lds-verify" not in report["passes"]
    assert "link-hsaco" in report["passes"] and report["hsaco"] == "\x7fELF" and not report["lds_artifact"]
    name, is_out_of_resources, message = report["over_limit"]
    assert is_out_of_resources and "kernel 'transpose' needs" in message and "65536 bytes gfx942" in message


def block_matmul(a, b, c, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    # Its dot operands reach their MFMA layouts through LDS (BM x BK + BK x BN f16), and its
    # f32 result goes through LDS to the store's layout (BM x BN, in rounds with the plugin).
    rm, rn, rk = pl.arange(0, BM), pl.arange(0, BN), pl.arange(0, BK)
    x = pl.load(a + rm[:, None] * BK + rk[None, :])
    y = pl.load(b + rk[:, None] * BN + rn[None, :])
    pl.store(c + rm[:, None] * BN + rn[None, :], pl.dot(x, y))


@pytest.mark.parametrize("with_plugin, block, too_deep", [
    # 256 x 256: BK = 64 fits only once the result's conversion goes in rounds; BK = 256's
    # operands alone are 128 KB.
    (True, 256, 256),
    # Without the plugin nothing goes in rounds: 64 x 64 blocks, and BK = 1024 (128 KB).
    (False, 64, 1024),
], ids=["with-lds-plugin", "without"])
def test_the_autotuner_drops_configs_whose_lds_does_not_fit(with_plugin, block, too_deep, monkeypatch):
    from polytile.runtime import Config, autotune
    from polytile_amd import AmdBackend

    launched = []

    def record(self, *, compiled, kernel_name, params, options):  # no AMD GPU here: record the launch
        launched.append(compiled)
        return lambda grid, args, **kwargs: None

    monkeypatch.setattr(AmdBackend, "make_launcher", record)
    configs = [Config({"BK": too_deep}, num_warps=8), Config({"BK": 64}, num_warps=8)]
    # A JIT function of its own per case: its in-memory kernels are not keyed by the plugins.
    tuned = autotune(configs=configs, key=[], do_bench=lambda trial: (trial(), 1.0)[1])(pt.jit(block_matmul))
    a, c = np.zeros((block, too_deep), np.float16), np.zeros((block, block), np.float32)
    disabled = [] if with_plugin else ["polytile-lds"]
    with config.override(target="amd:gfx942", cache=False, disabled_plugins=disabled):
        tuned[(1,)](a, a, c, BM=block, BN=block)
    assert tuned.best_config == configs[1] and list(tuned.configs_timings) == [configs[1]]
    (error,) = tuned.dropped_configs.values()
    assert list(tuned.dropped_configs) == [configs[0]] and isinstance(error, OutOfResourcesError)
    assert (error.kernel, error.limit) == ("block_matmul", 65536) and error.need > 65536
    (compiled,) = launched
    assert compiled.metadata["amd_code_object"]["group_segment_fixed_size"] == compiled.metadata["shared_bytes"]
    if with_plugin:
        assert error.remedies_tried == ("conversions-in-rounds",)
        assert compiled.metadata["lds"]["bytes"] <= 65536 and compiled.metadata["lds"]["waves_per_simd"] >= 1
    else:
        assert "lds" not in compiled.metadata
