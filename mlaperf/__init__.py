"""mlaperf: performance-regression tracking for sparse-MLA decode kernels."""

__version__ = "0.1.0"


class Terminated(KeyboardInterrupt):
    """SIGTERM raised as a KeyboardInterrupt, so cleanup written for Ctrl-C also runs on a CI cancel."""
