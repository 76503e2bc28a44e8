"""Built-in tensor intrinsics, registered with :class:`~workbench.schedule.tensor_intrin.TensorIntrin`
when first looked up (one module per instruction family)."""
from . import x86  # noqa: F401  (registration)
