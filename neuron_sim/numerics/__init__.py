"""Deterministic transcendental functions on float64 arrays (placeholder docstring)."""
from .exp_log import exp, expm1, log, log1p, power
from .trig import sin, cos, tan
from .inverse import atan, atan2, asin, acos
from .hyperbolic import sinh, cosh, tanh, asinh, acosh, atanh, logistic
from .special import cbrt, erf
