"""What a block declares rather than what it computes: the order of its iterators
(``reorder_block_iter_var``), its read/write regions (``annotate_buffer_access``,
``unsafe_hide_buffer_access``) and the element type of a buffer it writes
(``unsafe_set_dtype``), as in TVM 0.27.

The ``unsafe_`` ones may change what the function computes (a narrower dtype rounds) or what
the analyses of later primitives see (a hidden access is not a dependence): TVM's names keep
saying so.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...errors import ScheduleError
from ...ir.buffer import Buffer
from ...ir.expr import BufferLoad, Cast, IntImm, check_dtype, convert
from ...ir.functor import transform
from ...ir.index_map import IndexMap, _text
from ...ir.stmt import Block, BlockRealize, BufferRegion, BufferStore, Range
from ..instruction import Instruction, py_value, schedule_primitive
from ..rewrite import simplify
from ..rv import RV, BlockRV
from .cache import allocation_site, nth_buffer

if TYPE_CHECKING:
    from ..schedule import Schedule


def _block_name(block: Block) -> str:
    return f"block {block.name!r}"


def _int_list(primitive: str, value: Any, argument: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ScheduleError(primitive, f"expected a list of ints, got {value!r}", argument=argument)
    return list(value)


def _buf_type(primitive: str, value: Any) -> str:
    if value not in ("read", "write"):
        raise ScheduleError(
            primitive, f"buf_type must be 'read' or 'write', got {value!r}", argument="buf_type"
        )
    return value


# ------------------------------------------------------------------------------------------
# reorder_block_iter_var


@schedule_primitive("reorder_block_iter_var", tvm_inputs=("block", "new_order"))
def reorder_block_iter_var(sch: Schedule, block: BlockRV, new_order: list[int]) -> None:
    """Reorder the iterators of ``block`` (and their bindings): iterator ``k`` of the result is
    iterator ``new_order[k]`` of the block. Nothing is computed differently; later primitives
    that work by iterator position (``blockize``'s and ``tensorize``'s matching, layout
    rewrites) see the new order.

    Rule: ``new_order`` is a permutation of ``0 .. n-1`` for the block's ``n`` iterators.

    Before / after ``reorder_block_iter_var(C, [2, 1, 0])``::

        block C:                           block C:
          vi, vj, vk = remap("SSR",          vk, vj, vi = remap("RSS",
                             [i, j, k])                         [k, j, i])
    """
    node = sch.get(block)
    order = _int_list("reorder_block_iter_var", new_order, "new_order")
    n = len(node.iter_vars)
    if sorted(order) != list(range(n)):
        raise ScheduleError(
            "reorder_block_iter_var",
            f"{order} is not a permutation of [0, 1, ..., {n - 1}] for the {n} iterators of "
            f"{_block_name(node)}",
            argument="new_order",
            nodes=[node],
        )
    realize = sch.index.realizes[node.name]
    new_block = node.with_(iter_vars=tuple(node.iter_vars[k] for k in order))
    sch.replace(
        realize,
        BlockRealize(tuple(realize.iter_values[k] for k in order), realize.predicate, new_block),
    )


# ------------------------------------------------------------------------------------------
# unsafe_set_dtype


@schedule_primitive(
    "unsafe_set_dtype", tvm_name="UnsafeSetDType", tvm_inputs=("block",), tvm_attrs=("buffer_index", "dtype")
)
def unsafe_set_dtype(sch: Schedule, block: BlockRV, buffer_index: int, dtype: str) -> None:
    """Change the element type of the intermediate buffer ``block.writes[buffer_index]`` to
    ``dtype``: every store into it casts the value to ``dtype``, every load from it casts back
    to the old type, so the other expressions keep their types. Unsafe: a narrower type rounds
    or wraps what the buffer holds (as in TVM).

    Rules: the buffer is allocated by a block (a parameter's type is the function's
    interface); ``dtype`` is a known type. The same type as now changes nothing.

    Before / after ``unsafe_set_dtype(B, 0, "float16")``::

        B = T.alloc_buffer((8, 8))         B = T.alloc_buffer((8, 8), "float16")
        B[vi, vj] = A[vi, vj] * 2.0        B[vi, vj] = T.Cast("float16", A[vi, vj] * 2.0)
        C[vi, vj] = B[vi, vj] + 1.0        C[vi, vj] = T.Cast("float32", B[vi, vj]) + 1.0
    """
    node = sch.get(block)
    buf = nth_buffer("unsafe_set_dtype", node, buffer_index, "write", "buffer_index")
    try:
        check_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ScheduleError("unsafe_set_dtype", str(exc), argument="dtype") from None
    if dtype == buf.dtype:
        return None
    site = allocation_site(sch.index, node, buf)
    if site is None:
        raise ScheduleError(
            "unsafe_set_dtype",
            f"{buf.name} is a parameter of {sch.func.name}: its dtype is the function's interface "
            f"(apply it to an intermediate buffer, e.g. one made by cache_write)",
            argument="buffer_index",
            nodes=[node],
        )
    new = buf.with_(dtype=dtype)
    old_dtype = buf.dtype

    def post(n: Any) -> Any:
        if isinstance(n, BufferLoad) and n.buffer is new:
            return Cast(old_dtype, BufferLoad(new, n.indices))
        if isinstance(n, BufferStore) and n.buffer is new:
            return BufferStore(new, Cast(dtype, n.value), n.indices)
        return n

    sch.replace(site, transform(site, post, buffer_map={buf: new}))
    return None


# ------------------------------------------------------------------------------------------
# unsafe_hide_buffer_access


@schedule_primitive("unsafe_hide_buffer_access", tvm_inputs=("block", "buf_type", "buf_index_array"))
def unsafe_hide_buffer_access(
    sch: Schedule, block: BlockRV, buf_type: str, buf_index_array: list[int]
) -> None:
    """Drop entries ``buf_index_array`` from the read (``buf_type="read"``) or write regions
    of ``block``; the body still accesses those buffers. Unsafe: dependence analyses no longer
    see the access. TVM's use: hiding reads of index buffers (sparse formats) so that the
    block matches a tensor intrinsic.

    Rules: ``buf_type`` is ``"read"`` or ``"write"``; each index is in range (repeats are
    allowed and count once, as in TVM).

    Before / after ``unsafe_hide_buffer_access(B, "read", [0])``::

        block B: reads(I[vi], A[I[vi]])    block B: reads(A[I[vi]])
    """
    node = sch.get(block)
    kind = _buf_type("unsafe_hide_buffer_access", buf_type)
    indices = _int_list("unsafe_hide_buffer_access", buf_index_array, "buf_index_array")
    regions = node.reads if kind == "read" else node.writes
    for k in indices:
        if not 0 <= k < len(regions):
            raise ScheduleError(
                "unsafe_hide_buffer_access",
                f"{_block_name(node)} has {len(regions)} {kind} regions; {k} is not an index into them",
                argument="buf_index_array",
                nodes=[node],
            )
    kept = tuple(r for k, r in enumerate(regions) if k not in set(indices))
    sch.replace(node, node.with_(**{"reads" if kind == "read" else "writes": kept}))


# ------------------------------------------------------------------------------------------
# annotate_buffer_access


class RegionMap:
    """A region written as a function of a block's iterators: ``lambda vi, vj: ((vi - 1, vi +
    1), vj)`` gives, per buffer axis, ``(begin, end)`` or a single index (``vj`` is ``(vj, vj +
    1)``). Kept as the :class:`IndexMap` of the flat ``(begin, end, begin, end, ...)`` list,
    which is what a trace records (text, no ``eval``: ``lambda vi, vj: (vi - 1, vi + 1, vj,
    vj + 1)``); that text is also accepted."""

    @staticmethod
    def coerce(value: Any) -> IndexMap:
        if isinstance(value, (str, IndexMap)):
            imap = IndexMap.coerce(value)
            if len(imap.results) % 2:
                raise ValueError(f"{imap} does not give (begin, end) pairs: it has an odd number of results")
            return imap
        if not callable(value):
            raise TypeError(f"expected a function of the block iterators, got {value!r}")
        return IndexMap.from_func(_flat_ranges(value))

    @classmethod
    def __trace_arg__(cls, value: Any) -> str:
        return str(cls.coerce(value))


def _flat_ranges(fn: Callable) -> Callable:
    def flat(*params):
        out: list[Any] = []
        for item in fn(*params):
            if isinstance(item, (tuple, list)):
                if len(item) != 2:
                    raise ValueError(f"a range is (begin, end), got {item!r}")
                out.extend(convert(x) for x in item)
            else:
                out.extend((convert(item), convert(item) + 1))
        return out

    return functools.wraps(fn)(flat)


def _render_annotate_buffer_access(inst: Instruction, names: Mapping[RV, str]) -> str:
    """TVM's text: the ranges as a lambda giving a list of ``(begin, end)`` pairs."""
    imap = IndexMap.parse(inst.args["gen_new_ranges"])
    pairs = [f"({_text(a)}, {_text(b)})" for a, b in zip(imap.results[::2], imap.results[1::2])]
    fn = f"lambda {', '.join(p.name for p in imap.params)}: [{', '.join(pairs)}]"
    return (
        f"sch.annotate_buffer_access(block={names[inst.args['block']]}, "
        f"buffer_index={py_value(inst.args['buffer_index'], names)}, "
        f"buf_type={py_value(inst.args['buf_type'], names)}, gen_new_ranges={fn})"
    )


@schedule_primitive("annotate_buffer_access", as_python=_render_annotate_buffer_access)
def annotate_buffer_access(
    sch: Schedule, block: BlockRV, buffer_index: int, buf_type: str, gen_new_ranges: RegionMap
) -> None:
    """Declare the region of ``block.reads[buffer_index]`` (``buf_type="read"``) or of its
    writes explicitly, as ``gen_new_ranges(*block iterators)``: one ``(begin, end)`` pair, or
    one index, per buffer axis. The block gets the annotation ``explicit_read_region`` (or
    ``explicit_write_region``) listing the annotated indices, as in TVM, so that passes which
    would re-derive the region keep it. For accesses that analysis over-approximates (a
    resize reading ``x[0:32]`` where each point needs a 6-wide window); the region is trusted.

    Rules: ``buf_type`` is ``"read"`` or ``"write"``; ``buffer_index`` is in range; the function
    takes one parameter per block iterator and gives one range per buffer axis (TVM compares
    the ranges with the iterator count, and stops with an InternalError when the axis count
    differs: the axis count is what a region needs); the ranges
    use ``+ - * // %`` of the iterators and integers (an index map's language).

    Before / after ``annotate_buffer_access(B, 0, "read", lambda vi, vj: ((vi - 1, vi + 1),
    (vj - 1, vj + 1)))``::

        block B:                           block B:
          reads(A[vi, vj])                   reads(A[vi - 1:vi + 1, vj - 1:vj + 1])
                                             block_attr({"explicit_read_region": [0]})
    """
    node = sch.get(block)
    kind = _buf_type("annotate_buffer_access", buf_type)
    if isinstance(buffer_index, bool) or not isinstance(buffer_index, int):
        raise ScheduleError(
            "annotate_buffer_access", f"expected an int, got {buffer_index!r}", argument="buffer_index"
        )
    buf: Buffer = nth_buffer("annotate_buffer_access", node, buffer_index, kind, "buffer_index")
    imap = RegionMap.coerce(gen_new_ranges)
    n_iters = len(node.iter_vars)
    if len(imap.params) != n_iters:
        raise ScheduleError(
            "annotate_buffer_access",
            f"{imap} takes {len(imap.params)} iterators; {_block_name(node)} has {n_iters}",
            argument="gen_new_ranges",
            nodes=[node],
        )
    if len(imap.results) != 2 * buf.ndim:
        raise ScheduleError(
            "annotate_buffer_access",
            f"{imap} gives {len(imap.results) // 2} ranges; {buf.name} has {buf.ndim} axes",
            argument="gen_new_ranges",
            nodes=[node],
        )
    bounds = imap.map_indices([iv.var for iv in node.iter_vars])
    ranges = tuple(Range(b, simplify(e - b, {})) for b, e in zip(bounds[::2], bounds[1::2]))
    for r in ranges:
        if isinstance(r.extent, IntImm) and r.extent.value <= 0:
            raise ScheduleError(
                "annotate_buffer_access",
                f"the range [{r.min}, {r.min} + {r.extent}) of {buf.name} is empty",
                argument="gen_new_ranges",
                nodes=[node],
            )
    regions = list(node.reads if kind == "read" else node.writes)
    regions[buffer_index] = BufferRegion(buf, ranges)
    key = f"explicit_{kind}_region"
    marked = tuple(node.annotations.get(key, ()))
    if buffer_index not in marked:
        marked = marked + (buffer_index,)
    field = "reads" if kind == "read" else "writes"
    sch.replace(node, node.with_(**{field: tuple(regions)}, annotations={**node.annotations, key: marked}))
