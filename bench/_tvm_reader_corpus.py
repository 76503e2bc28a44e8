"""Make bench/data/tvm_schedule_programs.json.gz: what TVM 0.27 prints for its own schedule tests.

Run by TVM's virtualenv (TVM is never a dependency of the workbench):

    /path/to/tvm-venv/bin/python bench/_tvm_reader_corpus.py TESTS_DIR [-o OUT]

TESTS_DIR holds apache/tvm's ``tests/python/s_tir/schedule/test_tir_schedule_*.py``. Every
module-level ``PrimFunc`` / ``IRModule`` and every ``before`` / ``expected`` of a
``CompareBeforeAfter`` class is printed with ``.script()`` under the key ``<file>:<name>``.
"""

import argparse
import glob
import gzip
import importlib.util
import json
import os
import sys

import tvm
from tvm import tirx as tir

PREFIX = "test_tir_schedule_"


def programs(tests_dir: str) -> dict[str, str]:
    sys.path.insert(0, tests_dir)
    out: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(tests_dir, PREFIX + "*.py"))):
        mod_name = os.path.basename(path)[:-3]
        try:
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            spec.loader.exec_module(module)
        except Exception as e:  # a test file that does not import under this TVM: say so, go on
            print("skipped", mod_name, type(e).__name__, str(e)[:100], file=sys.stderr)
            continue
        short = mod_name[len(PREFIX) :]
        for name, value in vars(module).items():
            if isinstance(value, (tir.PrimFunc, tvm.IRModule)):
                out[f"{short}:{name}"] = value.script()
            elif isinstance(value, type):
                for attr in ("before", "expected"):
                    v = getattr(value, attr, None)
                    if isinstance(v, (tir.PrimFunc, tvm.IRModule)):
                        out[f"{short}:{name}.{attr}"] = v.script()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests_dir")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("-o", "--out", default=os.path.join(here, "data", "tvm_schedule_programs.json.gz"))
    args = ap.parse_args()
    progs = programs(args.tests_dir)
    source = (
        f"apache/tvm {tvm.__version__} tests/python/s_tir/schedule/{PREFIX}*.py: module-level programs "
        "and CompareBeforeAfter before/expected, printed by .script(); made by bench/_tvm_reader_corpus.py"
    )
    with gzip.open(args.out, "wt") as f:
        json.dump({"source": source, "programs": progs}, f)
    print(f"{len(progs)} programs -> {args.out}")


if __name__ == "__main__":
    main()
