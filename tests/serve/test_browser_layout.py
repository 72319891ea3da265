"""``cn3 serve``'s page in a real browser, continued: the arcs' layout at 8, 30 and 60 words (no two
relation labels' boxes overlap, no arc leaves the view, no sideways scroll), the per-head figures,
the model view (every layer x head, a click opens one), compare of runs of different depths, page
state after an item, and exports that name what they show for every kind of run.

Uses the fixtures of ``test_browser.py`` (the driver, the page, its checks) against the session's runs.
"""

from __future__ import annotations

import pytest

from tests.serve.test_browser import Page, _drawn_arcs, _expected_arcs, driver, shots  # noqa: F401

pytestmark = pytest.mark.slow

#: a long sentence, cut to 8, 30 and 60 words
WORDS = ("the committee said that the new proposal which was drafted by several members of the board last year "
         "would reduce costs for families who live in rural areas and improve access to schools hospitals and roads "
         "while critics argued that its funding plan remained unclear and that the timeline was far too short for "
         "the regions most affected by the storms of the previous winter season").split()


@pytest.fixture
def page(driver, live_server, shots):  # noqa: F811 - the same checks as test_browser's
    driver.get_log("browser")
    opened = Page(driver, live_server, shots)
    yield opened
    assert opened.severe() == []
    assert opened.foreign_resources() == []


#: the boxes (page coordinates) of the relation labels, the arcs, the words and each graph's SVG
GEOMETRY = """
const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
return [...document.querySelectorAll('#views svg.arcs')].map((svg) => ({
  svg: box(svg), labels: [...svg.querySelectorAll('text.rel')].map(box),
  arcs: [...svg.querySelectorAll('path.arc, path.dep, path.best, circle.ring')].map(box),
  scale: Number(svg.getAttribute('data-scale')),
  scroll: [...document.querySelectorAll('#views .scroll')].map((e) => e.scrollWidth - e.clientWidth),
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth]}));
"""


def overlapping(boxes: list) -> list:
    return [(a, b) for j, a in enumerate(boxes) for b in boxes[j + 1:]
            if a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5]


@pytest.mark.parametrize("words", [8, 30, 60])
@pytest.mark.parametrize("compare", [False, True])
def test_long_sentences_stay_readable(page, serve_ids, words, compare):
    text = " ".join(WORDS[:words])
    page.show(serve_ids["trec"], text, pretokenized=True, other=serve_ids["trec_transformer"] if compare else "")
    page.find("#topk").clear()
    page.find("#topk").send_keys("2")
    for graph in page.driver.execute_script(GEOMETRY):
        left, top, right, bottom = graph["svg"]
        assert overlapping(graph["labels"]) == [], "two relation labels overlap"
        for box in graph["arcs"] + graph["labels"]:
            assert left - 1 <= box[0] and box[2] <= right + 1 and top - 1 <= box[1] and box[3] <= bottom + 1, \
                (box, graph["svg"])
        assert max(graph["scroll"]) <= 0 and graph["page"][0] <= graph["page"][1], "a sideways scroll"
        assert graph["scale"] >= 0.99 if words <= 30 else 0.75  # 60 words: scaled a little at most
    assert len(page.all("#views svg.arcs text.word")) == words * (2 if compare else 1)
    if compare:  # side by side while short, one above the other (the page's width each) when long
        assert ("compare" in page.find("#views").get_attribute("class")) == (words <= 24)
    if not compare:
        page.screenshot(f"layout-{words}-words")


def test_each_head_shows_its_own_figures_and_marks(page, serve_ids):
    run = serve_ids["trec_transformer"]
    question = "What is the capital city of France ?"
    page.show(run, question)
    layer = page.api("/api/view", {"run": run, "text": question})["sides"][0]["layers"][1]
    page.select("layer", "1")
    for head in (-1, 0, 1):
        page.select("head", str(head))
        stats = layer if head < 0 else layer["per_head"][head]
        text = page.find(".metrics").text
        assert f"hub share {stats['hub_share']:.2f}" in text, text
        assert f"row entropy {stats['row_entropy']:.2f}" in text, text
        assert ("all heads (mean)" in text) == (head < 0)
        marked = {(int(a.get_attribute("data-i")), int(a.get_attribute("data-k")))
                  for a in page.all("svg.arcs .tree-head, svg.arcs .tree-dependent")}
        drawn = _drawn_arcs(page)
        assert marked == {(i, k) for i, k, _ in stats["tree_marks"]} & drawn


def test_model_view_opens_a_layer_and_head(page, serve_ids):
    run = serve_ids["trec_transformer"]
    page.show(run, "Who wrote Hamlet ?")
    view = page.api("/api/view", {"run": run, "text": "Who wrote Hamlet ?"})
    layers = view["sides"][0]["layers"]
    cells = page.all(".model-view .thumb-cell")
    assert len(cells) == len(layers) * (len(layers[0]["heads"]) + 1)  # every layer x head, and all heads
    assert len(page.all(".model-view canvas.thumb")) == len(cells)
    target = page.find('.model-view .thumb-cell[data-layer="1"][data-head="0"]')
    before = page.renders()
    target.click()
    page.wait.until(lambda d: page.renders() > before)
    assert page.find("#layer").get_attribute("value") == "1" and page.find("#head").get_attribute("value") == "0"
    assert page.find(".metrics").text.startswith("layer 2, head 1")
    assert _drawn_arcs(page) == _expected_arcs(layers[1]["heads"][0], 1, 0.0)
    assert page.find('.model-view .thumb-cell.current[data-layer="1"][data-head="0"]')
    # a thumbnail is the head's matrix: its darkest pixel per row is the row's strongest key
    rows = page.driver.execute_script(
        "const c = document.querySelector('.model-view .thumb-cell[data-layer=\"1\"][data-head=\"0\"] canvas');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "return [...Array(c.height).keys()].map((i) => [...Array(c.width).keys()]"
        "  .map((k) => d[4 * (i * c.width + k)]));")
    matrix = layers[1]["heads"][0]
    for row, red in zip(matrix, rows):
        assert red.index(min(red)) in [k for k, v in enumerate(row) if v >= max(row) - 0.01]
    page.screenshot("model-view")


def test_compare_runs_of_different_depths(page, serve_ids):
    deep, shallow = serve_ids["trec"], serve_ids["conll2003"]
    text = "the new proposal was drafted by the board"
    page.show(deep, text, other=shallow, pretokenized=True)
    compared = page.api("/api/compare", {"runs": [deep, shallow], "text": text, "pretokenized": True})
    depths = [len(v["sides"][0]["layers"]) for v in compared["views"]]
    assert depths[0] > depths[1]
    assert "which both have" in page.find(".difference-note").text
    page.select("layer", str(depths[0] - 1))  # a layer only the deeper run has
    views = page.all("#views .view")
    assert views[0].find_elements("css selector", "svg.arcs")
    note = views[1].find_element("css selector", ".depth-note").text
    assert f"has {depths[1]} layer(s): layer {depths[0]} is not in it" in note
    assert not views[1].find_elements("css selector", "svg.arcs")  # never another layer under this one's name
    page.screenshot("compare-different-depths")


def test_switches_reset_and_an_item_does_not_tick_pretokenized(page, serve_ids):
    run = serve_ids["trec"]
    page.show(run, "Who wrote Hamlet ?")
    page.select("layer", "1")
    page.select("head", "1")
    page.select("items-order", "entropy")
    page.find("#items-errors").click()
    page.find("#items-load").click()
    page.wait.until(lambda d: page.all("table.items tbody tr") or page.find("#error").is_displayed())
    rows = page.all("table.items tbody tr")
    assert rows and all(row.find_elements("css selector", "td.wrong") for row in rows)
    entropies = [float(row.find_elements("css selector", "td")[-1].text) for row in rows]
    assert entropies == sorted(entropies, reverse=True)
    before = page.renders()
    rows[0].click()
    page.wait.until(lambda d: page.renders() > before)
    assert not page.find("#pretokenized").is_selected()  # the item went as tokens; the box stays as it was
    page.show(run, "Where's the Nile?")
    tokens = page.api("/api/view", {"run": run, "text": "Where's the Nile?"})["sides"][0]["tokens"]
    assert [w.text for w in page.all("svg.arcs text.word")] == tokens  # tokenised, not split on spaces
    page.select("run", serve_ids["trec_transformer"])
    assert page.find("#head").get_attribute("value") in ("-1", None) or page.find("#controls").get_attribute("hidden")
    page.show(serve_ids["trec_transformer"], "Who wrote Hamlet ?")
    assert page.find("#layer").get_attribute("value") == "0" and page.find("#head").get_attribute("value") == "-1"


@pytest.mark.parametrize("name", ["trec", "conll2003", "multi30k", "trec_lstm"])
def test_exports_name_what_they_show(page, serve_ids, name):
    import time
    import xml.etree.ElementTree as ET

    text = {"multi30k": "A man is riding a bike .", "conll2003": "Peter lives in Paris ."}.get(
        name, "Who wrote Hamlet ?")
    page.show(serve_ids[name], text, pretokenized=name == "conll2003")
    for old in page.driver.downloads.glob("cn3-view*"):
        old.unlink()
    for button in ("export-svg", "export-png"):
        page.find(f"#{button}").click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(
            any(page.driver.downloads.glob(f"cn3-view*.{ext}")) and not any(page.driver.downloads.glob("*.crdownload"))
            for ext in ("svg", "png")):
        time.sleep(0.2)
    assert not page.find("#error").is_displayed(), page.find("#error").text
    svg = next(page.driver.downloads.glob("cn3-view*.svg")).read_text(encoding="utf-8")
    words = " ".join(t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))
    run_name = page.api("/api/runs")["runs"][int(serve_ids[name][1:])]["name"]
    first = page.api("/api/view", {"run": serve_ids[name], "text": text, "pretokenized": name == "conll2003"})
    assert run_name in words and "prediction" in words and " ".join(first["sides"][0]["tokens"]) in words
    assert ("layer 1, all heads (mean)" in words) == (name != "trec_lstm")  # a graph-less run: the prediction
    assert next(page.driver.downloads.glob("cn3-view*.png")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sparse_weights_and_a_best_tree(page, serve_ids, monkeypatch):
    """Weights with exact zeros (sparsemax, entmax, a tree) draw only their non-zero edges, whatever the
    top-k; a layer's ``best_tree`` (head per word, -1 the root) is drawn under the parse like a parse."""
    import numpy as np

    import cn3.serve.views as views

    original = views.layer_json

    def sparse_with_tree(l, heads, gate, keys, parse, word_rows, tree=False):  # tree: the run's own flag, unused
        one_hot = np.zeros_like(heads)  # each row keeps its strongest key only
        rows = np.arange(heads.shape[1])
        for h in range(len(heads)):
            one_hot[h, rows, heads[h].argmax(1)] = 1.0
        out = original(l, one_hot, gate, keys, parse, word_rows)
        return {**out, "best_tree": [-1] + list(range(heads.shape[2] - 1))}  # a chain: word i's head is i - 1

    monkeypatch.setattr(views, "layer_json", sparse_with_tree)
    run = serve_ids["trec_transformer"]
    page.show(run, "Who wrote the play Hamlet ?")
    n = len(page.all("svg.arcs text.word"))
    page.select("head", "0")
    page.find("#topk").clear()
    page.find("#topk").send_keys("4")
    assert len(page.all("svg.arcs .arc, svg.arcs .ring")) == n  # one non-zero edge per row, not four
    assert len(page.all("svg.arcs path.best")) == n - 1 and len(page.all("svg.arcs line.best")) == 1
    assert page.find("svg.arcs text.band-label").text == "best tree of this layer"
    drawn = page.all("svg.arcs path.best")
    heads = {int(p.get_attribute("data-dep")): int(p.get_attribute("data-head")) for p in drawn}
    assert heads == {i: i - 1 for i in range(1, n)}
    page.screenshot("sparse-best-tree")
