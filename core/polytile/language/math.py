"""``pl.math``: Triton's ``tl.math`` namespace, the language's math builtins under it
(``pl.math.exp(x)`` is ``pl.exp(x)``)."""

from __future__ import annotations

from .standard import (abs, cdiv, ceil, clamp, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, maximum,
                       minimum, rsqrt, sigmoid, sin, softmax, sqrt, sqrt_rn, umulhi)

__all__ = ["abs", "cdiv", "ceil", "clamp", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2",
           "maximum", "minimum", "rsqrt", "sigmoid", "sin", "softmax", "sqrt", "sqrt_rn", "umulhi"]
