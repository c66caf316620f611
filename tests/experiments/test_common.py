"""experiments/common.py: the benchmarks' shared ``--device`` argument."""

import argparse
import importlib
import pkgutil

import pytest
import torch

from experiments import benchmarks
from experiments.benchmarks import (bench_distributed, bench_natural_connections, bench_pt2, bench_semistochastic,
                                    decode_floor)
from experiments.common import add_device_argument

#: Every script in ``experiments/benchmarks/``, found rather than listed, so a new one is checked too.
EVERY_BENCHMARK = [importlib.import_module(f"experiments.benchmarks.{m.name}")
                   for m in pkgutil.iter_modules(benchmarks.__path__)]


def test_the_device_argument_parses_devices_and_refuses_others_where_the_code_is_cpu_only(capsys):
    p = argparse.ArgumentParser()
    add_device_argument(p)
    assert p.parse_args([]).device == torch.device("cpu")
    assert p.parse_args(["--device", "cuda:1"]).device == torch.device("cuda", 1)
    with pytest.raises(SystemExit) as exit_:
        p.parse_args(["--device", "gpu0"])
    assert exit_.value.code == 2 and "not a device: 'gpu0'" in capsys.readouterr().err
    only = argparse.ArgumentParser()
    add_device_argument(only, cpu_only="Numba")
    assert only.parse_args(["--device", "cpu"]).device == torch.device("cpu")
    with pytest.raises(SystemExit) as exit_:
        only.parse_args(["--device", "cuda"])
    assert exit_.value.code == 2 and "CPU code only (Numba)" in capsys.readouterr().err


@pytest.mark.parametrize("module", EVERY_BENCHMARK, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_benchmark_takes_a_device(module, capsys):
    assert len(EVERY_BENCHMARK) >= 12
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0 and "--device" in capsys.readouterr().out


@pytest.mark.parametrize("module", (bench_pt2, bench_distributed, decode_floor, bench_natural_connections),
                         ids=lambda m: m.__name__)
def test_the_cpu_only_benchmarks_refuse_a_gpu_before_any_work(module, capsys):
    with pytest.raises(SystemExit) as exit_:
        module.main(["--device", "cuda"])
    assert exit_.value.code == 2 and "CPU code only" in capsys.readouterr().err


def test_the_semistochastic_kernel_timing_refuses_a_gpu(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_semistochastic.main(["--kernel-only", "--device", "cuda"])
    assert exit_.value.code == 2 and "use --device cpu" in capsys.readouterr().err
