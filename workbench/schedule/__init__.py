"""The probabilistic scheduling language: ``Schedule``, random variables, instructions, traces.

Importing this package registers every primitive as a ``Schedule`` method.
"""

from .instruction import REGISTRY, Instruction, InstructionKind, get_kind, schedule_primitive, unregister
from .rv import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .trace import Trace, TraceFormatError, UnknownInstructionKind
from . import primitives  # noqa: F401  (registers the primitives)

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
