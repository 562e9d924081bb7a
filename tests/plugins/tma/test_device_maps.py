"""Tensor maps built on the device (polytile_tma.device_maps): where
``lower-tensor-descriptors`` builds one (IR text in, IR text out), where it keeps the
masked accesses, the PTX that builds it for sm_90a (assembled by ptxas), and the global
scratch it asks of the launch."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polytile.language as pl
from polytile.compiler import compile_module
from polytile.errors import VerificationError
from polytile.gpu.global_scratch import ALIGNMENT_KEY, BYTES_KEY, USERS_KEY
from polytile.ir import parse_module, verify
from polytile.runtime import jit
from polytile.ir_testing import apply_passes, dedent, roundtrip

from polytile_tma.bulk import element_code
from polytile_tma.lowering import LowerTensorDescriptors
from tests.gpu.ptx_assembly import assembles

KERNEL = """
func.func @k(%x: ptr<{element}>, %m: i32, %n: i32, %s: i64, %i: i32) attributes {{kernel = true, pt.divisibility = [{base}, 1, 1, {stride}, 1]}} {{
  %one = arith.constant {{value = {last}}} : i64
  %d = tma.make_descriptor %x shape(%m, %n) strides(%s, %one) {{block_shape = [64, 64]{padding}}} : !tma.desc<tile<64x64x{element}>, {pad}>
  %v = tma.load %d, %i, %i : tile<64x64x{element}>
  tma.store %d, %i, %i, %v
  func.return
}}
"""


def _kernel(element="f16", base=16, stride=16, last=1, padding="zero"):
    attribute = ', padding = "nan"' if padding == "nan" else ""
    return KERNEL.format(element=element, base=base, stride=stride, last=last, padding=attribute, pad=padding)


def test_a_descriptor_made_in_the_kernel_gets_a_map_and_its_accesses_become_bulk_copies():
    expected = """
    func.func @k(%x: ptr<f16>, %m: i32, %n: i32, %s: i64, %i: i32) attributes {kernel = true, pt.divisibility = [16, 1, 1, 16, 1]} {
      %one = arith.constant {value = 1} : i64
      %0 = tma.create_map %x shape(%m, %n) strides(%s, %one) {block = [64, 64]} : !tma.map<>
      %1 = tma.bulk_load %0, %i, %i : tile<64x64xf16>
      tma.bulk_store %0, %i, %i, %1
      func.return
    }
    """
    assert apply_passes(_kernel(), LowerTensorDescriptors(device_maps=True)) == dedent(expected)


def test_the_map_keeps_the_padding():
    lowered = apply_passes(_kernel(element="f32", padding="nan"), LowerTensorDescriptors(device_maps=True))
    assert 'tma.create_map %x shape(%m, %n) strides(%s, %one) {block = [64, 64], padding = "nan"}' in lowered


@pytest.mark.parametrize("case, why", [
    (dict(base=8), "a base not known to be 16-byte aligned"),
    (dict(stride=1), "a row stride not known to be a multiple of 16 bytes"),
    (dict(last=2), "a last stride other than 1"),
])
def test_without_proof_the_map_is_valid_the_accesses_stay_masked(case, why):
    lowered = apply_passes(_kernel(**case), LowerTensorDescriptors(device_maps=True))
    assert "tma.create_map" not in lowered and "tile.load" in lowered and "tile.store" in lowered, why


def test_other_targets_keep_the_masked_accesses():
    lowered = apply_passes(_kernel(), LowerTensorDescriptors())
    assert "tma.create_map" not in lowered and "tma.bulk_load" not in lowered


def test_the_map_op_prints_parses_and_verifies():
    text = """
    func.func @k(%x: ptr<f16>, %m: i32, %s: i64) {
      %one = arith.constant {value = 1} : i64
      %0 = tma.create_map %x shape(%m, %m) strides(%s, %one) {block = [64, 64], padding = "nan"} : !tma.map<>
      func.return
    }
    """
    assert roundtrip(dedent(text)) == dedent(text)
    bad = dedent(text).replace("block = [64, 64]", "block = [64, 3]")
    with pytest.raises(VerificationError, match="cannot move blocks of"):
        verify(parse_module(bad))


@pytest.mark.parametrize("element, code", [("f16", 6), ("bf16", 10), ("f32", 7), ("f64", 9), ("i8", 0), ("u8", 0),
                                           ("i16", 1), ("i32", 3), ("u32", 2), ("i64", 5), ("u64", 4)])
def test_element_codes_are_ptx_tensormap_codes(element, code):
    from polytile.ir import types as t

    assert element_code(getattr(t, element)) == code


# --------------------------------------------------------------------------------------
# PTX for sm_90a


@jit
def device_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: pl.constexpr, BN: pl.constexpr, BK: pl.constexpr):
    a_desc = pl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = pl.make_tensor_descriptor(b_ptr, [N, K], [K, 1], [BN, BK])
    c_desc = pl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    pid_m, pid_n = pl.program_id(0), pl.program_id(1)
    acc = pl.zeros((BM, BN), dtype=pl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([pid_n * BN, k])
        acc = pl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


def _compile(target, n=256):
    a = np.zeros((n, n), np.float16)
    module = device_matmul.lower_for(target, a, a, a, n, n, n, BM=128, BN=128, BK=64)
    return compile_module(module, target, num_warps=4, num_stages=3)


def test_hopper_builds_each_map_in_global_scratch_then_copies_through_it():
    result = _compile("nvidia:sm_90a")
    artifacts = result.context.artifacts
    ptx, name = artifacts["ptx"], artifacts["kernel_name"]
    assert ".version 8.7" in ptx
    # Three maps of 128 bytes in each program's slice, passed as a last, hidden parameter.
    assert (artifacts[BYTES_KEY], artifacts[ALIGNMENT_KEY]) == (384, 128)
    assert [u.split(" (")[0] for u in artifacts[USERS_KEY]] == ["the tensor map of pl.make_tensor_descriptor"] * 3
    assert re.search(rf"\.param \.u64 \.ptr \.global \.align 128 {name}_param_6\s*\)", ptx)
    fields = re.findall(r"tensormap\.replace\.tile\.(\w+)\.shared::cta\.b1024\.b(?:32|64) \[%r\d+\], ([^;]+);", ptx)
    first = fields[:13]
    assert [f for f, _ in first] == ["global_address", "rank", "box_dim", "box_dim", "global_dim", "global_dim",
                                     "global_stride", "element_stride", "element_stride", "elemtype",
                                     "interleave_layout", "swizzle_mode", "fill_mode"]
    values = dict((f + (v.split(",")[0] if "," in v else ""), v.split(", ")[-1]) for f, v in first)
    # A 128 x 64 f16 block: one box of 64 columns (128 bytes) by 128 rows, 128-byte swizzle.
    assert values["rank"] == "1" and values["box_dim0"] == "64" and values["box_dim1"] == "128"
    assert values["elemtype"] == "6" and values["swizzle_mode"] == "3" and values["fill_mode"] == "0"
    assert len(fields) == 3 * 13
    release = ptx.index("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned")
    acquire = ptx.index("fence.proxy.tensormap::generic.acquire.gpu", release)
    assert release < acquire < ptx.index("prefetch.tensormap", acquire) < ptx.index("cp.async.bulk.tensor.2d")
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 2  # the store: 2 boxes
    assert "ld.global" not in ptx and "st.global" not in ptx
    assembles(ptx, "sm_90a", name)


# Plain sm_90 has bulk copies but not tensormap.replace (arch-specific sm_90a only).
@pytest.mark.parametrize("target", ["nvidia:sm_80", "nvidia:sm_89", "nvidia:sm_90"])
def test_before_hopper_device_descriptors_are_masked_accesses_without_scratch(target):
    artifacts = _compile(target).context.artifacts
    assert "tensormap" not in artifacts["ptx"] and BYTES_KEY not in artifacts
    assembles(artifacts["ptx"], target.split(":")[1], artifacts["kernel_name"])


def test_amd_compiles_device_descriptors_to_masked_accesses_without_scratch():
    artifacts = _compile("amd:gfx942").context.artifacts
    assert BYTES_KEY not in artifacts and artifacts["hsaco"][:4] == b"\x7fELF"


@jit
def made_in_a_loop(x_ptr, y_ptr, M, N, BM: pl.constexpr, BN: pl.constexpr):
    for i in range(0, 2):
        src = pl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
        dst = pl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
        dst.store([i * BM, 0], src.load([i * BM, 0]))


def test_a_descriptor_made_in_a_loop_keeps_masked_accesses():
    x = np.zeros((256, 256), np.float32)
    module = made_in_a_loop.lower_for("nvidia:sm_90a", x, x, 256, 256, BM=64, BN=64)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    assert "tensormap" not in artifacts["ptx"] and BYTES_KEY not in artifacts


def test_ahead_of_time_the_hidden_scratch_parameter_is_in_the_layout():
    from polytile.aot import compile_kernel

    result = compile_kernel(device_matmul, target="nvidia:sm_90a",
                            signature="*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16",
                            constexprs={"BM": 128, "BN": 128, "BK": 64}, options={"num_stages": 3})
    metadata = result.metadata
    assert (metadata[BYTES_KEY], metadata[ALIGNMENT_KEY]) == (384, 128)
    last = metadata["arguments"][-1]
    assert (last["name"], last["hidden"], last["size"], last["offset"]) == ("global_scratch", True, 8, 40)
    assert metadata["parameter_bytes"] == 48  # 3 pointers, 3 i32, padding to 8


# --------------------------------------------------------------------------------------
# Bulk reductions (desc.atomic_* through a map)


REDUCE = """
func.func @k(%x: ptr<{element}>, %m: i32, %n: i32, %s: i64, %i: i32, %v: tile<64x64x{element}>) attributes {{kernel = true, pt.divisibility = [16, 1, 1, 16, 1, 1]}} {{
  %one = arith.constant {{value = 1}} : i64
  %d = tma.make_descriptor %x shape(%m, %n) strides(%s, %one) {{block_shape = [64, 64]}} : !tma.desc<tile<64x64x{element}>, zero>
  tma.reduce %d, %i, %i, %v {{kind = "{kind}"}}
  func.return
}}
"""


@pytest.mark.parametrize("kind, element", [("add", "f32"), ("add", "bf16"), ("add", "u64"), ("min", "i32"),
                                           ("max", "i64"), ("xor", "u32"), ("min", "f16"), ("max", "bf16")])
def test_a_reduction_the_copy_engine_takes_is_a_bulk_reduction_through_the_map(kind, element):
    lowered = apply_passes(REDUCE.format(kind=kind, element=element), LowerTensorDescriptors(device_maps=True))
    assert f'tma.bulk_store %0, %i, %i, %v {{reduce = "{kind}"}}' in lowered
    assert "tile.atomic_rmw" not in lowered


@pytest.mark.parametrize("kind, element", [("add", "i64"), ("add", "i16"), ("and", "i8"), ("max", "u16"),
                                           ("xor", "i64")])
def test_a_reduction_the_copy_engine_does_not_take_stays_an_atomic(kind, element):
    lowered = apply_passes(REDUCE.format(kind=kind, element=element), LowerTensorDescriptors(device_maps=True))
    # ... and no map is built for a descriptor nothing moves through it.
    assert "tile.atomic_rmw" in lowered and "reduce =" not in lowered and "tma.create_map" not in lowered


def test_the_verifier_refuses_a_bulk_reduction_the_copy_engine_does_not_take():
    text = dedent("""
    func.func @k(%m: !tma.map<>, %i: i32, %v: tile<64x64xi16>) {
      tma.bulk_store %m, %i, %i, %v {reduce = "add"}
      func.return
    }
    """)
    with pytest.raises(VerificationError, match="a bulk reduction cannot combine i16 with 'add'"):
        verify(parse_module(text))


@jit
def accumulate_blocks(x_ptr, y_ptr, M, N, BM: pl.constexpr, BN: pl.constexpr, KIND: pl.constexpr = "add"):
    src = pl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    dst = pl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    pm, pn = pl.program_id(0) * BM, pl.program_id(1) * BN
    if KIND == "add":
        dst.atomic_add([pm, pn], src.load([pm, pn]))
    elif KIND == "min":
        dst.atomic_min([pm, pn], src.load([pm, pn]))
    else:
        dst.atomic_max([pm, pn], src.load([pm, pn]))


def test_hopper_ptx_of_a_descriptor_atomic_add_is_a_bulk_reduction():
    x = np.zeros((256, 256), np.float32)
    module = accumulate_blocks.lower_for("nvidia:sm_90a", x, x, 256, 256, BM=64, BN=64)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    reduce = ptx.index("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group")
    assert ptx.rindex("fence.proxy.async.shared::cta", 0, reduce) < reduce
    assert ptx.index("cp.async.bulk.commit_group", reduce) < ptx.index("cp.async.bulk.wait_group", reduce)
    assert "atom.global" not in ptx and "red.global" not in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])


@pytest.mark.parametrize("kind", ["min", "max"])
@pytest.mark.parametrize("target", ["nvidia:sm_90a", "nvidia:sm_80"])
def test_min_and_max_of_halves_are_bulk_reductions_on_hopper_and_16_bit_atomics_before(kind, target):
    x = np.zeros((256, 256), np.float16)
    module = accumulate_blocks.lower_for(target, x, x, 256, 256, BM=64, BN=64, KIND=kind)
    artifacts = compile_module(module, target, num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    if target.endswith("90a"):
        assert f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{kind}.tile.bulk_group" in ptx
        assert "atom.global" not in ptx
    else:  # no 16-bit float min/max instruction: a compare-and-swap loop
        assert "atom.global.relaxed.gpu.cas.b16" in ptx and "cp.reduce" not in ptx
    assembles(ptx, target.split(":")[1], artifacts["kernel_name"])


@jit
def copy_3d(x_ptr, y_ptr, H, L, BL: pl.constexpr, D: pl.constexpr):
    # Batched rows as one 3-D descriptor (heads, rows, columns), a block of one head.
    x = pl.make_tensor_descriptor(x_ptr, [H, L, D], [L * D, D, 1], [1, BL, D])
    y = pl.make_tensor_descriptor(y_ptr, [H, L, D], [L * D, D, 1], [1, BL, D])
    h, i = pl.program_id(0), pl.program_id(1)
    y.store([h, i * BL, 0], x.load([h, i * BL, 0]) + 1)


def test_a_3d_descriptor_made_in_the_kernel_is_a_3d_map_and_3d_copies():
    x = np.zeros((4, 128, 64), np.float16)
    module = copy_3d.lower_for("nvidia:sm_90a", x, x, 4, 128, BL=64, D=64)
    artifacts = compile_module(module, "nvidia:sm_90a", num_warps=4).context.artifacts
    ptx = artifacts["ptx"]
    assert re.findall(r"tensormap\.replace\.tile\.rank\.shared::cta\.b1024\.b32 \[%r\d+\], 2;", ptx)
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster.global.tile") == 1
    assert ptx.count("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group") == 1
    assert "ld.global" not in ptx and "st.global" not in ptx
    assembles(ptx, "sm_90a", artifacts["kernel_name"])
