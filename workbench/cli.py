"""The ``workbench`` command.

workbench workloads                      list the paper's workloads (and registered extras)
workbench show GMM [--shape m=64 ...]    print a workload's IR
workbench run GMM [--target llvm]        build it unscheduled, check it against numpy, time both
workbench tune GMM|all [--trials 64]     tune into a database (--db tuning.sqlite, --shape, --small)
workbench best GMM [--db tuning.sqlite]  print the best schedule found: its IR and trace
workbench import-tvm DIR [--db OUT]      import TVM MetaSchedule JSON databases
workbench export-tvm GMM [--db PATH]     print the best trace as TVM Python (--all: every one)
workbench db check PATH                  is a database intact? (db repair PATH --out NEW)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Sequence

import numpy as np

from . import workloads
from .cli_args import Parser, UsageError, positive_int, shape_kwargs
from .codegen import build
from .errors import WorkbenchError
from .graph.cli import add_parsers as add_model_parsers
from .tune.cli import add_parsers

__all__ = ["main", "UsageError"]


def _workload_func(name: str, shape: dict):
    """The workload's function, or a UsageError naming the bad name or shape parameter."""
    try:
        return workloads.get(name, **shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None


def _cmd_workloads(args: argparse.Namespace) -> int:
    for name in workloads.names():
        print(f"{name:5s} {workloads.describe(name)}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    print(_workload_func(args.name, shape_kwargs(args.shape)))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    kw = shape_kwargs(args.shape)
    func = _workload_func(args.name, kw)
    t0 = time.perf_counter()
    kernel = build(func, target=args.target)
    compile_s = time.perf_counter() - t0
    data = workloads.random_args(args.name, seed=0, **kw)
    kernel(*data)
    expected = workloads.reference(args.name, **kw)(*data[:-1])
    np.testing.assert_allclose(data[-1], expected, rtol=1e-4, atol=1e-4)
    ours = kernel.time(*data, number=args.number, repeat=3)
    ref = workloads.reference(args.name, **kw)
    t0 = time.perf_counter()
    for _ in range(args.number):
        ref(*data[:-1])
    theirs = (time.perf_counter() - t0) / args.number
    print(
        f"{args.name} on {args.target}: matches numpy; compile {compile_s:.2f} s; "
        f"{ours * 1e3:.3f} ms vs numpy reference {theirs * 1e3:.3f} ms"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; the exit status: 0 done, 1 done but nothing found / some failed, 2 a user
    error (one line on stderr), 130 interrupted (Ctrl-C; SIGTERM too for a tune); an internal
    error prints its traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(argv)
        args.argv = argv
        return args.fn(args)
    except (UsageError, WorkbenchError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(first if first.startswith("workbench") else f"workbench: {first}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `workbench best GMM | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except Exception:
        traceback.print_exc()
        print(
            "workbench: internal error (a bug in workbench, not in your command): please "
            "report it with the command line and the traceback above",
            file=sys.stderr,
        )
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="workbench",
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("workloads", help="list workloads").set_defaults(fn=_cmd_workloads)
    p = sub.add_parser("show", help="print a workload's IR")
    p.add_argument("name")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT")
    p.set_defaults(fn=_cmd_show)
    p = sub.add_parser("run", help="build a workload unscheduled, check and time it")
    p.add_argument("name")
    p.add_argument("--target", default="llvm")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT")
    p.add_argument("--number", type=positive_int, default=3)
    p.set_defaults(fn=_cmd_run)
    add_parsers(sub)
    add_model_parsers(sub)
    return parser


if __name__ == "__main__":
    sys.exit(main())
