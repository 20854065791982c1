"""mlaperf: performance-regression tracking for sparse-MLA decode kernels."""

__version__ = "0.1.0"
