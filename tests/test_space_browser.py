"""The Space in a real browser: headless Chromium types a problem, clicks Solve, and a screenshot
shows the answer.

Needs Debian's `chromium` and `chromium-driver` and the `selenium` package (`pip install -e
".[browser]"`); `.ci/run` installs them and runs this file as its own step (`-m browser`).
Screenshots go to $HF_ARITH_SCREENSHOTS (default: pytest's temporary folder).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from test_space import free_port, load_app

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def page_url():
    app = load_app()
    port = free_port()
    app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.demo.close()


@pytest.fixture
def browser():
    # CI sets HF_ARITH_REQUIRE_BROWSER=1 after installing everything: there a missing piece fails.
    missing = pytest.fail if os.environ.get("HF_ARITH_REQUIRE_BROWSER") == "1" else pytest.skip
    try:
        from selenium import webdriver
    except ImportError:
        missing("selenium is not installed (pip install -e '.[browser]')")
    if not (CHROMIUM and CHROMEDRIVER):
        missing("Debian's chromium and chromium-driver are not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium_profile_")
    # The flags that work headless on this kind of machine (closed network, running as root).
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_solve_in_the_browser_and_screenshot(page_url, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(page_url)
    box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#problem textarea, #problem input")))
    box.clear()
    box.send_keys("1234567890+9876543210")
    browser.find_element(By.CSS_SELECTOR, "#solve").click()

    def answer_shown(driver):
        field = driver.find_element(By.CSS_SELECTOR, "#answer textarea, #answer input")
        return field.get_attribute("value") or False

    assert wait.until(answer_shown) == "11111111100"
    verdict = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#verdict")))
    wait.until(lambda d: "correct" in verdict.text)
    assert "✅ correct" in verdict.text

    out = Path(os.environ.get("HF_ARITH_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "space_solve.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A bad problem shows the friendly message in the page, not an error page.
    box.clear()
    box.send_keys("-5+3")
    browser.find_element(By.CSS_SELECTOR, "#solve").click()
    wait.until(lambda d: "negative numbers are not supported" in d.find_element(By.CSS_SELECTOR, "#verdict").text)
