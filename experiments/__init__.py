"""Experiments: probes, ablations, sweeps and Nsight targets run while the kernels were designed. Not part
of the product (not installed, not in asv's benchmark directory); ``README.md`` says what each answered."""
