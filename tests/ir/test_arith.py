"""The arithmetic layer: folding, normal form, index patterns, bounds, proofs, relaxation.

Results are compared by structure (``shape`` below) or by evaluation, never by printed text.
"""

import itertools
import math
import random

import pytest

from workbench.ir.arith import (
    Analyzer,
    can_prove,
    const_int_bound,
    evaluate,
    region_covers,
    relax,
    relax_region,
    simplify,
    union_regions,
)
from workbench.ir.buffer import Buffer
from workbench.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
    call,
    is_const,
)
from workbench.ir.stmt import Range

_OPS = {
    Add: "+",
    Sub: "-",
    Mul: "*",
    Div: "/",
    FloorDiv: "//",
    FloorMod: "%",
    Min: "min",
    Max: "max",
    EQ: "==",
    NE: "!=",
    LT: "<",
    LE: "<=",
    GT: ">",
    GE: ">=",
    And: "and",
    Or: "or",
}


class _V:
    """A variable inside a shape: equal to the very same Var object only."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, o):
        return (o.v if isinstance(o, _V) else o) is self.v

    def __repr__(self):
        return self.v.name


class _T(tuple):
    """A node inside a shape: never equal to a bare Var (whose == would build an IR node)."""

    def __eq__(self, o):
        return isinstance(o, tuple) and tuple.__eq__(self, o)

    __hash__ = tuple.__hash__


def shape(e):
    """A nested tuple of an expression: Vars compared by identity, constants as Python values."""
    if isinstance(e, Var):
        return _V(e)
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    if isinstance(e, BinaryOp):
        return _T((_OPS[type(e)], shape(e.a), shape(e.b)))
    if isinstance(e, Not):
        return _T(("not", shape(e.a)))
    if isinstance(e, Select):
        return _T(("select", shape(e.condition), shape(e.true_value), shape(e.false_value)))
    if isinstance(e, Cast):
        return _T(("cast", e.dtype, shape(e.value)))
    if isinstance(e, BufferLoad):
        return _T((e.buffer.name,) + tuple(shape(i) for i in e.indices))
    if isinstance(e, Call):
        return _T((e.op,) + tuple(shape(a) for a in e.args))
    raise TypeError(type(e))


i, j, k, n = Var("i"), Var("j"), Var("k"), Var("n")
io, ii, f = Var("io"), Var("ii"), Var("f")
x, y = Var("x", "float32"), Var("y", "float32")


def S(e, ranges=None):
    return shape(simplify(e, ranges))


def is_true(e):
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 1


def is_false(e):
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 0


# --------------------------------------------------------------------------------------------
# constant folding


@pytest.mark.parametrize(
    "e, want",
    [
        (IntImm(7) // -2, -4),
        (IntImm(-7) // 2, -4),
        (IntImm(-7) % 2, 1),
        (IntImm(7) % -2, -1),
        (Div(IntImm(-7), IntImm(2)), -3),
        (Div(IntImm(7), IntImm(-2)), -3),
        (Min(IntImm(3), IntImm(-1)), -1),
        (Max(IntImm(3), IntImm(-1)), 3),
        (IntImm(2**31 - 1) + 1, -(2**31)),  # int32 wraps like generated code
        (Cast("int8", IntImm(300)), 44),
        (Cast("int32", FloatImm(-2.7)), -2),
        (Cast("uint8", IntImm(-1)), 255),
        (IntImm(5, "uint8") - IntImm(6, "uint8"), 255),
        (IntImm(3, "int64") * IntImm(4, "int64"), 12),
    ],
)
def test_fold_integers(e, want):
    r = simplify(e)
    assert isinstance(r, IntImm) and r.value == want and r.dtype == e.dtype


def test_fold_floats_in_their_dtype():
    r = simplify(FloatImm(0.1) + FloatImm(0.2))  # float32 arithmetic, not float64
    assert isinstance(r, FloatImm) and r.dtype == "float32"
    assert r.value == pytest.approx(0.3, rel=1e-7) and r.value != 0.1 + 0.2
    assert simplify(FloatImm(1.0) / FloatImm(0.0)).value == math.inf
    assert simplify(FloatImm(7.5) // FloatImm(2.0)).value == 3.0
    assert simplify(Cast("float32", IntImm(3))).value == 3.0
    assert simplify(call("exp", FloatImm(0.0))).value == 1.0
    assert simplify(call("round", FloatImm(2.5))).value == 3.0  # half away from zero, like C


def test_fold_bools_and_comparisons():
    assert is_true(simplify(IntImm(3) < IntImm(4)))
    assert is_false(simplify(FloatImm(3.0) > FloatImm(4.0)))
    b = Var("b", "bool")
    assert simplify(And(IntImm(1, "bool"), b)) is b
    assert is_false(simplify(And(b, IntImm(0, "bool"))))
    assert is_true(simplify(Or(b, IntImm(1, "bool"))))
    assert simplify(Not(Not(b))) is b
    assert simplify(Select(IntImm(1, "bool"), x, y)) is x


def test_integer_division_by_zero_is_left_for_runtime():
    assert S(IntImm(4) // 0) == ("//", 4, 0)


# --------------------------------------------------------------------------------------------
# affine normal form


def test_affine_cancellation_and_merge():
    assert is_const(simplify((i * 4 + j) - j - i * 4), 0)
    assert S(i * 4 + j * 2 + i * 4) == ("+", ("*", i, 8), ("*", j, 2))
    assert S((i + 1) * 3 - 3) == ("*", i, 3)
    assert simplify(i * 1 + 0) is i
    assert is_const(simplify((i + j) * 0), 0)


def test_order_is_first_appearance_not_name():
    z, a = Var("z"), Var("a")
    assert S(z + a + z) == ("+", ("*", z, 2), a)
    assert S(a + z + a) == ("+", ("*", a, 2), z)


def test_natural_signs():
    assert S(0 - i + 16) == ("-", 16, i)
    assert S(i - j * 2 - 3) == ("-", ("-", i, ("*", j, 2)), 3)
    assert S(-i + n) == ("-", n, i)  # positive terms first


def test_nonlinear_products_are_atoms():
    assert S(i * j * 2 + j * i) == ("*", ("*", i, j), 3)
    assert S((i * 2) * (j * 3)) == ("*", ("*", i, j), 6)


def test_floats_are_not_reassociated():
    assert S((x + 1.0) + 2.0) == ("+", ("+", x, 1.0), 2.0)
    assert simplify(x * 1.0 + 0.0) is x
    assert S(x * 0.0) == ("*", x, 0.0)  # NaN * 0 is NaN: keep it
    assert S(x - x) == ("-", x, x)


# --------------------------------------------------------------------------------------------
# floordiv / floormod and the index patterns of loop transformations


def test_floordiv_splits_out_multiples():
    assert S((i * 8 + j) // 8) == ("+", i, ("//", j, 8))
    assert simplify((i * 8 + j) // 8, {j: (0, 8)}) is i
    assert S((i * 8 + j) % 8) == ("%", j, 8)
    assert simplify((i * 8 + j) % 8, {j: (0, 8)}) is j
    assert S((i * 9 + j) // 8) == ("+", i, ("//", ("+", i, j), 8))


def test_split_patterns():
    r = {ii: (0, 8)}
    assert simplify((io * 8 + ii) // 8, r) is io
    assert simplify((io * 8 + ii) % 8, r) is ii
    assert S((io * 8 + ii) // 4, r) == ("+", ("*", io, 2), ("//", ii, 4))


def test_fuse_pattern_recombines():
    assert simplify(f // 16 * 16 + f % 16) is f
    assert S((f // 16) * 32 + (f % 16) * 2) == ("*", f, 2)
    assert S(f // 16 * 16 + f % 16 + 1) == ("+", f, 1)


def test_split_then_fuse_then_split():
    # fuse(i, j) with j of extent 16 gives i = f // 16, j = f % 16; split f by 4
    fo, fi = Var("fo"), Var("fi")
    r = {fo: (0, 64), fi: (0, 4)}
    fused = fo * 4 + fi
    assert S(fused // 16, r) == ("//", fo, 4)
    assert S(fused % 16, r) == ("+", ("*", ("%", fo, 4), 4), fi)
    # and the two recombine into the fused index
    assert shape(simplify(simplify(fused // 16, r) * 16 + simplify(fused % 16, r), r)) == (
        "+",
        ("*", fo, 4),
        fi,
    )


def test_nested_split_patterns():
    assert S((f % 64) // 16, {f: (0, 64)}) == ("//", f, 16)
    assert S((f // 4) % 8, {f: (0, 32)}) == ("//", f, 4)
    assert is_const(simplify(f // 64, {f: (0, 64)}), 0)
    assert S((f // 4) // 8) == ("//", f, 32)
    assert S((f % 64) % 16) == ("%", f, 16)
    assert S((f % 64) // 16, {f: (0, 256)}) == ("//", ("%", f, 64), 16)


def test_gcd_factoring():
    assert S((i * 4 + j) // 8, {j: (0, 4)}) == ("//", i, 2)
    assert S((i * 4 + j) % 8, {j: (0, 4)}) == ("+", ("*", ("%", i, 2), 4), j)
    assert S((i * 6 + 4) // 2) == ("+", ("*", i, 3), 2)


def test_negative_divisors_and_coefficients():
    assert S((15 - i) // 16, {i: (0, 16)}) == 0
    env = [{i: v} for v in range(-20, 20)]
    for e in ((i * 3 + 1) // -4, (i * 3 + 1) % -4, (0 - i) // 8, (0 - i * 9) % 8):
        s = simplify(e)
        assert all(evaluate(e, p) == evaluate(s, p) for p in env)


def test_truncating_div_becomes_floordiv_when_nonnegative():
    assert simplify(Div(i * 8 + j, IntImm(8)), {i: (0, 4), j: (0, 8)}) is i
    assert S(Div(i, IntImm(8))) == ("/", i, 8)  # sign unknown: stays C division


# --------------------------------------------------------------------------------------------
# min / max, comparisons, logic


def test_minmax_by_bounds():
    assert simplify(Min(i, i + 1)) is i
    assert S(Max(i, i + 1)) == ("+", i, 1)
    assert S(Min(i * 8 + ii, IntImm(64)), {i: (0, 8), ii: (0, 8)}) == ("+", ("*", i, 8), ii)
    assert S(Min(i, IntImm(3)), {i: (0, 16)}) == ("min", i, 3)
    assert S(Min(Min(i, j), i)) == ("min", i, j)
    assert simplify(Min(Max(i, j), i)) is i


def test_comparisons_decided_or_normalised():
    r = {i: (0, 16)}
    assert is_true(simplify(i < 16, r))
    assert is_false(simplify(i >= 16, r))
    assert S(i < 15, r) == ("<", i, 15)
    assert S(i * 4 < 16) == ("<", i, 4)
    assert S(i * 4 <= 15) == ("<=", i, 3)
    assert S(i * 4 + j < j + 8) == ("<", i, 2)
    assert S(i > j) == ("<", j, i)
    assert is_false(simplify(EQ(i * 4, IntImm(6))))
    assert S(EQ(i * 4 + 2, j * 2)) == ("==", ("+", ("*", i, 2), 1), j)
    assert S(Not(i < j)) == ("<=", j, i)


def test_logic_with_bounds_and_select():
    r = {i: (0, 8), j: (0, 8)}
    assert S(And(i < 8, j < 4), r) == ("<", j, 4)
    assert is_true(simplify(Or(i < 2, j < 8), r))
    assert S(Select(i < 8, i * 2, j), r) == ("*", i, 2)
    assert S(Select(j < 4, i + 1, 1 + i)) == ("+", i, 1)
    assert is_true(simplify(Not(i >= 8), r))


def test_loads_and_casts_are_atoms():
    A = Buffer("A", (16,), "int32")
    assert is_const(simplify(A[i + 1] - A[1 + i]), 0)
    assert S(Cast("int64", i) * 2 + Cast("int64", i)) == ("*", ("cast", "int64", i), 3)
    assert simplify(Cast("int32", i)) is i


# --------------------------------------------------------------------------------------------
# bounds and proofs


def test_const_int_bound():
    r = {i: 16, j: (0, 4), n: (1, 9)}
    assert const_int_bound(i * 4 + j, r) == (0, 63)
    assert const_int_bound(i - j, r) == (-3, 15)
    assert const_int_bound(i * -2, r) == (-30, 0)
    assert const_int_bound(i // 3, r) == (0, 5)
    assert const_int_bound(i % 5, r) == (0, 4)
    assert const_int_bound((i + 32) % 64, r) == (32, 47)
    assert const_int_bound(Min(i, j) + Max(i, IntImm(2)), r) == (2, 18)
    assert const_int_bound(Select(i < 3, j, IntImm(10)), r) == (0, 10)
    assert const_int_bound(i * j, r) == (0, 45)
    assert const_int_bound(i // n, r) == (0, 15)
    assert const_int_bound(i % n, r) == (0, 8)
    assert const_int_bound(k, r) == (None, None)
    assert const_int_bound(k % 8, r) == (0, 7)
    assert const_int_bound(Min(k, IntImm(3)), r) == (None, 3)
    assert const_int_bound(i * 4 + j - (i * 4 + j), r) == (0, 0)
    assert const_int_bound(i < 3, r) == (0, 1)
    assert const_int_bound(Cast("int8", k), r) == (-128, 127)


def test_symbolic_range_min():
    # ii in [io*8, io*8 + 8) with io in [0, 4)
    ana = Analyzer({io: 4})
    ana.bind(ii, Range(io * 8, IntImm(8)))
    assert ana.const_int_bound(ii) == (0, 31)
    assert ana.can_prove(ii < 32)
    assert not ana.can_prove(ii < 31)


def test_can_prove():
    r = {i: (0, 16), j: (0, 4)}
    assert can_prove(i * 4 + j < 64, r)
    assert not can_prove(i * 4 + j < 63, r)
    assert can_prove(And(i >= 0, j <= 3), r)
    assert can_prove((i * 4 + j) // 4 == i, r)
    assert not can_prove(k < 5, r)


def test_analyzer_bind_replaces():
    ana = Analyzer()
    ana.bind(i, 8)
    assert ana.can_prove(i < 8)
    ana.bind(i, (0, 16))
    assert not ana.can_prove(i < 8)
    assert ana.simplify(i // 16) is not i and is_const(ana.simplify(i // 16), 0)


# --------------------------------------------------------------------------------------------
# relaxation and regions


def test_relax_split_index():
    lo, hi = relax(io * 8 + ii, {ii: (0, 8)})
    assert shape(lo) == ("*", io, 8) and shape(hi) == ("+", ("*", io, 8), 7)


def test_relax_through_floordiv_floormod_minmax():
    lo, hi = relax((io * 8 + ii) // 4, {ii: (0, 8)})
    assert shape(lo) == ("*", io, 2) and shape(hi) == ("+", ("*", io, 2), 1)
    lo, hi = relax((io * 4 + ii) % 16, {ii: (0, 4)}, {io: (0, 4)})
    assert shape(lo) == ("*", io, 4) and shape(hi) == ("+", ("*", io, 4), 3)
    lo, hi = relax(Min(io * 8 + ii, n), {ii: (0, 8)})
    assert shape(lo) == ("min", ("*", io, 8), n) and shape(hi) == ("min", ("+", ("*", io, 8), 7), n)
    lo, hi = relax(io * 2 - ii, {ii: (0, 8)})
    assert shape(lo) == ("-", ("*", io, 2), 7) and shape(hi) == ("*", io, 2)


def test_relax_unbounded_side_is_none():
    A = Buffer("A", (16,), "int32")
    lo, hi = relax(A[ii] + io, {ii: (0, 8)})
    assert lo is None and hi is None
    lo, hi = relax(Min(ii, n), {ii: (0, 8)})  # n stays symbolic: both sides bounded
    assert shape(lo) == ("min", 0, n) and shape(hi) == ("min", 7, n)


def test_relax_region_and_clamp():
    r = relax_region((Range(io * 8 + ii, IntImm(1)), Range(j, IntImm(2))), {ii: (0, 8), j: (0, 4)})
    assert shape(r[0].min) == ("*", io, 8) and is_const(r[0].extent, 8)
    assert is_const(r[1].min, 0) and is_const(r[1].extent, 5)
    A = Buffer("A", (16,), "int32")
    with pytest.raises(ValueError):
        relax_region((Range(A[ii], IntImm(1)),), {ii: (0, 8)})
    r = relax_region((Range(Cast("int32", A[ii] * 0 + k), IntImm(1)),), {k: (0, 8)}, shape=(100,))
    assert is_const(r[0].min, 0) and is_const(r[0].extent, 8)


def test_union_regions():
    u = union_regions((Range(i, IntImm(1)),), (Range(i + 1, IntImm(1)),))
    assert u[0].min is i and is_const(u[0].extent, 2)
    u = union_regions((Range(i * 4, IntImm(4)),), (Range(i * 4 + 2, IntImm(4)),))
    assert shape(u[0].min) == ("*", i, 4) and is_const(u[0].extent, 6)
    u = union_regions((Range(i, IntImm(1)),), (Range(j, IntImm(1)),))
    assert shape(u[0].min) == ("min", i, j)
    with pytest.raises(ValueError):
        union_regions((Range(i, IntImm(1)),), ())


def test_region_covers():
    full = (Range.from_extent(64),)
    r = {i: (0, 16)}
    assert region_covers(full, (Range(i * 4, IntImm(4)),), r)
    assert not region_covers(full, (Range(i * 4, IntImm(5)),), r)
    assert region_covers((Range(i, IntImm(3)),), (Range(i + 1, IntImm(2)),))
    assert not region_covers((Range(i, IntImm(3)),), (Range(j, IntImm(1)),))


# --------------------------------------------------------------------------------------------
# randomized: simplify preserves values, bounds contain them, relax contains them


def ref_eval(e, env):
    """An evaluator independent of the library (ideal integers, floor semantics)."""
    t = type(e)
    if t is Var:
        return env[e]
    if t is IntImm:
        return bool(e.value) if e.dtype == "bool" else e.value
    if t is Not:
        return not ref_eval(e.a, env)
    if t is Select:
        return ref_eval(e.true_value if ref_eval(e.condition, env) else e.false_value, env)
    a, b = ref_eval(e.a, env), ref_eval(e.b, env)
    if t is Div:
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return {
        Add: lambda: a + b,
        Sub: lambda: a - b,
        Mul: lambda: a * b,
        FloorDiv: lambda: a // b,
        FloorMod: lambda: a % b,
        Min: lambda: min(a, b),
        Max: lambda: max(a, b),
        EQ: lambda: a == b,
        NE: lambda: a != b,
        LT: lambda: a < b,
        LE: lambda: a <= b,
        GT: lambda: a > b,
        GE: lambda: a >= b,
        And: lambda: a and b,
        Or: lambda: a or b,
    }[t]()


VARS = {Var("p"): (0, 4), Var("q"): (-3, 6), Var("r"): (2, 8)}


def random_int(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.7:
            return rng.choice(list(VARS))
        return IntImm(rng.randint(-9, 16))
    op = rng.choice(
        ["add", "add", "sub", "mulc", "mul", "div", "mod", "tdiv", "min", "max", "select", "affine"]
    )
    a = random_int(rng, depth - 1)
    if op == "affine":  # an index-like sum c1*a + c2*b + c3
        b = random_int(rng, depth - 1)
        return a * rng.choice([1, 2, 4, 8, -1]) + b * rng.choice([1, 3, 16]) + rng.randint(-5, 5)
    if op in ("div", "mod", "tdiv", "mulc"):
        c = IntImm(rng.choice([1, 2, 3, 4, 8, 16, -2, -3, -8]))
        return {"div": FloorDiv, "mod": FloorMod, "tdiv": Div, "mulc": Mul}[op](a, c)
    b = random_int(rng, depth - 1)
    if op == "select":
        return Select(random_bool(rng, 1), a, b)
    return {"add": Add, "sub": Sub, "mul": Mul, "min": Min, "max": Max}[op](a, b)


def random_bool(rng, depth):
    if depth == 0 or rng.random() < 0.6:
        cmp = rng.choice([EQ, NE, LT, LE, GT, GE])
        return cmp(random_int(rng, 2), random_int(rng, 2))
    op = rng.choice([And, Or, Not])
    if op is Not:
        return Not(random_bool(rng, depth - 1))
    return op(random_bool(rng, depth - 1), random_bool(rng, depth - 1))


POINTS = [
    dict(zip(VARS, vals)) for vals in itertools.product(*(range(lo, lo + ext) for lo, ext in VARS.values()))
]


def test_random_int_expressions_keep_values_and_bounds():
    rng = random.Random(1234)
    for _ in range(300):
        e = random_int(rng, 4)
        s = simplify(e, VARS)
        lo, hi = const_int_bound(e, VARS)
        for p in POINTS:
            want = ref_eval(e, p)
            assert ref_eval(s, p) == want, (e, s, p)
            assert (lo is None or lo <= want) and (hi is None or want <= hi), (e, lo, hi, p)


def test_random_bool_expressions_keep_values():
    rng = random.Random(99)
    for _ in range(150):
        e = random_bool(rng, 3)
        s = simplify(e, VARS)
        proved = can_prove(e, VARS)
        for p in POINTS:
            want = ref_eval(e, p)
            assert bool(ref_eval(s, p)) == bool(want), (e, s, p)
            assert want or not proved, (e, p)


def test_random_relax_contains_values():
    rng = random.Random(7)
    p, q, r = VARS
    for _ in range(150):
        e = random_int(rng, 3)
        lo, hi = relax(e, {q: VARS[q], r: VARS[r]}, {p: VARS[p]})
        for pv in range(*_bounds(VARS[p])):
            vals = [ref_eval(e, pt) for pt in POINTS if pt[p] == pv]
            if lo is not None:
                assert ref_eval(lo, {p: pv}) <= min(vals), (e, lo)
            if hi is not None:
                assert max(vals) <= ref_eval(hi, {p: pv}), (e, hi)


def _bounds(r):
    return r[0], r[0] + r[1]


def test_random_affine_relax_is_exact():
    rng = random.Random(3)
    p, q, r = VARS
    for _ in range(50):
        cq, cr, cp = rng.choice([-3, -1, 1, 2, 8]), rng.choice([-2, 1, 4]), rng.randint(-4, 4)
        e = p * cp + q * cq + r * cr + rng.randint(-5, 5)
        lo, hi = relax(e, {q: VARS[q], r: VARS[r]})
        for pv in range(-3, 4):
            vals = [
                ref_eval(e, {p: pv, q: a, r: b})
                for a in range(*_bounds(VARS[q]))
                for b in range(*_bounds(VARS[r]))
            ]
            assert ref_eval(lo, {p: pv}) == min(vals) and ref_eval(hi, {p: pv}) == max(vals)


def test_evaluate_matches_reference_semantics():
    p, q, _ = VARS
    e = Select(p < q, (p * 7 - q) // 3, Div(q - p * 5, IntImm(4))) % 5
    for pt in POINTS:
        assert evaluate(e, pt) == ref_eval(e, pt)
    assert evaluate(Cast("int8", p * 100), {p: 3}) == 44
    with pytest.raises(KeyError):
        evaluate(p + 1, {})


def test_random_union_and_covers_are_sound():
    rng = random.Random(11)
    p, q, _ = VARS
    pts = [{p: a, q: b} for a in range(*_bounds(VARS[p])) for b in range(*_bounds(VARS[q]))]
    ranges = {p: VARS[p], q: VARS[q]}

    def rand_range():
        lo = p * rng.choice([0, 1, 2, 4]) + q * rng.choice([0, 1, -1]) + rng.randint(-3, 3)
        return Range(lo, IntImm(rng.randint(1, 5)))

    def span(r, pt):
        lo = ref_eval(r.min, pt)
        return lo, lo + ref_eval(r.extent, pt)  # half-open

    for _ in range(100):
        a, b = rand_range(), rand_range()
        (u,) = union_regions((a,), (b,), ranges)
        covers = region_covers((a,), (b,), ranges)
        for pt in pts:
            ua, ub = span(u, pt)
            for r in (a, b):
                lo, hi = span(r, pt)
                assert ua <= lo and hi <= ub
            if covers:
                (alo, ahi), (blo, bhi) = span(a, pt), span(b, pt)
                assert alo <= blo and bhi <= ahi


def test_normal_forms_come_back_as_the_same_object():
    e = i * 8 + j * 2
    assert simplify(e) is e
    c = And(i < 4, j <= n)
    assert simplify(c) is c
    A = Buffer("A", (16,), "float32")
    load = A[i * 4 + 1] * x
    assert simplify(load) is load
    assert simplify(i * 4 + j * 4) is not e


def test_symbolic_loop_range_bounds_its_variable():
    """A loop ``for i in range(n)`` proves ``i < n`` (and ``i + 1 <= n``), also through a split of
    ``n``; what its tail may pass stays unproven."""
    n, i, i0, i1 = Var("n"), Var("i"), Var("i0"), Var("i1")
    ana = Analyzer({i: Range(IntImm(0), n), i0: Range(IntImm(0), (n + 3) // 4), i1: Range.from_extent(4)})
    assert ana.can_prove(i < n) and ana.can_prove(i + 1 <= n) and ana.can_prove(i >= 0)
    assert not ana.can_prove(i + 1 < n)
    assert ana.can_prove(i0 * 4 < n)  # the first row of each tile exists
    assert not ana.can_prove(i0 * 4 + i1 < n)  # the tail's other rows may not
    assert ana.can_prove(i0 * 4 + i1 < n + 3)
