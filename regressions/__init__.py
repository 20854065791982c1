"""Regression detection and PR reports."""
