"""The measured peaks (:mod:`nnqs.training.memory_peaks`): a phase sees what it allocates, a nested
phase's peak is its own while the outer one keeps the larger, and nothing records without a recorder."""

import numpy as np
import pytest

from nnqs.training.memory_peaks import PeakMemory, phase, resident_bytes

MIB = 2**20


def _touch(n_bytes: int) -> np.ndarray:
    a = np.empty(n_bytes, dtype=np.uint8)
    a[::4096] = 1   # resident, page by page
    return a


@pytest.fixture
def recorder():
    r = PeakMemory()
    if not r.resettable:
        pytest.skip("the resident high-water mark cannot be reset here")
    return r


def test_a_phase_sees_its_own_allocation(recorder):
    with recorder.recording():
        with phase("small"):
            a = _touch(16 * MIB)
            del a
        with phase("large"):
            b = _touch(256 * MIB)
            del b
        with phase("after"):
            pass
    now = resident_bytes()
    assert recorder.peaks["large"] - now > 200 * MIB          # the 256 MiB array was counted there
    assert recorder.peaks["small"] - now < 100 * MIB          # not in the phase before it ...
    assert recorder.peaks["after"] - now < 100 * MIB          # ... nor in the one after: the mark was reset
    assert recorder.peak == recorder.peaks["large"] and list(recorder.peaks) == ["small", "large", "after"]


def test_nested_phases_and_repeats_keep_the_largest(recorder):
    with recorder.recording():
        with phase("outer"):
            a = _touch(200 * MIB)
            del a
            with phase("inner"):
                b = _touch(20 * MIB)
                del b
        for size in (40, 120, 40):
            with phase("cycle"):
                c = _touch(size * MIB)
                del c
    assert recorder.peaks["outer"] - recorder.peaks["inner"] > 150 * MIB   # the inner reset lost nothing outside
    assert recorder.peaks["cycle"] - recorder.peaks["inner"] > 80 * MIB    # the largest of the three cycles


def test_without_a_recorder_nothing_is_recorded():
    other = PeakMemory()
    with phase("loose"):
        pass
    assert other.peaks == {} and other.to_dict()["peak"] == other.baseline


def test_a_phase_entry_is_what_was_held_when_it_opened(recorder):
    """The entry of the kept occurrence: a phase opened while 150 MiB are held enters above the one
    opened after they were freed, and its peak minus its entry is what it added itself."""
    with recorder.recording():
        with phase("light"):
            pass
        held = _touch(150 * MIB)
        for size in (10, 60):
            with phase("heavy"):
                extra = _touch(size * MIB)
                del extra
        del held
        with phase("after"):
            pass
    entries, peaks = recorder.entries, recorder.peaks
    assert entries["heavy"] - entries["light"] > 120 * MIB        # the held array counts in its entry
    assert 40 * MIB < peaks["heavy"] - entries["heavy"] < 100 * MIB   # the kept occurrence is the 60 MiB one
    assert entries["after"] - entries["light"] < 60 * MIB        # freed before it opened
    assert set(recorder.to_dict()["entries"]) == {"light", "heavy", "after"}
