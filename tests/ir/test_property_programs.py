"""Property: random straight-line programs of arith/math ops, built with the builder,
verify and round-trip print -> parse -> print identically (with and without locations)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polytile.dialects.arith import (
    BINARY_OPS,
    CASTS,
    FLOAT_BINARY_OPS,
    FLOAT_PREDICATES,
    INTEGER_BINARY_OPS,
    INTEGER_PREDICATES,
    CmpFOp,
    CmpIOp,
    ConstantOp,
    NegFOp,
    SelectOp,
)
from polytile.dialects.builtin import ModuleOp
from polytile.dialects.func import FuncOp, ReturnOp
from polytile.dialects.math import UNARY_FLOAT_OPS, UNARY_OPS, FmaOp
from polytile.errors import SourceLocation
from polytile.ir import Builder, parse_module, print_ir, verify
from polytile.ir import types as t

INT_SCALARS = [t.i8, t.i16, t.i32, t.i64, t.u8, t.u16, t.u32, t.u64]
FLOAT_SCALARS = [t.f16, t.bf16, t.f32, t.f64, t.f8e4m3, t.f8e5m2]
SHAPES = [(), (4,), (2, 8)]
BITCAST_PAIRS = {(16, "i"): [t.f16, t.bf16], (32, "i"): [t.f32], (64, "i"): [t.f64],
                 (16, "f"): [t.i16, t.u16], (32, "f"): [t.i32, t.u32], (64, "f"): [t.i64, t.u64]}


def shaped(element, shape):
    return t.TileType(shape, element) if shape else element


arg_types = st.builds(shaped, st.sampled_from(INT_SCALARS + FLOAT_SCALARS + [t.i1]), st.sampled_from(SHAPES))
hints = st.sampled_from([None, None, None, "x", "y", "x_1", "acc", "v0"])
locations = st.one_of(st.none(), st.builds(SourceLocation, st.sampled_from(["k.py", "dir/my kernel.py"]),
                                           st.integers(1, 500), st.integers(0, 80)))


def constant_value(draw, element):
    if element == t.i1:
        return draw(st.booleans())
    if isinstance(element, t.IntType):
        lo = -(1 << (element.width - 1)) if element.signed else 0
        return draw(st.integers(lo, (1 << element.width) - 1))
    return draw(st.one_of(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
                          st.sampled_from([0.0, -0.0, 1.0, float("inf"), float("-inf"), float("nan")])))


def build_program(draw):
    func = FuncOp.create("prog", draw(st.lists(arg_types, min_size=1, max_size=4)))
    b = Builder.at_end(func.entry_block)
    values = list(func.arguments)
    for value in values:
        value.name_hint = draw(hints)

    def pick(predicate):
        candidates = [v for v in values if predicate(v.type)]
        return draw(st.sampled_from(candidates)) if candidates else None

    def partner(v):
        return draw(st.sampled_from([w for w in values if w.type == v.type]))

    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["const", "ibin", "fbin", "unary", "cmp", "select", "cast", "fma"]))
        loc = draw(locations)
        op = None
        if kind == "const":
            shape = draw(st.sampled_from(SHAPES))
            element = draw(st.sampled_from(INT_SCALARS + FLOAT_SCALARS + [t.i1]))
            op = b.create(ConstantOp, value=constant_value(draw, element), result_types=[shaped(element, shape)],
                          location=loc)
        elif kind == "ibin" and (v := pick(lambda ty: t.is_integer(ty))) is not None:
            name = draw(st.sampled_from([n for n, *_ in INTEGER_BINARY_OPS]))
            op = b.create(BINARY_OPS[name], v, partner(v), location=loc)
        elif kind == "fbin" and (v := pick(t.is_float)) is not None:
            name = draw(st.sampled_from([n for n, *_ in FLOAT_BINARY_OPS]))
            op = b.create(BINARY_OPS[name], v, partner(v), location=loc)
        elif kind == "unary" and (v := pick(lambda ty: t.is_integer(ty) or t.is_float(ty))) is not None:
            if t.is_float(v.type):
                cls = draw(st.sampled_from([NegFOp] + [UNARY_OPS[n] for n, *_ in UNARY_FLOAT_OPS]))
            else:
                cls = UNARY_OPS["absi"]
            op = b.create(cls, v, location=loc)
        elif kind == "cmp" and (v := pick(lambda ty: t.is_integer(ty) or t.is_float(ty))) is not None:
            if t.is_float(v.type):
                op = b.create(CmpFOp, v, partner(v), predicate=draw(st.sampled_from(sorted(FLOAT_PREDICATES))),
                              location=loc)
            else:
                op = b.create(CmpIOp, v, partner(v), predicate=draw(st.sampled_from(sorted(INTEGER_PREDICATES))),
                              location=loc)
        elif kind == "select" and (v := pick(lambda ty: True)) is not None:
            shape = t.shape_of(v.type)
            cond = pick(lambda ty: ty == t.i1 or ty == shaped(t.i1, shape))
            if cond is not None:
                op = b.create(SelectOp, cond, v, partner(v), location=loc)
        elif kind == "cast" and (v := pick(lambda ty: t.element_type(ty) != t.i1)) is not None:
            src = t.element_type(v.type)
            shape = t.shape_of(v.type)
            options = []
            if isinstance(src, t.IntType):
                options += [("extsi", d) for d in INT_SCALARS if d.width > src.width]
                options += [("extui", d) for d in INT_SCALARS if d.width > src.width]
                options += [("trunci", d) for d in INT_SCALARS if d.width < src.width]
                options += [("sitofp", d) for d in FLOAT_SCALARS] + [("uitofp", d) for d in FLOAT_SCALARS]
                options += [("bitcast", d) for d in BITCAST_PAIRS.get((src.width, "i"), [])]
            else:
                options += [("extf", d) for d in FLOAT_SCALARS if d.width > src.width]
                options += [("truncf", d) for d in FLOAT_SCALARS if d.width < src.width]
                options += [("fptosi", d) for d in INT_SCALARS] + [("fptoui", d) for d in INT_SCALARS]
                options += [("bitcast", d) for d in BITCAST_PAIRS.get((src.width, "f"), [])]
            name, dst = draw(st.sampled_from(options))
            op = b.create(CASTS[name], v, result_types=[shaped(dst, shape)], location=loc)
        elif kind == "fma" and (v := pick(t.is_float)) is not None:
            op = b.create(FmaOp, v, partner(v), partner(v), location=loc)
        if op is not None:
            op.result.name_hint = draw(hints)
            values.append(op.result)
    returned = draw(st.lists(st.sampled_from(values), max_size=3))
    b.create(ReturnOp, returned, location=draw(locations))
    func.function_type = t.FunctionType(func.function_type.inputs, tuple(v.type for v in returned))
    func.location = draw(locations)
    module = ModuleOp.build()
    module.body.block.append(func)
    return module


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_straight_line_programs_round_trip(data):
    module = build_program(data.draw)
    verify(module)
    for with_locations in (False, True):
        text = print_ir(module, print_locations=with_locations)
        parsed = parse_module(text)
        verify(parsed)
        assert print_ir(parsed, print_locations=with_locations) == text
        assert [op.name for op in parsed.walk()] == [op.name for op in module.walk()]
        if with_locations:
            assert [op.location for op in parsed.walk()][1:] == [op.location for op in module.walk()][1:]
