"""A second C-family GPU language is a table: OpenCL C for the hand GPU schedules, compiled by a
real OpenCL compiler (clang) where one is installed, parsed as C otherwise."""

import re
from dataclasses import replace
import shutil
import subprocess

import pytest

import workbench as wb
from workbench.codegen.cuda import emit_cuda
from workbench.recipes import gpu as S
from workbench.codegen.gpu.cfamily import c_source
from workbench.codegen.gpu.device import gpu_program
from workbench.codegen.opencl import OPENCL, emit_opencl

GMM = dict(b=1, n=64, m=128, k=32)


def _clang_compile(source, tmp_path):
    path = tmp_path / "kernel.cl"
    path.write_text(source)
    cmd = ["clang", "-x", "cl", "-cl-std=CL1.2", "-c", "-Xclang", "-finclude-default-header"]
    done = subprocess.run(
        [*cmd, "-Werror=implicit-function-declaration", "-o", "/dev/null", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def _parse_as_c(source):
    """OpenCL C is C99 plus address-space qualifiers, attributes and a few type names: without
    them pycparser must accept the source."""
    pycparser = pytest.importorskip("pycparser")
    text = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    text = re.sub(r"//.*", "", text)
    text = re.sub(r"__attribute__\(\(.*?\)\)\)?", "", text)
    text = re.sub(r"\b(__kernel|__global|__local|__private|restrict)\b", "", text)
    types = "typedef int bool; typedef unsigned char uchar; typedef unsigned int uint; typedef long ulong;"
    pycparser.CParser().parse(types + "\n" + text)


@pytest.fixture(scope="module")
def gmm_source():
    return emit_opencl(S.gmm_shared(**GMM).func)


def test_hand_gmm_is_opencl_c(gmm_source):
    src = gmm_source
    assert "__kernel void __attribute__((reqd_work_group_size(16, 8, 1)))" in src
    assert "__global float* restrict X" in src
    assert "__local float X_shared[" in src and "__private float Z_local[16]" in src
    assert "get_group_id(0)" in src and "get_local_id(1)" in src
    assert src.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert "vstore4(vload4(0, X + " in src  # the float4 fetch of the CUDA kernel
    for cuda_word in ("__syncthreads", "threadIdx", "blockIdx", "__shared__", "__global__", "float4*"):
        assert cuda_word not in src
    # the same kernel as CUDA C, line for line, up to the table's words
    assert len(src.splitlines()) == len(emit_cuda(S.gmm_shared(**GMM).func).splitlines())


def test_hand_gmm_parses_as_c(gmm_source):
    _parse_as_c(gmm_source)


@pytest.mark.skipif(
    shutil.which("clang") is None, reason="no clang (Debian: apt-get install clang) to compile OpenCL C"
)
@pytest.mark.parametrize("label", ["gmm", "sfm"])
def test_opencl_compiler_accepts_the_hand_schedules(label, gmm_source, tmp_path):
    source = gmm_source if label == "gmm" else emit_opencl(S.sfm_cross_thread(m=4, n=100).func)
    _clang_compile(source, tmp_path)


def test_cross_thread_reduction_is_a_tree_declared_at_the_kernel_top():
    """No warp shuffles in OpenCL C 1.2; its __local arrays live at kernel scope."""
    src = emit_opencl(S.sfm_cross_thread(m=4, n=100).func)
    _parse_as_c(src)
    assert "shfl" not in src and "a tree in shared memory" in src
    kernel = src[src.index("__kernel") :]
    body = kernel.splitlines()[1:]
    decls = [n for n, line in enumerate(body) if line.startswith("  __local ")]
    assert len(decls) == 5 and decls == list(range(5))  # 3 shared buffers, 2 reduction trees


def test_what_opencl_lacks_is_refused():
    wmma = S.gmm_wmma(n=32, m=64, k=32).func
    with pytest.raises(wb.BuildError, match=r"opencl: .*uses float16"):
        emit_opencl(wmma)
    # with half (cl_khr_fp16) in the table, tensor cores are still not OpenCL's
    with_half = replace(OPENCL, types={**OPENCL.types, "float16": "half"}, to_half="{}", from_half="{}")
    _, program = gpu_program(wmma, wb.Target("cuda"))
    with pytest.raises(wb.BuildError, match=r"opencl: .*tensor cores"):
        c_source(program, with_half)
    sch = wb.Schedule(wb.workloads.get("GMM-FP16", n=32, m=32, k=32))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(wb.BuildError, match=r"opencl: .*float16"):
        emit_opencl(sch.func)
