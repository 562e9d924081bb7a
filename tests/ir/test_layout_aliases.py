"""Layout aliases in printed IR (``#blocked0 = #gpu.blocked<...>`` once, then the alias),
as MLIR prints them: the printer's option, the parser's definitions, and their errors."""

from __future__ import annotations

import textwrap

import pytest

import polytile.dialects.gpu  # noqa: F401  (registers the layout attributes)
from polytile.errors import IRParseError
from polytile.ir import parse_module, print_ir, verify


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


BLOCKED = "#gpu.blocked<size_per_thread = [1, 4], threads_per_warp = [4, 8], warps_per_cta = [4, 1], order = [1, 0]>"
OTHER = "#gpu.blocked<size_per_thread = [4], threads_per_warp = [32], warps_per_cta = [4], order = [0]>"

FULL = ir(f"""
    func.func @f(%x: tile<32x32xf32, {BLOCKED}>, %y: tile<512xf32, {OTHER}>) {{
      %0 = tile.reduce %x {{axis = 1}} : tile<32xf32, #gpu.slice<dim = 1, parent = {BLOCKED}>> {{
      ^bb0(%a: f32, %b: f32):
        %1 = arith.addf %a, %b : f32
        tile.reduce_return %1
      }}
      %2 = arith.addf %x, %x : tile<32x32xf32, {BLOCKED}>
      func.return
    }}
""")

ALIASED = ir(f"""
    #blocked0 = {BLOCKED}
    #blocked1 = {OTHER}
    #slice0 = #gpu.slice<dim = 1, parent = #blocked0>
    func.func @f(%x: tile<32x32xf32, #blocked0>, %y: tile<512xf32, #blocked1>) {{
      %0 = tile.reduce %x {{axis = 1}} : tile<32xf32, #slice0> {{
      ^bb0(%a: f32, %b: f32):
        %1 = arith.addf %a, %b : f32
        tile.reduce_return %1
      }}
      %2 = arith.addf %x, %x : tile<32x32xf32, #blocked0>
      func.return
    }}
""")


def test_each_layout_is_written_once_then_named():
    module = parse_module(FULL)
    verify(module)
    assert print_ir(module, layout_aliases=True) == ALIASED
    assert print_ir(module) == FULL  # the default writes them in full


def test_aliased_text_parses_to_the_same_module():
    module = parse_module(ALIASED)
    verify(module)
    assert print_ir(module) == FULL
    assert print_ir(module, layout_aliases=True) == ALIASED


def test_a_module_without_layouts_has_no_aliases():
    text = ir("""
        func.func @g(%x: tile<4xf32>) {
          func.return
        }
    """)
    assert print_ir(parse_module(text), layout_aliases=True) == text


@pytest.mark.parametrize("text, message", [
    (f"#blocked0 = {BLOCKED}\n#blocked0 = {OTHER}\n", "alias '#blocked0' is defined twice"),
    (f"#blocked0 {BLOCKED}\n", "expected '=' after '#blocked0': text before the first op may only define aliases"),
    ("func.func @f(%x: tile<4xf32, #blocked9>) {\n  func.return\n}\n", "blocked9"),
])
def test_alias_mistakes_are_named(text, message):
    with pytest.raises(IRParseError, match=message):
        parse_module(text)
