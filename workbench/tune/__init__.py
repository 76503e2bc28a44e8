"""The tuner: database, builder/runner, cost models, search strategies, task scheduler, ``tune``.

``workbench.tune`` is both this package and a function: ``wb.tune(func, trials=64)`` calls
:func:`workbench.tune.tuning.tune` (also ``wb.tune.tune``), while ``wb.tune.XGBModel`` and
the other names below stay reachable as attributes.
"""

import sys as _sys
import types as _types

from .cost_model import CostModel, FeatureModel, RandomModel, RidgeModel, XGBModel, has_xgboost
from .database import STATUSES, Database, JSONDatabase, Record, SQLiteDatabase, WorkloadEntry, trace_hash
from .report import BatchEvent, ProgressBar, TaskSummary, TuneSummary
from .measure import MeasureConfig
from .runner import LocalRunner, MeasureInput, MeasureInterrupted, MeasureResult, Runner, Task
from .dask_runner import DaskRunner
from .scheduler import GradientBased, RoundRobin, TaskScheduler, TaskState
from .search import (
    Candidate,
    EvolutionarySearch,
    ReplayFunc,
    ReplayTrace,
    SearchContext,
    SearchStats,
    SearchStrategy,
)
from .task import TraceSpace, TuneTask, as_tasks, make_space
from .tuning import TuneInterrupted, tune
from . import features

__all__ = [
    "tune",
    "TuneInterrupted",
    "MeasureInterrupted",
    "Database",
    "SQLiteDatabase",
    "JSONDatabase",
    "Record",
    "WorkloadEntry",
    "STATUSES",
    "trace_hash",
    "CostModel",
    "FeatureModel",
    "RandomModel",
    "RidgeModel",
    "XGBModel",
    "has_xgboost",
    "features",
    "MeasureConfig",
    "Runner",
    "LocalRunner",
    "DaskRunner",
    "Task",
    "MeasureInput",
    "MeasureResult",
    "SearchStrategy",
    "SearchContext",
    "SearchStats",
    "Candidate",
    "ReplayTrace",
    "ReplayFunc",
    "EvolutionarySearch",
    "TaskScheduler",
    "TaskState",
    "RoundRobin",
    "GradientBased",
    "TuneTask",
    "TraceSpace",
    "as_tasks",
    "make_space",
    "BatchEvent",
    "ProgressBar",
    "TaskSummary",
    "TuneSummary",
]


class _CallableModule(_types.ModuleType):
    """Lets ``wb.tune(...)`` call the tuner while ``wb.tune.<name>`` reaches this package."""

    def __call__(self, *args, **kwargs):
        return tune(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
