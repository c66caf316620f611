"""experiments/common.py: the benchmarks' shared ``--device`` argument."""

import argparse

import pytest
import torch

from experiments.benchmarks import (bench_connected, bench_distributed, bench_local_energy, bench_minsr, bench_pass,
                                    bench_pt2, bench_sampling, bench_sampling_revisions, bench_semistochastic,
                                    bench_vmc_step, decode_floor, gpu_suite)
from experiments.common import add_device_argument

EVERY_BENCHMARK = (bench_connected, bench_distributed, bench_local_energy, bench_minsr, bench_pass, bench_pt2,
                   bench_sampling, bench_sampling_revisions, bench_semistochastic, bench_vmc_step, decode_floor,
                   gpu_suite)


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
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0 and "--device" in capsys.readouterr().out


@pytest.mark.parametrize("module", (bench_pt2, bench_distributed, decode_floor), ids=lambda m: m.__name__)
def test_the_cpu_only_benchmarks_refuse_a_gpu_before_any_work(module, capsys):
    with pytest.raises(SystemExit) as exit_:
        module.main(["--device", "cuda"])
    assert exit_.value.code == 2 and "CPU code only" in capsys.readouterr().err


def test_the_semistochastic_kernel_timing_refuses_a_gpu(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_semistochastic.main(["--kernel-only", "--device", "cuda"])
    assert exit_.value.code == 2 and "use --device cpu" in capsys.readouterr().err
