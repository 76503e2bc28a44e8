"""workbench: schedule tensor programs with MetaSchedule's probabilistic scheduling language.

The public API (``DESIGN.md``) is re-exported here; see the README for a tour.
"""
from .errors import BuildError, InternalError, ScheduleError, WorkbenchError
from .ir import Buffer, PrimFunc
from .ir.dsl import (Tensor, cast, compute, create_func, erf, exp, fabs, if_then_else, log,
                     max, maximum, min, minimum, placeholder, pow, reduce_axis, rsqrt, sigmoid,
                     sqrt, sum, tanh, all_of, any_of)

__version__ = "0.1.0"
