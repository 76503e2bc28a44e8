"""Sphinx configuration: ``sphinx-build -W --keep-going -b html docs docs/_build/html``.

The reference is generated from the docstrings (autodoc; their reStructuredText is the
source of truth), the Markdown pages and the notebooks are read by MyST-NB. The lessons and
notebooks are executed at build time so that their pages show their outputs (plots, loop nests,
widgets' static HTML), with a tiny tuning budget and cached:

* ``WB_NOTEBOOK_TRIALS`` (default here 4; the notebooks read it, below 16 they also shrink their
  problem sizes) is the budget; ``WB_DOCS_BUILD=1`` is set for the kernels too;
* the results are cached in ``docs/_build/.jupyter_cache`` (jupyter-cache): a notebook is run
  again only when its code changes, so a rebuild after a text edit takes seconds;
* ``WB_DOCS_TIMEOUT`` (seconds, default 300) bounds each cell; a cell that fails or times
  out is a warning, hence an error under ``-W``;
* ``WB_DOCS_EXECUTE=off`` builds without executing (code without outputs), as before.

A first build executes the 16 notebooks (a few minutes on a quiet machine);
``python bench/docs_build.py`` builds the site and checks that a lesson page holds its outputs.
Why Sphinx: docs/design.md ("Documentation").
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import shutil
import sys
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document the tree being built, not an installed copy

project = "workbench"
author = "the workbench authors"
copyright = "the workbench authors, Apache-2.0"
release = version = importlib.metadata.version("workbench")

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the few NumPy-style "Parameters" sections
    "sphinx.ext.viewcode",
    "myst_nb",  # Markdown pages and notebooks (never executed here)
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "_build",
    "**/.ipynb_checkpoints",
    "**/__pycache__",
    "**/*.sqlite*",
    "tutorials/**/solutions/**",
]

# lessons and notebooks live at the top of the repository; each build copies them into docs/
# (gitignored), so a new lesson is in the site as soon as it is in its folder, and their links
# to each other resolve (through a symlink Sphinx would see the real path, outside docs/).
for folder in ("tutorials", "notebooks"):
    copy = DOCS / folder
    if copy.is_symlink():
        copy.unlink()
    elif copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(
        ROOT / folder,
        copy,
        # the lessons' helper modules (checks.py) come along: the notebooks run here and import them
        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.sqlite*", "*.jsonl"),
    )

# the kernels that execute the notebooks inherit this environment: a tiny budget, and the tree
# being documented ahead of any installed workbench
os.environ.setdefault("WB_NOTEBOOK_TRIALS", "4")
os.environ["WB_DOCS_BUILD"] = "1"
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
# plotly figures as HTML that draws with the page's plotly.js (below): the default renderer's
# output is a MIME type MyST-NB does not render
os.environ["PLOTLY_RENDERER"] = "notebook_connected"
nb_execution_mode = os.environ.get("WB_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_timeout = int(os.environ.get("WB_DOCS_TIMEOUT", "300"))  # seconds per cell
nb_execution_show_tb = True  # a failing cell's traceback in the build log
nb_merge_streams = True  # a cell's prints as one block
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = [
    "myst.header",  # a notebook may start at "##" (its title is in markdown)
    "misc.highlighting_failure",  # notebook cells with IPython magics (%tune ... $TRIALS)
]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
default_role = "code"  # `x` in a docstring reads as code, as it does in Markdown

html_theme = "furo"
html_title = f"workbench {release}"
html_static_path: list[str] = ["_static"]
# plotly.js from the installed plotly package (copied at each build, gitignored), loaded by every
# page: the executed notebooks' figures draw with it, offline too
try:
    import plotly

    _plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    (DOCS / "_static" / "plotly").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_plotly_js, DOCS / "_static" / "plotly" / "plotly.min.js")
    html_js_files = ["plotly/plotly.min.js"]
except (ImportError, OSError):  # no plotly: the notebooks' figures stay blank
    html_js_files = []


class PrimitiveReference(SphinxDirective):
    """``.. workbench-primitives::`` — every registered instruction kind as a ``Schedule``
    method, grouped by the module (primitive family) that registers it, in registration order.
    Generated from the registry, so a new primitive is documented the moment it exists."""

    def run(self) -> list[nodes.Node]:
        from workbench.schedule import REGISTRY

        families: dict[str, list[str]] = {}
        for name, kind in REGISTRY.items():
            families.setdefault(kind.fn.__module__, []).append(name)
        lines: list[str] = []
        for module, names in families.items():
            # the module docstring states the rules the family shares
            intro = inspect.cleandoc(sys.modules[module].__doc__ or "").splitlines()
            title = module.rsplit(".", 1)[-1].replace("_", " ")
            lines += [title.capitalize(), "-" * len(title), "", *intro, "", f"*Module* ``{module}``", ""]
            for name in names:
                lines += [f".. automethod:: workbench.Schedule.{name}", ""]
        content = StringList(lines, source="workbench-primitives")
        section = nodes.section()
        section.document = self.state.document
        nested_parse_with_titles(self.state, content, section)
        return list(section.children)


def setup(app):
    app.add_directive("workbench-primitives", PrimitiveReference)
    return {"parallel_read_safe": True}
