"""Texts that run code if anything evaluates them, for the tests of the parsers that must
only read literals (activations, state changes)."""

import pytest

from groundhog_port.errors import LegacyInputError


def assert_never_evaluated(parse, templates, match, tmp_path):
    """``parse(text)`` refuses every ``template`` filled with code that would create a marker
    file (``{touch}``: ``os.system('touch ...')``, ``{open}``: ``open(..., 'w')``) with a
    ``LegacyInputError`` matching ``match``, and the file never appears."""
    marker = tmp_path / "PWNED"
    code = {
        "touch": f"__import__('os').system('touch {marker}')",
        "open": f"open({str(marker)!r}, 'w')",
    }
    for template in templates:
        with pytest.raises(LegacyInputError, match=match):
            parse(template.format(**code))
    assert not marker.exists()
