"""``python -m workbench ...``: the ``workbench`` command, where the environment's scripts
folder is not on PATH (a virtualenv used without activating it, a bench run by its Python)."""

import sys

from .cli import main

sys.exit(main())
