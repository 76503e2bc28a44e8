"""Tune a graph's tasks and run the graph: ``tune_model``, ``build_model``, ``Model``.

``build_model`` builds each distinct task once: from the database's best record when it has
one, else from :func:`default_schedule` (outer spatial loops fused and parallel, the innermost
spatial loop vectorized, each where the schedule and a cost rule allow it). The executor
preallocates every intermediate array (aligned numpy), binds each kernel's arguments once, and
calls the kernels' low-overhead entries in topological order; reshapes are numpy views.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..codegen import aligned, build, empty
from ..codegen.timing import MIN_REPEAT_MS, TimingResult, time_runs, timing_plan
from ..errors import ScheduleError
from ..ir.arith import simplify
from ..ir.func import PrimFunc
from ..ir.functor import free_vars, pre_order, substitute
from ..ir.stmt import REDUCE, SPATIAL, Block, ForKind, SeqStmt
from ..schedule import Schedule
from ..space.analysis import const_extent, loop_iter_type
from ..space.postprocs.rewrite_parallel_vectorize_unroll import _stride
from ..target import Target
from ..tune.database.base import Database, Record
from ..tune.task import TuneTask
from ..tune.tuning import tune
from .graph import Graph


def tune_model(
    graph: Graph,
    target: Any = "llvm",
    trials: int = 64,
    database: Union[str, Database] = "model.sqlite",
    *,
    num_trials_per_iter: Optional[int] = None,
    baseline: bool = False,
    measure_defaults: bool = True,
    **kwargs: Any,
) -> Database:
    """Tune every task of ``graph`` with ``wb.tune``'s task scheduler (gradient-based: the
    next batch goes to the task whose weighted latency is expected to fall fastest; weight =
    how many groups run the task), ``trials`` measured candidates over all tasks, all records
    in one database. Resumable: records already in ``database`` count toward ``trials``.

    ``num_trials_per_iter`` None: at most 16, fewer when the budget would otherwise not reach
    every task once. Other keywords go to :func:`workbench.tune` (``seed``, ``strategy``,
    ``runner``, ``callbacks``, ...); ``baseline`` (timing every unscheduled task) is off.
    ``measure_defaults``: each task's :func:`default_schedule` is measured in its first batch
    (one trial of the budget per task), and re-measured with the final candidates in
    alternation whatever its first figure, so the tuned model is not slower than the untuned
    one where the budget finds nothing better (seen on full-size ResNet-18 at 16 trials per
    task: 23.2 ms tuned against 21.1 ms untuned; and at 1,000 trials tuned on a busy machine,
    where the stem's default, measured once under load, was replaced by a slower pick).
    """
    tasks = graph.task_list()
    if num_trials_per_iter is None:
        num_trials_per_iter = max(1, min(16, trials // max(len(tasks), 1)))
    tune_tasks = [
        TuneTask(
            t.func,
            name=f"{t.name}#{k}",
            weight=float(t.weight),
            initial_schedules=(default_schedule(t.func, target),) if measure_defaults else (),
        )
        for k, t in enumerate(tasks)
    ]
    return tune(
        tune_tasks,
        target=target,
        trials=trials,
        database=database,
        num_trials_per_iter=num_trials_per_iter,
        baseline=baseline,
        **kwargs,
    )


#: parallel iterations wanted per core before the default schedule stops fusing outer loops
#: (TVM's ``max_jobs_per_core`` default: enough chunks to balance uneven blocks)
JOBS_PER_CORE = 16
#: a loop nest with fewer iterations than this (all its loops) stays serial: starting the
#: threads and waiting at the barrier costs more than the work (PyTorch's ``GRAIN_SIZE``)
MIN_PARALLEL_WORK = 32768


def default_schedule(func: PrimFunc, target: Any = "llvm") -> Schedule:
    """The schedule used where a task has no record, for each block (its own loop nest, as the
    DSL lowers a fused group):

    * the leading spatial loops fused until they give ``JOBS_PER_CORE`` iterations per core of
      ``target`` (or all of them but the vector loop), and the fused loop made ``parallel``: at
      batch 1 the outermost loop alone has extent 1, which left every untuned kernel serial.
      Not for a nest of fewer than ``MIN_PARALLEL_WORK`` iterations: a tiny model's kernels
      of a few microseconds ran slower in parallel;
    * the innermost spatial loop vectorized, split to the target's vector lanes for the dtype
      it writes when longer, where every access of the block moves by 0 or 1 element per lane,
      or a read by 2 to ``MAX_SHUFFLE_STRIDE`` (a stride-2 convolution's input: the codegen
      loads the span and shuffles). Stricter than TVM's check, which lets the innermost loop
      through: a dense layer's weight read ``W[j, k]`` along ``j`` would be a gather, 4.8x
      slower than the serial dot product on 768x768 (the importer stores it ``(K, N)``);
    * a reduction block (convolution, dense, matmul, pooling) tiled as TVM's CPU schedules do
      (:func:`_tile_reduction`): the vector loop below the reduction loops, ``REGISTER_BLOCK``
      outputs that share its vector loads unrolled around it, the accumulators in a local
      write cache whose write-back takes the elementwise epilogue. Untuned full-size
      ResNet-18 went from 6x to 1.25x PyTorch eager with it (one run, 2 cores, loaded).
      A convolution whose weight is stored output-channels-last (the importer's (I, H, W, O))
      is vectorized over its output channels instead where they give at least as many lanes
      (:func:`_vector_axis`): ``CHANNEL_BLOCK`` channel vectors by ``ROW_BLOCK`` columns of
      accumulators, TVM's NCHWc kernel; untuned ResNet-18 then ran 0.6-0.7x eager (was 1.4x:
      its last stage's 7-wide rows filled 7 of 16 lanes; one run, 2 cores, loaded).

    Each step is skipped where the schedule refuses it (``ScheduleError``), so the result is
    always valid; ``build_model`` checks nothing else. Loops of a nest shared by two blocks,
    or of a block under a loop already parallel, are left alone. Why a block got no parallel
    or no vectorized loop: :func:`explain_default_schedule`.
    """
    return _default_schedule(func, target)[0]


def explain_default_schedule(func: PrimFunc, target: Any = "llvm") -> dict[str, dict[str, Union[int, str]]]:
    """Per block of ``func``: ``{"parallel": extent or why not, "vectorized": extent or why
    not}`` in :func:`default_schedule` (an int: the extent of the loop it made; a str: the
    reason it made none, e.g. ``"below the parallel grain: 25088 iterations < 32768"`` or
    ``"a gather: A moves by 8 elements per lane of ax3"``); a tiled reduction also has
    ``"register_block"`` (the accumulator vectors unrolled: 4 output rows, or channel vectors
    x columns) and, where its write-back's vector differs from its own (channels inside the
    tile, columns in the output), ``"write_back_vectorized"``; the epilogue blocks inlined
    into its write-back say so."""
    return _default_schedule(func, target)[1]


def _default_schedule(func: PrimFunc, target: Any):
    tgt = Target.of(target)
    cores = max(tgt.num_cores, 1)
    sch = Schedule(func)
    notes: dict[str, dict[str, Union[int, str]]] = {}
    names = [n.name for n in pre_order(func.body) if isinstance(n, Block) and n.name != "root"]
    for name in names:
        if name in notes:  # inlined into a reduction's write-back
            continue
        note = notes[name] = {"parallel": "", "vectorized": ""}
        try:
            block = sch.get_block(name)
            loops = sch.get_loops(block)
        except ScheduleError as err:
            note["parallel"] = note["vectorized"] = f"refused: {err}"
            continue
        nodes = [sch.get(lp) for lp in loops]
        if not nodes:
            note["parallel"] = note["vectorized"] = "no loops"
            continue
        if any(n.kind != ForKind.SERIAL or n.annotations for n in nodes):
            note["parallel"] = note["vectorized"] = "under a loop already scheduled (shared nest)"
            continue
        kinds = [loop_iter_type(sch.index, n) for n in nodes]
        work = 1
        for n in nodes:
            work *= const_extent(n) or 1
        # the leading run of plain spatial loops over this block alone
        lead = 0
        for n, kind in zip(nodes, kinds):
            if kind != SPATIAL or const_extent(n) is None or isinstance(n.body, SeqStmt):
                break
            lead += 1
        if lead == 0:
            note["parallel"] = note["vectorized"] = "no spatial loop of its own outside the reduction"
            continue
        spatial = list(loops[:lead])
        finish = None
        vec = None
        if lead < len(nodes) and all(k == REDUCE for k in kinds[lead:]):
            trial = sch.copy()
            tiled = _tile_reduction(trial, block, loops, lead, tgt, names[names.index(name) + 1 :])
            if tiled[0] is not None:
                sch = trial
                spatial, lanes, reg, write_back, finish, fused_away = tiled
                note["vectorized"] = lanes
                if reg > 1:
                    note["register_block"] = reg
                if write_back and write_back != lanes:
                    note["write_back_vectorized"] = write_back
                for other in fused_away:
                    notes[other] = {"parallel": f"inlined into {name}'s write-back", "vectorized": ""}
                    notes[other]["vectorized"] = notes[other]["parallel"]
                vec = True
            else:
                why = tiled[1]
        if vec is None:
            trial = sch.copy()  # the same loop handles; kept only when every step was accepted
            vec, why = _vectorize_innermost(trial, block, loops, lead, tgt)
            if vec is not None:
                sch = trial
                note["vectorized"] = int(why)
                spatial = spatial[:-1] + ([vec] if vec is not spatial[-1] else [])
            else:
                note["vectorized"] = why
        # outer loops to fuse: those whose product first reaches the wanted parallel work
        chosen, product = [], 1
        for lp in spatial:
            chosen.append(lp)
            product *= const_extent(sch.get(lp)) or 1
            if product >= cores * JOBS_PER_CORE:
                break
        if product <= 1:
            note["parallel"] = "its outer spatial loops have 1 iteration"
        elif work < MIN_PARALLEL_WORK:
            note["parallel"] = f"below the parallel grain: {work} iterations < {MIN_PARALLEL_WORK}"
        else:
            try:
                fused = sch.fuse(*chosen) if len(chosen) > 1 else chosen[0]
                sch.parallel(fused)
                note["parallel"] = product
            except ScheduleError as err:
                note["parallel"] = f"refused: {err}"
        if finish is not None:
            finish(sch)
    return sch, notes


#: the output rows (channels, matrix rows) a reduction computes at once in registers, each
#: reusing the same vector loads of its input (TVM's conv2d schedules block output channels so)
REGISTER_BLOCK = 4
#: vectorized over output channels (a convolution whose weight is stored output-channels-last):
#: vectors of channels and output columns computed at once, ``CHANNEL_BLOCK`` x ``ROW_BLOCK``
#: accumulators (28 of AVX-512's 32 registers), each weight vector serving ``ROW_BLOCK`` outputs
#: and each input element (broadcast) ``CHANNEL_BLOCK`` vectors: TVM's NCHWc kernel (``oc_bn``
#: x ``reg_n``). 512x7x7 3x3 conv, 2 cores: 1.2 ms against 10 ms vectorized along the 7-wide
#: rows (one run, loaded).
CHANNEL_BLOCK = 4
ROW_BLOCK = 7


def _vector_factor(sch: Schedule, block, inner, target: Any) -> tuple[int, str]:
    """The vector width for loop ``inner`` of ``block``: the largest divisor of its extent up to
    the target's lanes for the dtype the block writes, or (0, why there is none)."""
    extent = const_extent(sch.get(inner)) or 0
    writes = sch.get(block).writes
    dtype = writes[0].buffer.dtype if writes else "float32"
    try:
        lanes = target.vector_lanes(str(dtype))
    except ValueError as err:
        return 0, f"no vector lanes for {dtype}: {err}"
    factor = max((f for f in range(1, min(lanes, extent) + 1) if extent % f == 0), default=1)
    if factor < 2:
        return 0, f"the innermost spatial loop's extent {extent} has no factor from 2 to {lanes} lanes"
    return factor, ""


def _largest_divisor(n: int, most: int) -> int:
    return max((f for f in range(1, most + 1) if n % f == 0), default=1)


def _vector_axis(sch: Schedule, block, loops: list, lead: int, target: Target) -> int:
    """Which of the ``lead`` spatial loops a reduction vectorizes: an outer one along which
    every read moves by 0 or 1 element (a convolution's output channels, its weight stored
    channels-last) where it gives at least as many lanes as the innermost, else the innermost.
    The 7-wide rows of ResNet's last stage fill 7 of 16 lanes, its 512 channels all 16; at a
    tie the channels still win: each input element is broadcast to ``CHANNEL_BLOCK`` vectors
    of them, where along the rows each weight is (ResNet's stem, 112 columns of 3 channels:
    0.70 ms against 1.09, one run). Its write goes to the local cache, laid out with that
    axis last."""
    inner = _vector_factor(sch, block, loops[lead - 1], target)[0]
    best, best_factor = lead - 1, 1
    for d in range(lead - 2, -1, -1):
        factor = _vector_factor(sch, block, loops[d], target)[0]
        if factor > best_factor and not _strided_access(sch, block, loops[d], reads_only=True):
            best, best_factor = d, factor
    return best if best_factor >= max(inner, 2) else lead - 1


def _tile_reduction(sch: Schedule, block, loops: list, lead: int, target: Target, after: list[str]):
    """A reduction block (``lead`` spatial loops, then only reduction loops) as TVM's CPU
    schedules for conv2d and dense do: the innermost spatial loop split to the vector lanes and
    vectorized below the reduction loops; a spatial loop that the vector read does not depend
    on (a convolution's output channel, a matrix product's row) split by ``REGISTER_BLOCK`` and
    unrolled between them, so each vector of input is loaded once for that many outputs; the
    accumulation in a ``local`` write cache of that tile (``cache_write`` + ``reverse_compute_at``,
    then ``decompose_reduction``), whose write-back takes the elementwise epilogue blocks that
    follow (``reverse_compute_inline``: bias, residual add, relu computed while the tile is in
    registers, not in passes of their own over memory).

    Where an outer spatial loop gives more lanes (:func:`_vector_axis`: output channels), it is
    the vector loop instead, split ``CHANNEL_BLOCK`` vectors deep, the innermost spatial loop
    (output columns) the register block (``ROW_BLOCK``), and the cache transformed to hold the
    vector axis last (``transform_layout``), so the accumulators are contiguous vectors.

    Returns (the outer spatial loops, for the parallel fuse; lanes; register block (the
    accumulator vectors); the write-back's vector width (0: none); a function finishing the
    schedule once the parallel loop is made; the blocks inlined), or (None, why not). ``sch``
    may be half-rewritten on failure: the caller works on a copy."""
    axis = _vector_axis(sch, block, loops, lead, target)
    inner = loops[axis]
    extent = const_extent(sch.get(inner)) or 0
    factor, why = _vector_factor(sch, block, inner, target)
    if not factor:
        return None, why
    var = sch.get(inner).loop_var
    vector_reads = _reads_using(sch, block, var)
    # the register block: the innermost other spatial loop that no vector read depends on
    reg_loop, reg = None, 1
    for lp in reversed([lp for lp in loops[:lead] if lp is not inner]):
        lv = sch.get(lp).loop_var
        n = const_extent(sch.get(lp)) or 0
        f = _largest_divisor(n, REGISTER_BLOCK if axis == lead - 1 else ROW_BLOCK)
        if f > 1 and not any(lv in used for used in vector_reads.values()):
            reg_loop, reg = lp, f
            break
    deep = _largest_divisor(extent // factor, CHANNEL_BLOCK) if axis < lead - 1 else 1
    try:
        if deep > 1:
            vec_outer, vec_mid, vec = sch.split(inner, [None, deep, factor])
        else:
            vec_mid = None
            vec_outer, vec = sch.split(inner, [None, factor]) if factor < extent else (None, inner)
        outer = [lp for lp in loops[:lead] if lp is not inner]
        reg_inner = None
        if reg_loop is not None:
            k = outer.index(reg_loop)
            reg_outer, reg_inner = sch.split(reg_loop, [None, reg])
            outer[k] = reg_outer
        if vec_outer is not None:
            # in the loop order of the output: the channel tiles outside the rows
            outer.insert(axis, vec_outer)
        reductions = list(loops[lead:])
        unrolled = [lp for lp in (vec_mid, reg_inner) if lp is not None]
        sch.reorder(*outer, *reductions, *unrolled, vec)
        strided = _strided_access(sch, block, vec, max_stride=MAX_SHUFFLE_STRIDE, reads_only=axis < lead - 1)
        if strided:
            return None, strided
        if not outer:
            return None, "no spatial loop outside the vector loop to hold the write cache"
        sch.vectorize(vec)
        for lp in unrolled:
            sch.unroll(lp)
        cache = sch.cache_write(block, 0, "local")
        if axis < lead - 1:
            dims = [f"a{d}" for d in range(lead)]
            order = dims[:axis] + dims[axis + 1 :] + [dims[axis]]
            sch.transform_layout(block, ("write", 0), f"lambda {', '.join(dims)}: ({', '.join(order)})")
        sch.reverse_compute_at(cache, outer[-1])
        inlined = []
        for name in after:  # the elementwise epilogue, in order, while each one inlines
            try:
                sch.reverse_compute_inline(sch.get_block(name))
            except ScheduleError:
                break
            inlined.append(name)
        back = sch.get_loops(cache)[len(outer) :]
        write_back = 0
        if back and (const_extent(sch.get(back[-1])) or 0) > 1:
            # along the output's last axis even where the tile holds channels last: its
            # residual read and its store stay contiguous, only the tile is gathered (a
            # channel vector instead, scattering the stores, ran 7x slower)
            sch.vectorize(back[-1])
            write_back = const_extent(sch.get(back[-1])) or 0
    except ScheduleError as err:
        return None, f"refused: {err}"

    def finish(s: Schedule) -> None:
        # after the parallel loop: an update block without its init is no longer "complete"
        # for parallel or vectorize, so the init comes out last, its loops then vectorized
        try:
            init = s.decompose_reduction(block, reductions[0])
            init_loops = s.get_loops(init)[len(outer) :]
            if init_loops:
                s.vectorize(init_loops[-1])
        except ScheduleError:
            pass

    return outer, factor, reg * deep, write_back, finish, inlined


def _reads_using(sch: Schedule, block, var) -> dict[str, set]:
    """The reads of ``block`` (not of what it writes) whose index depends on ``var``, each with
    the loop variables its index depends on."""
    node = sch.get(block)
    realize = sch.index.realizes[node.name]
    binding = {iv.var: v for iv, v in zip(node.iter_vars, realize.iter_values)}
    written = {w.buffer for w in node.writes}
    out: dict[str, set] = {}
    for access in node.reads:
        if access.buffer in written:
            continue
        used = set()
        for r in access.region:
            used |= free_vars(substitute(r.min, binding))
        if var in used:
            out[access.buffer.name] = used
    return out


def _vectorize_innermost(sch: Schedule, block, loops: list, lead: int, target: Any):
    """Vectorize the innermost of the ``lead`` spatial loops (see :func:`default_schedule`);
    return the split's outer loop (the vectorized loop itself when no split was needed: the
    caller then leaves it out of the parallel fuse) and the lanes, or None and why not (``sch``
    is then half-rewritten: the caller works on a copy)."""
    inner = loops[lead - 1]
    extent = const_extent(sch.get(inner)) or 0
    factor, why = _vector_factor(sch, block, inner, target)
    if not factor:
        return None, why
    try:
        if factor < extent:
            outer, vec = sch.split(inner, [None, factor])
        else:
            outer, vec = None, inner
        rest = loops[lead:]
        if rest:
            sch.reorder(vec, *rest)
            sch.reorder(*rest, vec)
        strided = _strided_access(sch, block, vec)
        if strided:
            return None, strided  # a gather or scatter per lane
        sch.vectorize(vec)
    except ScheduleError as err:
        return None, f"refused: {err}"
    return (outer if outer is not None else inner), factor


#: the largest element stride of a read that the llvm codegen loads as one wide contiguous load
#: and deinterleaves with a shuffle (a stride-2 convolution's or pooling's input along x)
MAX_SHUFFLE_STRIDE = 4


def _strided_access(sch: Schedule, block, loop, max_stride: int = 1, reads_only: bool = False) -> str:
    """Which access of ``block`` moves by neither 0 nor 1 element per iteration of ``loop``
    ("" when none does); reads moving by 2 to ``max_stride`` elements pass (the codegen loads
    them wide and shuffles). TVM's contiguity check lets the innermost loop through whatever
    its stride; we do not: the default schedule has no tuner to measure the gather it would
    make. ``reads_only``: the writes are not checked (they go to a write cache laid out for
    the loop)."""
    node = sch.get(block)
    var = sch.get(loop).loop_var
    realize = sch.index.realizes[node.name]
    binding = {iv.var: v for iv, v in zip(node.iter_vars, realize.iter_values)}
    written = {w.buffer for w in node.writes}
    writes = [] if reads_only else [(a, False) for a in node.writes]
    for access, is_read in [(a, True) for a in node.reads] + writes:
        stride, size = 0, 1
        for dim in range(len(access.region) - 1, -1, -1):
            coef = _stride(simplify(substitute(access.region[dim].min, binding)), var)
            if coef:
                stride = coef * size
                break
            size *= access.buffer.shape[dim]
        if stride in (0, 1) or (reads_only and access.buffer in written):
            continue
        if is_read and access.buffer not in written and 1 < stride <= max_stride:
            continue  # a wide load and a shuffle
        return f"a gather: {access.buffer.name} moves by {stride} elements per lane of {var.name}"
    return ""


@dataclass
class Step:
    group: int
    task: int
    entry: Any
    args: list


class Model:
    """A compiled graph: ``model(*inputs) -> tuple of outputs`` (numpy in, numpy out)."""

    def __init__(self, graph: Graph, target: Any, kernels: list, records: list[Optional[Record]]):
        self.graph, self.target = graph, target
        self.kernels, self.records = kernels, records
        g = graph
        arrays: dict[str, np.ndarray] = {}
        for v in g.inputs:
            shape, dtype = g.values[v]
            arrays[v] = empty(shape, dtype)
        for c, a in g.constants.items():
            arrays[c] = aligned(np.ascontiguousarray(a, dtype=g.values[c][1]))
        groups = g.fuse()
        for grp in groups:
            shape, dtype = g.values[grp.output]
            arrays[grp.output] = empty(shape, dtype)
        for n in g.nodes:  # views, in order (a view of a view, of a constant, of an input)
            if n.pattern == "view":
                arrays[n.name] = arrays[n.inputs[0]].reshape(n.shape)
        self.arrays = arrays
        self.steps: list[Step] = []
        for k, grp in enumerate(groups):
            args = [arrays[v] for v in grp.inputs] + [arrays[grp.output]]
            kernel = kernels[grp.task]
            kernel.check_args(tuple(args))  # once, here: the run calls the bare entries
            self.steps.append(Step(k, grp.task, kernel.entry, args))
        self._inputs = [arrays[v] for v in g.inputs]
        self._outputs = [arrays[v] for v in g.outputs]

    # running ---------------------------------------------------------------------------------
    def _set_inputs(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self._inputs):
            raise TypeError(
                f"the model takes {len(self._inputs)} inputs ({', '.join(self.graph.inputs)}), "
                f"got {len(inputs)}"
            )
        for name, dst, x in zip(self.graph.inputs, self._inputs, inputs):
            x = np.asarray(x)
            if x.shape != dst.shape:
                raise ValueError(f"input {name!r} has shape {x.shape}, expected {dst.shape}")
            np.copyto(dst, x, casting="same_kind")

    def run(self) -> None:
        """Run every kernel on the inputs already in place."""
        for s in self.steps:
            s.entry(*s.args)

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        self._set_inputs(inputs)
        self.run()
        return tuple(o.copy() for o in self._outputs)

    def time(
        self,
        *inputs: Any,
        number: Optional[int] = None,
        repeat: int = 5,
        min_repeat_ms: float = MIN_REPEAT_MS,
        windows: Optional[int] = None,
    ) -> TimingResult:
        """Seconds per run of the whole model (the kernels, not the input copy), as
        ``Kernel.time`` measures a kernel: the median of ``repeat`` repeats, each the fastest
        of its ``windows`` windows of ``number`` runs (``number`` None: sized by duration, from
        the median of a few single runs, and ``WINDOWS`` windows of ~1 ms; a model longer than
        that gets fewer windows, at least one)."""
        self._set_inputs(inputs)
        self.run()
        return time_runs(self.run, (), **timing_plan(number, repeat, min_repeat_ms, 1, windows))

    def _run_times(self, runs: int) -> np.ndarray:
        """``runs`` x steps: seconds each kernel took in each of ``runs`` runs of the model."""
        clock = time.perf_counter
        out = np.empty((runs, len(self.steps)))
        for r in range(runs):
            row = out[r]
            t = clock()
            for j, s in enumerate(self.steps):
                s.entry(*s.args)
                u = clock()
                row[j] = u - t
                t = u
        return out

    def time_groups(self, *inputs: Any, min_ms: float = 200.0, runs: Optional[int] = None) -> list[float]:
        """Seconds each group's kernel takes within a run of the model (in group order): the
        median over ``runs`` runs (enough for ``min_ms`` in all, at least 11) of the clock
        read between consecutive kernels, as TVM's debug executor times each operator. In
        place, so each kernel sees the caches the kernel before it left; the median drops
        runs where a parallel kernel waited for a descheduled worker thread."""
        self._set_inputs(inputs)
        self.run()
        if runs is None:
            est = float(np.median(self._run_times(3).sum(axis=1)))
            runs = int(min(max(11, min_ms / 1e3 / max(est, 1e-9)), 10_000))
        return [float(t) for t in np.median(self._run_times(runs), axis=0)]

    # reporting ---------------------------------------------------------------------------------
    @property
    def tuned(self) -> list[bool]:
        """Per task: whether its kernel came from a database record."""
        return [r is not None for r in self.records]

    def report(self) -> str:
        """Which tasks were built from a record (database hits) and which from the default."""
        lines = [f"{sum(self.tuned)} of {len(self.records)} tasks from the database:"]
        for task, rec in zip(self.graph.task_list(), self.records):
            how = f"record {rec.latency * 1e3:.4f} ms" if rec is not None else "default schedule"
            lines.append(f"  {task.name} x{task.weight}: {how}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Model {len(self.steps)} kernels ({len(self.kernels)} distinct, {sum(self.tuned)} tuned), "
            f"target={str(self.target)!r}>"
        )


def build_model(graph: Graph, target: Any = "llvm", database: Union[None, str, Database] = None) -> Model:
    """Compile ``graph``: each distinct task from ``database``'s best record for ``target``
    when it has one, else from :func:`default_schedule`."""
    db = Database.open(database) if isinstance(database, str) else database
    kernels, records = [], []
    for task in graph.task_list():
        rec = db.best(task.func, target) if db is not None else None
        sch = None
        if rec is not None:
            try:
                sch = rec.schedule(task.func)
            except Exception:  # a record that no longer replays: the default schedule
                rec = None
        if sch is None:
            sch = default_schedule(task.func, target)
        kernels.append(build(sch, target=target))
        records.append(rec)
    return Model(graph, target, kernels, records)
