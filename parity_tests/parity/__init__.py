"""Tests: the port against the recordings of the original (../shared/legacy_traces)."""
