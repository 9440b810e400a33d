"""The Space in a real browser: headless Chromium types problems, clicks examples and tabs, and
screenshots show the answers, on a desktop window and on a 400-pixel-wide screen; and a built Space
folder (tests/test_space_build.py) answers in the browser without hf_arith.

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
from space_helpers import BuiltSpace, free_port, load_app, published_cache

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_SECONDS = 60  # for the page and each answer to appear (they take well under a second when idle)


@pytest.fixture(scope="module")
def page_url():
    app = load_app()
    port = free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.demo.close()


def chromium(width: int = 1280):
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
    if width != 1280:  # a phone's screen: headless windows are never narrower than 500 pixels
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    return driver, profile


@pytest.fixture
def browser():
    driver, profile = chromium()
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def phone():
    driver, profile = chromium(400)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shots(tmp_path) -> Path:
    out = Path(os.environ.get("HF_ARITH_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def wait(driver):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS)


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


BOX = ("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom, "
       "window.innerWidth, window.innerHeight, window.devicePixelRatio];")


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


def solve(driver, problem: str) -> str:
    """Type `problem`, click Solve, wait for the verdict of this problem; returns the verdict's kind."""
    box = wait(driver).until(lambda d: css(d, "#problem textarea, #problem input"))
    box.clear()
    box.send_keys(problem)
    wait(driver).until(lambda d: idle(d))  # (typing and leaving a field may start an answer too)
    before = verdict_html(driver)
    css(driver, "#solve").click()
    wait(driver).until(lambda d: idle(d) and all_css(d, "#verdict [data-verdict]") and verdict_html(d) != before)
    return css(driver, "#verdict [data-verdict]").get_attribute("data-verdict")


def verdict_html(driver) -> str:
    found = all_css(driver, "#verdict [data-verdict]")
    return found[0].get_attribute("outerHTML") if found else ""


def idle(driver) -> bool:
    return not any(word in css(driver, "#verdict").text for word in ("processing", "pending"))


def open_tab(driver, name: str) -> None:
    next(t for t in all_css(driver, "button[role=tab]") if t.text == name).click()


def test_solve_in_the_browser_and_screenshot(page_url, browser, tmp_path):
    from selenium.webdriver.support import expected_conditions as ec

    import hf_arith
    from hf_arith.data.problems import example_problem, reference_answer

    # The page opens on the first model, whatever is bundled: give it a problem it takes.
    app = load_app()
    entry = app.load(app.MODELS[0])
    problem = example_problem(entry.fmt, min(10, entry.max_digits))
    expected = reference_answer(problem, entry.fmt)
    assert hf_arith.solve(entry.model, entry.tokenizer, [problem])[0] == expected  # (else the page would say wrong)

    browser.get(page_url)
    wait(browser).until(ec.element_to_be_clickable(("css selector", "#problem textarea, #problem input")))
    assert solve(browser, problem) == "correct"
    field = css(browser, "#answer textarea, #answer input")
    assert field.get_attribute("value") == expected
    verdict = css(browser, "#verdict")
    assert "Correct" in verdict.text and expected in verdict.text
    strip = "".join(c.text.split("\n")[0] for c in all_css(browser, "#verdict .strip .cell.ok"))
    assert strip == expected  # the digit strip, in normal order

    # The answer must be in the picture: scrolled into view, inside the viewport, and its box not blank.
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", field)
    left, top, right, bottom, width, height, scale = browser.execute_script(BOX, field)
    assert 0 <= left < right <= width and 0 <= top < bottom <= height, (left, top, right, bottom, width, height)
    shot = shots(tmp_path) / "space_solve.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert_text_drawn(shot, [v * scale for v in (left, top, right, bottom)])

    # A bad problem shows the friendly message in the page, not an error page.
    assert solve(browser, "-5+3") == "refused"
    assert "negative numbers are not supported" in css(browser, "#verdict").text


def test_the_loops_example_keeps_its_loop_count_and_marks_wrong_digits(page_url, browser, tmp_path):
    app = load_app()
    browser.get(page_url)
    examples = wait(browser).until(lambda d: all_css(d, "#examples button"))
    loops = next(e for e in examples if "more loops break long sums" in e.text)
    loops.click()
    wait(browser).until(lambda d: css(d, "#answer textarea, #answer input").get_attribute("value"))
    wait(browser).until(lambda d: css(d, "#verdict [data-verdict]").get_attribute("data-verdict") == "wrong")
    assert css(browser, "#problem textarea, #problem input").get_attribute("value") == app.LONG_SUM
    assert css(browser, "#recurrences input[type=number]").get_attribute("value") == "16"  # not reset to 2
    assert css(browser, "#model input").get_attribute("value") == "looped-add-window"
    bad = all_css(browser, "#verdict .strip .cell.bad")
    assert bad and all(c.value_of_css_property("background-color") != "rgba(0, 0, 0, 0)" for c in bad)
    assert "16 recurrences (trained with 2)" in css(browser, "#verdict").text
    # The Models tab follows the main selector.
    open_tab(browser, "Models")
    wait(browser).until(lambda d: css(d, "#overview_model input").get_attribute("value") == "looped-add-window")
    wait(browser).until(lambda d: "### looped-add-window" in d.page_source or "looped-add-window" in css(d, "#overview_text").text)
    wait(browser).until(lambda d: all_css(d, "#overview_figures figure img"))
    assert "red square" in css(browser, "#overview_figures").text
    assert browser.save_screenshot(str(shots(tmp_path) / "space_models.png"))


def pick_model(driver, name: str) -> None:
    """Choose `name` in the main model dropdown, as a visitor does."""
    model = wait(driver).until(lambda d: css(d, "#model input"))
    if model.get_attribute("value") == name:  # (already chosen: its list would show it alone)
        return
    model.click()
    option = wait(driver).until(lambda d: next((o for o in all_css(d, "ul[role=listbox] li, [role=option]")
                                                 if o.text.strip() == name), None))
    option.click()
    wait(driver).until(lambda d: css(d, "#model input").get_attribute("value") == name)
    wait(driver).until(lambda d: name in css(d, "#model_info").text)  # its description is shown


# The strip's colours (the page's CSS): what a visitor sees for each kind of cell.
CELL_COLOURS = {"ok": "rgba(200, 236, 196, 1)", "bad": "rgba(247, 185, 178, 1)", "work": "rgba(235, 231, 243, 1)",
                "pad": "rgba(236, 236, 236, 1)", "end": "rgba(221, 230, 245, 1)"}


def assert_strip_colours(driver, app, bundled: str, problem: str) -> None:
    """The strip as drawn agrees with the verdict: the written working in the working colour (as many
    cells as the task's `split_working` gives), then the final answer, all green under Correct."""
    entry = app.load(bundled)
    exact = app.written_answer(entry, problem)
    working, _ = entry.fmt.task_rules.split_working(exact, entry.fmt)
    final = entry.fmt.task_rules.answer_places(exact, entry.fmt)  # after the working, or read off it
    cells = all_css(driver, "#verdict .strip .cell:not(.legend)")
    kinds = [c.get_attribute("class").split()[1] for c in cells]
    for cell, kind in zip(cells, kinds):
        assert cell.value_of_css_property("background-color") == CELL_COLOURS[kind], kind
    verdict = css(driver, "#verdict [data-verdict]").get_attribute("data-verdict")
    assert verdict == "correct", css(driver, "#verdict").text
    assert kinds.count("work") == len(working) and kinds[: len(working)] == ["work"] * len(working)
    judged = [k for k in kinds if k not in ("work", "end")]
    assert len(judged) == len(final) and set(judged) <= {"ok", "pad"} and "ok" in judged


def test_a_typed_loop_count_is_kept(page_url, browser):
    from selenium.webdriver.common.keys import Keys

    browser.get(page_url)
    pick_model(browser, "looped-add-window")
    number = wait(browser).until(lambda d: css(d, "#recurrences input[type=number]") if
                                 css(d, "#recurrences").is_displayed() else None)
    wait(browser).until(lambda d: number.get_attribute("value") == "2")  # the model's own count
    number.send_keys(Keys.CONTROL, "a")
    number.send_keys("16")
    number.send_keys(Keys.TAB)
    app = load_app()
    kind = solve(browser, app.LONG_SUM)
    assert kind == "wrong", css(browser, "#verdict").text
    assert "16 recurrences" in css(browser, "#verdict").text
    assert number.get_attribute("value") == "16"


def test_a_400_pixel_screen(page_url, phone, tmp_path):
    """Nothing is cut off at 400 pixels: the page never scrolls sideways, the digit strip wraps inside
    the screen, the token table fits, and the pictures scroll inside their own boxes."""
    app = load_app()
    phone.get(page_url)
    examples = wait(phone).until(lambda d: all_css(d, "#examples button"))
    next(e for e in examples if "more loops" in e.text).click()
    wait(phone).until(lambda d: css(d, "#verdict [data-verdict]").get_attribute("data-verdict") == "wrong")
    page_width = "return [document.documentElement.scrollWidth, window.innerWidth];"
    scroll, inner = phone.execute_script(page_width)
    assert inner == 400 and scroll <= inner
    for cell in all_css(phone, "#verdict .strip .cell"):
        left, _, right, *_ = phone.execute_script(BOX, cell)
        assert 0 <= left < right <= 400
    css(phone, "#tokens_box").click()
    table = wait(phone).until(lambda d: css(d, "#confidence table") if css(d, "#confidence").is_displayed() else None)
    phone.execute_script("arguments[0].scrollIntoView({block: 'center'});", table)
    for header in all_css(phone, "#confidence th"):
        left, _, right, *_ = phone.execute_script(BOX, header)
        assert 0 <= left < right <= 400, header.text
    assert phone.save_screenshot(str(shots(tmp_path) / "space_phone_solve.png"))
    open_tab(phone, "Models")
    image = wait(phone).until(lambda d: next(iter(all_css(d, "#overview_figures figure.wide img")), None))
    assert image.size["width"] >= 800  # readable: drawn wide, in a box that scrolls sideways
    assert phone.execute_script(page_width)[0] <= 400
    assert phone.save_screenshot(str(shots(tmp_path) / "space_phone_models.png"))
    assert app.LONG_SUM  # (the example's problem)


def test_the_attention_map_is_reachable_on_a_phone(page_url, tmp_path):
    """At 390 pixels the attention picture is drawn wide in a box that scrolls sideways, and both its
    left and its right edge can be scrolled into the screen."""
    driver, profile = chromium(390)
    try:
        driver.get(page_url)
        wait(driver).until(lambda d: css(d, "#problem textarea, #problem input"))
        pick_model(driver, "minimal-add10")
        box = css(driver, "#problem textarea, #problem input")
        box.clear()
        box.send_keys("12+34")
        open_tab(driver, "Attention")
        css(driver, "#attention").click()
        image = wait(driver).until(lambda d: next(iter(all_css(d, "#attention_plot img")), None))
        wait(driver).until(lambda d: image.size["width"] > 390)
        scroller = driver.execute_script(SCROLLER, image)
        assert scroller is not None, "no box around the attention map scrolls sideways"
        edges = ("const s = arguments[0], i = arguments[1].getBoundingClientRect(), b = s.getBoundingClientRect();"
                 "s.scrollLeft = arguments[2]; const j = arguments[1].getBoundingClientRect();"
                 "return [j.left - b.left, b.right - j.right, b.left, b.right];")
        left_gap, _, box_left, box_right = driver.execute_script(edges, scroller, image, 0)
        assert left_gap >= -1 and box_left >= 0 and box_right <= 390, (left_gap, box_left, box_right)
        _, right_gap, _, _ = driver.execute_script(edges, scroller, image, 10**6)
        assert right_gap >= -1, right_gap
        assert driver.execute_script("return document.documentElement.scrollWidth;") <= 390
        assert driver.save_screenshot(str(shots(tmp_path) / "space_phone_attention.png"))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# The nearest box around an element that scrolls sideways (or null).
SCROLLER = ("let e = arguments[0].parentElement; while (e && e !== document.body) {"
            "const o = getComputedStyle(e).overflowX; if ((o === 'auto' || o === 'scroll') && "
            "e.scrollWidth > e.clientWidth) return e; e = e.parentElement; } return null;")


# -- a built Space, without hf_arith ------------------------------------------------------------------------
# One published model of every task, each with a problem whose strip is checked against the verdict.
BUILT_MODELS = {"org/minimal-add10": ("minimal-add10", "1234567890+9876543210"),
                "org/abacus-gpt2-sub": ("abacus-gpt2-sub", "123-456"),
                "org/abacus-gpt2-mul": ("abacus-gpt2-mul", "12345*6789"),
                "org/abacus-gpt2-sort": ("abacus-gpt2-sort", "a:31,b:7,c:120")}


@pytest.fixture(scope="module")
def built_url(tmp_path_factory):
    from hf_arith.publishing.space_build import build_space

    folder = build_space(tmp_path_factory.mktemp("space") / "space", list(BUILT_MODELS))
    hf_home = published_cache(tmp_path_factory.mktemp("published"),
                              {repo_id: bundled for repo_id, (bundled, _) in BUILT_MODELS.items()})
    space = BuiltSpace(folder, hf_home, tmp_path_factory.mktemp("log") / "app.log")
    try:
        yield space.wait().url
    finally:
        space.stop()


def test_a_built_space_in_the_browser(built_url, browser, tmp_path):
    browser.get(built_url)
    assert solve(browser, "1234567890+9876543210") == "correct"
    assert css(browser, "#answer textarea, #answer input").get_attribute("value") == "11111111100"
    assert "https://huggingface.co/org/minimal-add10" in css(browser, "#model_info").get_attribute("innerHTML")
    assert browser.save_screenshot(str(shots(tmp_path) / "built_space_solve.png"))


def test_every_task_in_a_built_space(built_url, browser, tmp_path):
    """A built Space without hf_arith, one model of every task: each answers right and its strip's
    colours agree with the verdict (the working of multiplication and sorting is not red)."""
    from hf_arith.data.tasks import task_names

    app = load_app()
    assert {app.load(bundled).fmt.task for bundled, _ in BUILT_MODELS.values()} == set(task_names())
    browser.get(built_url)
    for repo_id, (bundled, problem) in BUILT_MODELS.items():
        pick_model(browser, repo_id)
        assert solve(browser, problem) == "correct", css(browser, "#verdict").text
        answer = css(browser, "#answer textarea, #answer input").get_attribute("value")
        assert answer == app.exact_answer(app.load(bundled), problem)
        assert_strip_colours(browser, app, bundled, problem)
        assert browser.save_screenshot(str(shots(tmp_path) / f"built_space_{bundled}.png"))
