"""Screenshots of the widgets' static HTML and of built docs pages, with headless Chromium
(``chromium --headless --screenshot``; no Playwright needed), into docs/_static/screenshots/.

    python bench/screenshots.py                # the decision tree and the trace graph
    python bench/screenshots.py --docs-page tutorials/03_blocks_compute_at_inline.html

The decision tree: 12 programs sampled from CBR's first sketch (notebook 02's cell), measured
here on llvm (each the best of a few runs; a 56x56x16 -> 32 conv), coloured against the unscheduled
function.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "_static" / "screenshots"
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: sans-serif; margin: 16px; width: {width}px; }}</style></head>
<body>{body}</body></html>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    raise SystemExit("no headless browser: install chromium")


def shoot(url: str, png: Path, width: int = 1000, height: int = 900) -> None:
    subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    print("wrote", png.relative_to(ROOT))


def best_of(kernel, args, runs: int = 5) -> float:
    kernel(*args)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        kernel(*args)
        out.append(time.perf_counter() - t0)
    return min(out)


def widgets_html() -> dict[str, str]:
    import workbench as wb
    from kernel_ext import DecisionTree, TraceGraph
    from workbench.space.postprocs import default_postprocs, run_postprocs

    shape = dict(h=56, w=56, ci=16, co=32, kernel=3, stride=1, padding=1)
    func = wb.workloads.get("CBR", **shape)
    args = wb.workloads.random_args("CBR", **shape)
    baseline = best_of(wb.build(func, target="llvm"), args)
    items = []
    for seed in range(12):
        sch = wb.generate_design_space(func, target="llvm", seed=seed)[0]
        design = sch.trace
        if run_postprocs(sch, default_postprocs("llvm")) is None:
            items.append((design, best_of(wb.build(sch, target="llvm"), args)))
        else:
            items.append((design, None))
    tree = DecisionTree(
        items, title="12 programs sampled from CBR's first sketch", func=func, baseline=baseline
    )
    graph = TraceGraph(wb.generate_design_space(func, target="llvm", seed=0)[0])
    return {"decision_tree": tree._repr_html_(), "trace_graph": graph._repr_html_()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs-page", action="append", default=[], help="a page of docs/_build/html to shoot")
    ap.add_argument("--no-widgets", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.no_widgets:
        tmp = Path(tempfile.mkdtemp(prefix="wb_shots_"))
        for name, body in widgets_html().items():
            page = tmp / f"{name}.html"
            page.write_text(PAGE.format(width=900, body=body), encoding="utf-8")
            shoot(
                page.as_uri(), OUT / f"{name}.png", width=940, height=1100 if name == "trace_graph" else 900
            )
    for page in args.docs_page:
        path = ROOT / "docs" / "_build" / "html" / page
        shoot(path.as_uri(), OUT / f"docs_{Path(page).stem}.png", width=1280, height=2400)


if __name__ == "__main__":
    os.environ.setdefault("WB_NOTEBOOK_TRIALS", "4")
    main()
