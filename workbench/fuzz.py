"""Differential fuzzing of schedule primitives: random small programs, random sequences of
primitives on them, and every schedule a sequence ends with run on llvm against the program
before scheduling.

What is checked (DESIGN decision 9, "no silent wrong code"):

* a primitive either applies or raises ``ScheduleError``; any other exception is a bug
  (``internal``), and a refused step must leave the schedule as it was: the same function and
  the same trace (``not-restored``);
* the final schedule builds on llvm (``build``), computes what the unscheduled function
  computes on random inputs (``wrong``), writes no input (``input-written``), and its trace
  replays through JSON and Python to the same function (``roundtrip``).

The outputs are filled with NaN before each run and every intermediate buffer is filled with
NaN where the lowered code allocates it (outside vectorized loops), so reading an element that
no block wrote shows up as a NaN instead of a plausible stale value. Both functions are built on
llvm: vectorized and parallel loops run as such only there.

Everything is a function of the seed: ``run_case(seed)`` draws one program and a few
sequences, ``minimize`` shrinks a failing sequence to the instructions it needs. The test
``tests/schedule/test_fuzz_differential.py`` runs a few dozen seeds; ``bench/fuzz_schedules.py``
runs thousands and prints the bugs with their repro (program TVMScript + trace as Python).
"""

from __future__ import annotations

import dataclasses
import math
import random
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from .codegen.build import build
from .codegen.lower import lower
from .errors import ScheduleError
from .ir import dsl
from .ir.expr import BufferLoad, FloatImm, Var
from .ir.func import PrimFunc
from .ir.functor import pre_order, transform
from .ir.parser import parse
from .ir.stmt import Allocate, Block, BufferStore, For, ForKind, make_for, seq
from .ir.structural import structural_equal
from .schedule.instruction import REGISTRY, Instruction, iter_rvs, map_rvs
from .schedule.rv import RV
from .schedule.schedule import Schedule
from .schedule.trace import Trace
from .testing import check_trace_roundtrip

#: extents of generated shapes: 1, primes and composites, all small so that builds are quick
EXTENTS = (1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24)
MAX_ELEMENTS = 4096  # per buffer, so that a program stays cheap to run

#: primitives the step generator draws, with weights (loop primitives most often)
PRIMITIVES: dict[str, float] = {
    "split": 4,
    "fuse": 2,
    "reorder": 2,
    "parallel": 1.5,
    "vectorize": 1.5,
    "unroll": 1,
    "annotate": 0.3,
    "unannotate": 0.2,
    "add_unit_loop": 0.5,
    "compute_at": 3,
    "reverse_compute_at": 2,
    "compute_inline": 1.5,
    "reverse_compute_inline": 1,
    "cache_read": 1,
    "cache_write": 1,
    "set_scope": 0.3,
    "reindex": 0.7,
    "storage_align": 0.5,
    "transform_layout": 1,
    "transform_block_layout": 0.7,
    "decompose_padding": 1,
    "decompose_reduction": 1,
    "rfactor": 1.5,
    "blockize": 0.8,
    "read_at": 0.5,
    "write_at": 0.5,
    "merge": 0.7,
    "reorder_block_iter_var": 0.5,
}

#: registered primitives the fuzzer does not draw, and why
NOT_DRAWN = {
    "bind": "GPU thread axes: not built on llvm",
    "tensorize": "needs a matching tensor intrinsic; fuzzed by its own tests",
    "get_block": "query (drawn as part of every step)",
    "get_loops": "query (drawn as part of every step)",
    "get_child_blocks": "query, changes nothing",
    "get_producers": "query, changes nothing",
    "get_consumers": "query, changes nothing",
    "sample_perfect_tile": "drawn inside split steps",
    "sample_partitioned_tile": "drawn inside split steps",
    "get_output_blocks": "query, changes nothing",
    "unsafe_set_dtype": "changes the computed values by design (unsafe)",
    "unsafe_hide_buffer_access": "hides accesses from the dependence checks by design (unsafe)",
    "annotate_buffer_access": "declares a region that is trusted, not checked: a random one misleads later "
    "primitives by design",
    "sample_compute_location": "drawn inside compute_at steps",
    "sample_categorical": "yields a number only",
    "enter_postproc": "marker, changes nothing",
    "can_decompose_padding": "query, changes nothing",
    "loop_partition": "not drawn yet: needs a step drawer (factors summing below the extent)",
    "reindex_cache_read": "not drawn yet: needs an index-map drawer over the block iterators",
    "reindex_cache_write": "not drawn yet: needs an index-map drawer over the block iterators",
    "cache_inplace": "generated programs have no in-place block (read and write of one buffer)",
    "pad_einsum": "not drawn yet: needs a step drawer (padding per iterator)",
    "compute_inline_if": "compute_inline (drawn) when its decision is 1, nothing when 0",
}


# ------------------------------------------------------------------------------------------
# random programs


@dataclass
class Program:
    """A function to schedule: ``kind`` is ``"dsl"`` (generated) or ``"script"`` (hand)."""

    name: str
    func: PrimFunc
    kind: str


class _ProgramBuilder:
    """Stages of one random compute-DSL program, each reading earlier tensors."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.inputs: list[dsl.Tensor] = []
        self.stages: list[dsl.Tensor] = []

    def shape(self, rank: Optional[int] = None) -> tuple[int, ...]:
        rank = rank or self.rng.choice((1, 2, 2, 2, 3))
        while True:
            s = tuple(self.rng.choice(EXTENTS) for _ in range(rank))
            if math.prod(s) <= MAX_ELEMENTS:
                return s

    def placeholder(self, shape: Sequence[int]) -> dsl.Tensor:
        t = dsl.placeholder(tuple(shape), "float32", name=f"A{len(self.inputs)}")
        self.inputs.append(t)
        return t

    def name(self) -> str:
        return f"T{len(self.stages)}"

    def add(self, t: dsl.Tensor) -> dsl.Tensor:
        self.stages.append(t)
        return t

    def source(self) -> dsl.Tensor:
        pool = self.stages[-3:] or self.inputs
        return self.rng.choice(pool)

    def other(self, shape: Sequence[int]) -> dsl.Tensor:
        """A tensor of ``shape``: an earlier one when there is one, else a new input."""
        same = [t for t in self.stages + self.inputs if tuple(t.shape) == tuple(shape)]
        if same and self.rng.random() < 0.6:
            return self.rng.choice(same)
        return self.placeholder(shape)

    # stages ---------------------------------------------------------------------------------
    def unary(self, x: dsl.Tensor) -> dsl.Tensor:
        f = self.rng.choice(
            [
                lambda v: v * 2.0 + 1.0,
                lambda v: dsl.maximum(v, 0.0),
                lambda v: v * v,
                lambda v: dsl.tanh(v),
                lambda v: dsl.sigmoid(v),
                lambda v: dsl.exp(v * 0.5),
                lambda v: v - 0.25,
            ]
        )
        return self.add(dsl.compute(x.shape, lambda *i: f(x[i]), name=self.name()))

    def binary(self, x: dsl.Tensor) -> dsl.Tensor:
        y = self.other(x.shape)
        f = self.rng.choice([lambda a, b: a + b, lambda a, b: a * b, dsl.maximum, lambda a, b: a - b * 0.5])
        return self.add(dsl.compute(x.shape, lambda *i: f(x[i], y[i]), name=self.name()))

    def broadcast(self, x: dsl.Tensor) -> dsl.Tensor:
        axis = self.rng.randrange(len(x.shape))
        b = self.other((x.shape[axis],))
        return self.add(dsl.compute(x.shape, lambda *i: x[i] + b[i[axis]], name=self.name()))

    def transpose(self, x: dsl.Tensor) -> dsl.Tensor:
        if len(x.shape) < 2:
            return self.unary(x)
        perm = list(range(len(x.shape)))
        while perm == sorted(perm):
            self.rng.shuffle(perm)
        shape = tuple(x.shape[p] for p in perm)
        inv = [perm.index(d) for d in range(len(perm))]  # out axis holding input axis d
        return self.add(
            dsl.compute(shape, lambda *i: x[tuple(i[inv[d]] for d in range(len(inv)))], name=self.name())
        )

    def reduce(self, x: dsl.Tensor, keep: bool = False) -> dsl.Tensor:
        rank = len(x.shape)
        axes = sorted(self.rng.sample(range(rank), self.rng.randint(1, min(2, rank))))
        if len(axes) == rank and not keep:
            keep = True  # the DSL has no rank-0 tensors
        kind = self.rng.choice(["sum", "sum", "max", "min"])
        red = {a: dsl.reduce_axis(x.shape[a], name=f"k{a}") for a in axes}
        spatial = [a for a in range(rank) if a not in axes or keep]
        shape = tuple(1 if a in red else x.shape[a] for a in spatial)

        def body(*i):
            pos = dict(zip(spatial, i))
            idx = tuple(red[a] if a in red else pos[a] for a in range(rank))
            op = {"sum": dsl.sum, "max": dsl.max, "min": dsl.min}[kind]
            return op(x[idx], axis=[red[a] for a in axes])

        return self.add(dsl.compute(shape, body, name=self.name()))

    def normalize(self, x: dsl.Tensor) -> dsl.Tensor:
        """``x - reduce(x)`` over its last axis (softmax-like: a reduction broadcast back)."""
        rank = len(x.shape)
        k = dsl.reduce_axis(x.shape[-1], name="k")
        op = self.rng.choice([dsl.sum, dsl.max])
        r = self.add(
            dsl.compute(x.shape[:-1] or (1,), lambda *i: op(x[(*i[: rank - 1], k)], axis=k), name=self.name())
        )
        return self.add(
            dsl.compute(x.shape, lambda *i: x[i] - r[i[: rank - 1] or (0,)] * 0.5, name=self.name())
        )

    def pad(self, x: dsl.Tensor) -> dsl.Tensor:
        rank = len(x.shape)
        lo = [self.rng.choice((0, 1, 1, 2)) for _ in range(rank)]
        hi = [self.rng.choice((0, 1, 2)) for _ in range(rank)]
        if not any(lo) and not any(hi):
            lo[0] = 1
        shape = tuple(n + a + b for n, a, b in zip(x.shape, lo, hi))
        value = self.rng.choice((0.0, 0.0, -1.0))

        def body(*i):
            cond = None
            for d in range(rank):
                for c in ([i[d] >= lo[d]] if lo[d] else []) + ([i[d] < lo[d] + x.shape[d]] if hi[d] else []):
                    cond = c if cond is None else dsl.all_of(cond, c)
            return dsl.if_then_else(cond, x[tuple(i[d] - lo[d] for d in range(rank))], value)

        return self.add(dsl.compute(shape, body, name=self.name()))

    def matmul(self, x: dsl.Tensor) -> dsl.Tensor:
        if len(x.shape) != 2:
            return self.reduce(x)
        n = self.rng.choice(EXTENTS)
        w = self.other((x.shape[1], n))
        k = dsl.reduce_axis(x.shape[1], name="k")
        return self.add(
            dsl.compute((x.shape[0], n), lambda i, j: dsl.sum(x[i, k] * w[k, j], axis=k), name=self.name())
        )

    def conv(self, x: dsl.Tensor) -> dsl.Tensor:
        if len(x.shape) != 2 or min(x.shape) < 2:
            return self.pad(x)
        r, s = self.rng.randint(1, min(3, x.shape[0])), self.rng.randint(1, min(3, x.shape[1]))
        stride = self.rng.choice((1, 1, 2))
        w = self.placeholder((r, s))
        kr, ks = dsl.reduce_axis(r, name="kr"), dsl.reduce_axis(s, name="ks")
        shape = ((x.shape[0] - r) // stride + 1, (x.shape[1] - s) // stride + 1)
        return self.add(
            dsl.compute(
                shape,
                lambda i, j: dsl.sum(x[i * stride + kr, j * stride + ks] * w[kr, ks], axis=[kr, ks]),
                name=self.name(),
            )
        )

    def downsample(self, x: dsl.Tensor) -> dsl.Tensor:
        axis = self.rng.randrange(len(x.shape))
        shape = tuple((n + 1) // 2 if a == axis else n for a, n in enumerate(x.shape))
        return self.add(
            dsl.compute(
                shape,
                lambda *i: x[tuple(v * 2 if a == axis else v for a, v in enumerate(i))],
                name=self.name(),
            )
        )

    def flatten(self, x: dsl.Tensor) -> dsl.Tensor:
        if len(x.shape) == 1:
            n = x.shape[0]
            divs = [d for d in range(2, n) if n % d == 0]
            if not divs:
                return self.downsample(x)
            d = self.rng.choice(divs)
            return self.add(dsl.compute((n // d, d), lambda i, j: x[i * d + j], name=self.name()))
        m = x.shape[-1]
        shape = (*x.shape[:-2], x.shape[-2] * m)
        return self.add(
            dsl.compute(
                shape, lambda *i: x[(*i[:-1][: len(x.shape) - 2], i[-1] // m, i[-1] % m)], name=self.name()
            )
        )

    def concat(self, x: dsl.Tensor) -> dsl.Tensor:
        y = self.other(x.shape)
        n = x.shape[0]
        shape = (2 * n, *x.shape[1:])
        return self.add(
            dsl.compute(
                shape,
                lambda *i: dsl.if_then_else(i[0] < n, x[i], y[(i[0] - n, *i[1:])] * 2.0),
                name=self.name(),
            )
        )

    STAGES = {
        "unary": 2,
        "binary": 2,
        "broadcast": 1,
        "transpose": 1,
        "reduce": 2,
        "normalize": 1,
        "pad": 2,
        "matmul": 1.5,
        "conv": 1,
        "downsample": 0.5,
        "flatten": 0.5,
        "concat": 0.5,
    }


def random_program(seed: int) -> Program:
    """A random compute-DSL function of 1 to 5 stages (deterministic in ``seed``)."""
    rng = random.Random(f"program-{seed}")
    b = _ProgramBuilder(rng)
    x = b.placeholder(b.shape())
    kinds, weights = zip(*_ProgramBuilder.STAGES.items())
    for _ in range(rng.randint(1, 5)):
        x = b.source() if b.stages and rng.random() < 0.3 else x
        op = rng.choices(kinds, weights)[0]
        y = getattr(b, op)(x)
        if math.prod(y.shape) > MAX_ELEMENTS:
            b.stages.remove(y)  # a stage of normalize stays: it is a fine reduction
            continue
        x = y
    if not b.stages:
        b.unary(x)
    outputs = [b.stages[-1]]
    if len(b.stages) > 2 and rng.random() < 0.2:
        outputs.insert(0, rng.choice(b.stages[:-1]))
    used = _used_inputs(outputs)
    inputs = [t for t in b.inputs if t.buffer in used]
    return Program(f"fuzz{seed}", dsl.create_func(inputs + outputs, name=f"fuzz{seed}"), "dsl")


def _used_inputs(outputs: Sequence[dsl.Tensor]) -> set:
    seen, used, stack = set(), set(), list(outputs)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.body is None:
            used.add(t.buffer)
            continue
        for node in pre_order(t.body):
            if isinstance(node, BufferLoad):
                p = dsl._PRODUCER.get(node.buffer)
                if p is not None:
                    stack.append(p)
                else:
                    used.add(node.buffer)
    return used


#: hand-written programs with opaque blocks, predicates, in-place updates and nested blocks
SCRIPTS: dict[str, str] = {
    # a prefix sum: an opaque block carrying a dependence between iterations of its loop
    "scan": """
@T.prim_func
def scan(A: T.Buffer((13,), "float32"), C: T.Buffer((13,), "float32")):
    B = T.alloc_buffer((13,), "float32")
    for i in range(13):
        with T.block("B"):
            T.reads(A[0:13], B[0:13])
            T.writes(B[0:13])
            if i == 0:
                B[i] = A[i]
            else:
                B[i] = B[i - 1] + A[i]
    for i in range(13):
        with T.block("C"):
            vi = T.axis.spatial(13, i)
            C[vi] = B[vi] * T.float32(2)
""",
    # an opaque block holding its own loop nest (no iterators at all)
    "opaque_nest": """
@T.prim_func
def opaque_nest(A: T.Buffer((6, 10), "float32"), C: T.Buffer((6, 10), "float32")):
    B = T.alloc_buffer((6, 10), "float32")
    for i, j in T.grid(6, 10):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    with T.block("C"):
        T.reads(B[0:6, 0:10])
        T.writes(C[0:6, 0:10])
        for i in range(6):
            for j in range(10):
                C[i, j] = B[i, 9 - j] * T.float32(3)
""",
    # a predicated block (an imperfect split written by hand) feeding a reduction
    "predicated": """
@T.prim_func
def predicated(A: T.Buffer((11, 7), "float32"), C: T.Buffer((11,), "float32")):
    B = T.alloc_buffer((11, 7), "float32")
    for io, ii, j in T.grid(3, 4, 7):
        with T.block("B"):
            vi = T.axis.spatial(11, io * 4 + ii)
            vj = T.axis.spatial(7, j)
            T.where(io * 4 + ii < 11)
            B[vi, vj] = T.max(A[vi, vj], T.float32(0))
    for i, k in T.grid(11, 7):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + B[vi, vk]
""",
    # a block whose iterators are opaque, with an if statement in its body
    "opaque_iters": """
@T.prim_func
def opaque_iters(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
    B = T.alloc_buffer((8, 12), "float32")
    for i, j in T.grid(8, 12):
        with T.block("B"):
            vi = T.axis.opaque(8, i)
            vj = T.axis.opaque(12, j)
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            if vj % 2 == 0:
                B[vi, vj] = A[vi, vj] * T.float32(2)
            else:
                B[vi, vj] = A[vi, vj] - T.float32(1)
    for i, j in T.grid(8, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + B[vi, 11 - vj]
""",
    # a matmul with an explicit init block nested in an outer block, then a bias
    "nested": """
@T.prim_func
def nested(A: T.Buffer((9, 5), "float32"), W: T.Buffer((5, 6), "float32"), C: T.Buffer((9, 6), "float32")):
    B = T.alloc_buffer((9, 6), "float32")
    for i in range(9):
        with T.block("B_o"):
            vi = T.axis.spatial(9, i)
            T.reads(A[vi, 0:5], W[0:5, 0:6])
            T.writes(B[vi, 0:6])
            for j in range(6):
                with T.block("B_init"):
                    vj = T.axis.spatial(6, j)
                    B[vi, vj] = T.float32(0)
            for j, k in T.grid(6, 5):
                with T.block("B"):
                    vj, vk = T.axis.remap("SR", [j, k])
                    B[vi, vj] = B[vi, vj] + A[vi, vk] * W[vk, vj]
    for i, j in T.grid(9, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(0.5)
""",
}


def script_programs() -> list[Program]:
    return [Program(name, parse(text), "script") for name, text in SCRIPTS.items()]


def program(seed: int, scripts: bool = True) -> Program:
    """The program of case ``seed``: every 8th case (when ``scripts``) a hand-written one."""
    if scripts and seed % 8 == 7:
        progs = script_programs()
        return progs[(seed // 8) % len(progs)]
    return random_program(seed)


# ------------------------------------------------------------------------------------------
# random primitive steps


#: index maps by rank for transform_layout (shape-independent; holes need a pad value)
LAYOUT_MAPS = {
    1: ["lambda i: (i // 4, i % 4)", "lambda i: (i % 3, i // 3)", "lambda i: (i + 1,)", "lambda i: (i, 0)"],
    2: [
        "lambda i, j: (j, i)",
        "lambda i, j: (i // 2, j, i % 2)",
        "lambda i, j: (i, j // 4, j % 4)",
        "lambda i, j: (j // 3, i, j % 3)",
        "lambda i, j: (i + j, j)",
    ],
    3: [
        "lambda i, j, k: (k, i, j)",
        "lambda i, j, k: (i, j * 2, k)",
        "lambda i, j, k: (j, k // 2, i, k % 2)",
    ],
}


class Bug(Exception):
    """A failed check: ``kind`` (internal, not-restored, build, wrong, input-written, roundtrip)."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class Step:
    """One drawn primitive call (its queries already recorded in the trace)."""

    name: str
    args: tuple
    kwargs: dict


class StepDrawer:
    """Draws random primitive calls on the current state of a schedule."""

    def __init__(self, sch: Schedule, rng: random.Random, primitives: dict[str, float]):
        self.sch = sch
        self.rng = rng
        self.names, self.weights = zip(*primitives.items())

    def blocks(self) -> list[str]:
        return [n for n in self.sch.index.realizes if n != "root"]

    def block(self, name: Optional[str] = None):
        return self.sch.get_block(name or self.rng.choice(self.blocks()))

    def loops_of(self, block) -> list:
        return self.sch.get_loops(block)

    def any_loop(self):
        """(block, its loops) for a random block that has loops, else None."""
        names = self.blocks()
        self.rng.shuffle(names)
        for n in names[:4]:
            b = self.block(n)
            loops = self.loops_of(b)
            if loops:
                return b, loops
        return None

    def draw(self) -> Optional[Step]:
        name = self.rng.choices(self.names, self.weights)[0]
        if not self.blocks():
            return None
        return getattr(self, "_" + name)(name)

    # loops -----------------------------------------------------------------------------------
    def _extent(self, loop) -> int:
        ext = self.sch.get(loop).extent
        return getattr(ext, "value", 8)

    def _split(self, name):
        got = self.any_loop()
        if got is None:
            return None
        _, loops = got
        loop = self.rng.choice(loops)
        n = self._extent(loop)
        r = self.rng.random()
        if r < 0.15:
            factors = self.sch.sample_perfect_tile(loop, self.rng.choice((2, 3)), self.rng.choice((2, 4, 16)))
        elif r < 0.2:
            parts = self.rng.choice((2, 3))
            inner = self.rng.choice([d for d in (1, 1, 2, 3, 4) if n % d == 0])
            factors = self.sch.sample_partitioned_tile(loop, parts, self.rng.randrange(parts), inner)
        elif r < 0.45:
            factors = [None, self.rng.randint(1, n + 2)]
        elif r < 0.6:
            factors = [self.rng.randint(1, n + 1), None]
        elif r < 0.75:
            factors = [self.rng.randint(1, 3), None, self.rng.randint(1, 4)]
        elif r < 0.9:
            divs = [d for d in range(1, n + 1) if n % d == 0]
            d = self.rng.choice(divs)
            factors = [n // d, d]
        else:
            factors = [self.rng.randint(1, n + 1), self.rng.randint(1, n + 1)]  # usually refused
        return Step(name, (loop,), dict(factors=factors, preserve_unit_iters=self.rng.random() < 0.7))

    def _fuse(self, name):
        got = self.any_loop()
        if got is None:
            return None
        _, loops = got
        if self.rng.random() < 0.1:
            chosen = self.rng.sample(loops, min(len(loops), 2))
        else:
            start = self.rng.randrange(len(loops))
            chosen = loops[start : start + self.rng.choice((2, 2, 3))]
        return Step(name, tuple(chosen), dict(preserve_unit_iters=self.rng.random() < 0.7))

    def _reorder(self, name):
        got = self.any_loop()
        if got is None or len(got[1]) < 2:
            return None
        loops = got[1]
        chosen = self.rng.sample(loops, self.rng.randint(2, min(4, len(loops))))
        return Step(name, tuple(chosen), {})

    def _merge(self, name):
        """Loops at one depth of two (or three) blocks' nests, most often with equal extents
        from the top down to that depth (what merge needs)."""
        names = self.blocks()
        if len(names) < 2:
            return None
        chains = {n: self.loops_of(self.block(n)) for n in names}
        chains = {n: c for n, c in chains.items() if c}
        if len(chains) < 2:
            return None
        picked = self.rng.sample(sorted(chains), min(len(chains), self.rng.choice((2, 2, 3))))
        depth = min(len(chains[n]) for n in picked)
        same = [
            d
            for d in range(depth)
            if len({tuple(self._extent(l) for l in chains[n][: d + 1]) for n in picked}) == 1
        ]
        d = self.rng.choice(same) if same and self.rng.random() < 0.85 else self.rng.randrange(depth)
        return Step(name, tuple(chains[n][d] for n in picked), {})

    def _reorder_block_iter_var(self, name):
        block = self.block()
        n = len(self.sch.get(block).iter_vars)
        order = list(range(n))
        self.rng.shuffle(order)
        if self.rng.random() < 0.05:
            order = order[:-1] or [1]  # not a permutation: refused
        return Step(name, (block, order), {})

    def _loop_kind(self, name):
        got = self.any_loop()
        if got is None:
            return None
        loops = got[1]
        # innermost loops are the usual targets of vectorize; outer ones of parallel
        loop = loops[-1] if name == "vectorize" and self.rng.random() < 0.6 else self.rng.choice(loops)
        return Step(name, (loop,), {})

    _parallel = _vectorize = _unroll = _loop_kind

    def _target(self):
        got = self.any_loop()
        if got is None or self.rng.random() < 0.4:
            return self.block()
        return self.rng.choice(got[1])

    def _annotate(self, name):
        key, value = self.rng.choice(
            [
                ("pragma_auto_unroll_max_step", 16),
                ("pragma_unroll_explicit", 1),
                ("meta_schedule.unroll_explicit", 64),
                ("fuzz_key", "value"),
                ("meta_schedule.tiling_structure", "SSRSRS"),
            ]
        )
        return Step(name, (self._target(), key, value), {})

    def _unannotate(self, name):
        return Step(name, (self._target(), self.rng.choice(["fuzz_key", "pragma_auto_unroll_max_step"])), {})

    def _add_unit_loop(self, name):
        return Step(name, (self._target(),), {})

    # compute location ------------------------------------------------------------------------
    def _compute_at(self, name):
        names = self.blocks()
        if len(names) < 2:
            return None
        block = self.block()
        if name == "compute_at" and self.rng.random() < 0.25:
            loop = self.sch.sample_compute_location(block)
        else:
            other = self.block(self.rng.choice([n for n in names if n != self.sch.get(block).name]))
            loops = self.loops_of(other)
            if not loops:
                return None
            loop = self.rng.choice(loops)
        return Step(
            name,
            (block, loop),
            dict(preserve_unit_loops=self.rng.random() < 0.3, index=self.rng.choice((-1, -1, -1, 0))),
        )

    _reverse_compute_at = _compute_at

    def _compute_inline(self, name):
        return Step(name, (self.block(),), {})

    _reverse_compute_inline = _compute_inline

    # buffers ---------------------------------------------------------------------------------
    def _regions(self, block, which: str) -> int:
        b = self.sch.get(block)
        return len(b.reads if which == "read" else b.writes)

    def _index(self, block, which: str) -> int:
        n = self._regions(block, which)
        return self.rng.randrange(n) if n and self.rng.random() < 0.95 else n  # n: out of range

    def _cache_read(self, name):
        block = self.block()
        which = "read" if name == "cache_read" else "write"
        kw = {}
        if self.rng.random() < 0.2:
            kw["consumer_blocks"] = [self.block()]
        return Step(name, (block, self._index(block, which), self.rng.choice(["global", "local"])), kw)

    _cache_write = _cache_read

    def _set_scope(self, name):
        block = self.block()
        return Step(name, (block, self._index(block, "write"), "local"), {})

    def _reindex(self, name):
        block = self.block()
        which = self.rng.choice(["read", "write"])
        return Step(name, (block, (which, self._index(block, which))), {})

    def _storage_align(self, name):
        block = self.block()
        i = self._index(block, "write")
        b = self.sch.get(block)
        ndim = b.writes[i].buffer.ndim if i < len(b.writes) else 2
        axis = self.rng.randrange(-ndim, max(ndim - 1, 1))
        factor = self.rng.choice((2, 4, 8, 16))
        return Step(name, (block, i, axis, factor, self.rng.randrange(factor)), {})

    def _transform_layout(self, name):
        block = self.block()
        which = self.rng.choice(["read", "write", "write"])
        i = self._index(block, which)
        b = self.sch.get(block)
        regions = b.reads if which == "read" else b.writes
        if i < len(regions) and regions[i].buffer in self.sch.func.params:
            # a parameter in a new layout changes the kernel's arguments: the differential run
            # passes both functions the same arrays (tests/schedule/test_layout.py checks those)
            return None
        ndim = regions[i].buffer.ndim if i < len(regions) else 2
        maps = LAYOUT_MAPS.get(ndim)
        if not maps:
            return None
        kw = {"pad_value": self.rng.choice((0.0, -1.0))} if self.rng.random() < 0.5 else {}
        return Step(name, (block, (which, i), self.rng.choice(maps)), kw)

    def _transform_block_layout(self, name):
        block = self.block()
        n = len(self.sch.get(block).iter_vars)
        if n == 0:
            return None
        vs = [f"v{d}" for d in range(n)]
        params = ", ".join(vs)
        options = [f"lambda {params}: ({', '.join(reversed(vs))},)"]
        if n >= 2:
            ext = self.sch.get(block).iter_vars[1].dom.extent
            e = getattr(ext, "value", 4)
            options.append(f"lambda {params}: (v0 * {e} + v1, {', '.join(vs[2:])})".replace(", )", ")"))
        return Step(name, (block, self.rng.choice(options)), {})

    def _decompose_padding(self, name):
        got = self.any_loop()
        if got is None:
            return None
        block, loops = got
        return Step(name, (block, self.rng.choice(loops)), {})

    _decompose_reduction = _decompose_padding

    def _rfactor(self, name):
        got = self.any_loop()
        if got is None:
            return None
        block, loops = got
        b = self.sch.get(block)
        ndim = b.writes[0].buffer.ndim if b.writes else 1
        return Step(name, (self.rng.choice(loops),), dict(factor_axis=self.rng.randint(0, ndim)))

    def _blockize(self, name):
        got = self.any_loop()
        if got is None:
            return None
        return Step(name, (self.rng.choice(got[1]),), dict(preserve_unit_iters=self.rng.random() < 0.7))

    def _read_at(self, name):
        got = self.any_loop()
        if got is None:
            return None
        block, loops = got
        which = "read" if name == "read_at" else "write"
        return Step(name, (self.rng.choice(loops), block, self._index(block, which), "local"), {})

    _write_at = _read_at


# ------------------------------------------------------------------------------------------
# running a case


def written_params(func: PrimFunc) -> set:
    """The parameters some block writes (the function's outputs)."""
    params = set(func.params)
    return {
        r.buffer for n in pre_order(func.body) if isinstance(n, Block) for r in n.writes if r.buffer in params
    }


def poison_intermediates(lowered: PrimFunc) -> PrimFunc:
    """``lowered`` with every allocation filled with NaN first (float buffers, not inside a
    vectorized loop, where a nested fill loop would not be vector code)."""

    def pre(n):
        if isinstance(n, For) and n.kind == ForKind.VECTORIZED:
            return n  # keep as is, not visited
        return None

    def post(n):
        if isinstance(n, Allocate) and n.buffer.dtype.startswith("float"):
            idx = [Var(f"poison_{n.buffer.name}_{d}") for d in range(n.buffer.ndim)]
            fill: Any = BufferStore(n.buffer, FloatImm(math.nan, n.buffer.dtype), tuple(idx))
            for v, ext in reversed(list(zip(idx, n.buffer.shape))):
                fill = make_for(v, ext, fill)
            return dataclasses.replace(n, body=seq(fill, n.body))
        return n

    return dataclasses.replace(lowered, body=transform(lowered.body, post, pre))


def build_poisoned(func: PrimFunc):
    try:
        return build(poison_intermediates(lower(func)), target="llvm")
    except Exception:  # the fill loops are ours: fall back to the function as it is
        return build(func, target="llvm")


def random_args(func: PrimFunc, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    outs = written_params(func)
    args = []
    for p in func.params:
        shape = tuple(int(getattr(s, "value", s)) for s in p.shape)
        if p in outs:
            args.append(np.full(shape, np.nan, dtype=p.dtype))
        else:
            args.append(rng.uniform(-1, 1, size=shape).astype(p.dtype))
    return args


@dataclass
class Reference:
    """The unscheduled function's inputs and outputs on llvm."""

    func: PrimFunc
    args: list[np.ndarray]
    expected: list[np.ndarray]
    outputs: list[int]

    @staticmethod
    def of(func: PrimFunc, seed: int = 0) -> "Reference":
        args = random_args(func, seed)
        outs = written_params(func)
        run = [a.copy() for a in args]
        build_poisoned(func)(*run)
        return Reference(func, args, run, [i for i, p in enumerate(func.params) if p in outs])


def check_final(sch: Schedule, ref: Reference, roundtrip: bool = True) -> None:
    """Build the schedule on llvm, compare with the reference, replay its trace; a ``Bug``
    for the first check that fails."""
    try:
        kernel = build_poisoned(sch.func)
    except Exception as exc:
        raise Bug("build", f"{type(exc).__name__}: {exc}") from exc
    args = [a.copy() for a in ref.args]
    try:
        kernel(*args)
    except Exception as exc:
        raise Bug("run", f"{type(exc).__name__}: {exc}") from exc
    for i, (got, want) in enumerate(zip(args, ref.expected)):
        name = ref.func.params[i].name
        if i not in ref.outputs:
            if not np.array_equal(got, want, equal_nan=True):
                raise Bug("input-written", f"the kernel changed input {name}")
            continue
        scale = float(np.nanmax(np.abs(want), initial=0.0)) if np.isfinite(want).any() else 1.0
        close = np.isclose(got, want, rtol=1e-3, atol=1e-4 * (1.0 + scale), equal_nan=True)
        if not close.all():
            bad = np.argwhere(~close)
            at = tuple(int(v) for v in bad[0])
            raise Bug(
                "wrong",
                f"output {name}: {len(bad)} of {close.size} elements differ, first at {at}: "
                f"got {got[at]!r}, expected {want[at]!r}",
            )
    if roundtrip:
        try:
            check_trace_roundtrip(sch, ref.func)
        except Exception as exc:
            raise Bug("roundtrip", f"{type(exc).__name__}: {str(exc)[:300]}") from exc


def apply_step(sch: Schedule, step: Step) -> bool:
    """Apply ``step``: True if accepted, False if refused (and the schedule unchanged); a
    ``Bug`` for any other exception or for a refusal that changed the schedule."""
    func, text, n = sch.func, sch.trace.as_python(), len(sch.trace)
    try:
        getattr(sch, step.name)(*step.args, **step.kwargs)
        return True
    except ScheduleError:
        if sch.func is not func and not structural_equal(sch.func, func):
            raise Bug("not-restored", f"{step.name} refused but changed the function") from None
        if len(sch.trace) != n or sch.trace.as_python() != text:
            raise Bug("not-restored", f"{step.name} refused but changed the trace") from None
        return False
    except RecursionError as exc:
        raise Bug("internal", f"{step.name}: RecursionError: {str(exc)[:200]}") from exc
    except Exception as exc:
        raise Bug("internal", f"{step.name}: {type(exc).__name__}: {exc}") from exc


def failing_instruction(sch: Schedule, step: Step) -> Instruction:
    """The instruction ``step`` would have recorded (for the repro of a step that failed)."""
    kind = REGISTRY[step.name]
    args, _ = kind.bind(step.args, step.kwargs)
    return Instruction(kind, args, (), False)


@dataclass
class Failure:
    """A bug found by a case: what failed, the program, and the instructions that show it."""

    seed: int
    program: Program
    kind: str
    message: str
    insts: list[Instruction]
    detail: str = ""
    minimized: bool = False

    def trace_python(self) -> str:
        return Trace(self.insts, base_func=self.program.func).as_python()

    def primitives(self) -> list[str]:
        return [i.kind.name for i in self.insts if i.kind.name not in ("get_block", "get_loops")]

    def report(self) -> str:
        return (
            f"[{self.kind}] seed {self.seed}, program {self.program.name}: {self.message}\n"
            f"--- program ---\n{self.program.func}\n--- trace ---\n{self.trace_python()}\n"
        )


@dataclass
class CaseResult:
    seed: int
    program: str
    sequences: int = 0
    steps: int = 0
    accepted: int = 0
    refused: int = 0
    checked: int = 0
    failures: list[Failure] = field(default_factory=list)
    used: dict[str, int] = field(default_factory=dict)  # primitive -> accepted count


def reproduce(
    program: Program, insts: Sequence[Instruction], ref: Optional[Reference] = None
) -> Optional[Bug]:
    """Replay ``insts`` on a fresh schedule of the program, then check as a case does; the
    ``Bug`` it shows, or None (also when the instructions no longer replay)."""
    sch = Schedule(program.func, seed=0)
    rv_map: dict[RV, RV] = {}
    for inst in insts:
        try:
            args = {k: map_rvs(v, lambda rv: rv_map[rv]) for k, v in inst.args.items()}
        except KeyError:
            return None
        step = Step(inst.kind.name, (), dict(args))
        if inst.kind.is_sampling:
            step.kwargs["decision"] = inst.decision
        try:
            if inst.kind.name == "fuse":
                step = Step(
                    "fuse", tuple(args["loops"]), {"preserve_unit_iters": args["preserve_unit_iters"]}
                )
            elif inst.kind.name == "reorder":
                step = Step("reorder", tuple(args["ordered_loops"]), {})
            elif inst.kind.name == "merge":
                step = Step("merge", tuple(args["loops"]), {})
            before = len(sch.trace)
            if not apply_step(sch, step):
                return None
        except Bug as bug:
            return bug
        outputs = list(iter_rvs(sch.trace[before].outputs)) if len(sch.trace) > before else []
        if len(outputs) != len(inst.outputs):
            return None
        rv_map.update(zip(inst.outputs, outputs))
    try:
        check_final(sch, ref or Reference.of(program.func))
    except Bug as bug:
        return bug
    return None


def minimize(failure: Failure, ref: Optional[Reference] = None, budget: int = 200) -> Failure:
    """Drop instructions from the failing sequence while it still shows the same kind of bug."""
    ref = ref or Reference.of(failure.program.func)
    insts = list(failure.insts)
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for i in reversed(range(len(insts))):
            if tries >= budget:
                break
            candidate = insts[:i] + insts[i + 1 :]
            tries += 1
            bug = reproduce(failure.program, candidate, ref)
            if bug is not None and bug.kind == failure.kind:
                insts = candidate
                changed = True
    bug = reproduce(failure.program, insts, ref)
    message = bug.message if bug is not None else failure.message
    return dataclasses.replace(failure, insts=insts, message=message, minimized=True)


def run_case(
    seed: int,
    sequences: int = 3,
    max_steps: int = 8,
    primitives: Optional[dict[str, float]] = None,
    scripts: bool = True,
    skip: Optional[Callable[[Schedule, Step], Optional[str]]] = None,
    minimize_failures: bool = True,
) -> CaseResult:
    """Draw the program of ``seed`` and ``sequences`` random step sequences on it; check every
    sequence's final schedule. ``skip(sch, step)`` returning a reason leaves a step out (for
    known bugs)."""
    prog = program(seed, scripts)
    result = CaseResult(seed, prog.name)
    ref = Reference.of(prog.func, seed)
    rng = random.Random(f"steps-{seed}")
    for s in range(sequences):
        sch = Schedule(prog.func, seed=seed * 1000 + s)
        drawer = StepDrawer(sch, rng, primitives or PRIMITIVES)
        result.sequences += 1
        accepted_any = False
        failure = None
        for _ in range(rng.randint(1, max_steps)):
            n = len(sch.trace)
            try:
                step = drawer.draw()
            except ScheduleError:
                step = None  # a query on a stale state: draw again next time
            except Exception as exc:  # a query that fails is a bug too
                failure = Failure(
                    seed, prog, "internal", f"query: {type(exc).__name__}: {exc}", list(sch.trace)
                )
                failure.detail = traceback.format_exc()
                break
            if step is None:
                del sch.trace.insts[n:]  # queries of a step not taken
                continue
            try:
                reason = skip(sch, step) if skip is not None else None
            except ScheduleError:
                reason = None
            if reason:
                continue
            result.steps += 1
            try:
                ok = apply_step(sch, step)
            except Bug as bug:
                insts = list(sch.trace) + [failing_instruction(sch, step)]
                failure = Failure(seed, prog, bug.kind, bug.message, insts, traceback.format_exc())
                break
            if ok:
                result.accepted += 1
                accepted_any = True
                result.used[step.name] = result.used.get(step.name, 0) + 1
            else:
                result.refused += 1
        if failure is None and accepted_any:
            result.checked += 1
            try:
                check_final(sch, ref)
            except Bug as bug:
                failure = Failure(seed, prog, bug.kind, bug.message, list(sch.trace), traceback.format_exc())
        if failure is not None:
            if minimize_failures:
                failure = minimize(failure, ref)
            result.failures.append(failure)
    return result


def run_cases(seeds: Iterable[int], **kw: Any) -> list[CaseResult]:
    return [run_case(s, **kw) for s in seeds]


__all__ = [
    "PRIMITIVES",
    "NOT_DRAWN",
    "Program",
    "random_program",
    "script_programs",
    "program",
    "Step",
    "StepDrawer",
    "Bug",
    "Failure",
    "CaseResult",
    "Reference",
    "check_final",
    "apply_step",
    "reproduce",
    "minimize",
    "run_case",
    "run_cases",
    "poison_intermediates",
]
