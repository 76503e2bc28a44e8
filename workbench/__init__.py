"""workbench: schedule tensor programs with MetaSchedule's probabilistic scheduling language.

The public API (``DESIGN.md``) is re-exported here; see the README for a tour.
"""

from importlib import metadata as _metadata

from .errors import (
    BufferIndexError,
    BuildError,
    DatabaseError,
    InternalError,
    IRVerifyError,
    OutOfBoundsError,
    ScheduleError,
    TraceFormatError,
    TVMScriptError,
    UnknownInstructionKind,
    WorkbenchError,
)
from .ir import Buffer, IRModule, PrimFunc
from .codegen import Kernel, aligned, build, empty, lower, zeros
from .target import Target
from .ir.structural import assert_structural_equal, structural_equal, structural_hash
from .ir.verify import verify
from .ir.parser import from_tvmscript, parse
from .ir.dsl import (
    Tensor,
    cast,
    compute,
    create_func,
    erf,
    exp,
    fabs,
    if_then_else,
    log,
    max,
    maximum,
    min,
    minimum,
    placeholder,
    pow,
    reduce_axis,
    rsqrt,
    sigmoid,
    sqrt,
    sum,
    tanh,
    var,
    all_of,
    any_of,
)

from .ir.index_map import IndexMap
from .schedule.tensor_intrin import TensorIntrin
from .schedule import (
    BlockRV,
    ExprRV,
    Instruction,
    InstructionKind,
    LoopRV,
    Schedule,
    Trace,
    schedule_primitive,
)
from . import space, workloads
from . import tune  # a callable module: wb.tune(...) tunes, wb.tune.XGBModel etc. are its parts
from .tune import Database
from .space import generate_design_space
from . import graph
from .graph import Graph, Model, UnsupportedOperator, build_model, from_torch, tune_model

try:  # the installed distribution's version (pyproject.toml), one source
    __version__ = _metadata.version("workbench")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
