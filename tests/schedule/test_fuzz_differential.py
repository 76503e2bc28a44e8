"""Differential fuzzing of the primitives (workbench.fuzz): random programs, random sequences
of primitives, every accepted schedule built on llvm and compared with the unscheduled function,
every refused step checked to leave the schedule unchanged, every trace replayed.

The steps that reach a known bug, being fixed elsewhere, are left out by ``known_bug`` below:
each rule names its bug; delete a rule once its fix is merged (the test must stay green).
``bench/fuzz_schedules.py`` runs the same cases by the thousand.
"""

from __future__ import annotations

from typing import Optional

import pytest

import workbench as wb
from workbench import fuzz
from workbench.errors import ScheduleError
from workbench.ir.functor import pre_order
from workbench.ir.stmt import Block
from workbench.schedule.rv import BlockRV, LoopRV

#: about 0.45 s each on one core. Cases 7 and 87 (split / fuse above an opaque block), 8
#: (reverse_compute_at of a padding stage) and 37 (decompose_padding with a sibling block under
#: the loop) failed before those bugs were fixed.
CASES = range(0, 100)


def _blocks_under(sch, loop) -> list[Block]:
    node = sch.get(loop)
    return [n for n in pre_order(node.body) if isinstance(n, Block)]


def _loop_arg(step) -> Optional[LoopRV]:
    return next((a for a in step.args if isinstance(a, LoopRV)), None)


def _block_arg(sch, step) -> Optional[Block]:
    rv = next((a for a in step.args if isinstance(a, BlockRV)), None)
    return None if rv is None else sch.get(rv)


def known_bug(sch, step) -> Optional[str]:
    """The known bug ``step`` would reach (None: draw it). Each rule is removed with its fix;
    none is open now (the rules of the bugs fixed so far are in the history of this file)."""
    return None


@pytest.mark.parametrize("chunk", range(4))
def test_random_schedules_compute_the_same(chunk):
    seeds = [s for s in CASES if s % 4 == chunk]
    totals = dict(accepted=0, refused=0, checked=0)
    reports = []
    for seed in seeds:
        r = fuzz.run_case(seed, skip=known_bug)
        for k in totals:
            totals[k] += getattr(r, k)
        reports += [f.report() for f in r.failures]
    assert not reports, "\n".join(reports)
    # the cases exercise something: most steps apply, and schedules get checked
    assert totals["checked"] >= len(seeds)
    assert totals["accepted"] > totals["refused"] / 2


def test_every_registered_primitive_is_drawn_or_excused():
    from workbench.schedule.instruction import REGISTRY

    # the engine's own primitives (other tests register theirs, e.g. tune's inject_fault)
    built_in = {name for name, kind in REGISTRY.items() if kind.fn.__module__.startswith("workbench.")}
    missing = built_in - set(fuzz.PRIMITIVES) - set(fuzz.NOT_DRAWN)
    assert not missing, f"registered primitives the fuzzer neither draws nor excuses: {sorted(missing)}"


def test_programs_are_deterministic_and_varied():
    a, b = fuzz.program(3), fuzz.program(3)
    assert str(a.func) == str(b.func)
    texts = {str(fuzz.program(s).func) for s in range(40)}
    assert len(texts) >= 35
    kinds = {p.kind for p in map(fuzz.program, range(40))}
    assert kinds == {"dsl", "script"}


def test_cases_are_deterministic():
    r1, r2 = fuzz.run_case(11, minimize_failures=False), fuzz.run_case(11, minimize_failures=False)
    assert (r1.steps, r1.accepted, r1.refused, r1.used) == (r2.steps, r2.accepted, r2.refused, r2.used)


def test_poison_shows_a_read_of_unwritten_memory():
    """The intermediates are NaN before the kernel writes them: a schedule that skips part of
    a producer's writes is caught (here an edit the primitives would refuse, done by hand)."""
    func = wb.testing.elementwise_func((4, 8))
    ref = fuzz.Reference.of(func)
    sch = wb.Schedule(func)
    broken = wb.parse(
        str(func).replace(
            'for i, j in T.grid(4, 8):\n        with T.block("B")',
            'for i, j in T.grid(3, 8):\n        with T.block("B")',
        )
    )
    assert str(broken) != str(func)
    sch.func = broken
    with pytest.raises(fuzz.Bug, match="wrong"):
        fuzz.check_final(sch, ref, roundtrip=False)


def test_a_refusal_that_changes_the_schedule_is_a_bug(monkeypatch):
    """A primitive that rewrites, then refuses, is restored by the registry; the check would
    catch a schedule left changed (shown with the restore disabled)."""
    from workbench.schedule.instruction import InstructionKind

    def rewrite_then_refuse(sch_, block):
        sch_.func = wb.testing.opaque_func()
        raise ScheduleError("rewrite_then_refuse", "refused after a change")

    kind = InstructionKind(
        "rewrite_then_refuse", rewrite_then_refuse, sampling=False, pure=False, as_python=None
    )
    func = wb.testing.elementwise_func()
    sch = wb.Schedule(func)
    sch.rewrite_then_refuse = lambda block: sch._apply(kind, {"block": block})
    step = fuzz.Step("rewrite_then_refuse", (sch.get_block("B"),), {})
    assert fuzz.apply_step(sch, step) is False
    assert str(sch.func) == str(func)
    monkeypatch.setattr(wb.Schedule, "_restore", lambda self, saved: None)
    with pytest.raises(fuzz.Bug, match="not-restored"):
        fuzz.apply_step(sch, step)


def test_an_exception_other_than_schedule_error_is_a_bug():
    sch = wb.Schedule(wb.testing.elementwise_func())
    loop = sch.get_loops(sch.get_block("B"))[0]
    with pytest.raises(fuzz.Bug, match="internal"):
        fuzz.apply_step(sch, fuzz.Step("split", (loop,), dict(factors=[None, 2], no_such_argument=1)))


def _blockize_twice_then_cache_write(sch):
    sch.blockize(sch.get_loops(sch.get_block("T0"))[1], preserve_unit_iters=False)
    (loop,) = sch.get_loops(sch.get_block("T0"))
    sch.blockize(loop)
    sch.cache_write(sch.get_block("T0"), 0, "local")


def _rfactor_of_an_imperfect_split(sch):
    kr = sch.get_loops(sch.get_block("T0"))[2]
    _, kr_1 = sch.split(kr, [None, 4])
    sch.rfactor(kr_1, factor_axis=2)


#: the sequences of the bugs the fuzzer found (the seed, before the draws changed): each is
#: refused, or computes what the program computes
FOUND = {
    "reindex-read-of-update (587, 919, 1119)": (
        lambda: fuzz.program(919),
        lambda sch: sch.reindex(block=sch.get_block("B"), buffer=("read", 0)),
    ),
    "reindex-write-of-update-without-init": (
        lambda: fuzz.program(919),
        lambda sch: sch.reindex(block=sch.get_block("B"), buffer=("write", 0)),
    ),
    "reindex-of-own-loops (335, 415)": (
        lambda: fuzz.program(335),
        lambda sch: sch.reindex(block=sch.get_block("C"), buffer=("write", 0)),
    ),
    "rfactor-imperfect-split (1060)": (lambda: fuzz.program(1060), _rfactor_of_an_imperfect_split),
    "cache_write-without-init (1859)": (lambda: fuzz.program(1859), _blockize_twice_then_cache_write),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_sequences_found_are_refused_or_right(name):
    make, apply = FOUND[name]
    prog = make()
    sch = wb.Schedule(prog.func)
    try:
        apply(sch)
    except ScheduleError:
        return  # (that a refusal leaves the schedule unchanged: the tests of each primitive)
    fuzz.check_final(sch, fuzz.Reference.of(prog.func))
