"""Shared settings and file edits for the application tests."""

import json
import math
import re

#: A line of the CLI's log (time, level, logger): the run's progress, not its error.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+ \S+: ")

H2 = {"name": "h2", "geometry": "H 0 0 0; H 0 0 0.7414", "basis": "sto-3g"}
TINY = {
    "molecule": H2,
    "model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "phase_hidden": [8]},
    "sampler": {"n_samples": 1000, "unique_window": [2, 3]},
    "optim": {"steps": 6, "lr": 0.01, "warmup": 2, "method": "adamw"},
    "run": {"checkpoint_every": 2},
}


def shift_fcidump_value(path, indices: tuple[int, int, int, int], delta: float) -> None:
    """Add ``delta`` to the FCIDUMP entry with these four indices (``(0, 0, 0, 0)``: the constant)."""
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[1:] == [str(i) for i in indices])
    value, *rest = lines[row].split()
    lines[row] = " ".join([repr(float(value) + delta), *rest])
    path.write_text("\n".join(lines) + "\n")


def toml_text(settings: dict) -> str:
    """``settings`` (tables of scalars and lists, as :data:`TINY`) as the text of a config file."""
    def value(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return repr(v)

    return "\n".join(f"[{table}]\n" + "\n".join(f"{k} = {value(v)}" for k, v in keys.items())
                     for table, keys in settings.items()) + "\n"


def error_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are not log lines (:data:`LOG_LINE`) nor blank."""
    return [line for line in stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
