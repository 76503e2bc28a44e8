"""Bad input to the public schedule API, fuzzed (hypothesis, derandomized).

Every primitive gets arguments of the wrong kind, stale random variables, variables of another
schedule or of another block, zero / negative / huge numbers, malformed index maps; traces are
read from damaged JSON and replayed. The contract checked on every case:

* a rejected call raises the documented error (``ScheduleError`` for a primitive or a replay;
  ``ValueError`` for malformed trace JSON) and leaves the schedule exactly as it was (function
  text, trace text, history);
* an accepted call leaves a trace that still serializes and replays to the same function.
"""

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench as wb
from workbench.errors import ScheduleError
from workbench.ir.index_map import IndexMap
from workbench.schedule import Schedule, Trace, TraceFormatError
from workbench.schedule.instruction import REGISTRY
from workbench.schedule.rv import ExprRV
from workbench.testing import check_trace_roundtrip, original_func

FUZZ = settings(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def base_schedule(name: str):
    """A schedule a few steps in, with live, stale and location random variables."""
    func = wb.workloads.get(name, **wb.workloads.small(name))
    sch = Schedule(func, seed=0)
    blocks = sch.get_child_blocks(sch.get_block("root"))
    last = blocks[-1]
    loops = sch.get_loops(last)
    tiles = sch.sample_perfect_tile(loops[-1], n=2, max_innermost_factor=4)
    sch.split(loops[-1], tiles)  # loops[-1] is stale from here on
    sch.sample_compute_location(blocks[0])  # a LoopRV that is a location, not a loop
    sch.sample_categorical(candidates=[1, 2, 4], probs=[0.5, 0.25, 0.25])
    cached = sch.cache_read(last, 0, "global")
    sch.compute_inline(cached)  # a stale BlockRV
    sch.get_loops(blocks[0])
    return sch


def live(sch, rv) -> bool:
    try:
        return not isinstance(sch.get(rv), str)  # a loop, a block or an int
    except ScheduleError:
        return False


BASES = {name: base_schedule(name) for name in ("C2D", "SFM")}
OTHER = Schedule(BASES["C2D"].func)  # its variables belong to another schedule
OTHER_RVS = [OTHER.get_block("conv2d_nhwc"), *OTHER.get_loops(OTHER.get_block("conv2d_nhwc"))]
RVS = {name: list(sch.symbols) + OTHER_RVS for name, sch in BASES.items()}
LIVE = {name: [rv for rv in sch.symbols if live(sch, rv)] for name, sch in BASES.items()}
PRIMITIVES = sorted(n for n in REGISTRY if n != "inject_fault")

NAMES = [
    "root",
    "conv2d_nhwc",
    "PadInput",
    "T_softmax_exp",
    "T_softmax_norm",
    "",
    "nope",
    "global",
    "shared",
    "local",
    "threadIdx.x",
    "blockIdx.x",
    "vthread",
    "lambda i: (i,)",
    "lambda i, j: (j, i)",
    "lambda a, b, c, d: (a, b, c, d)",
    "X",
    "inputs",
    "weight",
    "pragma_unroll_explicit",
    "meta_schedule.parallel",
    "dot_4x4_f32",
]
ODD = [
    object(),
    np.int64(4),
    np.float32(2.0),
    np.bool_(True),
    b"global",
    (1, 2),
    {"a": 1},
    1.5,
    float("nan"),
    float("inf"),
    -0.0,
    2**31,
    2**63,
    -(2**63),
    10**30,
    [None, 4],
    [4, None],
    [None, None],
    [0, None],
    [-1, None],
    [],
    [1, 2, 3, 4, 5, 6, 7, 8],
    lambda i: i,
    lambda i, j: (j, i),
    lambda *a: a,
]


def anything(name: str):
    leaf = st.one_of(
        st.sampled_from(RVS[name]),
        st.integers(-3, 64),
        st.integers(-(2**70), 2**70),
        st.sampled_from(NAMES),
        st.text(max_size=5),
        st.none(),
        st.booleans(),
        st.sampled_from(ODD),
        st.floats(),
    )
    return st.one_of(leaf, st.lists(leaf, max_size=4))


SMALL = st.one_of(st.integers(-2, 8), st.sampled_from([0, -1, 2**31, 2**63, 10**30]))
MAPS = [
    "lambda a, b: (b, a)",
    "lambda a, b: (a // 4, b, a % 4)",
    "lambda a: (a // 0,)",
    "lambda a, b: (a + b,)",
    "lambda a, b: (a * 2, b)",
    "lambda a, b: (a, b, c)",
    "lambda a, b: (a % -3, b)",
    "lambda a, b, c, d: (d, c, b, a)",
    "lambda a, b: (1.5, b)",
    "lambda a, b: (a, b",
    "lambda: ()",
    "lambda a, a: (a,)",
    "lambda a, b: (a - 99, b)",
    "lambda a, b: (a // 99999999999, b)",
    "import os",
    "(lambda a: a)",
    lambda a, b: (b, a),
    lambda a, b: (a // 2, b, a % 2),
    lambda a: (a, 0),
]


def plausible(name: str, param: str):
    """Values of the kind a parameter takes, good ones and bad ones mixed."""
    factor = st.one_of(st.none(), SMALL, st.sampled_from([rv for rv in RVS[name] if isinstance(rv, ExprRV)]))
    by_param = {
        "factors": st.lists(factor, max_size=4),
        "n": SMALL,
        "max_innermost_factor": st.one_of(st.none(), SMALL),
        "candidates": st.lists(SMALL, max_size=4),
        "probs": st.lists(st.one_of(st.floats(-1, 2), st.floats()), max_size=4),
        "index_map": st.sampled_from(MAPS),
        "pad_value": st.one_of(st.none(), st.floats()),
        "buffer": st.one_of(
            st.sampled_from(NAMES), SMALL, st.tuples(st.sampled_from(["read", "write", "x"]), SMALL)
        ),
        "ann_val": anything(name),
    }
    if param in by_param:
        return by_param[param]
    if param.startswith("preserve"):
        return st.booleans()
    return st.one_of(SMALL, st.sampled_from(NAMES))


def argument(name: str, param: str, spec):
    """Mostly a variable of the kind the parameter wants (live, or stale, or of another block
    or schedule) or a value of the kind it wants, so that calls get past the type checks into
    each primitive's own rules; sometimes anything at all."""
    if spec is None:
        good = plausible(name, param)
    else:
        classes, _, listy = spec
        live = st.sampled_from([rv for rv in LIVE[name] if isinstance(rv, classes)])
        dead = st.sampled_from([rv for rv in RVS[name] if isinstance(rv, classes)])
        good = st.one_of(live, dead)
        good = st.lists(good, max_size=4) if listy else good
    return st.integers(0, 9).flatmap(lambda k: good if k < 8 else anything(name))


def snapshot(sch):
    return str(sch.func), sch.trace.as_python(), len(sch.history), len(sch.symbols)


@pytest.mark.parametrize("workload", sorted(BASES))
@pytest.mark.parametrize("primitive", PRIMITIVES)
@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_a_primitive_given_anything_raises_schedule_error_or_stays_replayable(primitive, workload, data):
    kind = REGISTRY[primitive]
    sch = BASES[workload].copy()
    positional, keywords = [], {}
    for p in kind.params:
        strategy = argument(workload, p.name, kind.specs.get(p.name))
        if p.kind == p.VAR_POSITIONAL:
            positional = data.draw(st.lists(strategy, max_size=4), label=p.name)
        else:
            keywords[p.name] = data.draw(strategy, label=p.name)
    if kind.is_sampling and data.draw(st.booleans(), label="with decision"):
        keywords["decision"] = data.draw(anything(workload), label="decision")
    before = snapshot(sch)
    try:
        getattr(sch, primitive)(*positional, **keywords)
    except ScheduleError:
        assert snapshot(sch) == before
        return
    check_trace_roundtrip(sch)


# ------------------------------------------------------------------------------------------
# traces read from damaged JSON

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**65), 2**65),
        st.floats(),
        st.text(max_size=4),
        st.sampled_from(["b0", "l3", "v9", "split", "get_block"]),
        st.sampled_from(
            [{"rv": "b0"}, {"rv": "l1"}, {"rv": 3}, {"dict": [[1, 2]]}, {"dict": [[[1], 2]]}, {"dict": 5}]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(value, prefix=()):
    """Every place in a JSON document: tuples of keys / indices."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from paths(v, prefix + (k,))


def damaged(data, draw):
    """``data`` with 1-3 places replaced by random JSON, deleted or duplicated."""
    data = json.loads(json.dumps(data))
    for _ in range(draw(st.integers(1, 3), label="damages")):
        places = [p for p in paths(data) if p]
        if not places:
            break
        where = draw(st.sampled_from(places), label="where")
        parent = data
        for key in where[:-1]:
            parent = parent[key]
        how = draw(st.sampled_from(["replace", "delete", "duplicate"]), label="how")
        if how == "replace":
            parent[where[-1]] = copy.deepcopy(draw(JSON_VALUES, label="by"))
        elif how == "delete":
            del parent[where[-1]]
        elif isinstance(parent, list):
            parent.insert(where[-1], parent[where[-1]])
    return data


@pytest.mark.parametrize("workload", sorted(BASES))
@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_a_damaged_trace_is_a_trace_format_error_or_replays_all_or_nothing(workload, data):
    good = BASES[workload].trace.as_json()
    bad = damaged(good, data.draw)
    try:
        trace = Trace.from_json(json.dumps(bad) if data.draw(st.booleans()) else bad)
    except ValueError as exc:
        assert isinstance(exc, TraceFormatError), exc
        return
    sch = Schedule(original_func(BASES[workload]))
    before = snapshot(sch)
    try:
        trace.apply_to_schedule(sch)
    except (ScheduleError, ValueError):
        assert snapshot(sch) == before
        return
    check_trace_roundtrip(sch)


@settings(FUZZ, max_examples=200)
@given(
    text=st.one_of(
        st.text(max_size=40),
        st.binary(max_size=20),
        st.integers(1, 100000).map(lambda n: "[" * n + "]" * n),
        st.integers(1, 100000).map(lambda n: '{"format": ' + "[" * n),
    )
)
def test_text_that_is_not_a_trace_is_a_trace_format_error(text):
    with pytest.raises(TraceFormatError):
        Trace.from_json(text)


# ------------------------------------------------------------------------------------------
# index maps from text

MAP_TOKENS = [
    "lambda",
    " ",
    "a",
    "b",
    ",",
    ":",
    "(",
    ")",
    "+",
    "-",
    "*",
    "//",
    "%",
    "0",
    "3",
    "99999999999999999999",
    "1.5",
    "c",
    "**",
    "[",
    "]",
    "__import__",
    "'x'",
]


@settings(FUZZ, max_examples=500)
@given(
    text=st.one_of(
        st.lists(st.sampled_from(MAP_TOKENS), max_size=14).map("".join),
        st.lists(st.sampled_from(MAP_TOKENS[5:]), max_size=10).map(
            lambda t: "lambda a, b: (" + "".join(t) + ")"
        ),
        st.text(max_size=20),
    )
)
def test_index_map_text_parses_or_is_a_value_error(text):
    try:
        imap = IndexMap.parse(text)
    except ValueError:
        return
    assert IndexMap.parse(str(imap)) == imap or str(IndexMap.parse(str(imap))) == str(imap)


# ------------------------------------------------------------------------------------------
# what the fuzzing found, pinned


def test_found_a_huge_tile_count_is_refused_not_allocated():
    sch = BASES["SFM"].copy()
    loop = sch.get_loops(sch.get_block("T_softmax_exp"))[0]
    with pytest.raises(ScheduleError, match=r"sample_perfect_tile \(argument 'n'\).*1 to 64"):
        sch.sample_perfect_tile(loop, n=2**31)


def test_found_infinite_probabilities_are_a_schedule_error():
    with pytest.raises(ScheduleError, match="probs"):
        BASES["SFM"].copy().sample_categorical(candidates=[1, 2], probs=[float("inf"), 1.0])


def test_found_unannotate_with_a_list_key_is_a_schedule_error():
    sch = BASES["SFM"].copy()
    with pytest.raises(ScheduleError, match=r"unannotate \(argument 'ann_key'\)"):
        sch.unannotate(sch.get_block("T_softmax_exp"), [None, 4])


@pytest.mark.parametrize(
    "bad",
    [
        {"format": "workbench.trace/1"},
        {"format": "workbench.trace/1", "insts": [5]},
        {"format": "workbench.trace/1", "insts": [{"kind": ["x"]}]},
        {
            "format": "workbench.trace/1",
            "insts": [{"kind": "get_block", "args": {"name": "A"}, "outputs": [3]}],
        },
        "[" * 100000 + "]" * 100000,
    ],
)
def test_found_malformed_trace_json_is_a_trace_format_error(bad):
    with pytest.raises(TraceFormatError):
        Trace.from_json(bad)


def test_found_a_failed_replay_leaves_the_schedule_as_it_was():
    data = BASES["SFM"].trace.as_json()
    split = next(i for i in data["insts"] if i["kind"] == "split")
    split["args"]["factors"] = [0, 7]  # a zero factor: fails mid-trace
    sch = Schedule(original_func(BASES["SFM"]))
    sch.get_block("T_softmax_exp")
    before = snapshot(sch)
    with pytest.raises(ScheduleError) as err:
        Trace.from_json(data).apply_to_schedule(sch)
    assert snapshot(sch) == before
    assert err.value.step == data["insts"].index(split)  # which instruction failed
