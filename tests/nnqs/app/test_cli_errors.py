"""Bad input through the real CLI (a subprocess): exit code 2, one line on stderr, no traceback,
and nothing written for it."""

import os
import subprocess
import sys

import pytest

from tests.hamiltonians.io.test_fcidump import GOOD

TINY = """
[molecule]
name = "h2"
geometry = "H 0 0 0; H 0 0 0.7414"
basis = "sto-3g"
[model]
d_model = 8
n_layers = 1
n_heads = 2
phase_hidden = [8]
[sampler]
n_samples = 1000
[optim]
steps = 3
lr = 0.01
warmup = 1
[start]
mode = "none"
[run]
checkpoint_every = 2
"""


def config(tmp_path, edit=("", "")):
    path = tmp_path / "c.toml"
    path.write_text(TINY.replace(*edit) if edit[0] else TINY)
    return str(path)


def nnqs(tmp_path, *args):
    env = {**os.environ, "NNQS_REFERENCE_CACHE": str(tmp_path / "refs.json")}
    return subprocess.run([sys.executable, "-m", "nnqs", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)


CASES = {
    "out is a file": (lambda t: ["run", config(t), "--out", str(t / "afile")], "afile: File exists"),
    "out under a file": (lambda t: ["run", config(t), "--out", str(t / "afile" / "x")], "Not a directory"),
    "resume a garbage checkpoint": (lambda t: ["run", config(t), "--out", str(t / "bad"), "--resume"],
                                    "not a readable nnqs checkpoint"),
    "analyse a garbage checkpoint": (lambda t: ["analyse", str(t / "bad")], "not a readable nnqs checkpoint"),
    "run --device tpu": (lambda t: ["run", config(t), "--device", "tpu", "--out", str(t / "o")], "unknown device 'tpu'"),
    "check --device tpu": (lambda t: ["check-consistency", "--device", "tpu"], "unknown device 'tpu'"),
    "check --batch 0": (lambda t: ["check-consistency", "--batch", "0"], "--batch must be >= 1"),
    "checkpoint_every 0": (lambda t: ["run", config(t, ("checkpoint_every = 2", "checkpoint_every = 0")), "--out",
                                      str(t / "o")], "checkpoint_every (0) must be >= 1"),
    "threads -1": (lambda t: ["run", config(t, ("checkpoint_every = 2", "threads = -1")), "--out", str(t / "o")],
                   "threads (-1) >= 0"),
    "eval_samples -1": (lambda t: ["run", config(t, ("n_samples = 1000", "eval_samples = -1")), "--out",
                                   str(t / "o")], "eval_samples (-1)"),
    "factor 0.5": (lambda t: ["run", config(t, ("n_samples = 1000", "factor = 0.5")), "--out", str(t / "o")],
                   "factor must be > 1"),
    "config is a folder": (lambda t: ["run", str(t), "--out", str(t / "o")], "is a folder"),
    "an unknown example": (lambda t: ["run", "--example", "nope", "--out", str(t / "o")],
                           "no example 'nope': choose one of h2o_631g_defaults, h2o_ccpvdz_defaults, lih"),
    "an example and a config": (lambda t: ["run", config(t), "--example", "lih", "--out", str(t / "o")],
                                "give one of a CONFIG.toml, --fcidump FILE or --example NAME"),
    "--steps 0": (lambda t: ["run", config(t), "--steps", "0", "--out", str(t / "o")], "steps >= 1"),
    "--adamw-steps -1": (lambda t: ["run", config(t), "--adamw-steps", "-1", "--out", str(t / "o")], "adamw_steps"),
    "--stop-after -1": (lambda t: ["run", config(t), "--stop-after", "-1", "--out", str(t / "o")],
                        "--stop-after must be >= 1"),
    "an old key": (lambda t: ["run", config(t, ("warmup = 1", 'warmup = 1\npretrain = "cisd"')),
                              "--out", str(t / "o")], "optim.pretrain is now start.mode (key 'mode' in the [start] table)"),
    "a removed key": (lambda t: ["run", config(t, ("warmup = 1", "warmup = 1\nanchors = 4")), "--out", str(t / "o")],
                      "optim.anchors: anchors were removed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    args, needle = CASES[case]
    result = nnqs(tmp_path, *args(tmp_path))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("nnqs: error:") and needle in lines[0], result.stderr
    assert not (tmp_path / "o").exists()  # nothing written for a bad input
    assert sorted(p.name for p in (tmp_path / "bad").iterdir() if not p.name.startswith(".nnqs")) == ["checkpoint.pt"]


GOOD_FCIDUMP = GOOD
BAD_FCIDUMPS = {
    "header only": (GOOD_FCIDUMP.split("&END\n")[0] + "&END\n", ":4: no integrals"),
    "cut at a line boundary": (GOOD_FCIDUMP.rsplit(" 0.7199", 1)[0], ":10: no core-energy line"),
    "conflicting symmetric values": (GOOD_FCIDUMP.replace(" 0.7199", " 0.5 1 2 1 2\n 0.7199"), ":11: (1 2|1 2)"),
    "NORB above the orbitals used": (GOOD_FCIDUMP.replace("NORB=   2", "NORB=   3").replace("ORBSYM=1,1,",
                                                                                         "ORBSYM=1,1,1,"),
                                     ":1: NORB=3, but no integral uses an orbital above 2"),
}


@pytest.mark.parametrize("case", list(BAD_FCIDUMPS))
def test_bad_fcidumps_through_the_cli(tmp_path, case):
    text, needle = BAD_FCIDUMPS[case]
    (tmp_path / "f.fcidump").write_text(text)
    result = nnqs(tmp_path, "run", "--fcidump", str(tmp_path / "f.fcidump"), "--out", str(tmp_path / "o"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and needle in lines[0], result.stderr
    assert not (tmp_path / "o").exists()


def run_cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "nnqs", "run", *args], capture_output=True, text=True, cwd=cwd)
    return proc.returncode, proc.stderr.strip().splitlines()


@pytest.mark.parametrize(
    "toml,needle",
    [
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\n[optim]\nstepz = 5\n', "optim.stepz"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\nbasis = "no-such-basis"\n', "no-such-basis"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\ncharge = 3\n', "electron"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\nspin = 1\n', "spin"),
        ('[molecule\ngeometry = 1\n', "config.toml"),
        ('[molecule]\ngeometry = "H 0 0 0; H 0 0 0.74"\n[start]\nmode = "casci"\ncas = [4, 2]\n',
         "[start] cas:"),
    ],
)
def test_cli_bad_config_exits_2_with_one_line(tmp_path, toml, needle):
    path = tmp_path / "config.toml"
    path.write_text(toml)
    code, lines = run_cli(str(path), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2, lines
    assert len(lines) == 1 and needle in lines[0], lines
    assert not (tmp_path / "out" / "result.json").exists()


def test_cli_bad_fcidump_exits_2(tmp_path):
    bad = tmp_path / "bad.fcidump"
    bad.write_text("&FCI NORB=2,NELEC=2,MS2=0,\n ORBSYM=1,1,\n ISYM=1,\n&END\n 0.5 1 1 x 1\n")
    code, lines = run_cli("--fcidump", str(bad), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2 and len(lines) == 1 and "bad.fcidump:5: malformed line" in lines[0]
    code, lines = run_cli("--fcidump", str(tmp_path / "missing.fcidump"), "--no-progress")
    assert code == 2 and "no such FCIDUMP" in lines[0]
    code, lines = run_cli("--no-progress")
    assert code == 2 and "give one of a CONFIG.toml, --fcidump FILE or --example NAME" in lines[0]


def test_a_run_that_cannot_fit_in_memory_stops_before_its_start(tmp_path):
    """``[run] max_memory_gib`` far below the plan: one line naming the settings, exit 2, no
    checkpoint (the check comes before the start)."""
    result = nnqs(tmp_path, "run", config(tmp_path, ("[run]\n", "[run]\nmax_memory_gib = 0.001\n")),
                  "--out", str(tmp_path / "o"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "the run needs about" in lines[0] and "max_memory_gib" in lines[0] and "0.00 GiB it may hold" in lines[0]
    assert "does not fit; lower" in lines[0]   # the phase, then the settings that shrink it
    assert not (tmp_path / "o" / "checkpoint.pt").exists()


def test_user_errors_share_one_base_and_other_errors_are_bugs(tmp_path, monkeypatch, capsys):
    """An :class:`~nnqs.errors.InputError` is one line and exit 2; any other exception (a bug) is
    not relabelled as bad input: it propagates with its traceback (the interpreter's exit 1)."""
    from hamiltonians import FCIDUMPError
    from nnqs.app import cli, run as run_module
    from nnqs.app.folder import FolderInUse
    from nnqs.app.io import CheckpointError
    from nnqs.app.runconfig import ConfigError
    from nnqs.errors import InputError, NNQSError, ResourceError
    from nnqs.parallel import RankLostError

    assert all(issubclass(e, InputError) for e in (ConfigError, CheckpointError, FolderInUse))
    assert issubclass(RankLostError, ResourceError) and issubclass(InputError, NNQSError)
    assert set(cli.USER_ERRORS) == {InputError, FCIDUMPError}

    def broken(*args, **kwargs):
        raise ValueError("a bug deep in the run")

    monkeypatch.setattr(run_module, "run", broken)
    with pytest.raises(ValueError, match="a bug deep"):
        cli.main(["run", config(tmp_path), "--out", str(tmp_path / "out"), "--no-progress"])

    def bad_input(*args, **kwargs):
        raise ConfigError("[optim] steps: the user's mistake")

    monkeypatch.setattr(run_module, "run", bad_input)
    assert cli.main(["run", config(tmp_path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["nnqs: error: [optim] steps: the user's mistake"]
