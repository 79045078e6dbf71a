"""Test support: recorded-case lookup, the in-process CLI runner, fuzzers, the HTTP load test and helpers shared by the test folders (not shipped in the wheel)."""
