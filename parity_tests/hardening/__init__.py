"""Tests: hostile and broken inputs, interrupted runs, output safety, fuzzing."""
