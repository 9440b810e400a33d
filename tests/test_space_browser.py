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


def assert_text_drawn(png: Path, box) -> None:
    """The screenshot's pixels inside `box` (the answer field) hold text: dark glyph pixels on a
    light field, not one flat colour."""
    from PIL import Image

    with Image.open(png) as image:
        crop = image.convert("L").crop(tuple(int(round(v)) for v in box))
    pixels = list(crop.getdata())
    dark = sum(p < 128 for p in pixels)
    assert crop.width > 20 and crop.height > 10
    assert 0.002 < dark / len(pixels) < 0.6, f"{dark} dark pixels of {len(pixels)}: no text drawn there"


def test_solve_in_the_browser_and_screenshot(page_url, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    import hf_arith
    from hf_arith.problems import example_problem, reference_answer

    # The page opens on the first bundled model, whatever is bundled: give it a problem it takes.
    app = load_app()
    name = app.MODELS[0]
    model, tok = app.load(name)
    problem = example_problem(tok.arith_format, min(10, app.max_digits(model, tok, name)))
    expected = reference_answer(problem, tok.arith_format)
    assert hf_arith.solve(model, tok, [problem])[0] == expected  # (else the page would say wrong)

    wait = WebDriverWait(browser, 60)
    browser.get(page_url)
    box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#problem textarea, #problem input")))
    box.clear()
    box.send_keys(problem)
    browser.find_element(By.CSS_SELECTOR, "#solve").click()

    def answer_shown(driver):
        field = driver.find_element(By.CSS_SELECTOR, "#answer textarea, #answer input")
        return field.get_attribute("value") or False

    assert wait.until(answer_shown) == expected
    verdict = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#verdict")))
    wait.until(lambda d: "correct" in verdict.text)
    assert "✅ correct" in verdict.text

    # The answer must be in the picture: scrolled into view, inside the viewport, and its box not blank.
    field = browser.find_element(By.CSS_SELECTOR, "#answer textarea, #answer input")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
    assert field.is_displayed()
    box_of = "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom, " \
             "window.innerWidth, window.innerHeight, window.devicePixelRatio];"
    left, top, right, bottom, width, height, scale = browser.execute_script(box_of, field)
    assert 0 <= left < right <= width and 0 <= top < bottom <= height, (left, top, right, bottom, width, height)
    verdict_box = browser.execute_script(box_of, browser.find_element(By.CSS_SELECTOR, "#verdict"))
    assert 0 <= verdict_box[1] < verdict_box[3] <= height  # the verdict too

    out = Path(os.environ.get("HF_ARITH_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "space_solve.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_text_drawn(shot, [v * scale for v in (left, top, right, bottom)])

    # A bad problem shows the friendly message in the page, not an error page.
    box.clear()
    box.send_keys("-5+3")
    browser.find_element(By.CSS_SELECTOR, "#solve").click()
    wait.until(lambda d: "negative numbers are not supported" in d.find_element(By.CSS_SELECTOR, "#verdict").text)
