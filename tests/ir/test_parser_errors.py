"""Malformed TVMScript: each script fails with the line, column (1-based) and message a student
can act on; and no text ever runs code (``__import__('os').system(...)`` anywhere is rejected)."""

import os

import pytest

import workbench as wb

HEAD = '@T.prim_func\ndef f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):\n'


def body(*lines: str) -> str:
    """The function above with ``lines`` as its body (line 3 is the first of them)."""
    return HEAD + "".join(f"    {line}\n" for line in lines)


def block(*lines: str) -> str:
    """A ``for i, j`` nest holding block "B" whose body is ``lines`` (line 5 is the first)."""
    return body("for i, j in T.grid(8, 8):", '    with T.block("B"):', *(f"        {line}" for line in lines))


REMAP = 'vi, vj = T.axis.remap("SS", [i, j])'

CASES = [  # (script, line, column, message)
    (
        block('vi, vj = T.axis.remap("S", [i, j])', "B[vi, vj] = A[vi, vj]"),
        5,
        35,
        'T.axis.remap expects one letter per iterator, got "S" for 2',
    ),
    (
        block('vi, vj = T.axis.remap("SX", [i, j])', "B[vi, vj] = A[vi, vj]"),
        5,
        35,
        'T.axis.remap kinds are "S" (spatial) or "R" (reduce), got "X"',
    ),
    (
        block('vi, vj = T.axis.remap("SS", [i, 3])', "B[vi, vj] = A[vi, vj]"),
        5,
        45,
        "T.axis.remap binds to loop variables of enclosing loops; 3 is not one",
    ),
    (block(REMAP, "B[vi, vj] = A[vi, vk]"), 6, 31, "unknown name vk"),
    (block(REMAP, "B[vi, vj] = A[vi]"), 6, 25, "buffer A has 2 dimensions, indexed with 1"),
    (
        block(REMAP, "B[vi, vj] = T.expp(A[vi, vj])"),
        6,
        25,
        "unknown TVMScript function T.expp; did you mean T.exp?",
    ),
    (
        block(REMAP, "B[vi, vj] = max(A[vi, vj], T.float32(0))"),
        6,
        25,
        "unknown function max: TVMScript expressions call T.* functions only; did you mean T.max?",
    ),
    (
        block('vi, vj = T.axis.remap("SS", [i, j]', "B[vi, vj] = A[vi, vj]"),
        5,
        34,
        "not valid Python syntax: '(' was never closed",
    ),
    (
        body("for i, j in T.grid(8):", "    B[i, j] = A[i, j]"),
        3,
        17,
        "T.grid has 1 extent for 2 loop variables",
    ),
    (body("while True:", "    pass"), 3, 5, "a while loop is not a TVMScript statement"),
    ('def f(A: T.Buffer((8,), "float32")):\n    pass\n', 1, 1, "function f needs the decorator @T.prim_func"),
    (
        '@T.prim_func\ndef f(A: T.Buffer((8,), "float23")):\n    pass\n',
        2,
        25,
        'unknown dtype "float23"; expected one of int8, int16, int32, int64, uint8, uint16, '
        "uint32, uint64, float16, float32, float64, bool",
    ),
    (
        '@T.prim_func\ndef f(A: T.Buffer((n,), "float32")):\n    pass\n',
        2,
        20,
        "buffer A: dimension n is not a declared size variable; declare it with `n = T.int32()` at "
        'the top of the function, or write it "n"',
    ),
    (
        body(
            "for i in range(8):",
            '    with T.block("B"):',
            "        vi = T.axis.spatial(8, i)",
            "        B[vi, 0] = A[vi, 0]",
            "for i in range(8):",
            '    with T.block("B"):',
            "        vi = T.axis.spatial(8, i)",
            "        B[vi, 1] = A[vi, 1]",
        ),
        8,
        22,
        'two blocks are named "B"; a block\'s name is its identity, so names must be unique',
    ),
    (
        block(REMAP, "x = A[vi, vj]", "B[vi, vj] = x"),
        6,
        13,
        "only buffer elements can be assigned (A[i] = ...); `x = ...` would need a local "
        "variable, which TVMScript blocks do not have",
    ),
    (block(REMAP, "B[vi, vj] = A[vi, 0:2]"), 6, 31, "slices (lo:hi) are only allowed in T.reads / T.writes"),
    (
        body("for i in range(8):", "    vi = T.axis.spatial(8, i)"),
        4,
        9,
        "T.axis.spatial belongs directly inside a `with T.block(...)`, before its body",
    ),
    (
        body("for i in range(8):", "    with T.init():", "        B[i, 0] = T.float32(0)"),
        4,
        9,
        "`with T.init()` belongs directly inside a reduction block, before its body",
    ),
    (
        block(REMAP, "B[vi, vj] = vi + vj"),
        6,
        13,
        'an int32 value stored into a float32 buffer; write T.Cast("float32", ...) to convert',
    ),
    (
        block("vi = T.axis.spatial(8)", "B[vi, 0] = A[vi, 0]"),
        5,
        18,
        "T.axis.spatial takes (domain, value): T.axis.spatial(128, i) or T.axis.spatial((lo, hi), i)",
    ),
    (
        body("for i in range(8):", "    with T.block():", "        B[i, 0] = A[i, 0]"),
        4,
        14,
        'T.block takes the block\'s name: T.block("name")',
    ),
    (
        block(REMAP, "B[vi, vj] = A[vi, vj] ** 2"),
        6,
        25,
        "operator ** is not supported in TVMScript expressions",
    ),
    (
        block(REMAP, "T.reads(vi)", "B[vi, vj] = A[vi, vj]"),
        6,
        21,
        "T.reads lists buffer regions such as A[vi, 0:16], found vi",
    ),
    (
        body("for i in [1, 2]:", "    pass"),
        3,
        14,
        "loops run over range(...), T.grid(...), T.serial, T.parallel, T.vectorized, T.unroll "
        "or T.thread_binding; found [1, 2]",
    ),
    (
        HEAD + "    pass\n" + HEAD + "    pass\n",
        5,
        1,
        "expected exactly one @T.prim_func (several go in an @I.ir_module class), found 2",
    ),
    (block(REMAP), 4, 14, "block B has no body"),
    (block(REMAP, "B[vi, vj] = A"), 6, 25, "buffer A used as a value; index it: A[...]"),
    (
        body("for i in T.thread_binding(8):", "    pass"),
        3,
        14,
        'T.thread_binding needs thread="threadIdx.x" (or another tag)',
    ),
]


@pytest.mark.parametrize("text, line, col, message", CASES, ids=[f"case{k}" for k in range(len(CASES))])
def test_malformed_script_names_line_column_and_cause(text, line, col, message):
    with pytest.raises(wb.TVMScriptError) as info:
        wb.parse(text)
    err = info.value
    assert (err.line, err.col, err.message) == (line, col, message)
    assert str(err).startswith(f"line {line}, col {col}: {message}")
    assert err.source_line == text.splitlines()[line - 1]
    assert str(err).splitlines()[-1] == "    " + " " * (col - 1) + "^"  # the caret under it


def test_at_least_twenty_must_fail_scripts():
    assert len(CASES) >= 20


ESCAPE = "__import__('os').system('touch {flag}')"

# the call in every position a script has: decorator, annotation, default, body, index,
# loop extent, T.reads, block name, attribute value, module level, class body
POSITIONS = [
    "@{x}\ndef f(A: T.Buffer((8,), 'float32')):\n    pass\n",
    "@T.prim_func\ndef f(A: {x}):\n    pass\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32') = {x}):\n    pass\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    {x}\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[{x}] = T.float32(0)\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    for i in range({x}):\n        pass\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    with T.block('b'):\n"
    "        T.reads({x})\n        A[0] = T.float32(0)\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    T.func_attr({{'k': {x}}})\n",
    "{x}\n@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    pass\n",
    "@I.ir_module\nclass M:\n    x = {x}\n",
    "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = T.float32(0) if {x} else T.float32(1)\n",
]


@pytest.mark.parametrize("position", range(len(POSITIONS)))
def test_import_os_system_is_rejected_without_running_anything(position, tmp_path):
    flag = tmp_path / "ran"
    text = POSITIONS[position].format(x=ESCAPE.format(flag=flag))
    with pytest.raises(
        wb.TVMScriptError,
        match=r"`__import__` is not TVMScript \(the parser "
        r"never runs code\)",
    ) as info:
        wb.parse(text)
    assert info.value.line == next(n for n, line in enumerate(text.splitlines(), 1) if "__import__" in line)
    assert not os.path.exists(flag)


@pytest.mark.parametrize(
    "code",
    [
        "().__class__.__bases__[0]",
        "A.__dict__",
        "eval('1')",
        "exec('x = 1')",
        "open('/etc/passwd')",
        "getattr(A, 'x')",
    ],
)
def test_no_escape_hatch_is_an_expression(code):
    text = f"@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = {code}\n"
    with pytest.raises(wb.TVMScriptError) as info:
        wb.parse(text)
    assert info.value.line == 3


def test_text_must_be_a_string():
    with pytest.raises(TypeError, match="TVMScript text"):
        wb.parse(wb.workloads.get("GMM"))


def test_absurd_nesting_is_an_error_not_a_crash():
    head = "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = "
    for value, message in [
        ("1 + " * 3000 + "1", "nests too deeply"),
        ("(" * 400 + "1" + ")" * 400, "too many nested parentheses"),
    ]:
        with pytest.raises(wb.TVMScriptError, match=message):
            wb.parse(head + value + "\n")
