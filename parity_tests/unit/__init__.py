"""Tests: one module against an independent reference (numpy, hand-computed values)."""
