"""Shared helpers of the benchmark scripts."""

from __future__ import annotations

import math
import platform
import sys
import time

import torch

from nnqs.app.io import write_json

#: A timed run longer than this (seconds) is not repeated.
LONG_RUN_S = 10.0


class PeakMemory:
    """Peak extra memory of a block: CUDA allocator peak, or CPU peak-RSS rise (bytes)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak = None

    @staticmethod
    def _status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset VmHWM to the current RSS
                self.base = self._status("VmRSS")
            except OSError:
                self.base = None
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.base
        elif self.base is not None:
            self.peak = self._status("VmHWM") - self.base
        return False


def cpu_model_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (``platform`` as a fallback)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(device: torch.device, fn):
    """``(result, seconds)``: CUDA events on CUDA, ``time.perf_counter`` otherwise."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize(device)
        return out, start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def best_of(device, repeats, fn):
    """Run ``fn`` up to ``repeats`` times (stopping early once a run is long); return the last
    result, the best time and the peak memory of the best run."""
    best, peak, result = math.inf, None, None
    for _ in range(repeats):
        with PeakMemory(device) as mem:
            result, dt = timed(device, fn)
        if dt < best:
            best, peak = dt, mem.peak
        if dt > LONG_RUN_S:
            break
    return result, best, peak


def save_results(path, results, **meta) -> dict:
    """Write ``{"meta": ..., "results": results}`` to ``path`` atomically and return it; ``meta``
    gets the machine (CPU model, torch version, threads), the time and the command line."""
    meta = {"cpu": cpu_model_name(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": " ".join(["python", *sys.argv]), **meta}
    payload = {"meta": meta, "results": results}
    write_json(path, payload)
    return payload
