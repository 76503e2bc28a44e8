"""``Target``: parsing, canonical text, host properties."""
import os

import llvmlite.binding as llvm
import pytest

from workbench.codegen.target import Target


def test_host_target_properties():
    t = Target("llvm")
    assert t.kind == "llvm" and str(t) == "llvm"
    assert t.mcpu == llvm.get_host_cpu_name()
    assert t.features == llvm.get_host_cpu_features().flatten()
    assert 1 <= t.num_cores <= (os.cpu_count() or 1)
    expected = 512 if "+avx512f" in t.features.split(",") else None
    if expected:
        assert t.vector_width_bits == 512
    assert t.vector_width_bits in (128, 256, 512)
    assert Target.host() == t


def test_options_are_parsed_and_canonical():
    t = Target("llvm  -num-cores=2 -mcpu=skylake-avx512")
    assert str(t) == "llvm -mcpu=skylake-avx512 -num-cores=2"
    assert t.mcpu == "skylake-avx512" and t.num_cores == 2 and t.vector_width_bits == 512
    assert t == "llvm -mcpu=skylake-avx512 -num-cores=2" and hash(t) == hash(Target(str(t)))
    assert t != Target("llvm")
    assert Target("llvm -mcpu=haswell").vector_width_bits == 256
    assert Target("llvm -mcpu=haswell -mattr=-avx,-avx2").vector_width_bits == 128
    assert Target.of(t) is t and Target.of("cuda").kind == "cuda"
    assert str(Target("cuda -arch=sm_80")) == "cuda -arch=sm_80"


@pytest.mark.parametrize("spec,match", [
    ("", "non-empty"),
    ("opencl", "unknown target kind"),
    ("llvm -mcpu", "-key=value"),
    ("llvm -cores=2", "unknown option -cores"),
    ("llvm -num-cores=0", "positive integer"),
    ("cuda -mcpu=x", "unknown option -mcpu"),
])
def test_bad_targets_are_rejected(spec, match):
    with pytest.raises(ValueError, match=match):
        Target(spec)
