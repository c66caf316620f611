"""nnqs inside PySCF: :class:`NNQSSolver` as ``mc.fcisolver`` of CASCI / CASSCF, and the
:func:`casci` / :func:`casscf` conveniences (see :mod:`nnqs.app.pyscf_solver`)."""

from nnqs.app.pyscf_solver import NNQSSolver, NNQSState, casci, casscf

__all__ = ["NNQSSolver", "NNQSState", "casci", "casscf"]
