"""Regression detection over benchmark history and pull-request comparisons.

Public surface: :func:`detect_steps` (one series, pure), :func:`compare_pair` (head vs base, pure),
:func:`detect_store` (the store's series -> stored regressions), and the `mlaperf detect` /
`mlaperf compare` commands (:mod:`regressions.commands`).
"""

from regressions.compare import Comparison, SeriesPair, compare_pair
from regressions.config import Settings, load_settings
from regressions.detect import DetectorParams, SeriesDetection, Step, detect_steps
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE, infer_direction

__all__ = [
    "DOWN_IS_WORSE",
    "UP_IS_WORSE",
    "Comparison",
    "DetectorParams",
    "SeriesDetection",
    "SeriesPair",
    "Settings",
    "Step",
    "compare_pair",
    "detect_steps",
    "infer_direction",
    "load_settings",
]
