"""Build the documentation site with the lessons and notebooks executed, then check that a
lesson page shows its outputs.

    python bench/docs_build.py                 # sphinx-build -W --keep-going -b html docs docs/_build/html
    python bench/docs_build.py --no-build      # only check an existing build

Needs the ``docs`` extra (``pip install -e ".[docs]"``: Sphinx, MyST-NB, furo, jupyter-cache).
The notebooks run with ``WB_NOTEBOOK_TRIALS`` (default 4, see docs/conf.py) and are cached in
docs/_build/.jupyter_cache: the first build takes minutes, a rebuild seconds. Not part of the
test suite for that reason.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"

#: pages and what each must show once executed: the outputs, not only the code
EXPECTED = {
    "tutorials/01_ir_and_loop_nests.html": ["wb-stepper", "T.prim_func"],
    "tutorials/03_blocks_compute_at_inline.html": ["the largest gain on this machine:"],
    "notebooks/02_design_space_cbr.html": ["wb-decision-tree", "<svg"],
}


def check() -> list[str]:
    problems = []
    for page, needles in EXPECTED.items():
        path = HTML / page
        if not path.exists():
            problems.append(f"{page}: not built")
            continue
        text = path.read_text(encoding="utf-8")
        outputs = len(re.findall(r'class="cell_output', text))
        print(f"{page}: {outputs} cell outputs, {len(text) // 1024} KiB")
        if not outputs:
            problems.append(f"{page}: no cell outputs (notebooks not executed?)")
        problems += [f"{page}: {n!r} missing" for n in needles if n not in text]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument(
        "--fresh", action="store_true", help="sphinx-build -E: re-read all pages (cached executions stay)"
    )
    args = ap.parse_args()
    if not args.no_build:
        t0 = time.monotonic()
        fresh = ["-E"] if args.fresh else []  # re-read every page (after a conf.py change)
        cmd = [sys.executable, "-m", "sphinx", *fresh, "-W", "--keep-going", "-b", "html", "docs", str(HTML)]
        code = subprocess.call(cmd, cwd=ROOT)
        print(f"sphinx-build: exit {code} in {time.monotonic() - t0:.0f} s")
        if code:
            return code
    problems = check()
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
