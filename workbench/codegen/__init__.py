"""Code generation: lowering, the backends (python reference, LLVM, CUDA) and ``Kernel``."""

from .arrays import aligned, empty, zeros
from .build import build
from .kernel import Kernel
from .lower import lower
from .timing import TimingResult

__all__ = ["build", "lower", "Kernel", "empty", "zeros", "aligned", "TimingResult"]
