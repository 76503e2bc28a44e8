# ruff: noqa: E402, E501  (a by-hand generator: pytest is stubbed before TVM loads)
"""Writes tests/data/tvm/{rfactor,cache_read_write}_cases.json from TVM 0.27's own tests (not
a test; run by hand with TVM's interpreter):

    TVM_PYTHON make_rfactor_cache_cases.py <apache/tvm checkout>/tests/python/s_tir/\
schedule/test_tir_schedule_rfactor.py rfactor_cases.json
    (the same with test_tir_schedule_cache_read_write.py cache_read_write_cases.json)

Every test function of TVM's file is run with hooks: each Schedule it makes records its program,
and every primitive called on it is written down as a step in our spelling at the moment of the
call (a block by name, a loop as ``sch.get_loops(sch.get_block(name))[k]``), with TVM's result
or refusal. A case is the program before, the steps up to the first refusal (or all of them), and
the program TVM gives after them (None where TVM refuses, with its message).
"""

import importlib.util
import json
import re
import sys


class _Raises:
    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, t, v, tb):
        return t is not None


class _Any:  # pytest stand-in
    def __getattr__(self, name):
        return _Any()

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Any()


_pytest = _Any()
_pytest.__dict__["raises"] = _Raises
sys.modules["pytest"] = _pytest
import tvm
import tvm.testing
from tvm.s_tir.schedule import schedule as _schmod

_Orig = tvm.s_tir.Schedule
PRIMS = [
    "rfactor",
    "cache_read",
    "cache_write",
    "cache_inplace",
    "cache_index",
    "reindex_cache_read",
    "reindex_cache_write",
    "split",
    "fuse",
    "reorder",
    "compute_at",
    "reverse_compute_at",
    "compute_inline",
    "reverse_compute_inline",
    "bind",
    "parallel",
    "vectorize",
    "unroll",
    "blockize",
    "decompose_reduction",
    "set_scope",
    "transform_layout",
]
made = []  # (schedule, program before, [(step, exception or None)]); FFI objects take no attributes


def _calls(sch):
    return next(c for s, _, c in made if s is sch)


def _name(sch, x):
    if isinstance(x, _schmod.SBlockRV):
        return f'sch.get_block("{sch.get(x).name_hint}")'
    if isinstance(x, _schmod.LoopRV):
        target = sch.get(x)
        for blk in _blocks(sch):
            loops = sch.get_loops(sch.get_sblock(blk))
            for k, l in enumerate(loops):
                if sch.get(l).same_as(target):
                    return f'sch.get_loops(sch.get_block("{blk}"))[{k}]'
        raise ValueError("loop not found")
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_name(sch, y) for y in x)
        return f"[{inner}]"
    if isinstance(x, tvm.tirx.Buffer):
        raise ValueError("buffer argument")
    if callable(x) or isinstance(x, tvm.tirx.IndexMap):
        im = x if isinstance(x, tvm.tirx.IndexMap) else tvm.tirx.IndexMap.from_func(x)
        return _lambda(im)
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, (int, float, bool)) or x is None:
        return repr(x)
    raise ValueError(f"argument {type(x).__name__}")


def _lambda(im):
    args = ", ".join(v.name for v in im.initial_indices)
    outs = ", ".join(str(e) for e in im.final_indices)
    # integer literals as plain ints: our index maps take Python ints
    return re.sub(r"T\.int(?:32|64)\((-?\d+)\)", r"\1", f"lambda {args}: ({outs},)")


def _blocks(sch):
    return re.findall(r'T\.sblock\("([^"]+)"', sch.mod["main"].script())


class Rec(_Orig):
    def __init__(self, mod, *a, **k):
        super().__init__(mod, *a, **k)
        made.append((self, self.mod["main"], []))


def _wrap(name):
    orig = getattr(_Orig, name)

    def f(self, *a, **k):
        try:
            desc = (
                f"sch.{name}("
                + ", ".join([_name(self, x) for x in a] + [f"{kk}={_name(self, v)}" for kk, v in k.items()])
                + ")"
            )
        except Exception as e:  # not writable as our step
            desc = ValueError(str(e))
        try:
            r = orig(self, *a, **k)
        except Exception as e:
            _calls(self).append((desc, e))
            raise
        _calls(self).append((desc, None))
        return r

    return f


for p in PRIMS:
    setattr(Rec, p, _wrap(p))
tvm.s_tir.Schedule = Rec

spec = importlib.util.spec_from_file_location("tvmtest", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
m.verify_trace_roundtrip = lambda *a, **k: None
m.assert_structural_equal_ignore_global_symbol = lambda *a, **k: None


def text(f):
    s = f.script()
    lines = [
        l for l in s.splitlines() if not l.startswith("# from") and not re.match(r"\s*T\.(reads|writes)\(", l)
    ]
    return "\n".join(lines).strip() + "\n"


def message(e):
    lines = str(e).splitlines()
    return next((l.split("Error message:", 1)[1].strip() for l in lines if "Error message:" in l), lines[-1])


programs, cases, skipped = {}, [], []
for test in [t for t in dir(m) if t.startswith("test_")]:
    fn = getattr(m, test)
    made.clear()
    argn = fn.__code__.co_argcount
    failed = None
    try:
        fn(*([False] * argn))
    except Exception as e:
        failed = f"{type(e).__name__}: {str(e)[:150]}"
        print("note:", test, failed, file=sys.stderr)
    made_here = [(s, b, c) for s, b, c in made if c]
    if not made:
        skipped.append(
            {"case": test, "why": f"TVM fails before scheduling: {failed}" if failed else "no TIR schedule"}
        )
    for i, (sch, before_f, calls) in enumerate(made_here):
        case = test[len("test_") :] + (f"_{i}" if len(made_here) > 1 else "")
        steps, err = [], None
        for desc, e in calls:
            if isinstance(desc, Exception):
                err = ("unwritable", str(desc))
                break
            steps.append(desc)
            if e is not None:
                err = ("refused", e)
                break
        if err and err[0] == "unwritable":
            skipped.append({"case": case, "why": "a step argument we cannot write: " + err[1]})
            continue
        before = text(before_f)
        key = next((k for k, v in programs.items() if v == before), None)
        if key is None:
            key = case.upper()
            programs[key] = before
        if err:
            c = {"case": case, "before": key, "steps": steps, "after": None, "tvm_error": message(err[1])}
            if not isinstance(err[1], tvm.s_tir.ScheduleError):  # TVM's own TODO: a verifier failure
                c["tvm_exception"] = type(err[1]).__name__
                c["tvm_error"] = str(err[1]).splitlines()[0]
            cases.append(c)
            print("refused ", case)
        else:
            programs[case.upper() + "_AFTER"] = text(sch.mod["main"])
            cases.append({"case": case, "before": key, "steps": steps, "after": case.upper() + "_AFTER"})
            print("ok      ", case)

json.dump(
    {
        "source": "apache/tvm tests/python/s_tir/schedule/"
        + sys.argv[1].rsplit("/", 1)[-1]
        + " (checkout 5d4dc87213), run on TVM 0.27 (programs as TVM prints "
        "them before and after its schedule; T.reads/T.writes dropped, the parser infers them; steps as Python "
        "with get_sblock read as get_block; tests parametrized on use_block_name run with block objects)",
        "programs": programs,
        "cases": cases,
        "skipped": skipped,
    },
    open(sys.argv[2], "w"),
    indent=1,
)
