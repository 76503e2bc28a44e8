"""The LLVM backend across CPUs: code for AVX2 and AVX-512 from one schedule, cross-compilation
for AArch64, and kernels for a CPU the host cannot run (compiled, shown, never run)."""

import sys

import numpy as np
import pytest

import workbench as wb
from workbench import target as target_module
from workbench.codegen.llvm import CompileOnlyKernel, build_llvm
from workbench.target import Target
from workbench.errors import BuildError
from workbench.schedule.intrinsics import gemm_intrinsics
from workbench.testing import X86_TARGETS, runs_here

jit_module = sys.modules["workbench.codegen.llvm.jit"]

AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1"
#: what LLVM reports on an AMD Zen 3 (AVX2 + FMA, no AVX-512)
ZEN3_FEATURES = (
    ",".join(
        f"+{f}"
        for f in """64bit adx aes avx avx2 bmi bmi2 clflushopt clwb
    clzero cmov crc32 cx16 cx8 f16c fma fsgsbase fxsr invpcid lzcnt mmx movbe mwaitx pclmul pku
    popcnt prfchw rdpid rdpru rdrnd rdseed sahf sha shstk sse sse2 sse3 sse4.1 sse4.2 sse4a
    ssse3 vaes vpclmulqdq wbnoinvd xsave xsavec xsaveopt xsaves""".split()
    )
    + ",-avx512f,-avx512bw,-avx512dq,-avx512vl,-avx512cd,-avx512vnni,-gfni"
)


def gmm_schedule(n=64, lanes=16):
    """GMM tiled 4 x ``lanes``: rows unrolled, columns vectorized, outer rows parallel."""
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=n, m=n, k=n))
    _, i, j, k = sch.get_loops("Z")
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, lanes])
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(io)
    sch.unroll(ii)
    sch.vectorize(ji)
    return sch


def gmm_args(n=64):
    return wb.workloads.random_args("GMM", b=1, n=n, m=n, k=n)


@pytest.mark.parametrize("target", X86_TARGETS)
def test_gmm_for_avx2_and_avx512(target):
    """One schedule per target, vectorized by the target's lanes: run where the host can, and
    the assembly has fused multiply-adds on ymm (AVX2) or zmm (AVX-512) registers."""
    lanes = Target(target).vector_lanes("float32")
    kernel = wb.build(gmm_schedule(lanes=lanes), target)
    args = gmm_args()
    if runs_here(target):
        kernel(*args)
        np.testing.assert_allclose(args[-1], args[0] @ args[1], rtol=1e-4, atol=1e-4)
    else:
        assert isinstance(kernel, CompileOnlyKernel)
    assert f"<{lanes} x float>" in kernel.source("llvm-raw")
    fmas = [line for line in kernel.source("asm").splitlines() if "vfmadd" in line]
    reg = "zmm" if lanes == 16 else "ymm"
    assert fmas and all(reg in line for line in fmas)


def test_cross_compile_for_aarch64():
    """A vectorized GMM for a Neoverse N1: IR and NEON assembly; running it is refused."""
    target = Target(AARCH64)
    assert target.vector_lanes("float32") == 4
    kernel = wb.build(gmm_schedule(lanes=16), AARCH64)
    assert isinstance(kernel, CompileOnlyKernel) and kernel.target == target
    assert 'target triple = "aarch64' in kernel.source("llvm")
    assert "<16 x float>" in kernel.source("llvm-raw")
    asm = kernel.source("asm")
    assert "fmla" in asm and ".4s" in asm and "zmm" not in asm
    args = gmm_args()
    with pytest.raises(
        RuntimeError,
        match=r"cannot run kernel 'batch_matmul_nkkm' on this host: "
        r"code for 'llvm -mcpu=neoverse-n1 -mtriple=aarch64",
    ):
        kernel(*args)
    with pytest.raises(RuntimeError, match="kernel.source"):
        kernel.time(*args)
    with pytest.raises(BuildError, match="aarch64"):
        jit_module.jit(kernel.source("llvm-raw"), "batch_matmul_nkkm_packed", target)


@pytest.fixture
def zen3_host(monkeypatch):
    """Pretend this machine is an AMD Zen 3: what ``Target("llvm")`` means changes with it."""
    monkeypatch.setattr(target_module, "_host_features", lambda: ZEN3_FEATURES)
    monkeypatch.setattr(Target, "mcpu_of_host", staticmethod(lambda: "znver3"))
    jit_module.target_machine.cache_clear()  # target machines are cached by target text
    yield
    jit_module.target_machine.cache_clear()


def test_avx2_host_resolves_the_host_target_to_8_lanes(zen3_host):
    host = Target("llvm")
    assert host.mcpu == "znver3" and host.vector_width_bits == 256
    assert host.vector_lanes("float32") == 8
    assert gemm_intrinsics(host)[0] == "avx2_f32_gemm_6x16x64"
    kernel = wb.build(gmm_schedule(lanes=8), "llvm")  # AVX2 code: this host runs it too
    args = gmm_args()
    kernel(*args)
    np.testing.assert_allclose(args[-1], args[0] @ args[1], rtol=1e-4, atol=1e-4)
    assert "zmm" not in kernel.source("asm")


def test_avx2_host_refuses_to_run_avx512_code(zen3_host):
    """Code for Skylake-X would die of SIGILL on a Zen 3: it is compiled, never run."""
    kernel = build_llvm(gmm_schedule().func, "llvm -mcpu=skylake-avx512")
    assert isinstance(kernel, CompileOnlyKernel) and "zmm" in kernel.source("asm")
    with pytest.raises(
        RuntimeError,
        match=r"'llvm -mcpu=skylake-avx512' needs avx512bw, .*"
        r"avx512f, avx512vl, which the host \(znver3\) lacks",
    ):
        kernel(*gmm_args())
    with pytest.raises(BuildError, match="avx512f"):
        jit_module.jit(
            kernel.source("llvm-raw"), "batch_matmul_nkkm_packed", Target("llvm -mcpu=skylake-avx512")
        )
