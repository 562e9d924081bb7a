"""Every op the core registers has a round-trip text in these tests.

Adding an op to a core dialect without adding a round-trip case to
``tests/dialects/test_<dialect>.py`` fails here, by name.
"""

from __future__ import annotations

from polytile.dialects import CORE_DIALECTS
from polytile.ir import IR_REGISTRY, parse_module
from polytile.ir.opdef import define_op
from polytile.ir.operation import Operation

from . import (test_arith, test_builtin, test_func, test_gpu, test_math, test_scf, test_tile, test_tile_asm,
               test_tile_block, test_tile_clock, test_tile_debug, test_tile_shape)

ALL_ROUNDTRIP_TEXTS = {
    f"{module.__name__.rsplit('.', 1)[-1]}:{name}": text
    for module in (test_arith, test_builtin, test_func, test_gpu, test_math, test_scf, test_tile, test_tile_asm,
                   test_tile_block, test_tile_clock, test_tile_debug, test_tile_shape)
    for name, text in module.ROUNDTRIP.items()
}


def core_op_names() -> set[str]:
    """Every registered op whose class lives in polytile itself (not in a plugin or a test)."""
    return {name for name, cls, _ in IR_REGISTRY.ops.items() if cls.__module__.startswith("polytile.")}


def test_core_dialects_declare_every_core_op():
    declared = {op.name for dialect in CORE_DIALECTS for op in dialect.ops}
    assert declared == core_op_names()


def ops_without_a_round_trip_case() -> list[str]:
    covered: set[str] = set()
    for text in ALL_ROUNDTRIP_TEXTS.values():
        covered.update(op.name for op in parse_module(text).walk())
    return sorted(core_op_names() - covered)


def test_every_registered_core_op_has_a_round_trip_case():
    missing = ops_without_a_round_trip_case()
    assert not missing, f"ops without a round-trip case in tests/dialects: {', '.join(missing)}"


def test_a_new_core_op_without_a_case_is_caught():
    namespace = {"name": "arith.brand_new", "__module__": "polytile.dialects.arith", "__qualname__": "BrandNewOp"}
    define_op(type("BrandNewOp", (Operation,), namespace))
    try:
        assert ops_without_a_round_trip_case() == ["arith.brand_new"]
    finally:
        IR_REGISTRY.ops._entries.pop("arith.brand_new")
    assert ops_without_a_round_trip_case() == []


def test_the_registry_holds_the_core_ops():
    names = core_op_names()
    assert len(names) >= 86
    assert {"builtin.module", "func.func", "arith.addi", "math.fma", "scf.while", "tile.dot"} <= names
