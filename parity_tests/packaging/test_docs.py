"""The documentation site (issue 39): ``mkdocs build --strict`` passes (a warning -- a broken
internal link or anchor, a page left out of the nav -- fails it), and the generated command
reference (``tools/cli_reference.py``, a mkdocs hook) shows every option of every command, as
``groundhog-port COMMAND --help`` prints it.

Proven: a link to ``docs/nowhere.md`` added to a page, an anchor ``fidelity.md#nowhere``, or a
page left out of ``mkdocs.yml``'s nav each fail ``test_site_builds_with_warnings_as_errors``;
the marker replaced by a hand-written reference fails ``test_reference_shows_every_option`` as
soon as a command gains an option.  ~40 s (one build per session; most of it imports every
command module for the reference).
"""

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from groundhog_port.cli.main import COMMANDS, build_parser, main

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import cli_reference  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(out)},
    )
    return out, run


def test_site_builds_with_warnings_as_errors(site):
    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    assert (out / "index.html").is_file()


def _page_links(out):
    """``(page, href)`` of every link of the built site to another place of the site (its
    pages, anchors aside; not http(s), mailto or a bare ``#anchor``)."""
    for page in sorted(out.rglob("*.html")):
        if page.relative_to(out).parts[0] in ("assets", "search") or page.name == "404.html":
            continue  # 404.html is only served by a web server (its links are absolute)
        for href in re.findall(r'<a [^>]*href="([^"]*)"', page.read_text(encoding="utf-8")):
            href = html.unescape(href).split("#")[0].split("?")[0]
            if href and not re.match(r"[a-z][a-z0-9+.-]*:", href):
                yield page, href


def test_site_links_point_at_html_files(site):
    """Opened from disk (file://, no server to turn ``first-hour/`` into its index.html), a
    link to a folder shows a folder listing: every link between pages names a ``.html`` file
    that exists (``use_directory_urls: false``).  Proven: with ``use_directory_urls: true``
    (main before issue 43) the links are ``first-hour/`` and this fails."""
    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    links = list(_page_links(out))
    assert len(links) > 50, links  # the nav alone links every page from every page
    bad = [
        (str(page.relative_to(out)), href)
        for page, href in links
        if not (href.endswith(".html") and (page.parent / href).resolve().is_file())
    ]
    assert not bad, f"links that are not .html files of the site: {bad[:10]}"


def test_site_opened_from_disk_in_a_browser_shows_pages(site, browser):
    """In headless Chromium, ``site/index.html`` opened as a file and a nav link followed
    shows that page (its heading), not a folder listing ("Index of ...")."""
    from selenium.webdriver.common.by import By

    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    browser.get((out / "index.html").as_uri())
    link = next(
        a
        for a in browser.find_elements(By.CSS_SELECTOR, "nav a.md-nav__link[href]")
        if "first-hour" in (a.get_attribute("href") or "")
    )
    browser.get(link.get_attribute("href"))
    assert browser.current_url.endswith("first-hour.html"), browser.current_url
    assert "Index of" not in browser.page_source
    heading = browser.find_element(By.CSS_SELECTOR, "article h1").text
    assert "first hour" in heading.lower(), heading


def _sections(page):
    """``{command: text}`` of the built reference: the text under each ``<h2>`` or ``<h3>`` heading."""
    text = (page).read_text(encoding="utf-8")
    parts = re.split(r'<h[23] id="([^"]+)"', text)
    return {
        parts[i]: html.unescape(re.sub(r"<[^>]+>", "", parts[i + 1]))
        for i in range(1, len(parts), 2)
    }


def test_reference_shows_every_option(site):
    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    sections = _sections(out / "cli.html")
    parser = build_parser(COMMANDS)
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in COMMANDS:
        assert name in sections, f"no section for {name!r} in the built reference"
        for action in sub.choices[name]._actions:
            for option in action.option_strings:
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", sections[name]), (
                    f"{name}: {option} is not in the reference"
                )


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_reference_is_what_help_prints(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", cli_reference.COLUMNS)
    with pytest.raises(SystemExit) as exit:
        main(["--help"] if name is None else [name, "--help"])
    assert exit.value.code == 0
    assert capsys.readouterr().out == cli_reference.command_help(name)
