"""``lower-tensor-descriptors``: IR text in, IR text out, and the errors it gives."""

from __future__ import annotations

import re

import pytest

from polytile.errors import CompilationError, VerificationError
from polytile.ir import parse_module, verify
from polytile.ir_testing import apply_passes, dedent, roundtrip

from polytile_tma.lowering import LowerTensorDescriptors

ONE_D = """
func.func @k(%x: ptr<i32>, %n: i32, %i: i32) attributes {kernel = true} {
  %one = arith.constant {value = 1} : i64
  %d = tma.make_descriptor %x shape(%n) strides(%one) {block_shape = [8]} : !tma.desc<tile<8xi32>, zero>
  %v = tma.load %d, %i : tile<8xi32>
  %e = tma.dim %d {index = 0, kind = "shape"} : i32
  %w = tile.splat %e : tile<8xi32>
  tma.reduce %d, %i, %w {kind = "max"}
  func.return
}
"""

# The positions i + arange(8) in i64, masked by 0 <= position < n, once per access; the
# load's padding is its `other`; the reduction an atomic without ordering; tma.dim the
# shape value itself.
_ACCESS = """
  %{a} = tile.arange {{end = 8, start = 0}} : tile<8xi32>
  %{b} = arith.extsi %{a} : tile<8xi64>
  %{c} = arith.extsi %i : i64
  %{d} = tile.splat %{c} : tile<8xi64>
  %{e} = arith.addi %{d}, %{b} : tile<8xi64>
  %{f} = tile.splat %one : tile<8xi64>
  %{g} = arith.muli %{e}, %{f} : tile<8xi64>
  %{h} = arith.constant {{value = 0}} : tile<8xi64>
  %{i} = arith.extsi %n : i64
  %{j} = tile.splat %{i} : tile<8xi64>
  %{k} = arith.cmpi %{e}, %{h} {{predicate = "sge"}} : tile<8xi1>
  %{l} = arith.cmpi %{e}, %{j} {{predicate = "slt"}} : tile<8xi1>
  %{m} = arith.andi %{k}, %{l} : tile<8xi1>
  %{n} = tile.splat %x : tile<8xptr<i32>>
  %{o} = tile.addptr %{n}, %{g} : tile<8xptr<i32>>"""


def _access(first: int) -> str:
    return _ACCESS.format(**{letter: first + k for k, letter in enumerate("abcdefghijklmno")})


def test_accesses_become_masked_pointer_accesses():
    expected = ("func.func @k(%x: ptr<i32>, %n: i32, %i: i32) attributes {kernel = true} {\n"
                "  %one = arith.constant {value = 1} : i64" + _access(0) + """
  %15 = arith.constant {value = 0} : tile<8xi32>
  %16 = tile.load %14 mask(%12) other(%15) : tile<8xi32>
  %w = tile.splat %n : tile<8xi32>""" + _access(17) + """
  %32 = tile.atomic_rmw %31, %w mask(%29) {kind = "max", sem = "relaxed"} : tile<8xi32>
  func.return
}
""")
    assert apply_passes(ONE_D, LowerTensorDescriptors()) == dedent(expected)


def _lowered(text: str) -> str:
    return apply_passes(text, LowerTensorDescriptors())


TWO_D = """
func.func @k(%x: ptr<T>, %m: i32, %n: i32, %s: i64, %i: i32, %j: i32, %v: tile<2x4xT>) attributes {kernel = true} {
  %one = arith.constant {value = 1} : i64
  %d = tma.make_descriptor %x shape(%m, %n) strides(%s, %one) {block_shape = [2, 4], padding = "PAD"} : !tma.desc<tile<2x4xT>, PAD>
  BODY
  func.return
}
"""


def two_d(body: str, element: str = "f16", padding: str = "zero") -> str:
    return TWO_D.replace("BODY", body).replace("PAD", padding).replace("T>", element + ">")


def test_a_load_reads_nan_outside_with_nan_padding_and_is_masked_in_both_dimensions():
    out = _lowered(two_d("%r = tma.load %d, %i, %j : tile<2x4xf16>\n  tma.store %d, %i, %j, %r", padding="nan"))
    assert "tma." not in out
    assert "arith.constant {value = nan} : tile<2x4xf16>" in out
    # both dimensions checked: two (sge, slt) pairs per access, combined with andi
    assert out.count('{predicate = "sge"}') == 4 and out.count('{predicate = "slt"}') == 4
    assert "tile.load %33 mask(%31) other(%34) : tile<2x4xf16>" in out
    assert "tile.store %69, %35 mask(%67)" in out


@pytest.mark.parametrize("element,kind,lowered", [
    ("f32", "add", "fadd"), ("i32", "add", "add"), ("u32", "min", "umin"), ("u32", "max", "umax"),
    ("i64", "min", "min"), ("i32", "and", "and"), ("i32", "or", "or"), ("i32", "xor", "xor"),
])
def test_reductions_become_unordered_atomics_of_the_element_kind(element, kind, lowered):
    body = f'tma.reduce %d, %i, %j, %v {{kind = "{kind}"}}'
    out = _lowered(two_d(body, element))
    assert f'{{kind = "{lowered}", sem = "relaxed"}}' in out and "tma." not in out


def test_min_and_max_of_halves_through_a_descriptor_are_float_atomics_and_of_f32_an_error():
    # Triton 3.6's rule: min and max through a descriptor take integers, f16 and bf16.
    for element in ("f16", "bf16"):
        lowered = _lowered(two_d('tma.reduce %d, %i, %j, %v {kind = "max"}', element))
        assert re.search(r'tile\.atomic_rmw %\w+, %v mask\(%\w+\) \{kind = "max", sem = "relaxed"\}', lowered), lowered
    with pytest.raises(VerificationError, match="'tma.reduce' op 'min' combines integers, f16 and bf16, not f32"):
        _lowered(two_d('tma.reduce %d, %i, %j, %v {kind = "min"}', "f32"))


GATHER = """
func.func @k(%x: ptr<f32>, %m: i32, %n: i32, %s: i64, %rows: tile<4xi32>, %c: i32) attributes {kernel = true} {
  %one = arith.constant {value = 1} : i64
  %d = tma.make_descriptor %x shape(%m, %n) strides(%s, %one) {block_shape = [1, 8]} : !tma.desc<tile<1x8xf32>, zero>
  %g = tma.gather %d, %rows, %c : tile<4x8xf32>
  tma.scatter %d, %g, %rows, %c
  func.return
}
"""


def test_gather_and_scatter_address_the_given_rows():
    out = _lowered(GATHER)
    assert "tma." not in out
    assert "%0 = arith.extsi %rows : tile<4xi64>" in out  # the rows are the positions along dimension 0
    assert "tile.load" in out and "tile.store" in out
    assert out.count("tile.expand_dims %0 {axis = 1} : tile<4x1xi64>") == 1


def test_the_types_and_ops_print_and_parse_back():
    assert roundtrip(ONE_D) == dedent(ONE_D)
    assert roundtrip(GATHER) == dedent(GATHER)


@pytest.mark.parametrize("text,message", [
    (ONE_D.replace("%v = tma.load %d, %i : tile<8xi32>", "%v = tma.load %d, %i, %i : tile<8xi32>"),
     "has 2 offsets for a descriptor of rank 1"),
    (ONE_D.replace('{kind = "max"}', '{kind = "fmax"}'), "unknown kind 'fmax'"),
    (GATHER.replace("{block_shape = [1, 8]}", "{block_shape = [2, 8]}").replace("tile<1x8xf32>", "tile<2x8xf32>"),
     "through a 2-D descriptor with a block of one row"),
    (ONE_D.replace("tile<8xi32>, zero>", "tile<4xi32>, zero>"), "describes !tma.desc<tile<8xi32>, zero>"),
])
def test_the_verifier_names_what_is_wrong(text, message):
    with pytest.raises(VerificationError, match=message):
        verify(parse_module(dedent(text)))


def test_a_descriptor_carried_by_a_loop_is_an_error_naming_the_op():
    text = """
    func.func @k(%x: ptr<i32>, %n: i32) attributes {kernel = true} {
      %one = arith.constant {value = 1} : i64
      %zero = arith.constant {value = 0} : i32
      %step = arith.constant {value = 1} : i32
      %d = tma.make_descriptor %x shape(%n) strides(%one) {block_shape = [8]} : !tma.desc<tile<8xi32>, zero>
      %e = scf.for %zero, %n, %step, %d : !tma.desc<tile<8xi32>, zero> {
      ^bb0(%i: i32, %c: !tma.desc<tile<8xi32>, zero>):
        scf.yield %c
      }
      func.return
    }
    """
    with pytest.raises(CompilationError, match="a tensor descriptor passed through 'scf.for' is not supported"):
        _lowered(text)


def test_a_module_without_descriptors_is_left_alone():
    text = """
    func.func @k(%x: ptr<i32>) attributes {kernel = true} {
      func.return
    }
    """
    assert _lowered(text) == dedent(text)
