"""What the package ships and says about itself (the wheel itself is checked by .ci/wheel)."""

import importlib.metadata
import pathlib

import workbench as wb
import kernel_ext


def test_version_comes_from_the_installed_metadata():
    assert wb.__version__ == importlib.metadata.version("workbench")


def test_both_packages_declare_their_type_hints():
    for package in (wb, kernel_ext):
        assert (pathlib.Path(package.__file__).parent / "py.typed").is_file(), package.__name__


def test_the_licence_is_apache_2():
    meta = importlib.metadata.metadata("workbench")
    assert meta.get("License-Expression") == "Apache-2.0"
