"""Tests: the HTTP server (API, page, limits, fairness)."""
