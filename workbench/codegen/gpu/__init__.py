"""What every GPU backend shares, whatever language it prints and however it launches.

* :mod:`.device`: a lowered function as GPU kernels (launch extents, guards, cross-thread
  reductions, barriers, shared memory) — the one translation every consumer reads;
* :mod:`.cfamily`: a printer of kernels in a C-family language, driven by a table per language
  (:data:`workbench.codegen.cuda.source.CUDA`, :data:`workbench.codegen.opencl.OPENCL`);
* :mod:`.emulate`: the kernels run on the CPU with numpy, one lane per thread (``cuda-emulate``).

A backend adds its table, a compiler and a launcher (:mod:`workbench.codegen.cuda`).
"""
