"""Mutators and the default mutator probabilities of each target kind."""

from .base import Mutator, NoSuchMutator, annotated_with, builtin_mutators, free_sampling, not_a_mutator
from .mutate_auto_inline import MutateAutoInline
from .mutate_compute_location import MutateComputeLocation
from .mutate_parallel import MutateParallel
from .mutate_thread_binding import MutateThreadBinding
from .mutate_tile_size import MutateTileSize
from .mutate_unroll import MutateUnroll


def default_mutators(kind: str = "llvm") -> dict[Mutator, float]:
    """Fresh default mutators with the probability the search picks each (TVM's)."""
    if kind == "llvm":
        return {
            MutateTileSize(): 0.9,
            MutateComputeLocation(): 0.05,
            MutateUnroll(): 0.03,
            MutateParallel(max_jobs_per_core=16): 0.02,
        }
    if kind == "cuda":
        return {MutateTileSize(): 0.9, MutateUnroll(): 0.08, MutateThreadBinding(): 0.02}
    raise ValueError(f"no default mutators for target kind {kind!r} (known: llvm, cuda)")


def __getattr__(name: str):
    """A mutator name that does not exist is answered with the mutators that do."""
    if name.startswith("Mutate"):
        raise AttributeError(f"no mutator {name}; workbench's mutators: {', '.join(builtin_mutators())}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Mutator",
    "MutateTileSize",
    "MutateUnroll",
    "MutateParallel",
    "MutateComputeLocation",
    "MutateAutoInline",
    "MutateThreadBinding",
    "default_mutators",
    "free_sampling",
    "annotated_with",
]
