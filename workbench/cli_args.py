"""What the ``workbench`` command's parsers share: the parser class, argument types and the
user error. Its own module so that ``workbench.cli`` and the subcommands it registers
(``workbench.tune.cli``, ``workbench.tune.learned.cli``) both import it, not each other."""

from __future__ import annotations

import argparse
from typing import Sequence


class UsageError(Exception):
    """A command line that cannot be carried out as given: one line on stderr, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line (with where to find the usage)."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def positive_int(text: str) -> int:
    """argparse type: an integer above 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def shape_kwargs(pairs: Sequence[str]) -> dict[str, int]:
    """The ``--shape n=64 k=32`` pairs as keyword arguments of a workload."""
    out = {}
    for p in pairs or ():
        key, sep, value = p.partition("=")
        if not sep or not key or not value.isdigit() or int(value) < 1:
            raise UsageError(f"--shape expects key=positive-integer pairs such as n=64, got {p!r}")
        out[key] = int(value)
    return out
