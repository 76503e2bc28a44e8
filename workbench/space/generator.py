"""Space generators: where a design space — a list of traces — comes from.

* :class:`PostOrderApply` applies schedule rules to every block (Ansor-style, template-free);
* :class:`ScheduleFn` runs a user's probabilistic program (AutoTVM-style template, or a fully
  manual schedule when it samples nothing);
* :class:`SpaceUnion` takes the union of other generators' spaces (RFC section 4.1).

Each schedule returned carries a trace whose sampling decisions were drawn with the given
seed; the search replays those traces with new decisions. A generator also holds the
postprocessors and mutators that go with its space (the target's defaults unless given), so a
tuner needs nothing else.
"""

from __future__ import annotations

import random
from typing import Any, Callable, ClassVar, Iterable, Mapping, Optional, Sequence, Union

from ..target import Target
from ..ir.func import PrimFunc
from ..schedule import BlockRV, Schedule
from ..ir.index import index
from .mutators import Mutator
from .plugin import Pluggable, target_kind
from .postprocs import Postproc
from .rules import ScheduleRule

RuleSpec = Union[str, ScheduleRule]


class SpaceGenerator(Pluggable):
    """Base of the space generators.

    ``postprocs`` (a list, or None for the target's defaults) validate and finish each
    candidate; ``mutator_probs`` (mutator -> probability, or None for the defaults) propose
    neighbours during the search. Both are resolved by :meth:`initialize_with_target`.
    """

    _registry: ClassVar[dict[str, type]] = {}

    def __init__(
        self,
        postprocs: Optional[Sequence[Union[str, Postproc]]] = None,
        mutator_probs: Optional[Mapping[Union[str, Mutator], float]] = None,
    ):
        self._postprocs_arg = postprocs
        self._mutators_arg = mutator_probs
        self.postprocs: list[Postproc] = []
        self.mutator_probs: dict[Mutator, float] = {}

    def initialize_with_target(self, target: Union[str, Target]) -> None:
        super().initialize_with_target(target)
        kind = target_kind(self.target)
        if self._postprocs_arg is None:
            self.postprocs = Postproc.create(kind)
        else:
            self.postprocs = [Postproc.named(p) if isinstance(p, str) else p for p in self._postprocs_arg]
        if self._mutators_arg is None:
            self.mutator_probs = Mutator.create(kind)
        else:
            self.mutator_probs = {
                (Mutator.named(m) if isinstance(m, str) else m): float(p)
                for m, p in self._mutators_arg.items()
            }
        for piece in [*self.postprocs, *self.mutator_probs]:
            piece.initialize_with_target(self.target)

    def generate_design_space(self, func: PrimFunc, seed: Optional[int] = None) -> list[Schedule]:
        """The design space of ``func``: schedules whose traces have sampled decisions.

        Also hands ``func`` to the mutators (those that replay traces need it)."""
        if self.target is None:
            self.initialize_with_target(Target.host())
        for mutator in self.mutator_probs:
            mutator.initialize_with_func(func)
        return self._generate(func, seed)

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        raise NotImplementedError(f"{type(self).__name__} must define _generate(func, seed)")


def post_order_blocks(func: PrimFunc) -> list[str]:
    """Block names, children before their parent (the root last)."""
    idx = index(func)
    out: list[str] = []

    def visit(realize) -> None:
        for child in idx.child_realizes(realize):
            visit(child)
        out.append(realize.block.name)

    visit(func.body)
    return out


class PostOrderApply(SpaceGenerator):
    """Apply each rule, in order, to every block (TVM's ``PostOrderApply``).

    For each rule the blocks are visited from the last in post-order (the root) to the first,
    i.e. consumers before producers; a block a previous step removed (inlined) is skipped. A
    rule returning several schedules forks the space: the remaining blocks are visited in
    each; a rule returning none (``[]``) is an error, since it would empty the space: a rule
    leaves a block it does not handle unchanged by returning ``[sch]``. ``rules``: instances
    or registered names, None for the target's defaults; ``block_filter(block) -> bool``
    restricts the blocks visited.
    """

    def __init__(
        self,
        rules: Optional[Sequence[RuleSpec]] = None,
        postprocs: Optional[Sequence[Union[str, Postproc]]] = None,
        mutator_probs: Optional[Mapping[Union[str, Mutator], float]] = None,
        block_filter: Optional[Callable[[Any], bool]] = None,
    ):
        super().__init__(postprocs, mutator_probs)
        self._rules_arg = rules
        self.rules: list[ScheduleRule] = []
        self.block_filter = block_filter

    def initialize_with_target(self, target: Union[str, Target]) -> None:
        super().initialize_with_target(target)
        if self._rules_arg is None:
            self.rules = ScheduleRule.create(target_kind(self.target))
        else:
            self.rules = [ScheduleRule.named(r) if isinstance(r, str) else r for r in self._rules_arg]
        for rule in self.rules:
            rule.initialize_with_target(self.target)

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        sch = Schedule(func, seed=seed)
        names = post_order_blocks(func)
        if self.block_filter is not None:
            names = [n for n in names if self.block_filter(index(func).block(n))]
        blocks = [sch.get_block(n) for n in names]
        result = [sch]
        for rule in self.rules:
            result = [out for s in result for out in _apply_everywhere(rule, s, blocks)]
        return result


def _apply_everywhere(rule: ScheduleRule, sch: Schedule, blocks: list[BlockRV]) -> list[Schedule]:
    current = [sch]
    for block in reversed(blocks):
        following: list[Schedule] = []
        for s in current:
            if s.symbols[block] not in s.index.realizes:
                following.append(s)  # inlined or otherwise removed by an earlier step
                continue
            produced = rule.apply(s, block)
            if not isinstance(produced, list) or not all(isinstance(p, Schedule) for p in produced):
                raise TypeError(
                    f"{type(rule).__name__}.apply must return a list of Schedules, got {produced!r}"
                )
            if not produced:
                # TVM drops such a branch silently; one rule doing it for one block (the root,
                # say) would empty the whole design space with no hint why
                name = s.symbols[block]
                root = " (the root block: rules see it too)" if name == s.func.body.block.name else ""
                raise ValueError(
                    f"schedule rule {type(rule).__name__} returned no schedule for "
                    f"block {name!r}{root}; return [sch] to leave a block "
                    f"unchanged"
                )
            following.extend(produced)
        current = following
    return current


class ScheduleFn(SpaceGenerator):
    """A user's probabilistic program as the space: ``fn(sch)`` transforms ``sch`` (return
    None), or returns a schedule or a list of schedules (forks)::

        def matmul_template(sch):
            i, j, k = sch.get_loops("C")
            sch.split(i, factors=sch.sample_perfect_tile(i, n=2))
        space = ScheduleFn(matmul_template)
    """

    def __init__(
        self,
        fn: Callable[[Schedule], Any],
        postprocs: Optional[Sequence[Union[str, Postproc]]] = None,
        mutator_probs: Optional[Mapping[Union[str, Mutator], float]] = None,
    ):
        super().__init__(postprocs, mutator_probs)
        self.fn = fn

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        sch = Schedule(func, seed=seed)
        out = self.fn(sch)
        if out is None:
            return [sch]
        if isinstance(out, Schedule):
            return [out]
        if isinstance(out, (list, tuple)) and all(isinstance(s, Schedule) for s in out):
            return list(out)
        raise TypeError(
            f"ScheduleFn: {getattr(self.fn, '__name__', self.fn)} must return None, "
            f"a Schedule or a list of them, got {type(out).__name__}"
        )


class SpaceUnion(SpaceGenerator):
    """The union of several generators' spaces (their schedules, concatenated in order)."""

    def __init__(
        self,
        generators: Iterable[SpaceGenerator],
        postprocs: Optional[Sequence[Union[str, Postproc]]] = None,
        mutator_probs: Optional[Mapping[Union[str, Mutator], float]] = None,
    ):
        super().__init__(postprocs, mutator_probs)
        self.generators = list(generators)
        if not self.generators:
            raise ValueError("SpaceUnion needs at least one space generator")

    def initialize_with_target(self, target: Union[str, Target]) -> None:
        super().initialize_with_target(target)
        for gen in self.generators:
            gen.initialize_with_target(self.target)

    def _generate(self, func: PrimFunc, seed: Optional[int]) -> list[Schedule]:
        rng = random.Random(seed)
        return [s for gen in self.generators for s in gen._generate(func, rng.randrange(2**31))]


def as_space(space: Any) -> SpaceGenerator:
    """A generator from what a user would pass: a generator, None (PostOrderApply with the
    default rules), a registered generator name, a function (ScheduleFn), or a list of those
    (SpaceUnion)."""
    if space is None:
        return PostOrderApply()
    if isinstance(space, SpaceGenerator):
        return space
    if isinstance(space, str):
        return SpaceGenerator.named(space)
    if isinstance(space, (list, tuple)):
        return SpaceUnion([as_space(s) for s in space])
    if callable(space):
        return ScheduleFn(space)
    raise TypeError(f"cannot make a space generator from {type(space).__name__} {space!r}")


def generate_design_space(
    func: PrimFunc, target: Union[str, Target] = "llvm", seed: int = 0, space: Any = None
) -> list[Schedule]:
    """The design space of ``func`` for ``target``: a list of schedules, one per sketch, each
    with decisions drawn from ``seed``. Their traces (``[s.trace for s in spaces]``) are what
    the search explores.

    >>> spaces = generate_design_space(func, target="llvm", seed=0)
    >>> print(spaces[0].trace)
    b0 = sch.get_block(name="C")
    ...
    """
    gen = as_space(space)
    gen.initialize_with_target(target)
    return gen.generate_design_space(func, seed=seed)
