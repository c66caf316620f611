"""Integrals in and out: FCIDUMP files, PySCF molecules and CI vectors, OpenFermion operators,
and the durable (atomic, flushed) file writes every writer of the project uses."""
