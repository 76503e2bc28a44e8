"""TVMScript written the way the MLC course and TVM's docs write it: each program parses, builds
with llvm and matches numpy (and its printed form parses back to the same function)."""

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_text_roundtrip

# MLC course, chapter 2 ("TensorIR"), at a smaller size: a module holding one function, the
# 2022 spelling of buffer types, one T.axis line per iterator, no T.reads / T.writes
MM_RELU = """
import tvm
from tvm.script import tir as T

@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def mm_relu(A: T.Buffer[(32, 32), "float32"],
                B: T.Buffer[(32, 32), "float32"],
                C: T.Buffer[(32, 32), "float32"]):
        T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
        Y = T.alloc_buffer((32, 32), dtype="float32")
        for i, j, k in T.grid(32, 32, 32):
            with T.block("Y"):
                vi = T.axis.spatial(32, i)
                vj = T.axis.spatial(32, j)
                vk = T.axis.reduce(32, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(32, 32):
            with T.block("C"):
                vi = T.axis.spatial(32, i)
                vj = T.axis.spatial(32, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""

# a padded NCHW convolution, TVM-docs style: T.axis.remap, T.if_then_else, += on the output
CONV2D_PAD = """
from tvm.script import tir as T

@T.prim_func
def conv2d(X: T.Buffer((1, 4, 8, 8), "float32"), W: T.Buffer((8, 4, 3, 3), "float32"),
           Y: T.Buffer((1, 8, 8, 8), "float32")):
    Xpad = T.alloc_buffer((1, 4, 10, 10), "float32")
    for n, c, h, w in T.grid(1, 4, 10, 10):
        with T.block("pad"):
            vn, vc, vh, vw = T.axis.remap("SSSS", [n, c, h, w])
            Xpad[vn, vc, vh, vw] = T.if_then_else(1 <= vh and vh < 9 and 1 <= vw and vw < 9,
                                                  X[vn, vc, vh - 1, vw - 1], T.float32(0))
    for n, k, h, w, c, rh, rw in T.grid(1, 8, 8, 8, 4, 3, 3):
        with T.block("conv"):
            vn, vk, vh, vw, vc, vrh, vrw = T.axis.remap("SSSSRRR", [n, k, h, w, c, rh, rw])
            with T.init():
                Y[vn, vk, vh, vw] = 0.0
            Y[vn, vk, vh, vw] += Xpad[vn, vc, vh + vrh, vw + vrw] * W[vk, vc, vrh, vrw]
"""

SOFTMAX = """
from tvm.script import tir as T

@T.prim_func
def softmax(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    maxelem = T.alloc_buffer((16,), "float32")
    E = T.alloc_buffer((16, 32))
    expsum = T.alloc_buffer((16,), "float32")
    for i, k in T.grid(16, 32):
        with T.block("maxelem"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(maxelem[vi])
            with T.init():
                maxelem[vi] = T.min_value("float32")
            maxelem[vi] = T.max(maxelem[vi], A[vi, vk])
    for i, j in T.grid(16, 32):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = T.exp(A[vi, vj] - maxelem[vi])
    for i, k in T.grid(16, 32):
        with T.block("expsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                expsum[vi] = T.float32(0)
            expsum[vi] = expsum[vi] + E[vi, vk]
    for i, j in T.grid(16, 32):
        with T.block("norm"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.block_attr({"axis": 1})
            B[vi, vj] = E[vi, vj] / expsum[vi]
"""

LAYER_NORM = """
from tvm.script import tir as T

@T.prim_func
def layer_norm(A: T.Buffer((8, 64), "float32"), gamma: T.Buffer((64,), "float32"),
               beta: T.Buffer((64,), "float32"), B: T.Buffer((8, 64), "float32")):
    mean = T.alloc_buffer((8,), "float32")
    sqsum = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 64):
        with T.block("mean"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                mean[vi] = T.float32(0)
            mean[vi] = mean[vi] + A[vi, vk] / T.float32(64)
    for i, k in T.grid(8, 64):
        with T.block("sqsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                sqsum[vi] = T.float32(0)
            sqsum[vi] = sqsum[vi] + (A[vi, vk] - mean[vi]) * (A[vi, vk] - mean[vi])
    for i, j in T.grid(8, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = ((A[vi, vj] - mean[vi]) / T.sqrt(sqsum[vi] / T.float32(64) + T.float32(1e-5))
                         * gamma[vj] + beta[vj])
"""

# the MLC course's hand-scheduled matmul: split loops bound by T.axis.spatial expressions,
# an initialization block of its own, parallel outer loop, vectorized inner loop
MM_SCHEDULED = """
from tvm.script import tir as T

@T.prim_func
def mm_scheduled(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                 C: T.Buffer((64, 64), "float32")):
    for i_0 in T.parallel(8):
        for i_1, j_0 in T.grid(8, 4):
            for j_1 in T.vectorized(16):
                with T.block("C_init"):
                    vi = T.axis.spatial(64, i_0 * 8 + i_1)
                    vj = T.axis.spatial(64, j_0 * 16 + j_1)
                    T.reads()
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.float32(0)
            for k in range(64):
                for j_1 in T.vectorized(16):
                    with T.block("C"):
                        vi = T.axis.spatial(64, i_0 * 8 + i_1)
                        vj = T.axis.spatial(64, j_0 * 16 + j_1)
                        vk = T.axis.reduce(64, k)
                        T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def _layer_norm(a, gamma, beta):
    mean = a.mean(axis=1, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=1, keepdims=True)
    return (a - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _softmax(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv2d(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 8, 8, 8), "float32")
    for rh in range(3):
        for rw in range(3):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, rh : rh + 8, rw : rw + 8], w[:, :, rh, rw])
    return out


PROGRAMS = {
    "mm_relu": (MM_RELU, [(32, 32), (32, 32)], lambda a, b: np.maximum(a @ b, 0)),
    "conv2d": (CONV2D_PAD, [(1, 4, 8, 8), (8, 4, 3, 3)], _conv2d),
    "softmax": (SOFTMAX, [(16, 32)], _softmax),
    "layer_norm": (LAYER_NORM, [(8, 64), (64,), (64,)], _layer_norm),
    "mm_scheduled": (MM_SCHEDULED, [(64, 64), (64, 64)], lambda a, b: a @ b),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_course_programs_build_and_match_numpy(name):
    text, shapes, reference = PROGRAMS[name]
    func = wb.parse(text)
    assert func.name == name
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, size=s).astype("float32") for s in shapes]
    out = np.full(func.params[-1].shape, np.nan, "float32")
    wb.build(func, target="llvm")(*inputs, out)
    np.testing.assert_allclose(out, reference(*inputs), rtol=1e-4, atol=1e-5)
    check_text_roundtrip(func)


def test_scheduled_matmul_keeps_its_loop_kinds():
    func = wb.parse(MM_SCHEDULED)
    kinds = [loop.kind.value for loop in func.loops()]
    assert kinds == ["parallel", "serial", "serial", "vectorized", "serial", "vectorized"]
    assert func.block("C_init").reads == ()
