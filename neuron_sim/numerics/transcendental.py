"""The public functions of ``neuron_sim.numerics`` in one namespace.

Implementations live in ``exp_log`` (exp, expm1, log, log1p, power), ``trig`` (sin, cos, tan),
``inverse`` (asin, acos, atan, atan2), ``hyperbolic`` (sinh, cosh, tanh, asinh, acosh, atanh,
logistic) and ``special`` (cbrt, erf). Each takes float64 arrays (or anything numpy turns into
one; the two-argument ones broadcast) and returns a new float64 array of the same shape.
"""

from __future__ import annotations

from .exp_log import exp, expm1, log, log1p, power
from .hyperbolic import acosh, asinh, atanh, cosh, logistic, sinh, tanh
from .inverse import acos, asin, atan, atan2
from .special import cbrt, erf
from .trig import cos, sin, tan

__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cos", "cosh", "erf",
    "exp", "expm1", "log", "log1p", "logistic", "power", "sin", "sinh", "tan", "tanh",
]
