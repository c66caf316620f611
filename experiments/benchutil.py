"""Shared helpers of the benchmark scripts."""

from __future__ import annotations

import torch


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
