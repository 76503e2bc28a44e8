"""What schedule rules, postprocessors and mutators have in common: a name-registry filled by
subclassing, a target to specialize for, and a copy per tuning task.

Subclassing a base (``ScheduleRule``, ``Postproc``, ``Mutator``) registers the class under its
snake-case name (``MultiLevelTiling`` -> ``"multi_level_tiling"``), so ``ScheduleRule.named(
"multi_level_tiling", structure="SSRSRS")`` finds user classes as well as the built-in ones.
"""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar, Optional, Union

from ..target import Target


def snake_case(name: str) -> str:
    """``MultiLevelTiling`` -> ``multi_level_tiling``; ``RewriteGPUCode`` -> ``rewrite_gpu_code``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


class Pluggable:
    """Base of the pluggable pieces. A direct subclass declaring ``_registry = {}`` is a family
    base; every class below it registers itself there."""

    _registry: ClassVar[dict[str, type]]
    #: the target this instance was specialized for (None until initialized)
    target: Optional[Target] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_registry" not in cls.__dict__:
            cls._registry[snake_case(cls.__name__)] = cls

    def initialize_with_target(self, target: Union[str, Target]) -> None:
        """Specialize for ``target`` (core count, vector width, GPU limits) before use.

        Subclasses that derive parameters from the target extend this (and call it)."""
        self.target = Target.of(target)

    def clone(self) -> "Pluggable":
        """An independent copy (one per tuning task, as TVM clones its modules)."""
        return copy.deepcopy(self)

    @classmethod
    def named(cls, name: str, **kwargs: Any) -> "Pluggable":
        """An instance of the registered class ``name``: its snake-case or class name, with or
        without underscores (``"add_rfactor"``, ``"AddRFactor"``)."""
        squash = lambda s: s.replace("_", "").lower()
        found = [c for key, c in cls._registry.items() if squash(key) == squash(name)]
        if not found:
            raise KeyError(f"no {cls.__name__} named {name!r}; known: {', '.join(sorted(cls._registry))}")
        return found[0](**kwargs)

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and k != "target"
        )
        return f"{type(self).__name__}({fields})"


def target_kind(target: Union[str, Target, None]) -> str:
    """``"cuda"`` for GPU targets, ``"llvm"`` for the CPU ones (``"python"`` included)."""
    if target is None:
        return "llvm"
    kind = Target.of(target).kind
    return "cuda" if kind.startswith("cuda") else "llvm"


def gpu_limit(target: Union[str, Target, None], key: str) -> int:
    """A GPU limit of the target (``"max-threads-per-block"``, ``"thread-warp-size"``, ...):
    its ``-key=value`` option, else the default of :class:`Target` for ``cuda``."""
    return getattr(Target.of(target if target is not None else "cuda"), key.replace("-", "_"))
