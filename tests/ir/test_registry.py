"""The IR registry: unknown names with close matches, and a plugin's dialect end to end."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from polytile.errors import IRParseError, PluginConflictError, UnknownNameError, VerificationError
from polytile.ir import IR_REGISTRY, Dialect, DialectAttribute, DialectType, parse_module, parse_type, print_ir, verify
from polytile.ir import types as t
from polytile.ir.opdef import Operand, define_op
from polytile.ir.operation import Operation
from polytile.ir.registry import IRRegistry
from polytile.plugins.registry import CORE_OWNER

from ._testdialect import TEST_DIALECT, TEST_PLUGIN, DescType, LayoutAttr, MakeDescOp, TokenType, UseTileOp


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- lookups ------------------------------------------------------------------------------


def test_core_ops_are_registered_and_owned_by_the_core():
    import polytile.dialects  # noqa: F401

    assert IR_REGISTRY.op("arith.addi").name == "arith.addi"
    assert IR_REGISTRY.ops.owner_of("tile.load") == CORE_OWNER
    assert {"builtin", "func", "arith", "math", "scf", "tile"} <= set(IR_REGISTRY.dialects.names())
    assert IR_REGISTRY.constant_materializer("arith") is not None
    assert IR_REGISTRY.constant_materializer("tile") is None
    assert IR_REGISTRY.constant_materializer("no-such-dialect") is None


def test_unknown_op_lists_close_matches():
    with pytest.raises(UnknownNameError) as info:
        IR_REGISTRY.op("tile.lod")
    err = info.value
    assert (err.kind, err.name) == ("op", "tile.lod")
    assert str(err) == "unknown op 'tile.lod'; did you mean 'tile.load', 'tile.dot' or 'tile.join'?"
    assert isinstance(err, KeyError)


def test_unknown_op_with_nothing_close():
    with pytest.raises(UnknownNameError) as info:
        IR_REGISTRY.op("zzz.qqq", "in test")
    assert str(info.value) == "unknown op 'zzz.qqq' in test"


def test_unknown_op_in_text_is_a_parse_error_with_close_matches():
    with pytest.raises(IRParseError) as info:
        parse_module("func.func @f(%a: f32) {\n  %0 = math.expp %a : f32\n  func.return\n}\n")
    assert info.value.message == "unknown op 'math.expp'; did you mean 'math.exp', 'math.exp2' or 'math.expm1'?"
    assert (info.value.line, info.value.column) == (2, 8)


def test_on_miss_loader_runs_once_then_lookup_is_retried():
    registry = IRRegistry()
    calls = []

    def loader():
        calls.append(1)
        registry.types.add("late.type", DescType)

    registry.on_miss = loader
    assert registry.type("late.type") is DescType
    assert calls == [1] and registry.on_miss is None
    with pytest.raises(UnknownNameError, match="unknown type 'late.typo'; did you mean 'late.type'"):
        registry.type("late.typo")
    assert calls == [1]


def test_on_miss_is_used_by_the_parser(monkeypatch):
    @dataclass(frozen=True)
    class LateType(DialectType):
        type_name = "late.thing"
        n: int

    def loader():
        IR_REGISTRY.types.add("late.thing", LateType)

    monkeypatch.setattr(IR_REGISTRY, "on_miss", loader)
    try:
        assert parse_type("!late.thing<3>") == LateType(3)
    finally:
        IR_REGISTRY.types._entries.pop("late.thing", None)


def test_a_second_owner_of_a_name_is_a_conflict():
    registry = IRRegistry()
    registry.register(TEST_DIALECT)
    other = Dialect("test2", types=(TokenType,))
    with registry.types.owned_by(TEST_PLUGIN):
        registry.types.add("test.other", DescType)
    with pytest.raises(PluginConflictError, match="type 'test.token' is registered twice"):
        @dataclass(frozen=True)
        class Clash(DialectType):
            type_name = "test.token"

        registry.register(Dialect("test3", types=(Clash,)))
    registry.register(other)  # the same class again under another dialect is not a clash


def test_define_op_needs_a_dotted_name():
    with pytest.raises(ValueError, match="op class Bad needs a dotted name such as 'dialect.op'"):
        @define_op
        class Bad(Operation):
            name = "nodot"


def test_define_op_allows_one_variable_result_group():
    from polytile.ir.opdef import Result

    with pytest.raises(ValueError, match="op test.two_variadic: at most one variable-length result group"):
        @define_op
        class TwoVariadic(Operation):
            name = "test.two_variadic"
            a = Result(variadic=True)
            b = Result(optional=True)


# -- a plugin's dialect: op, types, attributes ----------------------------------------------


def test_the_plugin_dialect_is_registered_under_its_owner():
    assert IR_REGISTRY.dialects.find("test") is TEST_DIALECT
    assert IR_REGISTRY.op("test.make_desc") is MakeDescOp
    assert IR_REGISTRY.type("test.desc") is DescType
    assert IR_REGISTRY.attribute("test.layout") is LayoutAttr
    for registry, name in ((IR_REGISTRY.ops, "test.make_desc"), (IR_REGISTRY.types, "test.desc"),
                           (IR_REGISTRY.attributes, "test.layout"), (IR_REGISTRY.dialects, "test")):
        assert registry.owner_of(name) == TEST_PLUGIN


PLUGIN_PROGRAM = ir("""
    func.func @k(%base: ptr<f16>, %s0: i64, %s1: i64, %t: tile<16x16xf32, #test.layout<warps = 4, order = [1, 0]>>) {
      %d = test.make_desc %base strides(%s0, %s1) offsets(%s0) {swizzle = 128} : !test.desc<[64, 32], f16>
      %e = test.make_desc %base strides(%s1) : !test.desc<[16], tile<16xf32, #test.swizzle<vec = 4, per_phase = 2>>>
      %u = test.use_tile %t : tile<16x16xf32, #test.layout<warps = 4, order = [1, 0]>>
      %f = test.make_desc %base offsets(%s0, %s0) : !test.desc<[], !test.token<2 x "q\\"">>
      func.return
    }
""")


def test_plugin_types_attributes_and_ops_round_trip():
    module = parse_module(PLUGIN_PROGRAM)
    verify(module)
    assert print_ir(module) == PLUGIN_PROGRAM
    func = module.body.block.first_op
    d, e, u, f = func.entry_block.ops[:4]
    assert d.result.type == DescType((64, 32), t.f16)
    assert d.strides == tuple(func.arguments[1:3]) and d.offsets == (func.arguments[1],)
    assert d.operand_segments == (1, 2, 1) and d.swizzle == 128
    assert e.offsets == () and e.swizzle == 0
    assert f.strides == () and f.result.type == DescType((), TokenType(2, 'q"'))
    assert u.result.type.layout == LayoutAttr(4, (1, 0))
    assert func.arguments[3].type == t.TileType((16, 16), t.f32, LayoutAttr(4))


def test_plugin_op_verifier_names_the_op_and_location():
    text = PLUGIN_PROGRAM.replace("strides(%s1) :", "strides(%s1, %s0) :")
    text = text.replace(">>>\n", '>>> loc("desc.py":7:3)\n')
    assert text.count("loc(") == 1
    with pytest.raises(VerificationError) as info:
        verify(parse_module(text))
    assert str(info.value) == "desc.py:7:3: error: 'test.make_desc' op needs 1 strides, got 2"


def test_plugin_op_keyworded_groups_and_an_operand_constraint():
    text = PLUGIN_PROGRAM.replace("strides(%s0, %s1) offsets(%s0)", "offsets(%s0) strides(%s0, %t)")
    with pytest.raises(VerificationError, match="'test.make_desc' op operand 'strides' must be an integer scalar, got "
                                                "tile<16x16xf32, #test.layout<warps = 4, order = \\[1, 0\\]>>"):
        verify(parse_module(text))


def test_plugin_type_with_a_custom_spelling_reports_its_own_errors():
    with pytest.raises(IRParseError) as info:
        parse_type('!test.token<2 y "a">')
    assert info.value.message == "expected 'x' in '!test.token'"
    assert info.value.column == 15


def test_dialect_types_are_attribute_values():
    module = parse_module(ir("""
        func.func @f() {
          func.return {pt.desc = !test.desc<[1], f32>, pt.fn = (!test.token<1 x "a">) -> i1}
        }
    """))
    ret = module.body.block.first_op.entry_block.first_op
    assert ret.attributes["pt.desc"] == DescType((1,), t.f32)
    assert ret.attributes["pt.fn"] == t.FunctionType((TokenType(1, "a"),), (t.i1,))
    assert print_ir(module).count("!test.") == 2


def test_an_op_defined_again_by_a_reloaded_module_replaces_the_old_class():
    namespace = {"name": "test.reloaded", "x": Operand(), "__module__": __name__, "__qualname__": "Reloaded"}
    first = define_op(type("Reloaded", (Operation,), dict(namespace)))
    second = define_op(type("Reloaded", (Operation,), dict(namespace)))
    assert IR_REGISTRY.op("test.reloaded") is second and first is not second


def test_unknown_dialect_type_and_attribute_in_text():
    with pytest.raises(IRParseError, match="unknown type 'test.dsc'; did you mean 'test.desc'"):
        parse_module("func.func @f(%a: !test.dsc<[1], f32>) {\n  func.return\n}\n")
    with pytest.raises(IRParseError, match="unknown attribute 'test.layot'; did you mean 'test.layout'"):
        parse_module("func.func @f(%a: tile<4xf32, #test.layot<warps = 1>>) {\n  func.return\n}\n")


def test_dialect_attribute_default_parameters_are_written_out():
    # Defaults print explicitly, so the text never depends on a plugin's default values.
    assert str(t.TileType((2,), t.f32, LayoutAttr(8))) == "tile<2xf32, #test.layout<warps = 8, order = [1, 0]>>"
    assert parse_type("tile<2xf32, #test.layout<warps = 8>>") == t.TileType((2,), t.f32, LayoutAttr(8))


def test_use_tile_infers_its_result():
    from polytile.ir import Block

    block = Block([t.TileType((4,), t.f32)])
    op = UseTileOp.build(block.arguments[0])
    assert op.result.type == t.TileType((4,), t.f32)


def test_plugin_attribute_classes_are_plain_dialect_attributes():
    assert issubclass(LayoutAttr, DialectAttribute) and LayoutAttr.attribute_name == "test.layout"


def test_the_registry_imports_the_core_dialects_on_its_first_miss():
    """Nothing imports polytile.dialects for what it registers: the registry names it as
    the provider of the core's dialects and imports it when a name is first missing."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from polytile.ir.registry import IR_REGISTRY\n"
        "from polytile.ir.parser import parse_type\n"
        "assert 'polytile.dialects' not in sys.modules\n"
        "IR_REGISTRY.on_miss = None  # not through the plugins\n"
        "assert IR_REGISTRY.op('arith.addi').name == 'arith.addi' and IR_REGISTRY.providers == ()\n"
        "assert IR_REGISTRY.ops.owner_of('tile.load').name == 'core'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
