"""Random valid kernels.

:func:`generate` builds one :class:`~polytile.fuzz.program.Kernel` from a seed and an
index (the same pair always gives the same kernel).  Each statement kind is a method of
:class:`Generator` that returns a :class:`Statement` or None when the values at hand do
not allow it (a dot needs a tile family, a comparison needs exact values, ...).

Tolerances follow from bounds tracked per value: ``magnitude`` (|value| never exceeds
it) and ``error`` (how far the interpreter's and a GPU's value may be apart).  A value
whose error is 0 must agree bit for bit: loads, exact integer arithmetic, and float
operations both targets round the same way from identical operands (IEEE add, subtract,
conversions, min/max, multiplication by powers of two).  Operations a GPU computes
differently add to the error: a product (a later add may fuse with it into an fma),
division (``div.full.f32`` is within 2 ulp), the approximate and libdevice transcendental
functions, reductions, scans and dots (accumulation order), float atomics (order).
"""

from __future__ import annotations

import math
import random
from typing import Callable

from . import lowp
from .dtypes import F16, F32, FLOATS, I8, I32, I64, INTS, MAX_MAGNITUDE, U32, DType, promote
from .program import Array, Kernel, Statement, Value

#: Statement kinds and their weights.
KINDS: dict[str, int] = {
    "load": 6, "binary": 14, "unary": 8, "convert": 4, "where": 4, "reduce": 5, "scan": 4, "dot": 10,
    "if": 3, "for": 3, "while": 2, "noinline": 3, "atomic": 3, "lowp_round": 3, "lowp_load": 2, "broadcast": 3,
}

_INT_INPUT_RANGE = 9
_FLOAT_INPUT_RANGE = 2.0


def generate(seed: int, index: int, max_statements: int = 10) -> Kernel:
    """The ``index``-th kernel of ``seed``."""
    return Generator(random.Random(f"polytile-fuzz:{seed}:{index}"), seed, index, max_statements).build()


class Generator:
    def __init__(self, rng: random.Random, seed: int, index: int, max_statements: int):
        self.rng = rng
        self.with_dot = False
        self.max_statements = max_statements
        family = "2d" if rng.random() < 0.45 else "1d"
        if family == "1d":
            block = rng.choice((16, 32, 64, 128, 256))
            n = rng.choice((rng.randint(1, 3 * block), block * rng.randint(1, 2), rng.randint(1, block) | 1))
            sizes, blocks = {"n": n}, {"BLOCK": block}
        else:
            self.with_dot = rng.random() < 0.5
            bm = rng.choice((16, 32)) if self.with_dot else rng.choice((1, 2, 4, 8, 16, 32))
            bn = rng.choice((16, 32, 64)) if self.with_dot else rng.choice((2, 4, 8, 16, 32, 64))
            bk = rng.choice((16, 32))
            sizes = {"M": rng.randint(1, 3 * bm), "N": rng.randint(1, bn), "K": rng.randint(1, 2 * bk)}
            blocks = {"BM": bm, "BN": bn, "BK": bk}
        sizes["trips"] = rng.randint(0, 4)
        self.kernel = Kernel(seed, index, family, sizes, blocks, num_warps=rng.choice((1, 2, 4, 8)))
        self.values: list[Value] = []
        self.counter = 0

    # ----------------------------------------------------------------------------------
    # Helpers

    @property
    def family(self) -> str:
        return self.kernel.family

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def shapes(self) -> tuple[str, ...]:
        return ("S", "V") if self.family == "1d" else ("S", "R", "C", "T")

    def extent(self, shape: str, axis: int = 0) -> int:
        """How many elements a reduction or scan of ``shape`` along ``axis`` combines."""
        b = self.kernel.blocks
        if self.family == "1d":
            return b["BLOCK"]
        if shape == "R":
            return b["BM"]
        if shape == "C":
            return b["BN"]
        return b["BM"] if axis == 0 else b["BN"]

    def elements(self, shape: str) -> int:
        b = self.kernel.blocks
        if shape == "S":
            return 1
        if self.family == "1d":
            return b["BLOCK"]
        return {"R": b["BM"], "C": b["BN"], "T": b["BM"] * b["BN"]}[shape]

    def pick(self, predicate: Callable[[Value], bool] = lambda v: True) -> Value | None:
        choices = [v for v in self.values if predicate(v)]
        if not choices:
            return None
        # Prefer recent values: deeper expressions.
        weights = [1 + i for i in range(len(choices))]
        return self.rng.choices(choices, weights)[0]

    def join(self, a: str, b: str) -> str:
        if a == b or b == "S":
            return a
        if a == "S":
            return b
        return "T"  # 2d: R with C, or either with T

    def ref(self, value: Value, shape: str) -> str:
        """``value`` written where a value of ``shape`` is expected (broadcast)."""
        if self.family == "2d" and shape == "T":
            if value.shape == "R":
                return f"{value.name}[:, None]"
            if value.shape == "C":
                return f"{value.name}[None, :]"
        return value.name

    @staticmethod
    def cast(expression: str, source: DType, target: DType) -> str:
        return expression if source == target else f"{expression}.to(pl.{target.language})"

    def fits(self, dtype: DType, magnitude: float) -> bool:
        if dtype.is_float:
            return magnitude <= MAX_MAGNITUDE[dtype.tag]
        return True

    def define(self, lines: list[str], value: Value, uses: tuple[str, ...] = (), label: str = "", **more) -> Statement:
        self.values.append(value)
        return Statement(lines, value, uses, label=label, **more)

    def int_magnitude(self, dtype: DType, magnitude: float) -> float:
        """An integer's bound: past its type's range the value may have wrapped anywhere."""
        limit = 2.0 ** (dtype.bits - (0 if dtype.kind == "u" else 1))
        return magnitude if magnitude < limit else 2.0 ** dtype.bits

    def random_dtype(self, floats: bool | None = None) -> DType:
        if floats is None:
            floats = self.rng.random() < 0.6
        if floats:
            return self.rng.choices(FLOATS, (3, 6, 1))[0]
        return self.rng.choice(INTS)

    # ----------------------------------------------------------------------------------
    # Statements

    def build(self) -> Kernel:
        statements = [self.load(force=True)]
        attempts = 0
        while len(statements) < self.rng.randint(3, self.max_statements) and attempts < 60:
            attempts += 1
            kind = self.rng.choices(list(KINDS), list(KINDS.values()))[0]
            statement = getattr(self, _METHODS.get(kind, kind))()
            if statement is not None:
                statements.append(statement)
        statements.extend(self.stores())
        self.kernel.statements = statements
        return self.kernel

    def load(self, force: bool = False, dtype: DType | None = None, shape: str | None = None) -> Statement:
        dtype = dtype or self.random_dtype()
        shape = shape or (self.rng.choice(("V", "V", "S")) if self.family == "1d"
                          else self.rng.choice(("T", "T", "R", "C", "S")))
        name = self.fresh("x")
        array = Array(name, dtype.tag, "in", _input_shape(self.family, shape))
        pointer = f"{name}_ptr"
        address, mask = self.addressing(pointer, shape)
        other = "0.0" if dtype.is_float else "0"
        text = f"pl.load({address})" if mask is None else f"pl.load({address}, mask={mask}, other={other})"
        magnitude = _FLOAT_INPUT_RANGE if dtype.is_float else _INT_INPUT_RANGE
        return self.define([f"{name} = {text}"], Value(name, dtype, shape, magnitude, 0.0), label="load",
                           arrays=(array,))

    def addressing(self, pointer: str, shape: str) -> tuple[str, str | None]:
        """The address expression and the mask of a ``shape`` input or output (scalars:
        element ``pid`` for outputs, element 0 for inputs is the caller's choice)."""
        if self.family == "1d":
            return {"V": (f"{pointer} + offs", "mask"), "S": (f"{pointer} + pid", None)}[shape]
        return {
            "T": (f"{pointer} + rows[:, None] * N + cols[None, :]", "mask"),
            "R": (f"{pointer} + rows", "rmask"),
            "C": (f"{pointer} + pid * N + cols", "cmask"),
            "S": (f"{pointer} + pid", None),
        }[shape]

    def binary(self) -> Statement | None:
        a = self.pick()
        if a is None:
            return None
        b = self.pick(lambda v: v.dtype.is_float == a.dtype.is_float) or a
        dtype = promote(a.dtype, b.dtype)
        shape = self.join(a.shape, b.shape)
        x, y = self.cast(self.ref(a, shape), a.dtype, dtype), self.cast(self.ref(b, shape), b.dtype, dtype)
        name = self.fresh()
        eps = dtype.eps
        ma, mb, ea, eb = a.magnitude, b.magnitude, a.error, b.error
        if dtype.is_float:
            op = self.rng.choice(("+", "-", "*", "/", "min", "max", "*2"))
            if op in "+-":
                text, magnitude = f"{x} {op} {y}", ma + mb
                error = ea + eb + (eps * magnitude if ea or eb else 0.0)
            elif op == "*":
                text, magnitude = f"{x} * {y}", ma * mb
                error = ea * mb + eb * ma + 2 * eps * magnitude
            elif op == "*2":
                text, magnitude, error = f"{x} * 0.5 + {y} * 2.0", ma / 2 + 2 * mb, ea / 2 + 2 * eb + 4 * eps * (ma + mb)
            elif op == "/":
                # |divisor| >= 1: no division by zero or by a tiny number.
                text, magnitude = f"{x} / (pl.abs({y}) + 1.0)", ma
                if dtype == F16:  # f16 / f16 is f32, as in Triton
                    text = f"({text}).to(pl.float16)"
                error = ea + eb * ma + 8 * eps * ma
            else:
                function = "pl.minimum" if op == "min" else "pl.maximum"
                text, magnitude, error = f"{function}({x}, {y})", max(ma, mb), max(ea, eb)
            if not self.fits(dtype, magnitude):
                return None
        else:
            op = self.rng.choice(("+", "-", "*", "&", "|", "^", "<<", ">>", "//", "%", "min", "max"))
            bits = dtype.bits
            if op in ("<<", ">>"):
                text = f"{x} {op} ({y} & {bits - 1})"
                magnitude = 2.0 ** bits if op == "<<" else ma
            elif op in ("//", "%"):
                # A positive divisor: no division by zero, no INT_MIN // -1.
                text = f"{x} {op} (({y} & 7) + 1)"
                magnitude = ma
            elif op in ("min", "max"):
                function = "pl.minimum" if op == "min" else "pl.maximum"
                text, magnitude = f"{function}({x}, {y})", max(ma, mb)
            else:
                text = f"{x} {op} {y}"
                magnitude = {"+": ma + mb, "-": ma + mb, "*": ma * mb}.get(op, 2.0 ** bits)
                if dtype.kind == "u" and op == "-":
                    magnitude = 2.0 ** bits
            magnitude, error = self.int_magnitude(dtype, magnitude), 0.0
        return self.define([f"{name} = {text}"], Value(name, dtype, shape, magnitude, error), (a.name, b.name),
                           label="binary")

    def unary(self) -> Statement | None:
        a = self.pick()
        if a is None:
            return None
        name, x, dtype = self.fresh(), a.name, a.dtype
        ma, ea = a.magnitude, a.error
        if not dtype.is_float:
            op = self.rng.choice(("neg", "abs", "invert"))
            text = {"neg": f"-{x}", "abs": f"pl.abs({x})", "invert": f"~{x}"}[op]
            # Negating an unsigned value (or inverting it) wraps to a large one.
            wraps = dtype.kind == "u" and op != "abs"
            magnitude = self.int_magnitude(dtype, 2.0 ** dtype.bits if wraps else ma + 1)
            return self.define([f"{name} = {text}"], Value(name, dtype, a.shape, magnitude, 0.0), (a.name,),
                               label="unary")
        # Transcendental functions: the interpreter is correctly rounded, a GPU within a
        # few ulp (f16 computes in f32 and rounds once more).
        slack = 16 * max(dtype.eps, F32.eps) + dtype.eps
        options = ["neg", "abs", "floor", "ceil", "sqrt", "log", "sigmoid"]
        if ma <= 7:
            options.append("exp")
        if ma <= 50:
            options += ["sin", "cos"]
        op = self.rng.choice(options)
        if op == "neg":
            text, magnitude, error = f"-{x}", ma, ea
        elif op == "abs":
            text, magnitude, error = f"pl.abs({x})", ma, ea
        elif op in ("floor", "ceil"):
            text, magnitude, error = f"pl.{op}({x})", ma + 1, (ea + 1 if ea else 0.0)
        elif op == "sqrt":
            magnitude = math.sqrt(ma + 1)
            text, error = f"pl.sqrt(pl.abs({x}) + 1.0)", ea / 2 + slack * magnitude + dtype.eps * (ma + 1)
        elif op == "log":
            magnitude = math.log(ma + 1) + 1e-3
            text, error = f"pl.log(pl.abs({x}) + 1.0)", ea + slack * (magnitude + 1) + dtype.eps * (ma + 1)
        elif op == "sigmoid":
            text, magnitude, error = f"pl.sigmoid({x})", 1.0, ea / 4 + slack * (ma + 1)
        elif op == "exp":
            magnitude = math.exp(ma)
            text, error = f"pl.exp({x})", magnitude * (ea + slack * (ma + 1)) + 2 * ea * magnitude
        else:
            text, magnitude, error = f"pl.{op}({x})", 1.0, ea + slack * (ma + 1)
        if not self.fits(dtype, magnitude):
            return None
        if dtype == F16 and op not in ("neg", "abs"):
            text = f"({text}).to(pl.float16)"  # sigmoid of f16 is f32 (its division is), as in Triton
        return self.define([f"{name} = {text}"], Value(name, dtype, a.shape, magnitude, error), (a.name,),
                           label="unary")

    def convert(self) -> Statement | None:
        a = self.pick()
        if a is None:
            return None
        target = self.random_dtype()
        if target == a.dtype:
            return None
        name = self.fresh()
        magnitude, error = a.magnitude, a.error
        if a.dtype.is_float and not target.is_float:
            # Float to int truncates; only exact, in-range values (out of range is undefined).
            if a.error or a.magnitude >= 2.0 ** (target.bits - 1) - 1:
                return None
            if target.kind == "u":
                text = f"pl.abs({a.name}).to(pl.{target.language})"
            else:
                text = f"{a.name}.to(pl.{target.language})"
        elif target.is_float:
            if not self.fits(target, magnitude):
                return None
            text = f"{a.name}.to(pl.{target.language})"
            if error or (a.dtype.is_float and target.bits < a.dtype.bits):
                error = error + (target.eps * magnitude if error else 0.0)
        else:
            text = f"{a.name}.to(pl.{target.language})"
            # A negative signed value wraps to a large unsigned one.
            wraps = target.kind == "u" and a.dtype.kind == "i"
            magnitude = self.int_magnitude(target, 2.0 ** target.bits if wraps else magnitude)
        return self.define([f"{name} = {text}"], Value(name, target, a.shape, magnitude, error), (a.name,),
                           label="convert")

    def where(self) -> Statement | None:
        # The condition compares exact values: an inexact one could flip.
        c = self.pick(lambda v: v.error == 0)
        a = self.pick()
        if c is None or a is None:
            return None
        b = self.pick(lambda v: v.dtype == a.dtype) or a
        shape = self.join(self.join(c.shape, a.shape), b.shape)
        zero = "0.0" if c.dtype.is_float else "0"
        name = self.fresh()
        text = f"pl.where({self.ref(c, shape)} > {zero}, {self.ref(a, shape)}, {self.ref(b, shape)})"
        value = Value(name, a.dtype, shape, max(a.magnitude, b.magnitude), max(a.error, b.error))
        return self.define([f"{name} = {text}"], value, (c.name, a.name, b.name), label="where")

    def broadcast(self) -> Statement | None:
        """An explicit broadcast or expand_dims/reshape round trip (2d), or a scalar
        broadcast to a vector with pl.full (1d)."""
        a = self.pick(lambda v: v.shape != "T")
        if a is None:
            return None
        name = self.fresh()
        if self.family == "1d" or a.shape == "S":
            block = "BLOCK" if self.family == "1d" else "BN"
            shape = "V" if self.family == "1d" else "C"
            if a.shape == "S":
                text = f"pl.full([{block}], 0, pl.{a.dtype.language}) + {a.name}"
            else:
                text = f"pl.reshape(pl.expand_dims({a.name}, 0), [{block}])"
        elif a.shape == "R":
            shape, text = "T", f"pl.broadcast_to(pl.expand_dims({a.name}, 1), [BM, BN])"
        else:
            shape, text = "T", f"pl.broadcast_to({a.name}[None, :], [BM, BN])"
        return self.define([f"{name} = {text}"], Value(name, a.dtype, shape, a.magnitude, a.error), (a.name,),
                           label="broadcast")

    def reduce(self) -> Statement | None:
        a = self.pick(lambda v: v.shape != "S")
        if a is None:
            return None
        if a.shape == "T":
            axis = self.rng.choice((0, 1))
            shape = "C" if axis == 0 else "R"
        else:
            axis, shape = 0, "S"
        count = self.extent(a.shape, axis)
        dtype, name = a.dtype, self.fresh()
        options = ["sum", "max", "min"]
        if not dtype.is_float:
            options.append("xor_sum")
        if a.error == 0:
            options += ["argmax", "argmin"]
        op = self.rng.choice(options)
        text = f"pl.{op}({a.name}, axis={axis})"
        if a.shape == "T" and op in ("sum", "max", "min") and self.rng.random() < 0.25:
            # keep_dims, broadcast back to the tile.
            text, shape = f"pl.broadcast_to(pl.{op}({a.name}, axis={axis}, keep_dims=True), [BM, BN])", "T"
        magnitude, error = a.magnitude, a.error
        if op == "sum":
            magnitude = count * a.magnitude
            if dtype.is_float:
                # Accumulated in f32 at least, in any order, rounded once to the type.
                accumulate = min(dtype.eps, F32.eps)
                error = count * a.error + 2 * count * accumulate * magnitude + dtype.eps * magnitude
                if not self.fits(dtype, magnitude):
                    return None
            else:
                # Narrow integers sum in int32: say which type we want.
                text = f"{text}.to(pl.{dtype.language})"
                magnitude = self.int_magnitude(dtype, magnitude)
        elif op == "xor_sum":
            magnitude = 2.0 ** dtype.bits
        elif op in ("argmax", "argmin"):
            dtype, magnitude, error = I32, float(count), 0.0
        return self.define([f"{name} = {text}"], Value(name, dtype, shape, magnitude, error), (a.name,),
                           label=f"reduce-{op}")

    def scan(self) -> Statement | None:
        a = self.pick(lambda v: v.shape != "S")
        if a is None:
            return None
        axis = self.rng.choice((0, 1)) if a.shape == "T" else 0
        count = self.extent(a.shape, axis)
        reverse = self.rng.random() < 0.3
        flag = ", reverse=True" if reverse else ""
        dtype, name = a.dtype, self.fresh()
        ops = ["cumsum", "max_scan"] + ([] if dtype.is_float else ["cumprod"])
        op = self.rng.choice(ops)
        magnitude, error = a.magnitude, a.error
        helpers: tuple[str, ...] = ()
        if op == "cumsum":
            text = f"pl.cumsum({a.name}, axis={axis}{flag})"
            magnitude = count * a.magnitude
            if dtype.is_float:
                error = count * a.error + 2 * count * min(dtype.eps, F32.eps) * magnitude + dtype.eps * magnitude
                if not self.fits(dtype, magnitude):
                    return None
            else:
                text = f"{text}.to(pl.{dtype.language})"
                magnitude = self.int_magnitude(dtype, magnitude)
        elif op == "cumprod":
            text = f"pl.cumprod({a.name}, axis={axis}{flag}).to(pl.{dtype.language})"
            magnitude = 2.0 ** dtype.bits
        else:
            text = f"pl.associative_scan({a.name}, {axis}, combine_maximum{flag})"
            helpers = (_COMBINE_MAXIMUM,)
        return self.define([f"{name} = {text}"], Value(name, dtype, a.shape, magnitude, error), (a.name,),
                           label=f"scan-{op}", helpers=helpers)

    def dot(self) -> Statement | None:
        if self.family != "2d" or not self.with_dot:
            return None
        k = self.fresh("d")
        choice = self.rng.choice(("f16", "f16-acc16", "f32-ieee", "f32-tf32", "i8"))
        operand = {"f16": F16, "f16-acc16": F16, "f32-ieee": F32, "f32-tf32": F32, "i8": I8}[choice]
        accumulator = I32 if operand is I8 else F16 if choice == "f16-acc16" else F32
        precision = {"f32-ieee": ', input_precision="ieee"', "f32-tf32": ', input_precision="tf32"'}.get(choice, "")
        bk = self.kernel.blocks["BK"]
        # K is bounded by 2 * BK (the generator's sizes): the bound uses it.
        count = 2 * bk
        m = _FLOAT_INPUT_RANGE if operand.is_float else _INT_INPUT_RANGE
        # Operands computed from the loads (scaled by 2: exact), not only loaded: their
        # layout conversion into the dot's operand layout starts from another op.
        scaled = self.rng.random() < 0.3
        a_scale = 2 if scaled else 1
        magnitude = count * m * m * a_scale
        if accumulator.is_float:
            rounding = 2.0 ** -10 if choice == "f32-tf32" else 0.0
            error = magnitude * (2 * rounding + 2 * count * accumulator.eps) + accumulator.eps * magnitude
        else:
            error = 0.0
        a_array, b_array = Array(f"{k}a", operand.tag, "in", "A"), Array(f"{k}b", operand.tag, "in", "B")
        load_a = (f"pl.load({k}a_ptr + rows[:, None] * K + {k}_ks[None, :], "
                  f"mask=rmask[:, None] & ({k}_ks[None, :] < K), other=0)")
        load_b = (f"pl.load({k}b_ptr + {k}_ks[:, None] * N + cols[None, :], "
                  f"mask=({k}_ks[:, None] < K) & cmask[None, :], other=0)")
        scale = " * 2" if scaled else ""
        if self.rng.random() < 0.25:
            # One dot, no loop and no accumulator: K beyond BK is left out (on every target).
            lines = [f"{k}_ks = pl.arange(0, BK)", f"{k}_a = {load_a}{scale}", f"{k}_b = {load_b}"]
            if accumulator is F16:
                lines.append(f"{k} = pl.dot({k}_a, {k}_b, out_dtype=pl.float16)")
            else:
                lines.append(f"{k} = pl.dot({k}_a, {k}_b{precision})")
        else:
            lines = [
                f"{k} = pl.zeros((BM, BN), dtype=pl.{accumulator.language})",
                f"for {k}_kb in range(0, pl.cdiv(K, BK)):",
                f"    {k}_ks = {k}_kb * BK + pl.arange(0, BK)",
                f"    {k}_a = {load_a}{scale}",
                f"    {k}_b = {load_b}",
                f"    {k} = pl.dot({k}_a, {k}_b, {k}{precision})",
            ]
        return self.define(lines, Value(k, accumulator, "T", magnitude, error), (), label=f"dot-{choice}",
                           arrays=(a_array, b_array))

    def condition(self) -> tuple[str, tuple[str, ...]]:
        scalar = self.pick(lambda v: v.shape == "S" and v.error == 0)
        options = ["pid % 2 == 0", "trips > 1"]
        options.append("n > 40" if self.family == "1d" else "M > N")
        if scalar is not None:
            zero = "0.0" if scalar.dtype.is_float else "0"
            options.append(f"{scalar.name} > {zero}")
        text = self.rng.choice(options)
        return text, ((scalar.name,) if scalar is not None and scalar.name in text else ())

    def if_(self) -> Statement | None:
        a = self.pick()
        if a is None:
            return None
        condition, uses = self.condition()
        name = self.fresh()
        if a.dtype.is_float:
            then, otherwise = f"{a.name} + 1.5", f"{a.name} * 0.5"
            magnitude = a.magnitude + 1.5
            error = a.error + (a.dtype.eps * magnitude if a.error else 0.0)
            if not self.fits(a.dtype, magnitude):
                return None
        else:
            then, otherwise = f"{a.name} + 3", f"{a.name} ^ 5"
            magnitude, error = self.int_magnitude(a.dtype, a.magnitude + 8), 0.0
        lines = [f"if {condition}:", f"    {name} = {then}", "else:", f"    {name} = {otherwise}"]
        return self.define(lines, Value(name, a.dtype, a.shape, magnitude, error), (a.name, *uses), label="if")

    def loop(self, kind: str) -> Statement | None:
        a = self.pick()
        if a is None:
            return None
        b = self.pick(lambda v: self.join(a.shape, v.shape) == a.shape and v.dtype.is_float == a.dtype.is_float) or a
        name, trips = self.fresh(), self.kernel.sizes["trips"]
        step = self.cast(self.ref(b, a.shape), b.dtype, a.dtype)
        static = kind == "for" and self.rng.random() < 0.25
        count = 3 if static else trips
        index = f"{name}_i"
        use_index = not static and self.rng.random() < 0.5
        increment = f"{step} + {index}.to(pl.{a.dtype.language})" if use_index else step
        magnitude = a.magnitude + count * (b.magnitude + (count if use_index else 0))
        if a.dtype.is_float:
            error = a.error + count * b.error + (2 * count * a.dtype.eps * magnitude if a.error or b.error else 0.0)
            if not self.fits(a.dtype, magnitude):
                return None
        else:
            magnitude, error = self.int_magnitude(a.dtype, magnitude), 0.0
        if kind == "for":
            header = f"for {index} in pl.static_range(3):" if static else f"for {index} in range(0, trips):"
            lines = [f"{name} = {a.name}", header, f"    {name} = {name} + {increment}"]
        else:
            lines = [f"{name} = {a.name}", f"{index} = trips * 0", f"while {index} < trips:",
                     f"    {name} = {name} + {increment}", f"    {index} += 1"]
        return self.define(lines, Value(name, a.dtype, a.shape, magnitude, error), (a.name, b.name), label=kind)

    def for_(self) -> Statement | None:
        return self.loop("for")

    def while_(self) -> Statement | None:
        return self.loop("while")

    def noinline(self) -> Statement | None:
        """A @jit(noinline=True) call: a scalar function of a pointer, an index and a
        scalar (loading through the pointer), or a callee that atomically adds."""
        name = self.fresh("f")
        dtype = self.random_dtype()
        length = "n" if self.family == "1d" else "N"
        array = Array(f"{name}x", dtype.tag, "in", "V" if self.family == "1d" else "N")
        scalar = self.pick(lambda v: v.shape == "S" and v.dtype == dtype)
        if self.rng.random() < 0.3 and (dtype in (F32, I32, U32, I64)):
            target = Array(f"{name}o", dtype.tag, "out", "atomic", fill="zeros", order_independent=True,
                           error=(4 * self.kernel.programs ** 2 * dtype.eps * _FLOAT_INPUT_RANGE if dtype.is_float
                                  else 0.0))
            helper = (f"@pt.jit(noinline=True)\ndef add_{name}(target, source, i):\n"
                      f"    pl.atomic_add(target + i % 4, pl.load(source + i))")
            lines = [f"add_{name}({name}o_ptr, {name}x_ptr, pid % {length})"]
            return Statement(lines, None, (), (array, target), helpers=(helper,), label="noinline-atomic")
        two = "2.0" if dtype.is_float else "2"
        helper = (f"@pt.jit(noinline=True)\ndef call_{name}(source, i, s):\n"
                  f"    return pl.load(source + i) * {two} + s")
        argument = scalar.name if scalar is not None else f"pid.to(pl.{dtype.language})"
        bound = scalar.magnitude if scalar is not None else float(self.kernel.programs)
        magnitude = 2 * _value_range(dtype) + bound
        error = 2 * (scalar.error if scalar is not None else 0.0)
        if dtype.is_float and not self.fits(dtype, magnitude):
            return None
        if not dtype.is_float:
            magnitude = self.int_magnitude(dtype, magnitude)
        uses = (scalar.name,) if scalar is not None else ()
        return self.define([f"{name} = call_{name}({name}x_ptr, pid % {length}, {argument})"],
                           Value(name, dtype, "S", magnitude, error), uses, label="noinline",
                           arrays=(array,), helpers=(helper,))

    def atomic(self) -> Statement | None:
        a = self.pick(lambda v: v.dtype in (F32, I32, U32, I64) and v.shape in ("V", "T", "S"))
        if a is None:
            return None
        ops = ["add", "max", "min"] + ([] if a.dtype.is_float else ["and", "or", "xor"])
        op = self.rng.choice(ops)
        name = self.fresh("a")
        if a.shape == "S":
            index, mask = "pid % 4", None
            count = self.kernel.programs
        elif self.family == "1d":
            index, mask = "offs % 4", "mask"
            count = self.kernel.sizes["n"]
        else:
            index, mask = "(rows[:, None] + cols[None, :]) % 4", "mask"
            count = self.kernel.sizes["M"] * self.kernel.sizes["N"]
        error = 0.0
        if a.dtype.is_float and op == "add":
            error = count * a.error + 2 * count * F32.eps * count * a.magnitude
            if count * a.magnitude > MAX_MAGNITUDE["f32"]:
                return None
        elif a.dtype.is_float:
            error = a.error
        target = Array(name, a.dtype.tag, "out", "atomic", error=error, fill="zeros", order_independent=True)
        masked = "" if mask is None else f", mask={mask}"
        return Statement([f"pl.atomic_{op}({name}_ptr + {index}, {a.name}{masked})"], None, (a.name,), (target,),
                         label=f"atomic-{op}")

    def lowp_round(self) -> Statement | None:
        a = self.pick(lambda v: v.dtype == F32)
        if a is None:
            return None
        fmt = self.rng.choice(lowp.FORMATS)
        if a.magnitude > min(fmt.max_value / 2, MAX_MAGNITUDE["f32"]):
            return None
        emulated, native = lowp.round_expression(fmt, a.name)
        name = self.fresh()
        error = a.error + lowp.quantum(fmt, a.magnitude + a.error) if a.error else 0.0
        lines = ["if EMULATE:", f"    {name} = {emulated}", "else:", f"    {name} = {native}"]
        return self.define(lines, Value(name, F32, a.shape, a.magnitude + error, error), (a.name,),
                           label=f"lowp-{fmt.tag}", needs_lowp=True)

    def lowp_load(self) -> Statement | None:
        fmt = self.rng.choice(lowp.FORMATS)
        shape = self.rng.choice(("V", "S")) if self.family == "1d" else self.rng.choice(("T", "R", "C"))
        name = self.fresh("x")
        array = Array(name, fmt.tag, "in", _input_shape(self.family, shape))
        address, mask = self.addressing(f"{name}_ptr", shape)
        loaded = f"pl.load({address})" if mask is None else f"pl.load({address}, mask={mask}, other=0)"
        emulated, native = lowp.decode_expression(fmt, loaded)
        lines = ["if EMULATE:", f"    {name} = {emulated}", "else:", f"    {name} = {native}"]
        return self.define(lines, Value(name, F32, shape, 4.0, 0.0), (), label=f"lowp-load-{fmt.tag}",
                           arrays=(array,), needs_lowp=True)

    def stores(self) -> list[Statement]:
        candidates = list(self.values)
        chosen = candidates[-1:] + self.rng.sample(candidates[:-1], min(len(candidates) - 1, self.rng.randint(0, 2)))
        statements = []
        for value in chosen:
            name = self.fresh("out")
            address, mask = self.addressing(f"{name}_ptr", value.shape)
            masked = "" if mask is None else f", mask={mask}"
            stored, dtype_tag, error = value.name, value.dtype.tag, value.error
            lines = [f"pl.store({address}, {stored}{masked})"]
            fmt = self.rng.choice(lowp.STORABLE)
            if value.dtype == F32 and value.magnitude < fmt.max_value / 2 and self.rng.random() < 0.2:
                emulated, native = lowp.encode_expression(fmt, value.name)
                dtype_tag = fmt.tag
                error = error + lowp.quantum(fmt, value.magnitude) if error else 0.0
                lines = ["if EMULATE:", f"    pl.store({address}, {emulated}{masked})", "else:",
                         f"    pl.store({address}, {native}{masked})"]
            array = Array(name, dtype_tag, "out", _input_shape(self.family, value.shape), error=error, fill="zeros")
            statements.append(Statement(lines, None, (value.name,), (array,), label="store",
                                        needs_lowp=dtype_tag in lowp.BY_TAG))
        return statements


#: Statement kinds whose names are Python keywords.
_METHODS = {"if": "if_", "for": "for_", "while": "while_"}

_COMBINE_MAXIMUM = "@pt.jit\ndef combine_maximum(a, b):\n    return pl.maximum(a, b)"


def _value_range(dtype: DType) -> float:
    return _FLOAT_INPUT_RANGE if dtype.is_float else float(_INT_INPUT_RANGE)


def _input_shape(family: str, shape: str) -> str:
    """The array shape (program.array_shape) of an input or output of a value's shape."""
    if family == "1d":
        return {"V": "V", "S": "S"}[shape]
    return {"T": "T", "R": "R", "C": "C", "S": "S"}[shape]
