"""The twelve workloads of the MetaSchedule paper (seeds ``000_…`` A.2), each with a numpy reference.

>>> import workbench as wb
>>> wb.workloads.names()[:3]
['C1D', 'C2D', 'C3D']
>>> func = wb.workloads.get("C2D", **wb.workloads.small("C2D"))
>>> args = wb.workloads.random_args("C2D", seed=0, **wb.workloads.small("C2D"))
>>> expected = wb.workloads.reference("C2D", **wb.workloads.small("C2D"))(*args[:-1])

Definitions, layouts and block names follow TVM's ``meta_schedule.testing.te_workload`` (see
each module's docstring), so tuned latencies compare with the TVM anchor. Add your own with
``@wb.workloads.register(name, reference=..., flops=..., small=...)``.
"""

from .registry import (
    PAPER_ORDER,
    Workload,
    describe,
    flops,
    get,
    lookup,
    names,
    output_params,
    random_args,
    reference,
    register,
    small,
    unregister,
)
from . import conv, conv_transpose, matmul, reduction  # noqa: F401  (registers the workloads)

__all__ = [
    "PAPER_ORDER",
    "Workload",
    "describe",
    "flops",
    "get",
    "lookup",
    "names",
    "output_params",
    "random_args",
    "reference",
    "register",
    "small",
    "unregister",
]
