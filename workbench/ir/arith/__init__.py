"""Arithmetic on the IR: simplification, integer bound analysis, symbolic relaxation of
index expressions and regions.

* :func:`simplify` puts integer expressions in affine normal form (``i*8 + j*2``) and applies
  the floordiv / floormod / min / max / comparison rules that bounds allow — the split and fuse
  index patterns of loop transformations fold back (``(io*8 + ii) // 8 -> io``);
* :func:`const_int_bound` / :func:`can_prove` answer questions under variable ranges;
* :func:`relax`, :func:`relax_region`, :func:`union_regions`, :func:`region_covers` reason about
  the part of a buffer an iteration touches;
* :func:`evaluate` gives an expression's value (the folding semantics, shared).

:class:`Analyzer` holds the ranges; the functions are thin wrappers that make one per call.
"""

from .analyzer import (
    Analyzer,
    as_range,
    can_prove,
    const_int_bound,
    region_covers,
    relax,
    relax_region,
    simplify,
    union_regions,
)
from .evaluate import evaluate, fold_binary, fold_call, fold_cast, int_range, wrap_int
from .relax import Relaxer
from .simplifier import Simplifier

__all__ = [
    "Analyzer",
    "Simplifier",
    "Relaxer",
    "as_range",
    "simplify",
    "const_int_bound",
    "can_prove",
    "relax",
    "relax_region",
    "union_regions",
    "region_covers",
    "evaluate",
    "fold_binary",
    "fold_call",
    "fold_cast",
    "int_range",
    "wrap_int",
]
