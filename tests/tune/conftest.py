"""Tuner tests: make the helper module importable (pytest runs with --import-mode=importlib)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "tuning.sqlite")
