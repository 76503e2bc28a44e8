"""``Target``: parsing, canonical text, host properties."""

import os
import re

import llvmlite.binding as llvm
import pytest

from workbench.target import Target


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


@pytest.mark.parametrize(
    "spec,match",
    [
        ("", "non-empty"),
        ("opencl", "unknown target kind"),
        ("llvm -mcpu", "-key=value"),
        ("llvm -cores=2", "unknown option -cores"),
        ("llvm -num-cores=0", "positive integer"),
        ("cuda -mcpu=x", "unknown option -mcpu"),
    ],
)
def test_bad_targets_are_rejected(spec, match):
    with pytest.raises(ValueError, match=match):
        Target(spec)


# SIMD widths and which CPUs' code runs here ------------------------------------------------------


@pytest.mark.parametrize(
    "spec,bits,fma",
    [
        ("llvm -mcpu=skylake-avx512", 512, True),
        ("llvm -mcpu=znver4", 512, True),
        ("llvm -mcpu=znver3", 256, True),
        ("llvm -mcpu=haswell -mattr=-avx", 128, False),  # no AVX: no AVX2, no FMA either
        ("llvm -mcpu=x86-64 -mattr=+avx512f", 512, True),  # AVX-512 brings AVX2 and FMA
        ("llvm -mcpu=sandybridge", 256, False),
        ("llvm -mcpu=x86-64", 128, False),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", 128, False),  # NEON
    ],
)
def test_vector_widths_come_from_the_target(spec, bits, fma):
    t = Target(spec)
    assert t.vector_width_bits == bits and t.has_feature("fma") == fma
    assert (
        t.vector_lanes("float32"),
        t.vector_lanes("float64"),
        t.vector_lanes("int8"),
        t.vector_lanes("bool"),
    ) == (bits // 32, bits // 64, bits // 8, bits // 8)
    assert t.vector_lanes() == bits // 32


def test_cross_target_does_not_take_host_properties():
    t = Target("llvm -mtriple=aarch64-linux-gnu")
    assert t.mcpu == "generic" and t.features == "" and not t.is_host_cpu
    assert t.arch == "aarch64" and not t.is_x86
    with pytest.raises(ValueError, match="not a dtype"):
        t.vector_lanes("float")


@pytest.mark.parametrize(
    "spec,host,match",
    [
        (
            "llvm -mcpu=skylake-avx512",
            "llvm -mcpu=znver3",
            r"needs avx512bw, avx512cd, avx512dq, avx512f, avx512vl, which the host \(znver3\) lacks",
        ),
        ("llvm -mcpu=znver3", "llvm -mcpu=skylake-avx512", None),  # AVX2 code on AVX-512
        ("llvm -mcpu=znver3", "llvm -mcpu=icelake-server", None),
        ("llvm -mcpu=skylake-avx512", "llvm -mcpu=znver4", None),
        ("llvm -mcpu=cascadelake", "llvm -mcpu=skylake-avx512", "needs avx512vnni"),
        ("llvm -mcpu=znver3 -mattr=+avx512f", "llvm -mcpu=znver3", "needs avx512f"),
        (
            "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1",
            "llvm",
            r"\(aarch64-linux-gnu\) cannot run on this x86_64-\S+ host",
        ),
        ("llvm -mcpu=my-cpu", "llvm", "CPU 'my-cpu' is not one whose features workbench knows"),
        ("llvm", "llvm", None),
    ],
)
def test_cannot_run_compares_with_the_host(spec, host, match):
    if "x86_64" in (match or "") and not Target("llvm").is_x86:
        pytest.skip("the message names an x86-64 host")
    reason = Target(spec).cannot_run(host=Target(host))
    if match is None:
        assert reason is None
    else:
        assert reason is not None and re.search(match, reason), reason


def test_cannot_run_defaults_to_this_host():
    assert Target("llvm").cannot_run() is None
    assert Target("llvm -mattr=+no-such-extension").cannot_run() is not None
    assert Target("cuda").cannot_run() is not None and Target("python").cannot_run() is None
