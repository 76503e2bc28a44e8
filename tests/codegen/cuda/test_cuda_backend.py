"""The CUDA backend: hand GPU schedules compile with nvcc and match numpy on the emulator; what it
rejects, it rejects with a message naming the loop, buffer or limit."""

import shutil

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.cuda import GPURaceError, emit_cuda, gpu_unavailable
from workbench.recipes import gpu as S
from workbench.codegen.cuda.compile import compile_cuda
from workbench.target import Target

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc (the CUDA toolkit) is not on the PATH: the generated CUDA C is not compiled"
)

#: label -> (workload, schedule, small shape, what the CUDA C must contain)
CASES = {
    "gmm_shared": (
        "GMM",
        S.gmm_shared,
        dict(b=1, n=64, m=128, k=32),
        ("__shared__", "__syncthreads();", "float4"),
    ),
    "c2d_shared": (
        "C2D",
        S.c2d_shared,
        dict(n=1, h=8, w=8, ci=4, co=8, kernel=3, stride=1, padding=1),
        ("__shared__", "__syncthreads();"),
    ),
    "sfm_cross_thread": (
        "SFM",
        S.sfm_cross_thread,
        dict(m=4, n=100),
        ("all-reduce (max)", "all-reduce (sum)"),
    ),
    "nrm_cross_thread": ("NRM", S.nrm_cross_thread, dict(b=3, m=8, n=30), ("all-reduce (sum)",)),
    "gmm_wmma": (
        "GMM-FP16",
        S.gmm_wmma,
        dict(n=32, m=64, k=32),
        ("wmma::mma_sync", "wmma::load_matrix_sync", "wmma::store_matrix_sync", "wmma::fill_fragment"),
    ),
}


def run_emulated(name, sch, shape, target="cuda-emulate"):
    args = wb.workloads.random_args(name, seed=0, **shape)
    expected = wb.workloads.reference(name, **shape)(*args[:-1])
    wb.build(sch, target=target)(*args)
    return args[-1], expected


@pytest.mark.parametrize("label", CASES)
def test_hand_schedule_matches_numpy_on_the_emulator(label):
    name, fn, shape, _ = CASES[label]
    out, expected = run_emulated(name, fn(**shape), shape)
    assert np.abs(expected).max() > 0
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@needs_nvcc
@pytest.mark.parametrize("label", CASES)
def test_hand_schedule_compiles_with_nvcc(label):
    name, fn, shape, features = CASES[label]
    kernel = wb.build(fn(**shape), target="cuda")
    assert kernel.cubin[:4] == b"\x7fELF"  # a cubin is an ELF file
    source = kernel.source("cuda")
    for text in features:
        assert text in source, f"{label}: no {text!r} in\n{source}"


def test_a_fetch_beside_a_per_thread_reduction_is_not_a_cross_thread_one():
    # one output per thread, accumulated in a 1-element local buffer over k_0, beside the
    # cooperative fetch's thread loops: each thread reduces alone (no all-reduce)
    shape = dict(b=1, n=32, m=64, k=32)
    sch = S.gmm_shared(tile=1, **shape)
    assert "all-reduce" not in emit_cuda(sch.func)
    out, expected = run_emulated("GMM", sch, shape)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_virtual_threads_run_in_turn_in_each_thread():
    shape = dict(b=1, n=32, m=32, k=8)
    sch = wb.Schedule(wb.workloads.get("GMM", **shape))
    z = sch.get_block("Z")
    b, i, j, k = sch.get_loops(z)
    i0, iv, it = sch.split(i, [None, 2, 8])
    j0, jt = sch.split(j, [None, 16])
    sch.reorder(b, i0, j0, iv, it, jt, k)
    sch.bind(sch.fuse(b, i0), "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(iv, "vthread.x")
    sch.bind(it, "threadIdx.y")
    sch.bind(jt, "threadIdx.x")
    source = emit_cuda(sch.func)
    assert "#pragma unroll\n  for (int i_1 = 0; i_1 < 2; ++i_1)" in source
    assert "block (16, 8, 1)" in source
    out, expected = run_emulated("GMM", sch, shape)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_warp_shuffle_reduction_when_the_axis_is_a_warp():
    sch = S.nrm_cross_thread(b=2, m=4, n=16, threads=32)
    assert "__shfl_xor_sync(0xffffffffu" in emit_cuda(sch.func)
    out, expected = run_emulated("NRM", sch, dict(b=2, m=4, n=16))
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@needs_nvcc
def test_ptx_on_request():
    kernel = wb.build(S.nrm_cross_thread(b=2, m=4, n=16), target="cuda -arch=sm_75")
    assert ".target sm_75" in kernel.source("ptx")
    assert kernel.source_kinds == ("cuda", "ptx")


def test_emulator_runs_gmm_256():  # the size the emulator is meant to check in seconds
    shape = dict(b=1, n=256, m=256, k=256)
    out, expected = run_emulated("GMM", S.gmm_shared(**shape), shape)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)


# rejected schedules --------------------------------------------------------------------------


def test_unbound_loop_is_rejected():
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=16, m=16, k=16))
    with pytest.raises(
        wb.BuildError,
        match=r"loop 'b' \(serial, extent 1\) is not bound to a "
        r"GPU thread axis.*writes Z.*sch.bind",
    ):
        wb.build(sch, target="cuda-emulate")


def test_serial_loop_around_a_kernel_is_rejected():
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=16, m=16, k=16))
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.bind(j, "threadIdx.x")
    with pytest.raises(wb.BuildError, match="loop 'b'.*encloses the thread-bound loop 'j'"):
        wb.build(sch, target="cuda-emulate")


def test_one_block_axis_bound_twice_is_rejected():
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=16, m=16, k=16))
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.bind(sch.fuse(b, i), "blockIdx.x")
    sch.bind(j, "blockIdx.x")
    with pytest.raises(
        wb.BuildError, match="loop 'j' is bound to blockIdx.x inside another loop bound to blockIdx.x"
    ):
        wb.build(sch, target="cuda-emulate")


def test_a_shared_fetch_computed_under_thread_loops_fetches_the_whole_tile():
    # compute_at relaxes a shared buffer's region over the thread loops above the target loop
    # (TVM): the fetch at k_0, under threadIdx.y / threadIdx.x, copies the block's 32 x 16 tile
    # of X, which compaction then allocates at that size
    sch = S.gmm_shared(b=1, n=64, m=128, k=32)
    source = emit_cuda(sch.func)  # (one thread's part would be 4 x 16 of X, 16 x 4 of Y)
    assert "__shared__ __align__(16) float X_shared[512];" in source  # 32 x 16
    assert "__shared__ __align__(16) float Y_shared[1024];" in source  # 16 x 64


def test_too_many_threads_per_block():
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=64, m=64, k=4))
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.bind(sch.fuse(b, i), "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(
        wb.BuildError,
        match=r"4096 threads per block \(64 \(threadIdx.x\) x 64 "
        r"\(threadIdx.y\)\); target cuda allows at most 1024",
    ):
        wb.build(sch, target="cuda")
    wb.build(sch, target="cuda-emulate -max-threads-per-block=4096")  # the limit is the target's


def test_shared_memory_beyond_the_target_limit():
    sch = S.gmm_shared(b=1, n=64, m=128, k=32)
    with pytest.raises(
        wb.BuildError,
        match=r"needs 6144 bytes of shared memory \(X_shared "
        r"\(2048 B\), Y_shared \(4096 B\)\); the target "
        r"allows 4096",
    ):
        wb.build(sch, target="cuda-emulate -max-shared-memory-per-block=4096")


def test_shared_memory_cannot_outlive_a_kernel():
    sch = S.nrm_cross_thread(b=2, m=4, n=16)
    sch.set_scope(sch.get_block("C"), 0, "shared")  # C: written by kernel 0, read by kernel 1
    with pytest.raises(
        wb.BuildError,
        match="shared buffer C_shared of norm_bmn is used by 2 "
        "kernels .* shared memory lives within one kernel",
    ):
        wb.build(sch, target="cuda-emulate")


def test_parallel_loop_is_rejected():
    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=16, m=16, k=16))
    b, i, j, k = sch.get_loops(sch.get_block("Z"))
    sch.bind(sch.fuse(b, i), "blockIdx.x")
    sch.parallel(j)
    with pytest.raises(wb.BuildError, match="loop 'j' is parallel"):
        wb.build(sch, target="cuda-emulate")


def pipelined_gmm(stage=(0, 0, 1), order=(0, 1, 2)):
    sch = S.gmm_shared(**PIPE_SHAPE)
    k0 = sch.get_loops(sch.get_block("Z_update"))[4]  # its body: fetch X, fetch Y, compute
    sch.annotate(k0, "software_pipeline_stage", list(stage))
    sch.annotate(k0, "software_pipeline_order", list(order))
    return sch


PIPE_SHAPE = dict(b=1, n=64, m=128, k=64)


@pytest.mark.parametrize("target", ["cuda-emulate", "python"])
def test_software_pipeline_double_buffers_the_fetched_tiles(target):
    sch = pipelined_gmm()
    source = emit_cuda(sch.func)
    # the loop runs one step more; the fetch of tile k_0_step overlaps the math on the previous
    # one, each shared buffer has two versions
    assert "for (int k_0_step = 0; k_0_step < 5; ++k_0_step)" in source
    assert "__shared__ __align__(16) float X_shared[1024];" in source  # 2 x 32 x 16
    assert "X_shared + (((((k_0_step % 2) * 512)" in source
    assert "wb_floormod((k_0_step - 1), 2) * 512)" in source
    out, expected = run_emulated("GMM", sch, PIPE_SHAPE, target=target)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_software_pipeline_order_runs_the_compute_first():
    sch = pipelined_gmm(order=(1, 2, 0))
    source = emit_cuda(sch.func)
    assert source.index("if ((k_0_step >= 1))") < source.index("if ((k_0_step < 4))")
    out, expected = run_emulated("GMM", sch, PIPE_SHAPE)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_software_pipeline_annotations_must_fit_the_loop_body():
    with pytest.raises(
        wb.BuildError,
        match="software pipeline of loop 'k_0': its body has 3 statements but software_pipeline_stage has 2",
    ):
        wb.build(pipelined_gmm(stage=(0, 1), order=(0, 1)), target="cuda-emulate")
    with pytest.raises(
        wb.BuildError,
        match=r"software_pipeline_order=\[0, 0, 1\] is not a "
        r"permutation of 0..2",
    ):
        wb.build(pipelined_gmm(order=(0, 0, 1)), target="cuda-emulate")


def test_software_pipeline_cannot_version_a_buffer_allocated_outside_the_loop():
    # the sums of squares (stage 0) and their roots (stage 1) pipelined over the batch: C is a
    # global intermediate of the whole function, not one per iteration
    sch = wb.Schedule(wb.workloads.get("NRM", b=1, m=4, n=8))
    b = sch.get_loops(sch.get_block("C"))[0]
    sch.bind(b, "blockIdx.x")
    sch.reverse_compute_at(sch.get_block("D"), b)
    sch.annotate(b, "software_pipeline_stage", [0, 1])
    with pytest.raises(
        wb.BuildError,
        match="buffer C is written in stage 0 and read in stage 1, but it is allocated outside the loop",
    ):
        wb.build(sch, target="cuda-emulate")


def test_race_between_threads_is_reported():
    # softmax in one kernel, the row's max and sum left in global memory: thread 0 writes the
    # max, the other threads read it with no barrier (only shared memory gets them)
    sch = wb.Schedule(wb.workloads.get("SFM", m=1, n=64))
    row, col = sch.get_loops(sch.get_block("T_softmax_norm"))
    sch.bind(row, "blockIdx.x")
    sch.bind(sch.split(col, [None, 32])[1], "threadIdx.x")
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        stage = sch.get_block(name)
        sch.compute_at(stage, row)
        sch.bind(sch.split(sch.get_loops(stage)[-1], [None, 32])[1], "threadIdx.x")
    with pytest.raises(
        GPURaceError,
        match=r"race on global buffer T_softmax_maxelem\[\d+\].*"
        r"thread \(0, 0, 0\) of block \(0, 0, 0\) wrote it and "
        r"thread \(\d+, 0, 0\) of block \(0, 0, 0\) reads it "
        r"with no __syncthreads\(\) in between",
    ):
        run_emulated("SFM", sch, dict(m=1, n=64))


def test_reduction_over_two_thread_axes():
    sch = wb.Schedule(wb.workloads.get("NRM", b=1, m=8, n=32))
    b, i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    sch.bind(b, "blockIdx.x")
    d = sch.get_loops(sch.get_block("D"))[0]
    sch.bind(d, "threadIdx.x")
    out, expected = run_emulated("NRM", sch, dict(b=1, m=8, n=32))  # two axes reduced: fine
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    sch = wb.Schedule(wb.workloads.get("NRM", b=1, m=8, n=32))
    b, i, j = sch.get_loops(sch.get_block("C"))
    with pytest.raises(wb.ScheduleError, match="bind.*feeds reduce iterator"):
        sch.bind(j, "blockIdx.x")  # blocks cannot reduce together: bind says so already


@needs_nvcc
def test_nvcc_errors_quote_the_offending_source_line():
    source = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_name;\n}\n'
    with pytest.raises(
        wb.BuildError,
        match=r"(?s)nvcc could not compile.*error: identifier "
        r"\"undefined_name\" is undefined.*   2 \| a\[0\] = "
        r"undefined_name;",
    ):
        compile_cuda(source, "sm_80")


@needs_nvcc
def test_an_architecture_nvcc_cannot_compile_for_is_its_error():
    with pytest.raises(wb.BuildError, match=r"(?s)nvcc could not compile.*sm_50"):
        wb.build(S.nrm_cross_thread(b=2, m=4, n=16), target="cuda -arch=sm_50")


@needs_nvcc
@pytest.mark.skipif(gpu_unavailable() is None, reason="a GPU is present: kernels run")
def test_without_a_gpu_the_kernel_says_what_is_missing():
    kernel = wb.build(S.nrm_cross_thread(b=2, m=4, n=16), target="cuda")
    args = wb.workloads.random_args("NRM", seed=0, b=2, m=4, n=16)
    with pytest.raises(
        RuntimeError, match=f"cannot run CUDA kernel 'norm_bmn': {gpu_unavailable()[:20]}.*cuda-emulate"
    ):
        kernel(*args)
    with pytest.raises(TypeError, match="argument 'A' has dtype float64"):  # checked first
        kernel(args[0].astype("float64"), args[1])


def test_cuda_target_properties():
    t = Target("cuda -arch=sm_90 -max-threads-per-block=512")
    assert (t.cuda_arch, t.max_threads_per_block, t.max_shared_memory_per_block, t.thread_warp_size) == (
        "sm_90",
        512,
        48 * 1024,
        32,
    )
    assert Target("cuda").cuda_arch == "sm_80"
    with pytest.raises(ValueError, match="-arch must look like sm_80"):
        Target("cuda -arch=volta")
    with pytest.raises(ValueError, match="-max-threads-per-block must be a positive integer"):
        Target("cuda -max-threads-per-block=0")
