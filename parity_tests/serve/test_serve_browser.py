"""The page of ``groundhog-port serve`` in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium; ``tools/install_browser.sh`` installs them, and
``tools/test.sh`` runs it): type a sentence, get ``translate``'s translation, the n-best
list, the unknown words marked and the attention heatmap drawn from the API's weights.

Screenshots go to the test's temporary folder, and to ``$GROUNDHOG_SCREENSHOT_DIR`` if set.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from groundhog_port.serve.text import MosesText
from parity_tests.support.serve import (
    RAW_EN,
    TEST_EN,
    TRANS10,
    post_json,
    running_server,
    unknown_by_vocabulary,
)


@pytest.fixture(scope="module")
def server(one_thread):
    with running_server() as srv:
        yield srv


def _save(driver, tmp_path, name):
    path = tmp_path / name
    driver.save_screenshot(str(path))
    keep = os.environ.get("GROUNDHOG_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / name)
    assert path.stat().st_size > 10_000
    return path


def _translate_in_page(driver, url, sentence):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    wait = WebDriverWait(driver, 120)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1")
    box = driver.find_element(By.ID, "source")
    box.clear()
    box.send_keys(sentence)
    driver.find_element(By.ID, "translate").click()
    wait.until(
        lambda d: d.find_element(By.ID, "status").text.startswith(
            ("done", "the search", "no answer")
        )
    )
    return By


def test_page_translates_like_translate_and_draws_the_heatmap(browser, server, tmp_path):
    k = next(i for i, l in enumerate(TEST_EN) if unknown_by_vocabulary(l))
    By = _translate_in_page(browser, server.url, RAW_EN[k])
    find = lambda i: browser.find_element(By.ID, i)
    assert find("status").text.startswith("done"), find("status").text
    # the translation: translate's line (sample.py's recorded one), shown detokenized
    assert find("translation").get_attribute("data-tokens") == TRANS10[k]
    assert find("translation").text == MosesText().detokenize(TRANS10[k])
    # the n-best list and the unknown words, as the JSON API gives them
    status, data = post_json(server.url, {"text": RAW_EN[k]})
    r = data["results"][0]
    rows = browser.find_elements(By.CSS_SELECTOR, "#nbest tbody tr")
    assert [row.find_elements(By.TAG_NAME, "td")[2].text for row in rows] == [
        h["translation"] for h in r["nbest"]
    ]
    assert rows[0].get_attribute("class") == "best"
    marked = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#source-marked span.unk")]
    assert marked == unknown_by_vocabulary(TEST_EN[k]) and find("unknown-panel").is_displayed()
    # the heatmap: one cell per (target word, source word), grey level = 255 * weight
    att = r["attention"]
    T, S = len(att["target"]), len(att["source"])
    canvas = find("heatmap")
    assert canvas.get_attribute("data-drawn") == f"{T}x{S}"
    greys = browser.execute_script(
        """
        const c = document.getElementById('heatmap'), g = JSON.parse(arguments[0]);
        const ctx = c.getContext('2d'), dpr = c.width / parseFloat(c.style.width);
        return g.map(([x, y]) => ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data[0]);
    """,
        _cell_centres(browser, T, S),
    )
    want = [round(255 * min(1.0, max(0.0, w))) for row in att["weights"] for w in row]
    assert greys == want
    assert len(set(want)) > 5  # a real picture, not a flat square
    _save(browser, tmp_path, "serve_page_desktop.png")


def _cell_centres(driver, T, S):
    """Centres of the heatmap cells in CSS pixels, row by row (geometry that app.js records)."""
    x0, y0, cell = driver.execute_script(
        "const d = document.getElementById('heatmap').dataset;"
        "return [d.x0, d.y0, d.cell].map(parseFloat);"
    )
    return json.dumps(
        [[x0 + (s + 0.5) * cell, y0 + (t + 0.5) * cell] for t in range(T) for s in range(S)]
    )


def test_page_is_readable_on_a_phone(browser, server, tmp_path):
    browser.set_window_size(390, 844)
    try:
        k = 30
        By = _translate_in_page(browser, server.url, RAW_EN[k])
        assert browser.find_element(By.ID, "translation").get_attribute("data-tokens") == TRANS10[k]
        # the page itself never scrolls sideways; a wide heatmap scrolls in its own box
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        size = browser.execute_script(
            "return parseFloat(getComputedStyle(document.getElementById('translation')).fontSize)"
        )
        assert size >= 16
        _save(browser, tmp_path, "serve_page_phone.png")
    finally:
        browser.set_window_size(1000, 1500)
