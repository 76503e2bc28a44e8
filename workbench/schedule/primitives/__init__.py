"""The primitives, one module per family; importing a module registers its instruction kinds.

Other families (compute location, caching, layout, reduction, blockize/tensorize) register
themselves the same way from their own modules.
"""

from . import annotation, for_kind, loops, query, sampling  # noqa: F401  (registration)
from . import compute_location, inline  # noqa: F401  (registration)
from . import cache, layout, read_write_at  # noqa: F401  (registration)
from . import reduction, blockize  # noqa: F401  (registration)
from . import postproc  # noqa: F401  (registration)
from . import block_signature  # noqa: F401  (registration)
from . import cache_variants, padding, partition  # noqa: F401  (registration)
