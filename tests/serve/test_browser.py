"""``cn3 serve``'s page in a real browser: Debian's ``chromium`` driven headless by Selenium through the
system ``chromedriver``, against the real server (``live_server``) over the tiny runs of ``serve_runs``.

Every test opens the page afresh; after it, the browser's console must hold no ``SEVERE`` entry and every
resource the page loaded must come from the server's origin. Screenshots of each view are written to
``$CN3_SCREENSHOTS`` (default: ``screenshots/`` under pytest's base temp directory, printed).
Skipped, saying why, where the browser, its driver or Selenium is missing (``scripts/setup.sh --browser``, run
by ``scripts/test.sh``, installs ``chromium`` and ``chromium-driver`` as root where apt is available).
"""

from __future__ import annotations

import json
import os
import struct
import time
import urllib.request
import xml.etree.ElementTree as ET
import zlib
from html import escape
from pathlib import Path
from urllib.parse import urlsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: the sentence every sentence run is shown (a question: TREC's kind)
QUESTION = "What is the capital city of France ?"
#: hostile text: markup, both quotes, an ampersand and right-to-left words
HOSTILE = "<script>window.pwned=1</script> \"quoted\" 'single' a&b <b>bold</b> שלום עולם"
WAIT = 30  # seconds: a view runs the model on a CPU that other work shares

pytestmark = pytest.mark.slow  # a browser and five trained runs: seconds per test


def _selenium():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(f"no browser for the page tests: {', '.join(missing)} missing "
                    "(scripts/setup.sh --browser, which scripts/test.sh runs, installs chromium and chromium-driver "
                    "as root where apt-get is available)")
    return pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """A headless Chromium (console log kept, downloads into a temporary directory, ``.downloads``)."""
    webdriver = _selenium()
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path_factory.mktemp("downloads")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    chrome = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    chrome.downloads = downloads
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """The directory the screenshots go to (printed)."""
    where = Path(os.environ.get("CN3_SCREENSHOTS") or tmp_path_factory.getbasetemp() / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of cn3 serve's page: {where}")
    return where


class Page:
    """The page at ``base`` in ``driver``: actions, waits and the checks every test ends with."""

    def __init__(self, driver, base: str, shots: Path):
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.base, self.shots = driver, base, shots
        self.wait = WebDriverWait(driver, WAIT)
        driver.get(base)
        self.wait.until(lambda d: d.find_element("css selector", "body[data-ready]"))

    def find(self, css: str):
        return self.driver.find_element("css selector", css)

    def all(self, css: str):
        return self.driver.find_elements("css selector", css)

    def select(self, element_id: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.find(f"#{element_id}")).select_by_value(value)

    def renders(self) -> int:
        return int(self.find("body").get_attribute("data-renders") or 0)

    def show(self, run: str, text: str, text2: str | None = None, pretokenized: bool | None = None,
             other: str = "") -> None:
        """Pick ``run`` (and ``other`` to compare with), type the text, press Show, wait for the view."""
        self.select("run", run)
        self.select("other", other)
        for element_id, value in (("text", text), ("text2", text2)):
            if value is not None:
                box = self.find(f"#{element_id}")
                box.clear()
                box.send_keys(value)
        if pretokenized is not None and self.find("#pretokenized").is_selected() != pretokenized:
            self.find("#pretokenized").click()
        before = self.renders()
        self.find("#go").click()
        self.wait.until(lambda d: self.renders() > before or self.find("#error").is_displayed())
        assert not self.find("#error").is_displayed(), self.find("#error").text

    def api(self, path: str, body: dict | None = None) -> dict:
        """The server's JSON answer (what the page was given), asked directly."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base.rstrip("/") + path, data=data,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=WAIT) as answer:
            return json.load(answer)

    def screenshot(self, name: str) -> Path:
        """The whole page (up to 4000 px tall) as ``<shots>/<name>.png``."""
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1400, "height": min(max(height, 600), 4000), "deviceScaleFactor": 1, "mobile": False})
        try:
            path = self.shots / f"{name}.png"
            assert self.driver.get_screenshot_as_file(str(path))
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        return path

    def severe(self) -> list[dict]:
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]

    def foreign_resources(self) -> list[str]:
        """The resources the page loaded from anywhere but the server."""
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(self.base))
        names = self.driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        return [name for name in names if not (name.startswith(origin + "/") or name.startswith(f"blob:{origin}/"))]


@pytest.fixture
def page(driver, live_server, shots):
    """The page freshly opened; afterwards: no console error, nothing loaded from elsewhere."""
    driver.get_log("browser")  # drop what an earlier test left
    opened = Page(driver, live_server, shots)
    yield opened
    assert opened.severe() == []
    assert opened.foreign_resources() == []


def _row(page: Page, element, tag: str = "td") -> list[str]:
    return [cell.text for cell in element.find_elements("css selector", tag)]


def _expected_arcs(matrix: list[list[float]], topk: int, threshold: float) -> set[tuple[int, int]]:
    """The arcs the page should draw: each row's ``topk`` largest entries at or above ``threshold``."""
    arcs = set()
    for i, row in enumerate(matrix):
        for k in sorted(range(len(row)), key=lambda k: -row[k])[:topk]:
            if row[k] >= threshold and row[k] > 0:
                arcs.add((i, k))
    return arcs


def _drawn_arcs(page: Page, scope: str = "") -> set[tuple[int, int]]:
    nodes = page.all(f"{scope} svg.arcs .arc, {scope} svg.arcs .ring")
    return {(int(n.get_attribute("data-i")), int(n.get_attribute("data-k"))) for n in nodes}


def _mean(heads: list) -> list[list[float]]:
    return [[sum(h[i][k] for h in heads) / len(heads) for k in range(len(heads[0]))] for i in range(len(heads[0]))]


def test_sentence_view_layers_heads_topk_and_hover(page, serve_ids):
    """A TREC CN3 run: the prediction, the arcs of each layer and head as the JSON has them, top-k and
    threshold, and hovering a word highlights its row and column in the arcs and the heatmap."""
    from selenium.webdriver.common.action_chains import ActionChains

    run = serve_ids["trec"]
    page.show(run, QUESTION)
    view = page.api("/api/view", {"run": run, "text": QUESTION, "pretokenized": False})
    side = view["sides"][0]
    n = len(side["tokens"])
    assert [w.text for w in page.all("svg.arcs text.word")] == side["tokens"]
    assert page.find(".prediction .label").text == view["prediction"]["label"]
    shown = [float(s.text) for s in page.all(".probs span:nth-child(3n)")]
    assert sum(shown) == pytest.approx(1.0, abs=0.01)
    assert len(page.all("svg.arcs rect.gate-cell")) == n  # a CN3 layer's update gate per word
    assert len(page.all("svg.arcs path.dep")) == sum(h >= 0 for h in (side["parse"] or {"heads": []})["heads"])
    assert _drawn_arcs(page) == _expected_arcs(_mean(side["layers"][0]["heads"]), 1, 0.0)
    assert f"hub share {side['layers'][0]['hub_share']:.2f}" in page.find(".metrics").text

    page.select("layer", "1")
    page.select("head", "1")
    assert page.find(".metrics").text.startswith("layer 2, head 2")
    second = side["layers"][1]["heads"][1]
    assert _drawn_arcs(page) == _expected_arcs(second, 1, 0.0)
    cells = page.all("svg.heatmap rect.cell")
    assert len(cells) == n * n
    assert cells[1].find_element("css selector", "title").get_attribute("textContent").endswith(f"{second[0][1]:.4f}")

    topk = page.find("#topk")
    topk.clear()
    topk.send_keys("3")
    assert _drawn_arcs(page) == _expected_arcs(second, 3, 0.0)
    page.driver.execute_script("const t = document.getElementById('threshold'); t.value = '0.2';"
                               "t.dispatchEvent(new Event('input'));")
    assert _drawn_arcs(page) == _expected_arcs(second, 3, 0.2)
    topk.clear()
    topk.send_keys("1")
    page.driver.execute_script("const t = document.getElementById('threshold'); t.value = '0';"
                               "t.dispatchEvent(new Event('input'));")

    word = 2
    ActionChains(page.driver).move_to_element(page.all("svg.arcs text.word")[word]).perform()
    reads = {(int(a.get_attribute("data-i")), int(a.get_attribute("data-k"))) for a in page.all("svg.arcs .row")}
    read_by = {(int(a.get_attribute("data-i")), int(a.get_attribute("data-k"))) for a in page.all("svg.arcs .col")}
    drawn = _drawn_arcs(page)
    assert reads == {(i, k) for i, k in drawn if i == word}
    assert read_by == {(i, k) for i, k in drawn if k == word and i != word}
    assert page.find("svg.arcs text.word.focus").text == side["tokens"][word]
    highlighted = page.all("svg.heatmap rect.cell.hl")
    assert len(highlighted) == 2 * n - 1  # the word's row and column
    page.screenshot("view-sentence")
    ActionChains(page.driver).move_to_element(page.find("header h1")).perform()
    assert page.all("svg.arcs .row") == [] and page.all("svg.heatmap rect.cell.hl") == []


def test_compare_two_runs_and_load_an_item(page, serve_ids):
    """CN3 beside the Transformer: both views, the difference heatmap as the JSON has it, the dev items
    where they disagree, and one click on an item loads it."""
    cn3, transformer = serve_ids["trec"], serve_ids["trec_transformer"]
    page.show(cn3, QUESTION, other=transformer)
    views = page.all("#views .view")
    assert [v.get_attribute("data-run") for v in views] == [cn3, transformer]
    assert len(page.all("#views svg.arcs")) == 2
    assert views[1].find_elements("css selector", "rect.gate-cell") == []  # attention: no update gate
    assert len(page.all("#head option")) == 3  # the mean and two heads
    compared = page.api("/api/compare", {"runs": [cn3, transformer], "text": QUESTION, "pretokenized": False})
    difference = [d for d in compared["difference"] if d["layer"] == 0][0]["matrix"]
    n = len(difference)
    cells = page.all("#difference rect.cell")
    assert len(cells) == n * n
    assert cells[n + 2].find_element("css selector", "title").get_attribute("textContent").endswith(
        f"{difference[1][2]:.4f}")
    page.screenshot("compare")

    page.select("items-order", "disagree")
    page.find("#items-load").click()
    page.wait.until(lambda d: page.all("#items tbody tr") or page.all("#items .note"))
    items = page.api(f"/api/items?run={cn3}&other={transformer}&split=dev&order=disagree&limit=20")["items"]
    rows = page.all("#items tbody tr")
    assert len(rows) == len(items) > 0, "the tiny runs should disagree on some dev item"
    assert [int(r.get_attribute("data-index")) for r in rows] == [item["index"] for item in items]
    page.screenshot("items")
    before = page.renders()
    rows[0].click()
    page.wait.until(lambda d: page.renders() > before)
    assert page.find("#text").get_attribute("value") == items[0]["text"]
    assert len(page.all("#views .view")) == 2


def test_pair_tagging_and_translation_runs(page, serve_ids):
    """A pair run shows both sentences; a tagging run keeps pretokenized tokens as given and shows tags
    with their marginals; a translation run shows its translation and source attention."""
    page.show(serve_ids["sick"], "A man is playing a guitar .", "A person plays music .")
    assert [h.text.split(":")[0] for h in page.all(".side h3")] == ["premise", "hypothesis"]
    assert len(page.all("svg.arcs")) == 2
    page.screenshot("pair")
    page.find("#text2").clear()
    page.find("#go").click()
    page.wait.until(lambda d: page.find("#error").is_displayed())
    assert page.find("#error").text == "Type a hypothesis too: this run reads sentence pairs."

    tokens = ["1.", "Germany", "beat", "U.S.", "in", "New", "York", "(", "AP", ")"]
    page.show(serve_ids["conll2003"], " ".join(tokens), pretokenized=True)
    table = page.find("table.tags")
    rows = table.find_elements("css selector", "tr")
    assert _row(page, rows[0]) == tokens
    view = page.api("/api/view", {"run": serve_ids["conll2003"], "text": " ".join(tokens), "pretokenized": True})
    assert _row(page, rows[1]) == view["prediction"]["tags"]
    assert [float(x) for x in _row(page, rows[2])] == pytest.approx(
        [m[t] for m, t in zip(view["prediction"]["marginals"], view["prediction"]["tags"])], abs=0.006)
    page.screenshot("tagging")

    source = "A dog runs on the beach ."
    page.show(serve_ids["multi30k"], source)
    view = page.api("/api/view", {"run": serve_ids["multi30k"], "text": source, "pretokenized": False})
    translation = view["translation"]
    assert page.find(".prediction .translation").text == view["prediction"]["translation"].strip()
    heat = page.find(".translation-block svg.heatmap")
    rows, cols = len(translation["target_tokens"]), len(translation["source_tokens"])
    assert len(heat.find_elements("css selector", "rect.cell")) == rows * cols
    gates = page.all(".translation-block svg.gate-strip rect.gate-cell")
    assert len(gates) == (cols if translation["local_gate"] is not None else 0)
    page.screenshot("translation")


def test_run_page(page, serve_ids):
    """The run page: results, one learning curve per split and metric as an inline SVG, the config."""
    run = serve_ids["trec"]
    page.select("run", run)
    page.find("#tab-run").click()
    page.wait.until(lambda d: page.all("#run-page pre.config"))
    data = page.api(f"/api/run?run={run}")
    metrics = {c["metric"] for c in data["curves"]}
    plots = page.all("#run-page svg.curves")
    assert len(plots) == len(metrics) > 0  # one plot per metric, one line per split
    assert sum(len(p.find_elements("css selector", "polyline")) for p in plots) == len(
        {(c["split"], c["metric"]) for c in data["curves"]})
    assert len(page.all("#run-page svg.curves circle")) == len(data["curves"])
    assert json.loads(page.find("#run-page pre.config").get_attribute("textContent")) == data["config"]
    assert page.find("#run-page h2").text == f"run {data['name']}"
    page.screenshot("run-page")


def test_export_html_svg_png(page, serve_ids):
    """Export writes a self-contained HTML file (inline CSS and SVG, no script), an SVG with the words
    and a PNG of it, through download links the page creates."""
    for old in page.driver.downloads.iterdir():
        old.unlink()
    page.show(serve_ids["trec"], HOSTILE)
    tokens = page.api("/api/view", {"run": serve_ids["trec"], "text": HOSTILE, "pretokenized": False})
    tokens = tokens["sides"][0]["tokens"]
    for button in ("export-html", "export-svg", "export-png"):
        page.find(f"#{button}").click()
    files = {name: page.driver.downloads / f"cn3-view.{name}" for name in ("html", "svg", "png")}
    deadline = time.monotonic() + WAIT
    while not all(p.is_file() and p.stat().st_size for p in files.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    html = files["html"].read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and "<svg" in html
    assert "<script" not in html and "src=" not in html and "http" not in html.replace(
        "http://www.w3.org/", "")  # nothing to load, nothing to run
    hostile = [t for t in tokens if "<" in t or "&" in t]
    assert hostile and all(f">{escape(t, quote=False)}</text>" in html for t in hostile)
    svg = ET.parse(files["svg"]).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    words = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if "word" in (t.get("class") or "")]
    assert [w.rstrip("…") for w in words[:len(tokens)]] == [t[:23] if len(t) > 24 else t for t in tokens]
    png = files["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width == 2 * int(svg.get("width")) and height == 2 * int(svg.get("height"))
    assert [a.text for a in page.all("#downloads a")] == ["cn3-view.html", "cn3-view.svg", "cn3-view.png"]


def test_hostile_text_is_text_and_errors_are_shown(page, serve_ids):
    """Markup, quotes and right-to-left words typed in come back as text (nothing runs); a sentence
    over the server's cap shows the server's error in the error area."""
    run = serve_ids["trec"]
    page.show(run, HOSTILE)
    tokens = page.api("/api/view", {"run": run, "text": HOSTILE, "pretokenized": False})["sides"][0]["tokens"]
    assert page.driver.execute_script("return [...document.querySelectorAll('svg.arcs text.word')]"
                                      ".map(t => t.firstChild.data)") == [
        t if len(t) <= 24 else f"{t[:23]}…" for t in tokens]
    assert page.find(".side h3 bdi").text == " ".join(tokens)
    assert page.driver.execute_script("return window.pwned === undefined && document.scripts.length === 1 && "
                                      "document.querySelectorAll('b:not(.tags b)').length === 0")
    page.screenshot("hostile")

    limit = page.api("/api/runs")["max_words"]
    page.find("#text").clear()
    page.find("#text").send_keys(" ".join(["word"] * (limit + 1)))
    page.find("#go").click()
    page.wait.until(lambda d: page.find("#error").is_displayed())
    assert str(limit) in page.find("#error").text
    page.screenshot("error")
    # the one console entry allowed: Chrome's own line for the refused request (status 413)
    severe = page.severe()
    assert all("413" in entry["message"] for entry in severe), severe


@pytest.fixture
def grid_server(serve_app, tmp_path):
    """The served runs again, with a grid report (Markdown with hostile text and one PNG) beside them."""
    from cn3.serve.api import ServeApp
    from cn3.serve.runs import find_report
    from cn3.serve.server import serving

    grid = tmp_path / "demo-grid"
    grid.mkdir()
    (grid / "report.md").write_text(
        "# Demo grid\n\nAccuracy of `cn3` runs, **best** first. <script>window.pwned=1</script>\n\n"
        "| run | dev |\n|---|---:|\n| cn3 | 0.81 |\n| <i>transformer</i> | 0.79 |\n\n"
        "```\ncn3 experiment run --out grid\n```\n\n![accuracy](curves.png)\n", encoding="utf-8")
    (grid / "curves.png").write_bytes(_png(48, 20))
    app = ServeApp(list(serve_app.runs.values()), max_words=serve_app.max_words, grid=find_report(grid))
    with serving(app) as url:
        yield url


def _png(width: int, height: int) -> bytes:
    """A grey ``width`` x ``height`` PNG (8-bit greyscale, one IDAT chunk)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes([128]) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_grid_report(driver, grid_server, shots):
    """The grid's report: headings, a table, code and the report's PNG, all as text (nothing runs)."""
    driver.get_log("browser")
    page = Page(driver, grid_server, shots)
    tab = page.find("#tab-grid")
    assert tab.is_displayed()
    tab.click()
    page.wait.until(lambda d: page.all("#grid-page .report img"))
    page.wait.until(lambda d: d.execute_script("return document.querySelector('#grid-page img').naturalWidth") == 48)
    report = page.find("#grid-page .report")
    assert report.find_element("css selector", "h2").text == "Demo grid"
    rows = report.find_elements("css selector", "table tr")
    assert [_row(page, r, "th, td") for r in rows] == [["run", "dev"], ["cn3", "0.81"], ["<i>transformer</i>", "0.79"]]
    assert report.find_element("css selector", "pre").text == "cn3 experiment run --out grid"
    assert "<script>window.pwned=1</script>" in report.find_element("css selector", "p").text
    assert driver.execute_script("return window.pwned === undefined && document.scripts.length === 1")
    page.screenshot("grid-report")
    assert page.severe() == []
    assert page.foreign_resources() == []
