"""``Postproc``: the paper's trace validator — finish a sampled candidate or reject it.

Some properties of a candidate are only known once its decisions are: how many loops can be
fused into one parallel loop, whether the threads of a GPU block fit the hardware. A
postprocessor runs on the candidate's schedule after the design-space trace was replayed. It
either completes the schedule (its primitives are recorded after an ``enter_postproc``
instruction, so the trace still reproduces the measured program) or rejects it — by returning
False or raising :class:`Rejected` with a reason.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Optional

from ...errors import ScheduleError
from ...schedule import Schedule, Trace
from ...schedule.primitives.postproc import enter_postproc  # noqa: F401  (its home before; re-exported)
from ..plugin import Pluggable, target_kind


class Rejected(Exception):
    """A postprocessor refuses a candidate; ``reason`` says why (for the tuning log)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Postproc(Pluggable):
    """Base class of postprocessors (TVM MetaSchedule's ``Postproc``)."""

    _registry: ClassVar[dict[str, type]] = {}

    def apply(self, sch: Schedule) -> bool:
        """Fix ``sch`` in place; return False (or raise :class:`Rejected`) to reject it."""
        raise NotImplementedError(f"{type(self).__name__} must define apply(sch)")

    @staticmethod
    def create(kind: Any = "llvm") -> list["Postproc"]:
        """The default postprocessors for a target kind (``"llvm"`` or ``"cuda"``)."""
        from . import default_postprocs  # a cycle: the package's __init__ imports this module

        return default_postprocs(target_kind(kind))


def run_postprocs(sch: Schedule, postprocs: Iterable[Postproc]) -> Optional[str]:
    """Apply ``postprocs`` in order; the reason of the first rejection, or None when all
    accepted (``sch`` is then the finished candidate).

    A primitive that fails inside a postprocessor (a ``ScheduleError``) rejects the candidate
    too: the sampled decisions made the rewrite impossible.
    """
    sch.enter_postproc()
    for post in postprocs:
        name = type(post).__name__
        try:
            ok = post.apply(sch)
        except Rejected as exc:
            return f"{name}: {exc.reason}"
        except ScheduleError as exc:
            return f"{name}: {exc}"
        if ok is False:
            return f"{name} rejected the candidate"
    return None


def without_postproc(trace: Trace) -> Trace:
    """The design-space part of ``trace``: the instructions before ``enter_postproc``."""
    for k, inst in enumerate(trace.insts):
        if inst.kind.name == "enter_postproc":
            return Trace(trace.insts[:k], trace.base_func)
    return trace.copy()
