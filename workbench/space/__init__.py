"""Design spaces: transformation modules (schedule rules), space generators, postprocessors
(the validator) and mutators — MetaSchedule's section 3.2 and the RFC's design space.

>>> spaces = generate_design_space(func, target="llvm", seed=0)   # one schedule per sketch
>>> print(spaces[0].trace)
b0 = sch.get_block(name="C")
...
>>> cand, reason = sample(func, spaces[0], Postproc.create("llvm"), seed=1)
"""

from . import analysis, mutators
from .candidate import replay, resample_around_pins, sample
from .generator import (
    PostOrderApply,
    ScheduleFn,
    SpaceGenerator,
    SpaceUnion,
    as_space,
    generate_design_space,
    post_order_blocks,
)
from .mutators import (
    MutateComputeLocation,
    MutateParallel,
    MutateThreadBinding,
    MutateTileSize,
    MutateUnroll,
    Mutator,
    default_mutators,
    free_sampling,
)
from .postprocs import (
    DisallowDynamicLoop,
    Postproc,
    Rejected,
    RewriteParallelVectorizeUnroll,
    RewriteCooperativeFetch,
    RewriteReductionBlock,
    RewriteTensorize,
    RewriteUnboundBlock,
    VerifyGPUCode,
    default_postprocs,
    run_postprocs,
    without_postproc,
)
from .rules import (
    AddRFactor,
    AutoBind,
    AutoInline,
    CrossThreadReduction,
    MultiLevelTiling,
    MultiLevelTilingTensorCore,
    MultiLevelTilingWithIntrin,
    ParallelizeVectorizeUnroll,
    RandomComputeLocation,
    ReuseType,
    ScheduleRule,
    default_rules,
    fork,
)


def __getattr__(name: str):
    if name.startswith("Mutate"):  # typos: say which mutators exist
        return getattr(mutators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "generate_design_space",
    "SpaceGenerator",
    "PostOrderApply",
    "ScheduleFn",
    "SpaceUnion",
    "as_space",
    "post_order_blocks",
    "replay",
    "resample_around_pins",
    "sample",
    "ScheduleRule",
    "fork",
    "AutoInline",
    "AutoBind",
    "CrossThreadReduction",
    "MultiLevelTiling",
    "MultiLevelTilingWithIntrin",
    "MultiLevelTilingTensorCore",
    "ReuseType",
    "ParallelizeVectorizeUnroll",
    "RandomComputeLocation",
    "AddRFactor",
    "default_rules",
    "Postproc",
    "Rejected",
    "run_postprocs",
    "without_postproc",
    "DisallowDynamicLoop",
    "RewriteParallelVectorizeUnroll",
    "RewriteReductionBlock",
    "RewriteTensorize",
    "VerifyGPUCode",
    "RewriteCooperativeFetch",
    "RewriteUnboundBlock",
    "default_postprocs",
    "Mutator",
    "MutateTileSize",
    "MutateUnroll",
    "MutateParallel",
    "MutateComputeLocation",
    "MutateThreadBinding",
    "default_mutators",
    "free_sampling",
    "analysis",
]
