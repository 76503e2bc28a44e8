"""CUDA C -> cubin / PTX: nvcc when it is on the PATH, else NVRTC through pycuda.

A compiler error becomes a ``BuildError`` quoting the compiler's messages, each followed by the
source line it names, so the reader sees the offending code without opening a file.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache

from ...errors import BuildError

#: seconds nvcc may take for one kernel file
NVCC_TIMEOUT = 120


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def compiler_available() -> str | None:
    """Why CUDA C cannot be compiled here, or None when it can (nvcc, or pycuda's NVRTC)."""
    if nvcc_path():
        return None
    try:
        import pycuda.compiler  # noqa: F401
    except ImportError:
        return ("neither nvcc (the CUDA toolkit, on the PATH) nor pycuda (pip install "
                "'workbench[cuda]') is available to compile CUDA C")
    return None


def compile_cuda(source: str, arch: str, output: str = "cubin") -> bytes:
    """``source`` compiled for ``arch`` (``"sm_80"``) to ``"cubin"`` or ``"ptx"`` bytes."""
    if output not in ("cubin", "ptx"):
        raise ValueError(f"compile_cuda: output is 'cubin' or 'ptx', got {output!r}")
    return _compile(source, arch, output)


@lru_cache(maxsize=256)
def _compile(source: str, arch: str, output: str) -> bytes:
    nvcc = nvcc_path()
    if nvcc is None:
        return _compile_nvrtc(source, arch, output)
    key = hashlib.sha1(source.encode()).hexdigest()[:12]
    with tempfile.TemporaryDirectory(prefix="wb-cuda-") as tmp:
        src = os.path.join(tmp, f"kernel_{key}.cu")
        out = os.path.join(tmp, f"kernel_{key}.{output}")
        with open(src, "w") as f:
            f.write(source)
        cmd = [nvcc, f"--{output}", f"-arch={arch}", "-O3", "-o", out, src]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BuildError(f"nvcc took more than {NVCC_TIMEOUT} s for {src}") from None
        if proc.returncode != 0:
            raise BuildError(quote_errors("nvcc", proc.stderr + proc.stdout, source, src))
        with open(out, "rb") as f:
            return f.read()


def _compile_nvrtc(source: str, arch: str, output: str) -> bytes:
    try:
        from pycuda.compiler import compile as pycuda_compile  # NVRTC / nvcc wrapped by pycuda
    except ImportError:
        raise BuildError(compiler_available() or "no CUDA compiler") from None
    try:
        return pycuda_compile(source, arch=arch, target=output, no_extern_c=True)
    except Exception as exc:  # pycuda.driver.CompileError carries the log in its message
        raise BuildError(quote_errors("nvrtc", str(exc), source, "kernel.cu")) from None


def quote_errors(tool: str, log: str, source: str, path: str) -> str:
    """The compiler's messages, each followed by the source line it points at."""
    lines = source.splitlines()
    out = [f"{tool} could not compile the generated CUDA C:"]
    name = re.escape(os.path.basename(path))
    for msg in log.strip().splitlines():
        msg = msg.replace(path, os.path.basename(path))
        out.append("  " + msg)
        m = re.search(name + r"\((\d+)\)", msg) or re.search(r"\((\d+)\): (?:error|warning)", msg)
        if m and 0 < int(m.group(1)) <= len(lines):
            n = int(m.group(1))
            out.append(f"    {n:4d} | {lines[n - 1].strip()}")
    return "\n".join(out)
