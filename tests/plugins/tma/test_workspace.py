"""The workspace ops (polytile_tma.workspace) in IR text: their mutation effects, with
locations compared as byte offsets whatever pointer type computes them, and the generic
lowering's record."""

from __future__ import annotations

from polytile.analysis.mutation import mutation_report
from polytile.ir import parse_module
from polytile.testing import apply_passes, dedent

from polytile_tma.lowering import LowerTensorDescriptors

KERNEL = """
func.func @k(%a: ptr<f32>, %b: ptr<f32>, %ws: ptr<i8>, %m: i32, %n: i32, %i: i32) attributes {kernel = true} {
  %c128 = arith.constant {value = 128} : i32
  %c32 = arith.constant {value = 32} : i32
  %w1 = tile.addptr %ws, %c128 : ptr<i8>
  tma.workspace_create %ws, %a, %m, %n {block_shape = [16, 16]}
  tma.workspace_create %w1, %b, %m, %n {block_shape = [16, 16]}
  %as_int = arith.ptrtoint %ws : i64
  %words = arith.inttoptr %as_int : ptr<i32>
  %w2 = tile.addptr %words, %c32 : ptr<i32>
  %v = tma.workspace_load %w2, %i, %i : tile<16x16xf32>
  tma.workspace_store %w2, %v, %i, %i
  func.return
}
"""


def test_thirty_two_words_past_the_workspace_are_its_byte_128():
    # ws + 32 i32 words is ws + 128 bytes: b's map, not a's.
    report = mutation_report(parse_module(dedent(KERNEL)))
    assert report.written == ["b", "ws"]
    assert "recorded at 'ws' + 128 bytes" in report.reasons[0]


def test_the_create_writes_a_record_of_address_rows_and_columns():
    out = apply_passes(dedent("""
        func.func @k(%a: ptr<f32>, %ws: ptr<i8>, %m: i32, %n: i32) attributes {kernel = true} {
          tma.workspace_create %ws, %a, %m, %n {block_shape = [16, 16]}
          func.return
        }
        """), LowerTensorDescriptors())
    stores = [line.strip() for line in out.splitlines() if "tile.store" in line]
    assert len(stores) == 3 and stores[1].endswith(", %m") and stores[2].endswith(", %n")
    assert "arith.ptrtoint %a : i64" in out and "{value = 8} : i64" in out and "{value = 12} : i64" in out
