"""Tests: the groundhog-port commands end to end, as users run them."""
