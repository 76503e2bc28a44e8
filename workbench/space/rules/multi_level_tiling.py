"""``MultiLevelTiling``: tile a compute-intensive block into levels of spatial and reduction
loops (the paper's Figure 4), optionally with cache stages for data reuse.

The ``structure`` string names the levels outer to inner: ``"SSRSRS"`` on CPU, ``"SSSRRSRS"``
on GPU. Each spatial loop is split into as many tiles as there are ``S`` (tile sizes from
``sample_perfect_tile``), each reduction loop into as many as there are ``R``, and the tiles are
reordered level by level. For a matmul ``C[i, j] += A[i, k] * B[k, j]`` and ``"SSRSRS"``::

    for i, j, k:                 for i0, j0:            # level 1 (S)
      C[i, j] += ...               for i1, j1:          # level 2 (S)
                                     for k0:            # level 3 (R)
                                       for i2, j2:      # level 4 (S)
                                         for k1:        # level 5 (R)
                                           for i3, j3:  # level 6 (S)
                                             C[i, j] += ...

Then the sub-rules, each of which may fork the design space: a write cache (``cache_write``
placed at a tile level with ``reverse_compute_at``) and read caches (``cache_read`` +
``compute_at`` into a tile level, fetched cooperatively on GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ...ir.stmt import REDUCE, SPATIAL
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    COOPERATIVE_FETCH,
    THREAD_EXTENT_HIGH,
    THREAD_EXTENT_LOW,
    TILING_STRUCTURE,
    const_extent,
    is_write_cache,
    needs_multi_level_tiling,
)
from ..plugin import target_kind
from .base import ScheduleRule, fork


@dataclass(frozen=True)
class ReuseType:
    """Data reuse through a cache stage: ``req`` is ``"no"``, ``"may"`` (fork: with and without
    the cache) or ``"must"``; ``levels`` are the tile levels (1-based) where the cache stage may
    be placed (one fork each); ``scope`` is the cache's storage scope."""

    req: str = "no"
    levels: tuple[int, ...] = ()
    scope: str = "global"

    def __post_init__(self):
        if self.req not in ("no", "may", "must"):
            raise ValueError(f"ReuseType.req must be 'no', 'may' or 'must', got {self.req!r}")
        object.__setattr__(self, "levels", tuple(self.levels))

    @staticmethod
    def of(value: Union[None, "ReuseType", Mapping[str, Any]]) -> "ReuseType":
        """Accepts None (no reuse), a ReuseType, or TVM's dict ``{"req", "levels", "scope"}``."""
        if value is None:
            return ReuseType()
        return value if isinstance(value, ReuseType) else ReuseType(**value)


@dataclass
class State:
    """One branch of the rule: its schedule, the block, and the loops of each tile level."""

    sch: Schedule
    block: BlockRV
    tiles: list[list[LoopRV]] = field(default_factory=list)

    def copy(self) -> "State":
        return State(fork(self.sch), self.block, [list(t) for t in self.tiles])


class MultiLevelTiling(ScheduleRule):
    """Multi-level tiling with optional write / read caches (TVM's ``MultiLevelTiling``).

    ``tile_binds``: thread axes the first levels are fused and bound to (GPU). ``filter_fn(sch,
    block) -> bool`` replaces the default test of which blocks to tile (reductions whose reads
    miss a spatial iterator, i.e. that reuse data).
    """

    def __init__(
        self,
        structure: str = "SSRSRS",
        tile_binds: Optional[Sequence[str]] = None,
        max_innermost_factor: Optional[int] = 64,
        vector_load_lens: Optional[Sequence[int]] = None,
        reuse_read: Union[None, ReuseType, Mapping[str, Any]] = None,
        reuse_write: Union[None, ReuseType, Mapping[str, Any]] = None,
        filter_fn: Optional[Callable[[Schedule, BlockRV], bool]] = None,
    ):
        if not structure or set(structure) - {"S", "R"}:
            raise ValueError(f"tiling structure must be a string of 'S' and 'R', got {structure!r}")
        self.structure = structure
        self.tile_binds = list(tile_binds or [])
        self.max_innermost_factor = max_innermost_factor
        self.vector_load_lens = list(vector_load_lens or [])
        self.reuse_read = ReuseType.of(reuse_read)
        self.reuse_write = ReuseType.of(reuse_write)
        if self.reuse_read.req == "may":
            raise ValueError("reuse_read: 'may' is not supported; use 'must' or 'no'")
        self.filter_fn = filter_fn
        self.s_indices = [k for k, c in enumerate(structure) if c == "S"]
        self.r_indices = [k for k, c in enumerate(structure) if c == "R"]
        self.thread_warp_size: Optional[int] = None
        self.max_threads_per_block: Optional[int] = None

    def initialize_with_target(self, target) -> None:
        super().initialize_with_target(target)
        if target_kind(self.target) == "cuda":
            self.max_threads_per_block = self.target.max_threads_per_block
            self.thread_warp_size = self.target.thread_warp_size

    # entry ----------------------------------------------------------------------------------
    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if self.filter_fn is not None:
            wanted = self.filter_fn(sch, block)
        else:
            wanted = needs_multi_level_tiling(sch.index, sch.get(block))
        if not wanted:
            return [sch]
        sch.annotate(block, TILING_STRUCTURE, self.structure)
        states = [State(sch, block)]
        for sub_rule in self.sub_rules():
            states = [out for state in states for out in sub_rule(state)]
        return [state.sch for state in states]

    def sub_rules(self) -> list[Callable[[State], list[State]]]:
        """The steps, in order; each maps one state to the states it forks into."""
        return [self.tile_loop_nest, self.add_write_reuse, self.add_read_reuse]

    # tiling ---------------------------------------------------------------------------------
    def split_loop(self, sch: Schedule, loop: LoopRV, n: int) -> list[LoopRV]:
        factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=self.max_innermost_factor)
        return sch.split(loop, factors=factors)

    def tile_loop_nest(self, state: State) -> list[State]:
        sch, block = state.sch, state.block
        loops = sch.get_loops(block)
        iter_types = [iv.iter_type for iv in sch.get(block).iter_vars]
        tiles: list[list[LoopRV]] = [[] for _ in self.structure]
        spatial_product: Optional[int] = 1
        for loop, kind in zip(loops, iter_types):
            if kind == SPATIAL:
                slots = self.s_indices
                extent = const_extent(sch.get(loop))
                spatial_product = (
                    None if extent is None or spatial_product is None else spatial_product * extent
                )
            elif kind == REDUCE:
                slots = self.r_indices
            else:
                continue  # opaque iterators keep their loop where it is
            if len(slots) == 1:
                tiles[slots[0]].append(loop)
                continue
            for slot, part in zip(slots, self.split_loop(sch, loop, len(slots))):
                tiles[slot].append(part)
        sch.reorder(*[loop for tile in tiles for loop in tile])
        for level, thread_axis in enumerate(self.tile_binds[: len(tiles)]):
            fused = sch.fuse(*tiles[level])
            sch.bind(fused, thread_axis)
            tiles[level] = [fused]
        state.tiles = tiles
        if self.thread_warp_size is not None:
            low = 1
            if spatial_product is not None and spatial_product > 2 * self.thread_warp_size:
                low = self.thread_warp_size
            sch.annotate(block, THREAD_EXTENT_LOW, low)
            sch.annotate(block, THREAD_EXTENT_HIGH, self.max_threads_per_block)
        return [state]

    # caches ---------------------------------------------------------------------------------
    def add_write_reuse(self, state: State) -> list[State]:
        config = self.reuse_write
        if config.req == "no":
            return [state]
        results = []
        if config.req == "may":
            # through the schedule, so the trace records the query as TVM's does
            found = state.sch.get_consumers(state.block)
            if len(found) == 1 and is_write_cache(state.sch.get(found[0])):
                # the single consumer already is a write cache or an elementwise epilogue:
                # place it at the tile, or leave it where it is
                cache = found[0]
                for level in config.levels:
                    new = state.copy()
                    new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
                    results.append(new)
                return results + [state]
            results.append(state.copy())  # the branch without a cache
        cache = state.sch.cache_write(state.block, 0, config.scope)
        for level in config.levels:
            new = state.copy()
            new.sch.reverse_compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
            results.append(new)
        return results

    def add_read_reuse(self, state: State) -> list[State]:
        config = self.reuse_read
        if config.req == "no":
            return [state]
        results = []
        for level in config.levels:
            new = state.copy()
            sch = new.sch
            node = sch.get(new.block)
            written = node.writes[0].buffer
            for index, read in enumerate(node.reads):
                if read.buffer is written:
                    continue
                cache = sch.cache_read(new.block, index, config.scope, consumer_blocks=[new.block])
                sch.compute_at(cache, new.tiles[level - 1][-1], preserve_unit_loops=True)
                ndim = len(read.buffer.shape)
                sch.fuse(*sch.get_loops(cache)[-ndim:])
                self.annotate_cooperative_fetch(sch, cache)
            results.append(new)
        return results

    def annotate_cooperative_fetch(self, sch: Schedule, cache: BlockRV) -> None:
        """Sample the vector length the threads fetch a GPU cache stage with."""
        dtype = sch.get(cache).writes[0].buffer.dtype
        limit = {"float32": 4, "float16": 8, "int8": 16}.get(dtype)
        lens = [n for n in self.vector_load_lens if limit is None or n <= limit]
        if dtype == "float16":
            lens = [n for n in lens if n == 1 or n % 2 == 0]
        if lens:
            v = sch.sample_categorical(lens, [1.0 / len(lens)] * len(lens))
            sch.annotate(cache, COOPERATIVE_FETCH, v)
