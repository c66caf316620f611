"""``nnqs reference RUN``: a finished or running run's slow references, computed in a process of
their own and merged into its ``result.json`` (:mod:`nnqs.app.references`)."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from nnqs.app.folder import FolderInUse, claim_run_folder
from nnqs.app.io import has_checkpoint, load_checkpoint
from nnqs.app.references import reference_fields
from nnqs.app.report import MetricsLog, write_result
from nnqs.app.runconfig import ConfigError, RunConfig, config_from_dict
from nnqs.app.system import complete_references, run_system

log = logging.getLogger(__name__)


def reference_run(out: str | Path, *, compute: bool = True) -> tuple[dict, bool]:
    """``nnqs reference RUN``: the references of the run in ``out``, the slow ones computed now
    (into the cache; :mod:`nnqs.app.references`), in a process of their own.

    The folder is not held while they compute, so the run may go on meanwhile (it reports them
    from the cache when it ends); a finished run's ``result.json`` and plot get them merged at
    once. Returns ``(references, merged)``.

    Raises:
        ConfigError: ``out`` holds no run (no ``result.json``, ``provenance.json`` or checkpoint
            with its config).
    """
    out = Path(out)
    config = _config_of_run(out)
    system = complete_references(config.molecule, run_system(config.molecule, out, resume=True, save=False),
                                 compute=compute)
    try:
        with claim_run_folder(out, resume=True, overwrite=False):
            path = out / "result.json"
            if not path.exists():
                return system.references, False
            try:
                result = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError) as error:
                raise ConfigError(f"{path}: unreadable ({type(error).__name__}); `nnqs run CONFIG --out {out} "
                                  "--resume` writes it again from the checkpoint") from None
            result.update(reference_fields(system.references, result))
            metrics = MetricsLog.read(out / "metrics.csv")
            write_result(out, config, result, metrics, int(result.get("steps", 0)))
            return system.references, True
    except FolderInUse:
        log.warning("%s is in use by its run: the references are cached, and the run reports them when it ends", out)
        return system.references, False


def _config_of_run(out: Path) -> RunConfig:
    """The effective config of the run in ``out``: ``result.json``'s, else the last session's
    in ``provenance.json``, else the checkpoint's."""
    sources = [(out / "result.json", lambda text: json.loads(text)["config"]),
               (out / "provenance.json", lambda text: json.loads(text)["sessions"][-1]["config"])]
    for path, read in sources:
        if path.is_file():
            with contextlib.suppress(ValueError, KeyError, TypeError, IndexError, ConfigError):
                return config_from_dict(read(path.read_text()))
    if has_checkpoint(out / "checkpoint.pt"):
        with contextlib.suppress(KeyError, TypeError, ConfigError):
            return config_from_dict({"molecule": load_checkpoint(out / "checkpoint.pt")["config"]["molecule"]})
    raise ConfigError(f"{out}: no nnqs run there (no result.json, provenance.json or checkpoint.pt with its config)")
