"""The test suite, by kind (one folder and one marker per kind)."""
