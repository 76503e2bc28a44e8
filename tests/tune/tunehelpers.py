"""Helpers of the tuner tests: small workloads, a hand-written space, fault injection.

The faults rewrite the *scheduled function* (workers receive functions, not traces), through a
registered primitive so the trace records them like any other step.
"""

from dataclasses import replace

import workbench as wb
from workbench.ir.expr import Add, BufferLoad, Cast, FloatImm, IntImm, Mul, Var
from workbench.ir.functor import transform
from workbench.ir.stmt import BufferStore, For, ForKind
from workbench.schedule import ExprRV, schedule_primitive


def small(name):
    return wb.workloads.get(name, **wb.workloads.small(name))


def gmm_space(sch):
    """A hand-written GMM space: tile i and j in two, parallel outer, vectorize inner."""
    b = sch.get_block("Z")
    bb, i, j, k = sch.get_loops(b)
    io, ii = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    jo, ji = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(sch.fuse(bb, io))
    sch.vectorize(ji)


def _params_stores(func, fn):
    def post(node):
        if isinstance(node, BufferStore) and node.buffer in func.params:
            return fn(node)
        return node

    return func.with_body(transform(func.body, post))


def crash(func):
    """Output stores land ~a terabyte past the buffer: a segfault (kernels check no bounds).
    The index goes through a value read from the input, so that the static bounds check after
    each primitive cannot prove it out of range (a constant index would be refused there)."""
    src = func.params[0]
    data = BufferLoad(src, tuple(IntImm(0, "int32") for _ in src.shape))
    far = Add(Cast("int32", Mul(data, FloatImm(0.0, src.dtype))), IntImm(1 << 30, "int32"))
    return _params_stores(func, lambda s: replace(s, indices=(far,) + tuple(s.indices[1:])))


def wrong(func):
    """Each output store adds 1: a wrong result."""
    return _params_stores(func, lambda s: replace(s, value=Add(s.value, FloatImm(1.0, s.value.dtype))))


def hang(func):
    """The whole body inside a loop of 2**31 - 1 iterations: a hang."""
    root = func.body.block
    loop = For(Var("forever"), IntImm(0, "int32"), IntImm(2**31 - 1, "int32"), ForKind.SERIAL, root.body)
    return func.with_body(replace(func.body, block=replace(root, body=loop)))


FAULTS = {1: crash, 2: hang, 3: wrong}


@schedule_primitive("inject_fault")
def inject_fault(sch, kind: ExprRV | int) -> None:
    """Test primitive: 0 = no fault, 1 = segfault, 2 = hang, 3 = wrong result."""
    kind = sch.get(kind) if isinstance(kind, ExprRV) else kind
    if kind:
        sch.func = FAULTS[kind](sch.func)
