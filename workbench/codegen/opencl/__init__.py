"""OpenCL C from the GPU device form: the C-family printer with OpenCL's table.

Source generation only — there is no OpenCL launcher (no pyopencl runtime, no ``opencl`` target
kind for ``wb.build``): this backend is the proof that a C-family GPU language is a table
(:data:`OPENCL`) for :mod:`..gpu.cfamily`, the device form (:mod:`..gpu.device`: kernels,
guards, cross-thread reductions, barriers) being shared with CUDA. ``emit_opencl(func)`` gives
OpenCL C 1.2 that ``clang -x cl -cl-std=CL1.2`` compiles.

What OpenCL C lacks is refused with a ``BuildError``: tensor cores (wmma), dynamic shared memory
(a ``__local`` kernel argument would need a launcher to size it) and float16 (the
``cl_khr_fp16`` extension). Warp shuffles are not used: a cross-thread reduction is the
shared-memory tree, its ``__local`` array declared at the kernel's top as OpenCL requires.
"""

from __future__ import annotations

from typing import Any

from ...ir.func import PrimFunc
from ..gpu.cfamily import CLanguage, c_source
from ..gpu.device import gpu_program
from ...target import Target

__all__ = ["OPENCL", "emit_opencl"]

_MATH = {op: op for op in ("exp", "log", "sqrt", "rsqrt", "tanh", "pow", "erf", "floor", "ceil", "round")}
_MATH.update(sin="sin", cos="cos", fabs="fabs", abs="fabs")  # the builtins are overloaded on precision

OPENCL = CLanguage(
    name="opencl",
    types={
        "bool": "bool",
        "int8": "char",
        "uint8": "uchar",
        "int16": "short",
        "uint16": "ushort",
        "int32": "int",
        "uint32": "uint",
        "int64": "long",
        "uint64": "ulong",
        "float32": "float",
        "float64": "double",
    },
    header="#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n\n",
    function_qualifiers="",
    kernel="__kernel void {bounds}{name}({params}) {{",
    launch_bounds="__attribute__((reqd_work_group_size({x}, {y}, {z}))) ",
    param="__global {type}* restrict {name}",
    shared_array="__local {type} {name}[{size}] __attribute__((aligned(16)));",
    shared_scratch="__local {type} {name}[{size}];",
    local_array="__private {type} {name}[{size}] __attribute__((aligned(16)));  // {scope}",
    hw={
        "blockIdx.x": "get_group_id(0)",
        "blockIdx.y": "get_group_id(1)",
        "blockIdx.z": "get_group_id(2)",
        "threadIdx.x": "get_local_id(0)",
        "threadIdx.y": "get_local_id(1)",
        "threadIdx.z": "get_local_id(2)",
    },
    barrier="barrier(CLK_LOCAL_MEM_FENCE);",
    unroll="#pragma unroll",
    vector_copy="vstore{n}(vload{n}(0, {src}), 0, {dst});",
    int_suffix={"int64": "L", "uint64": "UL", "uint32": "u"},
    float_from_bits="as_float({})",
    double_from_bits="as_double({})",
    math_f32=_MATH,
    math_f64=_MATH,
    nested_shared=False,
)


def emit_opencl(func: PrimFunc, target: Any = "cuda") -> str:
    """The OpenCL C source of ``func``'s GPU kernels (lowered first). ``target`` (a GPU
    ``Target`` or its string) gives the limits the kernels are checked against — threads per
    block, shared memory — and the warp size; OpenCL devices have the same orders of magnitude."""
    _, program = gpu_program(func, Target.of(target))
    return c_source(program, OPENCL)
