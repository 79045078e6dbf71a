"""Tests: the wheel users install."""
