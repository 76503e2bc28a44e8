"""Reduction primitives: ``rfactor`` and ``decompose_reduction`` (TensorIR semantics).

Both work on a *reduction block*: spatial and reduce iterators, an ``init`` run on the first
iteration of the reduce iterators, and a body that folds one more value into the output::

    block C:  vi = S(i), vk = R(k)
      init:   C[vi] = 0                  # the identity of the combiner
      body:   C[vi] = C[vi] + A[vi, vk]  # C = C ⊕ x, x not reading C

``rfactor`` needs the combiner to be associative and commutative (sum, product, max, min) and
the init to be its identity, because it regroups the terms of the reduction;
``decompose_reduction`` only moves the init and works for any reduction block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional, cast

from ...errors import ScheduleError
from ...ir.arith.evaluate import int_range
from ...ir.buffer import Buffer
from ...ir.dtype import DTYPE_INFO
from ...ir.expr import (
    conjuncts,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Expr,
    FloatImm,
    IntImm,
    Max,
    Min,
    Mul,
    Var,
    is_const,
    is_float,
)
from ...ir.functor import free_vars, pre_order, substitute, transform
from ...ir.region import infer_access_regions
from ...ir.stmt import (
    REDUCE,
    SPATIAL,
    TRUE,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IterVar,
    Range,
    Stmt,
    seq,
)
from ...ir.structural import structural_equal
from ..instruction import schedule_primitive
from ..rewrite import simplify
from ..rv import BlockRV, LoopRV
from .block_scope import buffer_names, buffers, fresh_name, reduction_problem, scope_blocks
from .loops import const_extent, loop_name
from .reduce_space import affine_binding_problem, reduce_space_problem

if TYPE_CHECKING:
    from ..schedule import Schedule

# ------------------------------------------------------------------------------------------
# helpers shared with blockize / tensorize


def conjoin_all(conds: Iterable[Expr]) -> Expr:
    out: Optional[Expr] = None
    for c in conds:
        out = c if out is None else And(out, c)
    return TRUE if out is None else out


def ordered_vars(e: Expr) -> list[Var]:
    """The variables of ``e`` in order of first appearance (deterministic, unlike a set)."""
    return list(dict.fromkeys(n for n in pre_order(e) if isinstance(n, Var)))


def block_regions(body: Stmt, init: Optional[Stmt], iter_vars: Iterable[IterVar]):
    """(reads, writes) of a new block, inferred from its statements."""
    return infer_access_regions(body, init, var_ranges={iv.var: iv.dom for iv in iter_vars})


# ------------------------------------------------------------------------------------------
# recognising the combiner


@dataclass(frozen=True)
class Reducer:
    """An associative, commutative combiner ``op`` and the test for its identity element."""

    name: str
    op: type

    def combine(self, a: Expr, b: Expr) -> Expr:
        return self.op(a, b)

    def is_identity(self, value: Expr) -> bool:
        if not isinstance(value, (IntImm, FloatImm)):
            return False
        v, dtype = value.value, value.dtype
        if self.name == "sum":
            return v == 0
        if self.name == "product":
            return v == 1
        # max(x, e) == x for every x: e is at or below the lowest value of the type. For floats
        # that is -inf, or the lowest finite value, TVM's identity (what its softmax writes):
        # rfactor only adds more copies of the init to a max, which changes nothing
        if self.name == "max":
            return (
                v in (float("-inf"), -_largest_finite(dtype)) if is_float(dtype) else v <= int_range(dtype)[0]
            )
        return v in (float("inf"), _largest_finite(dtype)) if is_float(dtype) else v >= int_range(dtype)[1]


def _largest_finite(dtype: str) -> float:
    if dtype == "bfloat16":  # not an IR dtype, but TVM's softmax may spell its identity so
        return 3.3895313892515355e38
    info = DTYPE_INFO.get(dtype)
    return float(info.max) if info is not None and info.is_float else float("inf")


REDUCERS = (Reducer("sum", Add), Reducer("product", Mul), Reducer("max", Max), Reducer("min", Min))


def match_reduction(primitive: str, block: Block, argument: str) -> tuple[Reducer, BufferStore, Expr]:
    """``(reducer, update, x)`` for a block whose body is ``C[s] = C[s] ⊕ x`` (either operand
    order) and whose init stores the identity of ``⊕`` into the same element."""
    init, update = block.init, block.body
    if not isinstance(init, BufferStore) or not isinstance(update, BufferStore):
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: the init and the body must each be one buffer store",
            argument=argument,
            nodes=[block],
        )
    out = update.buffer
    if init.buffer is not out or not structural_equal(init.indices, update.indices, map_free_vars=False):
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: the init writes "
            f"{init.buffer.name}{list(init.indices)} but the body writes "
            f"{out.name}{list(update.indices)}",
            argument=argument,
            nodes=[block],
        )
    value = update.value
    reducer = next((r for r in REDUCERS if type(value) is r.op), None)
    rhs = None
    if reducer is not None:
        op = cast(BinaryOp, value)  # type(value) is reducer.op, a binary operator
        for own, other in ((op.a, op.b), (op.b, op.a)):
            if _is_own_load(own, update) and not _reads(other, out):
                rhs = other
                break
    if rhs is None:
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: the update {out.name} = {value} is "
            f"not an associative reduction; expected {out.name} = {out.name} + x, "
            f"{out.name} * x, max({out.name}, x) or min({out.name}, x) with x not "
            f"reading {out.name}",
            argument=argument,
            nodes=[block],
        )
    assert reducer is not None  # rhs is only found when a reducer is
    if not reducer.is_identity(init.value):
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: the init value {init.value} is not "
            f"the identity of the {reducer.name} reduction",
            argument=argument,
            nodes=[block],
        )
    return reducer, update, rhs


def _is_own_load(e: Expr, store: BufferStore) -> bool:
    return (
        isinstance(e, BufferLoad)
        and e.buffer is store.buffer
        and structural_equal(e.indices, store.indices, map_free_vars=False)
    )


def _reads(e: Expr, buffer: Buffer) -> bool:
    return any(isinstance(n, BufferLoad) and n.buffer is buffer for n in pre_order(e))


def _check_reduction_block(primitive: str, idx, block: Block, argument: str) -> None:
    problem = reduction_problem(idx, block)
    if problem:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} is not a reduction block: it {problem}",
            argument=argument,
            nodes=[block],
        )


# ------------------------------------------------------------------------------------------
# rfactor


@schedule_primitive("rfactor", tvm_name="RFactor", tvm_inputs=("loop",), tvm_attrs=("factor_axis",))
def rfactor(sch: Schedule, loop: LoopRV, factor_axis: int) -> BlockRV:
    """Factorize the reduction of the one block under ``loop`` by that loop (``loop`` must feed
    only reduce iterators, the combiner must be associative with an identity init).

    A new block ``<name>_rf`` computes one partial result per value of ``loop`` into the new
    buffer ``<buffer>_rf`` (the extra dimension, of ``loop``'s extent, is inserted at
    ``factor_axis``; negative counts from the end as in Python); the original block is rewritten
    to reduce those partial results, under the original loops minus its other reduce loops.
    Returns the rfactor block. Unlike TVM, a reduce iterator sharing a loop with one the
    rfactor loop feeds is split into per-loop iterators as well, so that the rfactor block's
    iterators stay independent (and ``compute_at`` can move it).

    Before / after ``rfactor(k1, factor_axis=0)`` with ``k = k0 * 4 + k1``::

        for i, k0, k1:                         for i, k0, k1:
          block C:                               block C_rf:
            vi = S(i), vk = R(k0*4 + k1)           vk1 = S(k1), vi = S(i), vk0 = R(k0)
            init: C[vi] = 0                        init: C_rf[vk1, vi] = 0
            C[vi] = C[vi] + A[vi, vk]              C_rf[vk1, vi] += A[vi, vk0*4 + vk1]
                                               for i, k1:
                                                 block C:
                                                   vk1 = R(k1), vi = S(i)
                                                   init: C[vi] = 0
                                                   C[vi] = C[vi] + C_rf[vk1, vi]
    """
    rf_loop = sch.get(loop)
    idx = sch.index
    children = idx.child_realizes(rf_loop)
    if len(children) != 1:
        raise ScheduleError(
            "rfactor",
            f"{loop_name(rf_loop)} holds {len(children)} blocks; "
            f"rfactor needs exactly one block under the loop",
            argument="loop",
            nodes=[rf_loop],
        )
    realize = children[0]
    block = realize.block
    _check_reduction_block("rfactor", idx, block, "loop")
    if rf_loop.kind != ForKind.SERIAL or rf_loop.thread_tag:
        raise ScheduleError(
            "rfactor",
            f"{loop_name(rf_loop)} is {rf_loop.kind.value}; rfactor applies to a serial loop",
            argument="loop",
            nodes=[rf_loop],
        )
    extent = const_extent(
        "rfactor",
        rf_loop,
        advice="the rfactor buffer would have a dimension of that size; rfactor a loop of constant "
        "extent (the inner loop of a perfect split)",
    )
    if not (isinstance(rf_loop.min, IntImm) and rf_loop.min.value == 0):
        raise ScheduleError(
            "rfactor",
            f"{loop_name(rf_loop)} starts at {rf_loop.min}, not 0",
            argument="loop",
            nodes=[rf_loop],
        )
    _check_stage_pipeline("rfactor", idx, block)
    reducer, update, rhs = match_reduction("rfactor", block, "loop")
    loops = idx.loops_above(block)
    spatial, reduce = _loops_fed(block, realize, loops)
    _check_loops("rfactor", idx, rf_loop, realize, loops, spatial, reduce)
    _check_bindings("rfactor", realize, loops)
    out = update.buffer
    ndim = out.ndim
    if (
        isinstance(factor_axis, bool)
        or not isinstance(factor_axis, int)
        or not -(ndim + 1) <= factor_axis <= ndim
    ):
        raise ScheduleError(
            "rfactor",
            f"factor_axis is {factor_axis!r}; the output "
            f"{out.name} has {ndim} dimension(s), so it must be an int in "
            f"[{-(ndim + 1)}, {ndim}]",
            argument="factor_axis",
        )
    axis = factor_axis + ndim + 1 if factor_axis < 0 else factor_axis
    rf_buf = Buffer(
        fresh_name(f"{out.name}_rf", buffer_names(sch.func)),
        out.shape[:axis] + (extent,) + out.shape[axis:],
        out.dtype,
        out.scope,
    )
    names = idx.realizes.keys()
    rf_realize, rf_indices = _rf_block(
        block,
        realize,
        rf_loop,
        loops,
        reducer,
        update,
        rhs,
        rf_buf,
        axis,
        fresh_name(f"{block.name}_rf", names),
    )
    v_rf = rf_realize.block.iter_vars[0].var
    removed = {l.loop_var for l in loops if l.loop_var in reduce and l is not rf_loop}
    _check_every_slot_initialised(idx, realize, rf_loop, loops, removed)
    wb_realize = _write_back_block(
        block, realize, rf_loop, reducer, update, rf_buf, rf_indices, v_rf, removed
    )
    scope_name = idx.scope(block).name
    new_top = _drop_loops(idx, loops[0], realize, wb_realize, removed)
    sch.replace(loops[0], seq(_copy_loops(loops, rf_realize), new_top))
    scope = sch.index.block(scope_name)
    sch.replace(scope, scope.with_(alloc_buffers=scope.alloc_buffers + (rf_buf,)))
    return sch.new_rv(BlockRV, rf_realize.block.name)


def _check_every_slot_initialised(
    idx, realize: BlockRealize, rf_loop: For, loops: list[For], removed: set
) -> None:
    """Each partial result the write-back block reads is initialised by the rfactor block.

    The rfactor block initialises the slot of ``rf_loop = r`` on its first reduce iteration, the
    other reduce loops at their minimum; a predicate term false there for some ``r`` (an
    imperfect split of the reduction, rfactor by its inner loop: ``k0 * 4 + k1 < 2`` leaves the
    slots ``k1 = 2, 3`` unwritten) would have the write-back block sum what nobody wrote. Terms
    free of the other reduce loops stay on the write-back block, which then skips those slots;
    a term on both must be true at that first iteration for every ``r``. TVM accepts it and
    sums uninitialised memory; refused here."""
    rf_var = rf_loop.loop_var
    at_first = {l.loop_var: l.min for l in loops if l.loop_var in removed}
    ranges = idx.var_ranges(realize)
    for term in conjuncts(realize.predicate):
        used = free_vars(term)
        if rf_var not in used or not used & removed:
            continue
        if not is_const(simplify(substitute(term, at_first), ranges), 1):
            block = realize.block
            raise ScheduleError(
                "rfactor",
                f"the predicate {term} of block {block.name!r} is false on the first reduce "
                f"iteration for some values of {loop_name(rf_loop)}: their partial results would "
                f"never be initialised, and the write-back block would sum them (split the "
                f"reduction perfectly, or rfactor its outer loop)",
                argument="loop",
                nodes=[rf_loop, block],
            )


def _check_stage_pipeline(primitive: str, idx, block: Block) -> None:
    """TVM's stage-pipeline scope, in part: no block of the scope writes a buffer that an
    earlier block reads (a write-after-read dependency). TVM also requires each read region
    to be covered by what the producers write; that part is not checked here."""
    blocks = scope_blocks(idx, block)
    for pos, later in enumerate(blocks):
        for earlier in blocks[:pos]:
            war = buffers(earlier.reads) & buffers(later.writes)
            if war:
                scope = idx.scope(block)
                raise ScheduleError(
                    primitive,
                    f"the scope of block {block.name!r} is not a stage pipeline: block "
                    f"{later.name!r} writes {sorted(b.name for b in war)}, which the earlier block "
                    f"{earlier.name!r} reads (a write-after-read dependency)",
                    argument="loop",
                    nodes=[n for n in (scope, earlier, later) if n is not None],
                )


def _check_bindings(primitive: str, realize: BlockRealize, loops: list[For]) -> None:
    """The block's bindings are quasi-affine (TVM's reduction-block rule) and its reduce loops
    visit each point of the reduce domains exactly once. The init runs where the reduce
    iterators are at their minimum: with ``vk = k * k // 2`` (or ``k // 2``) that is at
    ``k = 0`` and again at ``k = 1``, a restart rfactor cannot reproduce — TVM refuses the
    first, accepts the second and changes the result; both are refused here."""
    block = realize.block
    problem = affine_binding_problem(realize, loops)
    if problem is None:
        problem = reduce_space_problem(realize, loops)
    if problem:
        raise ScheduleError(
            primitive,
            f"block {block.name!r}: its reduce loops must visit each point of its reduce "
            f"iterators' domains once, with quasi-affine bindings, but {problem}",
            argument="loop",
            nodes=[block],
        )


def _loops_fed(block: Block, realize: BlockRealize, loops: list[For]) -> tuple[set, set]:
    """(loop vars feeding spatial iterators, loop vars feeding reduce iterators)."""
    loop_vars = {l.loop_var for l in loops}
    spatial: set[Var] = set()
    reduce: set[Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (spatial if iv.iter_type == SPATIAL else reduce).update(free_vars(value) & loop_vars)
    return spatial, reduce


def _check_loops(
    primitive, idx, rf_loop: For, realize: BlockRealize, loops: list[For], spatial: set, reduce: set
) -> None:
    """TensorIR's loop rules: the rfactor block's loops are copies of all loops above the block,
    inserted before the outermost one, and the write-back block keeps the non-reduce ones."""
    name = realize.block.name
    var = rf_loop.loop_var
    if var in spatial:
        raise ScheduleError(
            primitive,
            f"{loop_name(rf_loop)} feeds a spatial iterator of block "
            f"{name!r}; the rfactor loop must feed only reduce iterators",
            argument="loop",
            nodes=[rf_loop],
        )
    if var not in reduce and not (isinstance(rf_loop.extent, IntImm) and rf_loop.extent.value == 1):
        # a unit loop that feeds nothing is fine (TVM too): one partial result, the whole sum
        raise ScheduleError(
            primitive,
            f"{loop_name(rf_loop)} is not bound to any reduce iterator of block {name!r} "
            f"(only a loop of extent 1 may be)",
            argument="loop",
            nodes=[rf_loop],
        )
    if idx.child_realizes(loops[0])[0] is not realize:
        raise ScheduleError(
            primitive,
            f"block {name!r} is not the first block under its outermost {loop_name(loops[0])}",
            argument="loop",
            nodes=[loops[0]],
        )
    met_reduce = False
    for l in loops:
        s, r = l.loop_var in spatial, l.loop_var in reduce
        if s and r:
            raise ScheduleError(
                primitive,
                f"{loop_name(l)} feeds both spatial and reduce iterators of block {name!r}",
                argument="loop",
                nodes=[l],
            )
        if r and not met_reduce:
            met_reduce = True
            if len(idx.child_realizes(l)) != 1:
                raise ScheduleError(
                    primitive,
                    f"the outermost reduce {loop_name(l)} holds other blocks besides {name!r}",
                    argument="loop",
                    nodes=[l],
                )
        elif not s and not r and met_reduce and not (isinstance(l.extent, IntImm) and l.extent.value == 1):
            raise ScheduleError(
                primitive,
                f"{loop_name(l)} feeds no iterator of block {name!r} but lies under a reduce loop",
                argument="loop",
                nodes=[l],
            )


def _split_loops(block, realize, rf_var: Var, loop_of: dict) -> set:
    """The loops whose reduce iterators the rfactor block replaces by one iterator per loop:
    those of the iterators fed by the rfactor loop, then, to a fixed point, those of any other
    reduce iterator sharing one of them.

    TVM keeps a reduce iterator the rfactor loop does not feed, even when it shares a loop with
    one it splits (``vi = ij_0 // 8`` beside the new ``vij_0 = ij_0``): right as written, but
    the iterators are no longer independent, so compute_at (which rebuilds one loop per
    iterator) must refuse the block. Splitting ``vi`` too keeps the rfactor block movable."""
    reduce_uses = [
        free_vars(value) & loop_of.keys()
        for iv, value in zip(block.iter_vars, realize.iter_values)
        if iv.iter_type == REDUCE
    ]
    split = {rf_var}
    grown = True
    while grown:
        grown = False
        for used in reduce_uses:
            if used & split and not used <= split:
                split |= used
                grown = True
    return split


def _rf_block(block, realize, rf_loop, loops, reducer, update, rhs, rf_buf, axis, name):
    """The rfactor block: the rfactor loop becomes a spatial iterator; each reduce iterator fed
    by it (or sharing a loop with one that is, see :func:`_split_loops`) is replaced by one
    reduce iterator per other loop in its binding."""
    rf_var = rf_loop.loop_var
    v_rf = Var("v" + rf_var.name, rf_var.dtype)
    iters = [IterVar(v_rf, Range(rf_loop.min, rf_loop.extent), SPATIAL)]
    values: list[Expr] = [rf_var]
    loop_of = {l.loop_var: l for l in loops}
    split = _split_loops(block, realize, rf_var, loop_of)
    iter_of_loop: dict[Var, Expr] = {rf_var: v_rf}
    vmap: dict[Var, Expr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == SPATIAL or not free_vars(value) & split:
            iters.append(iv)
            values.append(value)
            continue
        for v in ordered_vars(value):
            if v in loop_of and v not in iter_of_loop:
                l = loop_of[v]
                iter_var = iter_of_loop[v] = Var("v" + v.name, v.dtype)
                iters.append(IterVar(iter_var, Range(l.min, l.extent), REDUCE))
                values.append(v)
        vmap[iv.var] = substitute(value, iter_of_loop)
    index_list = list(update.indices)
    index_list.insert(axis, v_rf)
    indices = tuple(index_list)
    if any(iv.iter_type == REDUCE for iv in iters):
        body = substitute(
            BufferStore(rf_buf, reducer.combine(BufferLoad(rf_buf, indices), rhs), indices), vmap
        )
        init: Optional[Stmt] = substitute(BufferStore(rf_buf, block.init.value, indices), vmap)
    else:  # one term per partial result: store it (as TVM does)
        body, init = substitute(BufferStore(rf_buf, rhs, indices), vmap), None
    reads, writes = block_regions(body, init, iters)
    rf = Block(name, tuple(iters), reads, writes, body, init, annotations=block.annotations)
    return BlockRealize(tuple(values), realize.predicate, rf), indices


def _write_back_block(block, realize, rf_loop, reducer, update, rf_buf, rf_indices, v_rf, removed):
    """The original block, now reducing the partial results over the rfactor loop (``v_rf``,
    the rfactor block's iterator in ``rf_indices``, becomes a reduce iterator)."""
    rf_var = rf_loop.loop_var
    v_wb = Var("v" + rf_var.name, rf_var.dtype)
    iters = [IterVar(v_wb, Range(rf_loop.min, rf_loop.extent), REDUCE)]
    values: list[Expr] = [rf_var]
    vmap: dict[Var, Expr] = {v_rf: v_wb}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == SPATIAL:
            iters.append(IterVar(Var(iv.var.name, iv.var.dtype), iv.dom, SPATIAL))
            values.append(value)
            vmap[iv.var] = iters[-1].var
    out = update.buffer
    body = substitute(
        BufferStore(
            out,
            reducer.combine(BufferLoad(out, update.indices), BufferLoad(rf_buf, rf_indices)),
            update.indices,
        ),
        vmap,
    )
    init = substitute(block.init, vmap)
    reads, writes = block_regions(body, init, iters)
    # predicate terms on removed loops guarded the rfactor block; they cannot stay here
    kept = [c for c in conjuncts(realize.predicate) if not free_vars(c) & removed]
    wb = block.with_(iter_vars=tuple(iters), reads=reads, writes=writes, body=body, init=init)
    return BlockRealize(tuple(values), conjoin_all(kept), wb)


def _copy_loops(loops: list[For], realize: BlockRealize) -> Stmt:
    """``realize`` under copies of ``loops`` (fresh loop variables, same names and kinds)."""
    fresh = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in loops}
    body: Stmt = BlockRealize(
        tuple(substitute(v, fresh) for v in realize.iter_values),
        substitute(realize.predicate, fresh),
        realize.block,
    )
    for l in reversed(loops):
        body = l.with_(
            loop_var=fresh[l.loop_var],
            min=substitute(l.min, fresh),
            extent=substitute(l.extent, fresh),
            body=body,
        )
    return body


def _drop_loops(idx, top: For, old: BlockRealize, new: BlockRealize, removed: set) -> Stmt:
    """``top`` with ``old`` replaced by ``new`` and the loops of ``removed`` unwrapped (only the
    path from ``top`` to ``old`` is rebuilt)."""
    on_path = set(idx.ancestors(old))

    def pre(n):
        if n is old:
            return new
        if not isinstance(n, Stmt) or n not in on_path:
            return n
        return None

    def post(n):
        return n.body if isinstance(n, For) and n.loop_var in removed else n

    return transform(top, post, pre)


# ------------------------------------------------------------------------------------------
# decompose_reduction


@schedule_primitive("decompose_reduction", tvm_inputs=("block", "loop"))
def decompose_reduction(sch: Schedule, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Move the init of reduction ``block`` into a new block ``<name>_init`` placed right before
    ``loop``, under copies of the loops between ``loop`` (included) and the block that feed its
    spatial iterators; the block loses its init and is renamed ``<name>_update`` (TVM's names,
    so a trace written for TVM finds its blocks). Every random variable of the block stands for
    the update block afterwards; ``get_block("<name>")`` no longer finds it. ``loop`` must be
    above the block and not below any loop that feeds a reduce iterator. Returns the init block.

    Before / after ``decompose_reduction(C, i)``::

        for i, k:                               for i_init:
          block C:                                block C_init: vi_init = S(i_init)
            vi = S(i), vk = R(k)                    C[vi_init] = 0
            init: C[vi] = 0                     for i, k:
            C[vi] = C[vi] + A[vi, vk]             block C_update: vi = S(i), vk = R(k)
                                                    C[vi] = C[vi] + A[vi, vk]
    """
    blk = sch.get(block)
    target = sch.get(loop)
    idx = sch.index
    loops = idx.loops_above(blk)
    if target not in loops:
        raise ScheduleError(
            "decompose_reduction",
            f"{loop_name(target)} is not a loop above block {blk.name!r}",
            argument="loop",
            nodes=[target, blk],
        )
    _check_reduction_block("decompose_reduction", idx, blk, "block")
    realize = idx.realizes[blk.name]
    pos = loops.index(target)
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.iter_type != REDUCE:
            continue
        above = [l for l in loops[:pos] if l.loop_var in free_vars(value)]
        if above:
            raise ScheduleError(
                "decompose_reduction",
                f"{loop_name(above[0])} above "
                f"{loop_name(target)} feeds reduce iterator {iv.var.name!r} of "
                f"block {blk.name!r}; the init must go above every loop of the "
                f"reduction",
                argument="loop",
                nodes=[target, blk],
            )
    iters, values, ivmap = [], [], {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.iter_type == SPATIAL:
            ivmap[iv.var] = Var(iv.var.name + "_init", iv.var.dtype)
            iters.append(IterVar(ivmap[iv.var], iv.dom, SPATIAL))
            values.append(value)
    chosen, discarded = [], set()
    for l in reversed(loops[pos:]):
        if any(l.loop_var in free_vars(v) for v in values):
            chosen.append(l)
        else:
            discarded.add(l.loop_var)
    fresh = {l.loop_var: Var(l.loop_var.name + "_init", l.loop_var.dtype) for l in chosen}
    predicate = conjoin_all(
        substitute(c, fresh) for c in conjuncts(realize.predicate) if not free_vars(c) & discarded
    )
    body = substitute(blk.init, ivmap)
    reads, writes = block_regions(body, None, iters)
    init_block = Block(
        fresh_name(blk.name + "_init", idx.realizes),
        tuple(iters),
        reads,
        writes,
        body,
        annotations=blk.annotations,
    )
    nest: Stmt = BlockRealize(tuple(substitute(v, fresh) for v in values), predicate, init_block)
    for l in chosen:  # innermost first
        nest = For(
            fresh[l.loop_var],
            substitute(l.min, fresh),
            substitute(l.extent, fresh),
            l.kind,
            nest,
            l.thread_tag,
        )
    # without its init the block reads what it accumulates into: its writes come first (TVM's order)
    read_bufs = {r.buffer for r in blk.reads}
    reads = tuple(w for w in blk.writes if w.buffer not in read_bufs) + blk.reads
    update_name = fresh_name(blk.name + "_update", set(idx.realizes) | {init_block.name})
    sch.replace(blk, blk.with_(name=update_name, init=None, reads=reads))
    for rv, value in list(sch.symbols.items()):
        if isinstance(rv, BlockRV) and value == blk.name:
            sch.symbols[rv] = update_name
    target = sch.index.loops[target.loop_var]
    sch.replace(target, seq(nest, target))
    return sch.new_rv(BlockRV, init_block.name)
