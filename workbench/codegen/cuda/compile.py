"""CUDA C -> cubin / PTX with nvcc (the CUDA toolkit, on the PATH).

A compiler error becomes a ``BuildError`` quoting nvcc's messages, each followed by the source
line it names, so the reader sees the offending code without opening a file. (pycuda's own
``compiler`` calls nvcc too, so it is no fallback; an NVRTC path would need ``libnvrtc``, which
the toolkit on these machines lacks, so none is offered untested.)
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
    """Why CUDA C cannot be compiled here, or None when it can."""
    if nvcc_path():
        return None
    return "nvcc (the CUDA toolkit) is not on the PATH to compile CUDA C"


def compile_cuda(source: str, arch: str, output: str = "cubin") -> bytes:
    """``source`` compiled for ``arch`` (``"sm_80"``) to ``"cubin"`` or ``"ptx"`` bytes."""
    if output not in ("cubin", "ptx"):
        raise ValueError(f"compile_cuda: output is 'cubin' or 'ptx', got {output!r}")
    return _compile(source, arch, output)


@lru_cache(maxsize=256)
def _compile(source: str, arch: str, output: str) -> bytes:
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError(compiler_available() or "no CUDA compiler")
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
