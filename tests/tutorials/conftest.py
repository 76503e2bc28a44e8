"""The course's modules (tutorials/checks.py, tutorials/solutions.py) import as the lessons do."""

import pathlib
import sys

TUTORIALS = pathlib.Path(__file__).parents[2] / "tutorials"
sys.path.insert(0, str(TUTORIALS))
