"""The convergence plot draws signed errors: a value below the reference shows as negative, an
exact one as zero (no floor), and CCSD(T)'s error keeps its sign."""

import pytest

from nnqs.app.report import plot_convergence


def test_the_error_panel_is_signed_and_has_no_floor(tmp_path):
    refs = {"hf": -1.0, "ccsd_t": -1.1005, "fci": -1.1}
    drawn = plot_convergence(tmp_path / "c.png", [0, 1, 2], [-1.05, -1.099, -1.1], refs, "t (commit abc)",
                             stderrs=[1e-3, 1e-4, 0.0], final=(2, -1.1, "final"),
                             points=[(-1.1000002, "below", "D")])["error_panel"]
    assert (tmp_path / "c.png").stat().st_size > 0
    assert drawn["VMC"] == pytest.approx([50.0, 1.0, 0.0], abs=1e-9)   # mHa, the exact one at 0, not 1e-7
    assert drawn["below"][0] == pytest.approx(-2e-4, abs=1e-9)
    assert drawn["CCSD(T)"][0] == pytest.approx(-0.5, abs=1e-9)
    assert drawn["final"] == pytest.approx([0.0], abs=1e-12)
    # without FCI the panel is against DMRG; with neither there is no error panel
    assert plot_convergence(tmp_path / "d.png", [0], [-1.0], {"dmrg": -1.2}, "t")["error_panel"]["VMC"] == \
        pytest.approx([200.0])
    assert plot_convergence(tmp_path / "e.png", [0], [-1.0], {}, "t")["error_panel"] == {}
