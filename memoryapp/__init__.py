import os

# One BLAS thread per process: the web and worker processes are the unit of parallelism, and
# multi-threaded BLAS under load made a single query embedding several times slower
# (docs/decisions.md "BLAS runs one thread per process").
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
