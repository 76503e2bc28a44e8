"""The probabilistic scheduling language: ``Schedule``, random variables, instructions, traces.

Importing this package registers every built-in primitive (``schedule.py`` imports their
modules) and every built-in tensor intrinsic (:mod:`.intrinsics`, imported here: the package
owns both the ``TensorIntrin`` registry and the intrinsics, so a lookup needs no lazy import).
"""

from .instruction import REGISTRY, Instruction, InstructionKind, get_kind, schedule_primitive, unregister
from .rv import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .trace import Trace, TraceFormatError, UnknownInstructionKind
from . import intrinsics  # noqa: F401  (registers the built-in tensor intrinsics)

__all__ = [
    "Schedule",
    "Trace",
    "BlockRV",
    "LoopRV",
    "ExprRV",
    "Instruction",
    "InstructionKind",
    "schedule_primitive",
    "unregister",
    "REGISTRY",
    "get_kind",
    "TraceFormatError",
    "UnknownInstructionKind",
]
