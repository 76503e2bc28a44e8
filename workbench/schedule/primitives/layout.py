"""Buffer and iteration layout: ``set_scope``, ``storage_align``, ``transform_layout``,
``transform_block_layout``, ``decompose_padding`` (TensorIR semantics).

The first three change a buffer — where it lives, the padding of its strides, the order and
shape of its axes — and rewrite every access to it. ``set_scope`` and ``storage_align`` apply
to intermediate buffers (those a block allocates): a parameter lives where the caller put it.
``transform_layout`` also applies to a parameter, as in TVM: the function then takes that
argument in the new layout. The last two rewrite one block's iteration space.
"""

from __future__ import annotations

import math
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Union, cast

from ...errors import InternalError, ScheduleError
from ...ir.arith import Simplifier
from ...ir.buffer import Buffer, shape_str
from ...ir.expr import (
    conjuncts,
    EQ,
    GE,
    GT,
    LE,
    LT,
    BufferLoad,
    Cast,
    CmpOp,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Or,
    Select,
    Var,
    const,
    is_const,
)
from ...ir.functor import free_vars, pre_order, replace_buffers, substitute, transform
from ...ir.index_map import IndexMap
from ...ir.region import infer_access_regions
from ...ir.stmt import (
    REDUCE,
    SPATIAL,
    TRUE,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
    make_for,
    seq,
)
from ..instruction import schedule_primitive
from ..rewrite import conjoin, simplify
from ..rv import BlockRV, ExprRV, LoopRV, rv_of_var
from .block_scope import buffers, check_complete
from .block_scope import buffer_names, fresh_name
from .cache import (
    allocation_site,
    buffer_of,
    check_storage_scope,
    insert_into_body,
    nth_buffer,
    point_region,
    render_call,
    scoped_name,
)

if TYPE_CHECKING:
    from ..schedule import Schedule

Ranges = Mapping[Var, Range]


def _intermediate(sch, primitive: str, block: Block, buf: Buffer, argument: str) -> Block:
    """The block allocating ``buf``; a ScheduleError for a function parameter."""
    site = allocation_site(sch.index, block, buf)
    if site is None:
        raise ScheduleError(
            primitive,
            f"{buf.name} is a parameter of {sch.func.name}: its "
            f"scope and strides are the function's interface, which a "
            f"schedule does not change (apply it to an intermediate buffer, "
            f"e.g. one made by cache_read / cache_write)",
            argument=argument,
            nodes=[block],
        )
    return site


def _swap_buffer(sch, site: Block, old: Buffer, new: Buffer) -> None:
    sch.replace(site, replace_buffers(site, {old: new}))


def _write_buffer(primitive: str, block: Block, buffer_index: Any) -> Buffer:
    return nth_buffer(primitive, block, buffer_index, "write", "buffer_index")


# ------------------------------------------------------------------------------------------
# set_scope / storage_align


@schedule_primitive("set_scope", tvm_inputs=("block",), tvm_attrs=("buffer_index", "storage_scope"))
def set_scope(sch: Schedule, block: BlockRV, buffer_index: Union[int, str], storage_scope: str) -> None:
    """Move the intermediate buffer ``block.writes[buffer_index]`` (an index or a buffer name)
    to ``storage_scope``; it is renamed ``<buffer>_<scope>`` like TVM does. Rule: the buffer is
    allocated by a block (not a function parameter).

    Before / after ``set_scope(B, 0, "local")``::

        B = T.alloc_buffer((8, 8))         B_local = T.alloc_buffer((8, 8), scope="local")
        block B: B[vi, vj] = A[vi, vj]     block B: B_local[vi, vj] = A[vi, vj]
    """
    node = sch.get(block)
    check_storage_scope("set_scope", storage_scope)
    buf = _write_buffer("set_scope", node, buffer_index)
    site = _intermediate(sch, "set_scope", node, buf, "buffer_index")
    if buf.scope == storage_scope:
        return None
    name = fresh_name(scoped_name(buf, storage_scope), buffer_names(sch.func) - {buf.name})
    _swap_buffer(sch, site, buf, buf.with_(name=name, scope=storage_scope))
    return None


@schedule_primitive(
    "storage_align", tvm_inputs=("block",), tvm_attrs=("buffer_index", "axis", "factor", "offset")
)
def storage_align(
    sch: Schedule, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
) -> None:
    """Pad the stride of ``axis`` of the intermediate buffer ``block.writes[buffer_index]`` so
    that it is ``factor * k + offset`` elements (to avoid bank or cache-set conflicts). Backends
    index every buffer with ``Buffer.strides()``, which honours the alignment.

    Rules: the buffer is allocated by a block; ``axis`` (negative counts from the end) is not
    the innermost one, whose stride is always 1; ``factor > 0``; ``0 <= offset < factor``.

    Before / after ``storage_align(B, 0, axis=0, factor=8, offset=1)`` on B of shape (4, 16)::

        B = T.alloc_buffer((4, 16))        B = T.alloc_buffer((4, 16))   # strides (17, 1)
    """
    node = sch.get(block)
    buf = _write_buffer("storage_align", node, buffer_index)
    site = _intermediate(sch, "storage_align", node, buf, "buffer_index")
    for name, value in (("axis", axis), ("factor", factor), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError("storage_align", f"expected an int, got {value!r}", argument=name)
    if not -buf.ndim <= axis < buf.ndim:
        raise ScheduleError(
            "storage_align",
            f"{buf.name} has {buf.ndim} axes; axis {axis} is out of range",
            argument="axis",
            nodes=[node],
        )
    axis %= buf.ndim
    if axis == buf.ndim - 1:
        raise ScheduleError(
            "storage_align",
            f"axis {axis} is the innermost axis of {buf.name}, whose stride is always 1",
            argument="axis",
            nodes=[node],
        )
    if factor <= 0:
        raise ScheduleError("storage_align", f"factor must be positive, got {factor}", argument="factor")
    if not 0 <= offset < factor:
        raise ScheduleError(
            "storage_align", f"offset must be in [0, factor={factor}), got {offset}", argument="offset"
        )
    align = tuple(a for a in buf.align if a[0] != axis) + ((axis, factor, offset),)
    _swap_buffer(sch, site, buf, buf.with_(align=tuple(sorted(align))))
    return None


# ------------------------------------------------------------------------------------------
# transform_layout


class _Relayout:
    """Rewrites every access ``buf[idx]`` under a block to ``new[map(idx)]`` (simplified with
    the ranges of the variables in scope), re-deriving the declared regions of ``new``."""

    def __init__(self, buf: Buffer, new: Buffer, imap: IndexMap):
        self.buf, self.new, self.imap = buf, new, imap

    def indices(self, idx: tuple, ranges: Ranges) -> tuple:
        return tuple(simplify(e, ranges) for e in self.imap.map_indices(idx))

    def expr(self, e: Expr, ranges: Ranges) -> Expr:
        def post(n: Any) -> Any:
            if isinstance(n, BufferLoad) and n.buffer is self.buf:
                return BufferLoad(self.new, self.indices(n.indices, ranges))
            return n

        return transform(e, post)

    def stmt(self, s: Stmt, ranges: Ranges) -> Stmt:
        if isinstance(s, For):
            inner = {**ranges, s.loop_var: Range(s.min, s.extent)}
            return s.with_(body=self.stmt(s.body, inner))
        if isinstance(s, SeqStmt):
            return SeqStmt(tuple(self.stmt(x, ranges) for x in s.seq))
        if isinstance(s, BlockRealize):
            return s.with_(
                iter_values=tuple(self.expr(v, ranges) for v in s.iter_values),
                predicate=self.expr(s.predicate, ranges),
                block=self.block(s.block, ranges),
            )
        if isinstance(s, BufferStore):
            idx = self.indices(s.indices, ranges) if s.buffer is self.buf else s.indices
            return BufferStore(
                self.new if s.buffer is self.buf else s.buffer, self.expr(s.value, ranges), idx
            )
        if isinstance(s, IfThenElse):
            other = None if s.else_case is None else self.stmt(s.else_case, ranges)
            return IfThenElse(self.expr(s.condition, ranges), self.stmt(s.then_case, ranges), other)
        if isinstance(s, Evaluate):
            return Evaluate(self.expr(s.value, ranges))
        raise InternalError(f"transform_layout: unexpected {type(s).__name__} in a schedule")

    def block(self, b: Block, ranges: Ranges) -> Block:
        inner = {**ranges, **{iv.var: iv.dom for iv in b.iter_vars}}
        body = self.stmt(b.body, inner)
        init = None if b.init is None else self.stmt(b.init, inner)
        alloc = tuple(self.new if x is self.buf else x for x in b.alloc_buffers)
        reads, writes = b.reads, b.writes
        if self.buf in buffers(reads) | buffers(writes):
            got = infer_access_regions(
                body, init, alloc_buffers=alloc, var_ranges={iv.var: iv.dom for iv in b.iter_vars}
            )
            reads, writes = (
                tuple(self.region(r, found) for r in mine) for mine, found in zip((reads, writes), got)
            )
        return b.with_(body=body, init=init, alloc_buffers=alloc, reads=reads, writes=writes)

    def region(self, r: BufferRegion, found: tuple[BufferRegion, ...]) -> BufferRegion:
        if r.buffer is not self.buf:
            return r
        for f in found:
            if f.buffer is self.new:
                return f
        return BufferRegion.full(self.new)  # declared but not accessed directly: all of it


# An index map (or a pad value given as a lambda) may use integers sampled by the schedule,
# as TVM's may use ExprRVs: ``lambda i, j: (i, j // (v1 * v2))``. The trace records the lambda's
# text with each such integer named ``_0``, ``_1`` … followed by the random variables, so
# that it stays JSON, keeps the dependence on the sampling instructions (a replay with another
# decision follows it) and renders as the lambda over the trace's names (``v1``, ``v2``).


def _placeholders(imap: IndexMap) -> list[str]:
    taken = {p.name for p in imap.params}
    names: list[str] = []
    k = 0
    while len(names) < len(imap.symbols):
        if f"_{k}" not in taken:
            names.append(f"_{k}")
        k += 1
    return names


def _record_map(value: Any) -> Any:
    """What a trace records for an index map (or a lambda pad value): its text, or
    ``[text, [random variables]]`` when it uses sampled integers."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str):
        _parse_recorded(value)  # a recorded form (a replay): checked, kept
        return [value[0], list(value[1])]
    if isinstance(value, str):
        return str(IndexMap.parse(value))
    if isinstance(value, IndexMap) and not value.symbols:
        return str(value)
    if not callable(value) and not isinstance(value, IndexMap):
        raise TypeError(f"expected an index map (a lambda, its text or an IndexMap), got {value!r}")
    imap = value if isinstance(value, IndexMap) else IndexMap.from_func(value, symbols=True)
    rvs = [rv_of_var(s) for s in imap.symbols]
    unknown = [s.name for s, rv in zip(imap.symbols, rvs) if rv is None]
    if unknown:
        raise ValueError(f"{imap} uses {unknown}, neither a parameter nor an integer sampled by the schedule")
    if not rvs:
        return str(imap)
    return [str(imap.rename_symbols(_placeholders(imap))), rvs]


def _parse_recorded(value: Any) -> tuple[IndexMap, list[Any]]:
    """(map with symbols ``_k``, random variables) of a recorded form (text or [text, rvs])."""
    if isinstance(value, str):
        return IndexMap.parse(value), []
    text, rvs = value
    if not isinstance(rvs, (list, tuple)) or not all(isinstance(rv, ExprRV) for rv in rvs):
        raise TypeError(f"expected [index map text, [integer random variables]], got {value!r}")
    return IndexMap.parse(text, [f"_{k}" for k in range(len(rvs))]), list(rvs)


def _map_text(value: Any, names: Mapping[Any, str]) -> str:
    """The recorded map as a lambda over the trace's names of its sampled integers."""
    imap, rvs = _parse_recorded(value)
    return str(imap.rename_symbols([names[rvs[int(s.name[1:])]] for s in imap.symbols]))


class IndexMapArg:
    """An index map argument: a lambda (which may use integers the schedule sampled), its
    text or an IndexMap. The annotation tells the registry what to record (``_record_map``)."""

    @classmethod
    def __trace_arg__(cls, value: Any) -> Any:
        return _record_map(value)


class PadValue:
    """A ``pad_value`` argument: None, a number, or a lambda of the new buffer's indices
    (``lambda i, j: i + j``; it may use sampled integers), recorded like an index map."""

    @classmethod
    def __trace_arg__(cls, value: Any) -> Any:
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return value
        try:
            return _record_map(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"pad_value must be a number, a lambda of the new indices or None: {exc}"
            ) from None


def _index_map(sch, primitive: str, value: Any, argument: str = "index_map") -> IndexMap:
    """The map, its sampled integers replaced by their values."""
    try:
        if isinstance(value, IndexMap) and not value.symbols:
            return value
        imap, rvs = _parse_recorded(value if isinstance(value, (str, list, tuple)) else _record_map(value))
        return imap.bind({s: sch.get(rvs[int(s.name[1:])]) for s in imap.symbols})
    except (TypeError, ValueError) as exc:
        raise ScheduleError(primitive, str(exc), argument=argument) from None


def _render(inst: Any, names: Mapping[Any, str]) -> str:
    """TVM's trace text: index maps (and a lambda pad value) as lambdas over the trace's names."""
    return render_call(inst, names, map_text=_map_text)


def _pad_fill(name: str, buf: Buffer, value: Any, where: Optional[Callable[[tuple], Expr]] = None) -> Stmt:
    """A block writing ``value`` (a number, or an IndexMap of the indices) to every element of
    ``buf``, or to those where ``where(indices)`` holds."""
    ivs = tuple(IterVar(Var(f"vax{d}"), Range.from_extent(s), SPATIAL) for d, s in enumerate(buf.shape))
    idx = tuple(iv.var for iv in ivs)
    if isinstance(value, IndexMap):
        fill = value.map_indices(idx)[0]
        fill = fill if fill.dtype == buf.dtype else Cast(buf.dtype, fill)
    else:
        fill = const(value, buf.dtype)
    block = Block(name, ivs, (), (point_region(buf, idx),), BufferStore(buf, fill, idx))
    loops = [Var(f"ax{d}") for d in range(buf.ndim)]
    nest: Stmt = BlockRealize(tuple(loops), TRUE if where is None else where(tuple(loops)), block)
    for v, s in reversed(list(zip(loops, buf.shape))):
        nest = make_for(v, s, nest)
    return nest


def _padding_condition(imap: IndexMap, shape: tuple, new_shape: tuple) -> Optional[Callable[[tuple], Expr]]:
    """``cond(new indices)``: whether an element of the new buffer is padding (no element of
    ``shape`` maps to it), or None if it cannot be written as an expression.

    The map is extended to a domain on which it is a bijective affine map onto ``new_shape``
    (each axis rounded up to a multiple of the divisors applied to it, as a padded split is):
    its inverse then sends the padding, and only it, outside ``shape``."""
    divisors: dict[Var, list[int]] = {p: [] for p in imap.params}
    for r in imap.results:
        for n in pre_order(r):
            if isinstance(n, (FloorDiv, FloorMod)) and isinstance(n.b, IntImm):
                for p in free_vars(n.a):
                    divisors[p].append(n.b.value)
    extended = tuple(
        -(-s // math.lcm(*divisors[p])) * math.lcm(*divisors[p]) for p, s in zip(imap.params, shape)
    )
    try:
        if imap.map_shape(extended) != tuple(new_shape):
            return None
        inverse, onto = imap.inverse(extended)
    except ValueError:
        return None
    if onto != tuple(new_shape):
        return None
    outside = [k for k, (s, e) in enumerate(zip(shape, extended)) if e > s]

    def cond(indices: tuple) -> Expr:
        old = inverse.map_indices(indices)
        ranges = {v: Range.from_extent(n) for v, n in zip(indices, new_shape) if isinstance(v, Var)}
        terms = [simplify(GE(old[k], const(shape[k], "int32")), ranges) for k in outside]
        out = terms[0]
        for t in terms[1:]:
            out = Or(out, t)
        return out

    return cond if outside else None


def _pad_number(buf: Buffer, pad_value: Any) -> None:
    try:
        if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float)):
            raise TypeError("a number")
        const(pad_value, buf.dtype)
    except TypeError:
        raise ScheduleError(
            "transform_layout",
            f"pad_value must be a number that fits {buf.name}'s dtype {buf.dtype}, a lambda of the "
            f"new indices or None, got {pad_value!r}",
            argument="pad_value",
        ) from None


@schedule_primitive("transform_layout", as_python=_render)
def transform_layout(
    sch: Schedule,
    block: BlockRV,
    buffer: Any,
    index_map: IndexMapArg,
    pad_value: Optional[PadValue] = None,
) -> None:
    """Store a buffer in a new layout: element ``idx`` moves to ``index_map(*idx)`` and every
    access in the function follows. ``buffer`` is ``("read" | "write", index)`` into
    ``block``'s regions, a write index, or a buffer name; ``index_map`` a lambda
    (``lambda i, j: (i // 16, j, i % 16)``, which may use integers sampled by the schedule:
    ``lambda i, j: (i, j // (v1 * v2), j % (v1 * v2))``), its text or an IndexMap.

    The new shape is the smallest holding every mapped index. If the map leaves holes (the
    new shape has more elements), ``pad_value`` is required: a number, or a lambda of the new
    indices (``lambda i, j: i + j``). Rules: the map takes one index per axis, is injective on
    the buffer (checked on every index) and yields non-negative indices. A ``storage_align``
    of the buffer does not survive (its axes change meaning).

    *An intermediate buffer* (allocated by a block): with padding, a block ``<buffer>_pad``
    writes the pad value to the whole buffer first.

    *A function parameter* (as in TVM): the parameter itself changes shape, so the kernel
    built from the schedule takes (and fills) arrays in the new layout — the caller
    re-lays its data out, e.g. with numpy ``reshape`` / ``transpose``. With padding, a
    parameter the function writes gets a block ``<buffer>_pad`` at the end writing the pad
    value to the padding elements only (what the caller passed elsewhere stays, where the
    function does not write it); this needs the padding to be expressible, i.e. the map to be
    a padded split / fuse / reorder of the axes (refused otherwise). A parameter the function
    only reads gets no block: it never reads the padding (TVM records a ``T.assume`` that the
    caller filled it with the pad value; workbench has no use for it).

    Before / after ``transform_layout(B, ("write", 0), lambda i, j: (j, i))``::

        B = T.alloc_buffer((4, 8))         B = T.alloc_buffer((8, 4))
        block B: B[vi, vj] = A[vi, vj]     block B: B[vj, vi] = A[vi, vj]
        block C: C[vi, vj] = B[vi, vj]     block C: C[vi, vj] = B[vj, vi]
    """
    node = sch.get(block)
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        buffer = ("write", buffer)
    buf, _ = buffer_of("transform_layout", node, buffer)
    imap = _index_map(sch, "transform_layout", index_map)
    pad: Any = pad_value
    if isinstance(pad, (str, list, tuple, IndexMap)) or callable(pad):
        pad = _index_map(sch, "transform_layout", pad, "pad_value")
    site = allocation_site(sch.index, node, buf)
    if buf.is_symbolic:
        raise ScheduleError(
            "transform_layout",
            f"buffer {buf.name} has the symbolic shape {shape_str(buf.shape)}: transforming the layout "
            "of a buffer with size variables is not supported yet",
            argument="buffer",
        )
    if len(imap.params) != buf.ndim:
        raise ScheduleError(
            "transform_layout",
            f"{imap} takes {len(imap.params)} indices but {buf.name} has {buf.ndim} axes",
            argument="index_map",
        )
    try:
        shape = imap.map_shape(buf.shape)
        injective = imap.is_injective(buf.shape)
    except ValueError as exc:
        raise ScheduleError("transform_layout", str(exc), argument="index_map") from None
    if not injective:
        raise ScheduleError(
            "transform_layout",
            f"{imap} sends two elements of {buf.name} {list(buf.shape)} to the same place",
            argument="index_map",
        )
    padded = math.prod(shape) > buf.size
    if padded and pad is None:
        raise ScheduleError(
            "transform_layout",
            f"{imap} maps {buf.name} {list(buf.shape)} into {list(shape)}, leaving padding: give a pad_value",
            argument="pad_value",
        )
    if isinstance(pad, IndexMap):
        if len(pad.params) != len(shape) or len(pad.results) != 1:
            raise ScheduleError(
                "transform_layout",
                f"a pad_value lambda takes the {len(shape)} indices of the new {buf.name} "
                f"{list(shape)} and gives one value; {pad} does not",
                argument="pad_value",
            )
    elif pad is not None:
        _pad_number(buf, pad)
    new = Buffer(buf.name, shape, buf.dtype, buf.scope)
    if site is not None:
        sch.replace(site, _Relayout(buf, new, imap).block(site, sch.index.var_ranges(site)))
        if padded:
            name = fresh_name(f"{buf.name}_pad", set(sch.index.realizes))
            insert_into_body(sch, sch.index.block(site.name), 0, _pad_fill(name, new, pad))
        return None
    func = sch.func
    root = _Relayout(buf, new, imap).block(func.root, {})
    written = any(isinstance(n, BufferStore) and n.buffer is new for n in pre_order(root))
    if padded and written:
        where = _padding_condition(imap, buf.shape, shape)
        if where is None:
            raise ScheduleError(
                "transform_layout",
                f"{imap} pads parameter {buf.name} {list(buf.shape)} into {list(shape)}, and the "
                f"function writes it: the pad value must go to the padding elements only, which "
                f"needs a map that is a padded split / fuse / reorder of the axes",
                argument="index_map",
            )
        name = fresh_name(f"{buf.name}_pad", {b.name for b in func.blocks()})
        body = root.body
        items = list(body.seq) if isinstance(body, SeqStmt) else [body]
        root = root.with_(body=seq(*items, _pad_fill(name, new, pad, where)))
        if new in buffers(root.reads) | buffers(root.writes):  # a root declaring its regions
            got = infer_access_regions(root.body, None, alloc_buffers=root.alloc_buffers, var_ranges={})
            reads, writes = (
                tuple(next((f for f in found if f.buffer is new), r) if r.buffer is new else r for r in mine)
                for mine, found in zip((root.reads, root.writes), got)
            )
            root = root.with_(reads=reads, writes=writes)
    params = tuple(new if p is buf else p for p in func.params)
    sch.func = dataclasses.replace(func, params=params, body=cast(BlockRealize, func.body).with_(block=root))
    return None


# ------------------------------------------------------------------------------------------
# transform_block_layout


def _simplify_accesses(node: Any, ranges: Ranges) -> Any:
    """Loads, stores and regions of ``node`` with simplified indices."""

    def post(n: Any) -> Any:
        if isinstance(n, BufferLoad):
            return BufferLoad(n.buffer, tuple(simplify(i, ranges) for i in n.indices))
        if isinstance(n, BufferStore):
            return BufferStore(n.buffer, n.value, tuple(simplify(i, ranges) for i in n.indices))
        if isinstance(n, BufferRegion):
            return BufferRegion(
                n.buffer, tuple(Range(simplify(r.min, ranges), simplify(r.extent, ranges)) for r in n.region)
            )
        return n

    return transform(node, post)


def _check_trivial_nest(sch, primitive: str, block: Block) -> list[For]:
    """The loops above ``block``: one per iterator, bound directly to it, each holding only the
    next, starting at 0 with a constant extent equal to the iterator's domain."""
    idx = sch.index
    realize = idx.realizes[block.name]
    loops = idx.loops_above(block)
    inner: Stmt = realize
    for loop in reversed(loops):
        if loop.body is not inner:
            raise ScheduleError(
                primitive,
                f"loop {loop.loop_var.name!r} holds other statements "
                f"besides block {block.name!r}; the block must be alone under "
                f"its loops",
                argument="block",
                nodes=[loop],
            )
        inner = loop
    bound = [str(v) for v in realize.iter_values]
    trivial = len(loops) == len(block.iter_vars) and all(
        v is l.loop_var for v, l in zip(realize.iter_values, loops)
    )
    if not trivial:
        raise ScheduleError(
            primitive,
            f"block {block.name!r} is bound to {bound}, not to its "
            f"loops {[l.loop_var.name for l in loops]} one by one (undo split/"
            f"fuse/reorder first)",
            argument="block",
            nodes=[block],
        )
    for loop, iv in zip(loops, block.iter_vars):
        ok = (
            is_const(loop.min, 0)
            and is_const(iv.dom.min, 0)
            and isinstance(loop.extent, IntImm)
            and isinstance(iv.dom.extent, IntImm)
            and loop.extent.value == iv.dom.extent.value
        )
        if not ok:
            raise ScheduleError(
                primitive,
                f"loop {loop.loop_var.name!r} or iterator {iv.var.name!r} does not span a constant [0, n)",
                argument="block",
                nodes=[loop, block],
            )
    if not is_const(realize.predicate, 1):
        raise ScheduleError(
            primitive,
            f"block {block.name!r} has predicate {realize.predicate}",
            argument="block",
            nodes=[block],
        )
    return loops


@schedule_primitive("transform_block_layout", as_python=_render)
def transform_block_layout(sch: Schedule, block: BlockRV, index_map: IndexMapArg) -> None:
    """Remap the iteration space of ``block``: its iterators become ``index_map`` of the old
    ones, and new loops ``ax0 …`` (replacing the old loops) run over the mapped domain.

    Rules: the block is alone under its loops, bound to them one by one (the iterators are
    the loop variables), every extent is a constant; the map is a bijective affine map of the
    domain (splits ``// %``, fuses ``* +`` and reorders), and each new iterator mixes no
    spatial with reduce iterators.

    Before / after ``transform_block_layout(B, lambda i, j: (i * 8 + j,))``::

        for i, j in T.grid(4, 8):          for ax0 in range(32):
          block B: vi, vj = i, j              block B: vax0 = ax0
            B[vi, vj] = A[vi, vj]               B[vax0 // 8, vax0 % 8] = A[vax0 // 8, vax0 % 8]
    """
    node = sch.get(block)
    imap = _index_map(sch, "transform_block_layout", index_map)
    if len(imap.params) != len(node.iter_vars):
        raise ScheduleError(
            "transform_block_layout",
            f"{imap} takes {len(imap.params)} "
            f"indices but block {node.name!r} has {len(node.iter_vars)} "
            f"iterators",
            argument="index_map",
            nodes=[node],
        )
    loops = _check_trivial_nest(sch, "transform_block_layout", node)
    try:
        inverse, shape = imap.inverse([iv.dom.extent.value for iv in node.iter_vars])
    except ValueError as exc:
        raise ScheduleError("transform_block_layout", str(exc), argument="index_map") from None
    kinds = {p: iv.iter_type for p, iv in zip(imap.params, node.iter_vars)}
    new_vars = [Var(f"vax{k}") for k in range(len(shape))]
    new_ivs = []
    for v, r, n in zip(new_vars, imap.results, shape):
        used = {kinds[p] for p in free_vars(r)}
        if len(used) > 1 or used - {SPATIAL, REDUCE}:
            raise ScheduleError(
                "transform_block_layout",
                f"new iterator {r} mixes iterators of kinds {sorted(used)}",
                argument="index_map",
                nodes=[node],
            )
        new_ivs.append(IterVar(v, Range.from_extent(n), used.pop() if used else SPATIAL))
    ranges = {iv.var: iv.dom for iv in new_ivs}
    vmap = {iv.var: e for iv, e in zip(node.iter_vars, inverse.map_indices(new_vars))}
    rebuilt = node.with_(
        iter_vars=tuple(new_ivs),
        reads=_each(node.reads, vmap),
        writes=_each(node.writes, vmap),
        body=substitute(node.body, vmap),
        init=None if node.init is None else substitute(node.init, vmap),
    )
    rebuilt = _simplify_accesses(
        rebuilt, {**sch.index.var_ranges(loops[0] if loops else sch.index.realizes[node.name]), **ranges}
    )
    loop_vars = [Var(f"ax{k}") for k in range(len(shape))]
    nest: Stmt = BlockRealize(tuple(loop_vars), TRUE, rebuilt)
    for v, n in reversed(list(zip(loop_vars, shape))):
        nest = make_for(v, n, nest)
    sch.replace(loops[0] if loops else sch.index.realizes[node.name], nest)
    return None


# ------------------------------------------------------------------------------------------
# decompose_padding


def _each(items: tuple, vmap: Mapping[Var, Expr]) -> tuple:
    return tuple(substitute(x, vmap) for x in items)


def _in_bound_box(block: Block, cond: Expr) -> dict[Var, tuple[int, int]]:
    """Per iterator, the ``[lo, hi)`` where the padding condition holds: the condition must be
    a conjunction of bounds ``a * v + c (<, <=, >, >=, ==) d`` on single iterators."""
    # (the caller checked that every iterator domain is constant)
    box = {
        iv.var: (
            cast(IntImm, iv.dom.min).value,
            cast(IntImm, iv.dom.min).value + cast(IntImm, iv.dom.extent).value,
        )
        for iv in block.iter_vars
    }
    sim = Simplifier({})
    for conjunct in conjuncts(cond):
        c = cast(CmpOp, conjunct)  # the comparisons are checked first thing below
        if type(c) not in (LT, LE, GT, GE, EQ) or c.a.dtype != "int32":
            raise _pattern_error(block, f"{c} is not a bound on one iterator")
        lin = sim.lin(c.a - c.b)
        if len(lin.terms) != 1 or next(iter(lin.terms)) not in box:
            raise _pattern_error(block, f"{c} is not a bound on one iterator")
        (v, a), k = next(iter(lin.terms.items())), lin.const
        lo, hi = box[v]
        # a*v + k  <= u  and/or  >= l  (integers)
        upper = {LT: -1, LE: 0, EQ: 0}.get(type(c))
        lower = {GT: 1, GE: 0, EQ: 0}.get(type(c))
        for bound, is_upper in ((upper, True), (lower, False)):
            if bound is None:
                continue
            n = bound - k  # a*v <= n (upper) or a*v >= n (lower)
            if is_upper == (a > 0):  # v <= floor(n / a)
                hi = min(hi, n // a + 1)
            else:  # v >= ceil(n / a)
                lo = max(lo, -(-n // a))
        box[v] = (lo, hi)
    return box


def _pattern_error(block: Block, why: str) -> ScheduleError:
    return ScheduleError(
        "decompose_padding",
        f"block {block.name!r} does not match the padding "
        f"pattern `buf[...] = if_then_else(cond, value, constant)`: {why}",
        argument="block",
        nodes=[block],
    )


def _const_fill(name: str, realize: BlockRealize, loops: list[For], pad: Expr) -> Stmt:
    """Copies of ``loops`` around a block writing ``pad`` wherever ``realize`` writes."""
    block = realize.block
    vmap: dict[Var, Var] = {l.loop_var: Var(l.loop_var.name) for l in loops}
    ivs = tuple(IterVar(Var(iv.var.name), iv.dom, SPATIAL) for iv in block.iter_vars)
    imap = {old.var: new.var for old, new in zip(block.iter_vars, ivs)}
    store = cast(BufferStore, block.body)  # decompose_padding checked the pattern
    new_block = Block(
        name, ivs, (), _each(block.writes, imap), BufferStore(store.buffer, pad, _each(store.indices, imap))
    )
    nest: Stmt = BlockRealize(
        _each(realize.iter_values, vmap), substitute(realize.predicate, vmap), new_block
    )
    for l in reversed(loops):
        nest = For(vmap[l.loop_var], l.min, l.extent, l.kind, nest, l.thread_tag, l.annotations)
    return nest


@schedule_primitive("decompose_padding", tvm_inputs=("block", "loop"))
def decompose_padding(sch: Schedule, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split a padding block ``buf[...] = if_then_else(cond, value, pad)`` into a block
    ``<block>_pad_const`` writing the constant ``pad`` everywhere (in a copy of the loops from
    ``loop`` down, placed right before ``loop``), and the block itself, now iterating only over
    the in-bound region where it writes ``value``. Returns the constant block.

    Rules: ``loop`` is above the block; the block is complete; its body has the pattern with a
    constant ``pad`` and ``cond`` a conjunction of bounds on single iterators that is not
    always true.

    The loops holding nothing but the block shrink to the in-bound region; a loop that also
    holds another block (put there by ``compute_at`` or ``reverse_compute_at``) keeps its
    range, and the block is bound under it with the in-bound condition as predicate.

    Before / after ``decompose_padding(P, i)``::

        for i in range(10):                for i in range(10):
          block P: vi = i                    block P_pad_const: vi = i
            P[vi] = if_then_else(                P[vi] = 0
              1 <= vi < 9, A[vi - 1], 0)   for i in range(8):
                                             block P: vi = i
                                               P[vi + 1] = A[vi]
    """
    node = sch.get(block)
    target = sch.get(loop)
    idx = sch.index
    loops = idx.loops_above(node)
    if target not in loops:
        raise ScheduleError(
            "decompose_padding",
            f"loop {target.loop_var.name!r} is not above block {node.name!r}",
            argument="loop",
            nodes=[target, node],
        )
    check_complete("decompose_padding", idx, node)
    store = node.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Select):
        raise _pattern_error(node, "its body is not a store of an if_then_else")
    sel = store.value
    if not isinstance(sel.false_value, (IntImm, FloatImm)):
        raise _pattern_error(node, f"the padding value {sel.false_value} is not a constant")
    for iv in node.iter_vars:
        if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
            raise _pattern_error(node, f"iterator {iv.var.name!r} has a non-constant domain")
    box = _in_bound_box(node, sel.condition)
    realize = idx.realizes[node.name]
    if all(
        box[iv.var] == (iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value) for iv in node.iter_vars
    ):
        raise _pattern_error(node, f"the condition {sel.condition} always holds")
    if any(lo >= hi for lo, hi in box.values()):
        raise _pattern_error(node, f"the condition {sel.condition} never holds")
    # the in-bound nest is rebuilt up to the highest loop that holds only the next one; a loop
    # that also holds other statements (a producer put there by compute_at) runs them for its
    # whole range, so it is not shrunk: the block is then bound in place under a predicate
    first = loops.index(target)
    chain: list[For] = []
    if loops[-1].body is realize:
        top = len(loops) - 1
        while top > first and loops[top - 1].body is loops[top]:
            top -= 1
        chain = loops[top:]
    new_ranges = {l.loop_var: Range(l.min, l.extent) for l in chain}
    loop_shift: dict[Var, Expr] = {}
    ivs: list[IterVar] = []
    shift: dict[Var, Expr] = {}
    shifted: list[Optional[Expr]] = []
    for iv, value in zip(node.iter_vars, realize.iter_values):
        lo, hi = box[iv.var]
        new = IterVar(Var(iv.var.name), Range.from_extent(hi - lo), SPATIAL)
        ivs.append(new)
        shift[iv.var] = new.var + lo
        if isinstance(value, Var) and value in new_ranges and value not in loop_shift:
            new_ranges[value] = Range.from_extent(hi - lo)  # shrink the loop itself
            loop_shift[value] = value + lo
            shifted.append(None)  # bound to the shrunk loop as it is
        else:
            shifted.append(value - lo)
    outer = idx.var_ranges(chain[0] if chain else realize)
    scope_ranges = {**outer, **new_ranges}
    values = [
        value if v is None else simplify(substitute(v, loop_shift), scope_ranges)
        for v, value in zip(shifted, realize.iter_values)
    ]
    bindings = {iv.var: v for iv, v in zip(node.iter_vars, realize.iter_values)}
    cond = substitute(sel.condition, bindings)
    pred = simplify(substitute(conjoin(realize.predicate, cond), loop_shift), scope_ranges)
    inner = {iv.var: iv.dom for iv in ivs}
    body = _simplify_accesses(
        BufferStore(store.buffer, substitute(sel.true_value, shift), _each(store.indices, shift)), inner
    )
    reads, writes = infer_access_regions(body, var_ranges=inner)
    in_bound = node.with_(iter_vars=tuple(ivs), reads=reads, writes=writes, body=body)
    nest: Stmt = BlockRealize(tuple(values), TRUE if is_const(pred, 1) else pred, in_bound)
    for l in reversed(chain):
        rng = new_ranges[l.loop_var]
        nest = l.with_(min=rng.min, extent=rng.extent, body=nest)
    name = fresh_name(f"{node.name}_pad_const", set(idx.realizes))
    fill = _const_fill(name, realize, loops[first:], sel.false_value)
    sch.replace(chain[0] if chain else realize, nest)
    moved = sch.index.loops[target.loop_var]
    sch.replace(moved, seq(fill, moved))
    return sch.new_rv(BlockRV, name)


__all__ = ["set_scope", "storage_align", "transform_layout", "transform_block_layout", "decompose_padding"]
