"""Reference energies from other methods: PySCF's HF, MP2, CCSD, CCSD(T), CISD and FCI
(:mod:`hamiltonians.references.energies`, on the SCF of :mod:`hamiltonians.references.scf`) and
block2's DMRG (:mod:`hamiltonians.references.dmrg`).
PySCF and block2 are imported inside the functions that need them."""
