"""``cn3 visualize edges``: the learned soft graph of tiny real runs, in the terminal and in files."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app

# slow: trains the runs it draws (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()

SENTENCE = "What is the capital city of Peru ?"
WORDS = SENTENCE.split()
PREMISE, HYPOTHESIS = "A man is playing a guitar .", "A person plays music ."
TINY = ["train.max_steps=12", "train.evals_per_epoch=40", "train.batch_size=16", "model.hidden=32",
        "model.energy_dim=16", "model.mlp_hidden=32", "model.word_dim=16"]


def _train(prepared: Path, task: str, run: Path, *extra: str) -> Path:
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config

    cfg = resolve_config(task, None, {"data.prepared": prepared}, [*TINY, *extra])
    train(cfg, run, device_name="cpu")
    assert (run / "best.pt").is_file()
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root):
    """TREC (spaCy trees, POS input) with a 2-layer CN3 and a BiLSTM; SICK (no annotation) with CN3."""
    import torch

    from data_prep.prepare import PrepareSettings, prepare

    tmp = tmp_path_factory.mktemp("visualize")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: extra threads only fight over the shared cores
    try:
        trec = prepare(PrepareSettings(task="trec", data=data_root, out=tmp / "trec", annotator="spacy")).out
        sick = prepare(PrepareSettings(task="sick", data=data_root, out=tmp / "sick", annotator="none")).out
        runs = {
            "trec": _train(trec, "trec", tmp / "trec-cn3", "model.graph_layers=2", "model.pos_dim=8"),
            "lstm": _train(trec, "trec", tmp / "trec-lstm", "model.encoder=lstm"),
            "sick": _train(sick, "sick", tmp / "sick-cn3"),
        }
        yield runs
    finally:
        torch.set_num_threads(threads)


def invoke(*args):
    return runner.invoke(app, ["visualize", "edges", *[str(a) for a in args], "--device", "cpu"])


def assert_clean_error(result, *fragments):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error:") and len(result.output.strip().splitlines()) == 1, result.output
    for fragment in fragments:
        assert fragment in result.output, result.output


# ---- library ----------------------------------------------------------------------------------


def test_edge_view_is_the_models_own_graph(runs):
    import torch

    from cn3.layers import DynamicGraphLayer
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import examples_dataset, load_model, predict_with_probabilities, text_examples
    from cn3.train.runtime import resolve_device
    from cn3.visualize import edge_view, resolve_word

    device = resolve_device("cpu")
    loaded = load_model(RunDir(runs["trec"]), device)
    calls = []  # (layer, its input h, its (h', alpha, gate)) per CN3 layer, in order

    def keep(layer, args, kwargs, output):
        calls.append((layer, args[0] if args else kwargs["h"], output))

    hooks = [m.register_forward_hook(keep, with_kwargs=True)
             for m in loaded.model.modules() if isinstance(m, DynamicGraphLayer)]
    try:
        view = edge_view(loaded, [SENTENCE], device)
    finally:
        for hook in hooks:
            hook.remove()
    side, n = view.sides[0], len(WORDS)
    assert side.tokens == WORDS and view.n_layers == 2 == len(calls)
    for (layer, h, (_, alpha, gate)), alpha_view, gate_view in zip(calls, side.alphas, side.gates):
        assert alpha_view.shape == (n, n) and gate_view.shape == (n,)
        np.testing.assert_allclose(alpha_view, alpha[0, :n, :n].numpy(), rtol=1e-6)
        np.testing.assert_allclose(alpha_view.sum(1), 1.0, atol=1e-5)
        with torch.no_grad():  # g_i = sigmoid(W_g h_i + b) (CN3 eq. 5), shown averaged over hidden units
            expected = torch.sigmoid(layer.lin_gate(h[0, :n])).mean(-1)
        np.testing.assert_allclose(gate_view, expected.numpy(), rtol=1e-5)
    examples = text_examples([SENTENCE], loaded.manifest)
    dataset = examples_dataset(examples, loaded.vocabs, loaded.manifest, with_labels=False).dataset
    (pred,), (probs,) = predict_with_probabilities(loaded.model, dataset, device)
    assert view.prediction == loaded.vocabs["labels"].itos[pred]  # what `cn3 predict` says
    assert probs[pred] == max(probs)
    assert side.heads is not None and side.heads.count(-1) == 1 and view.tree_source == "spacy"
    assert resolve_word(view, "capital") == {0: 3} == resolve_word(view, "4") == resolve_word(view, "CAPITAL")


# ---- terminal ---------------------------------------------------------------------------------


def test_terminal_lists_every_word_gate_and_head(runs):
    result = invoke(runs["trec"], SENTENCE)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "prediction:" in out and "layer 1 of 2" in out and "layer 2 of 2" in out
    assert "gate" in out and "root" in out and "spacy" in out
    for word in WORDS:
        assert word in out
    rows = [line for line in out.splitlines() if re.match(r"\s*1\s+What\s+0\.\d\d\s", line)]
    assert len(rows) == 2  # the word table of each layer: position, word, gate
    assert "█" in out  # the shaded heatmap of a short sentence


def test_word_shows_all_its_weights_summing_to_one(runs):
    result = invoke(runs["trec"], SENTENCE, "--word", "capital", "--layer", "2")
    assert result.exit_code == 0, result.output
    assert "layer 2 of 2" in result.output and "layer 1 of 2" not in result.output
    block = result.output.split("alpha of word 4 'capital'")[1]
    weights = [float(m) for m in re.findall(r"^\s*\d+ \S+\s+(\d\.\d{3})", block, flags=re.M)]
    assert len(weights) == len(WORDS)
    assert sum(weights) == pytest.approx(1.0, abs=0.01)
    assert re.search(r"sum\s+1\.000", block)


def test_pair_task_shows_both_sentences(runs):
    result = invoke(runs["sick"], PREMISE, HYPOTHESIS)
    assert result.exit_code == 0, result.output
    assert "premise (7 words)" in result.output and "hypothesis (5 words)" in result.output
    assert "display only" in result.output  # SICK prepared without trees: spaCy parses for the picture


# ---- files ------------------------------------------------------------------------------------


def test_png_svg_html_files(runs, tmp_path):
    png, svg, page = tmp_path / "edges.png", tmp_path / "edges.svg", tmp_path / "out" / "edges.html"
    for path in (png, svg, page):
        result = invoke(runs["trec"], SENTENCE, "--out", path, "--word", "Peru")
        assert result.exit_code == 0, result.output
        assert f"wrote {path}" in result.output.replace("\n", "")
        assert "layer 1: hub share of this sentence:" in result.output  # what the titles say, on screen too
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 10_000
    assert "<svg" in svg.read_text()[:500]
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    assert "<script" not in text and "<link" not in text and "src=" not in text
    for word in WORDS:
        assert f">{word}<" in text or f"{word} " in text


def test_figure_titles_fit_the_figure(runs, monkeypatch):
    """The hub-share line under each arc panel's title is wrapped to the figure, not cut off at its edges
    (made longer here than any label makes it, so that the 8-inch figure cannot hold it on one line)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import cn3.visualize.figure as figure
    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import load_model
    from cn3.train.runtime import resolve_device
    from cn3.visualize import edge_view, resolve_layers
    from cn3.visualize.figure import render_figure

    loaded = load_model(RunDir(runs["trec"]), resolve_device("cpu"))
    view = edge_view(loaded, ["What is Susan B. Anthony 's birthday ?"], resolve_device("cpu"), None)
    real = figure.hub_line
    monkeypatch.setattr(figure, "hub_line", lambda side, layer: real(side, layer) + " and many more words" * 6)
    fig = render_figure(view, resolve_layers(view, None))
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    width = fig.bbox.width
    titles = [ax.title for ax in fig.get_axes() if "hub share" in ax.title.get_text()]
    assert titles
    for title in titles:
        box = title.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, (box, width, title.get_text())


def test_pair_png(runs, tmp_path):
    path = tmp_path / "pair.png"
    result = invoke(runs["sick"], PREMISE, HYPOTHESIS, "--out", path, "--layer", "1")
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:4] == b"\x89PNG"


# ---- errors -----------------------------------------------------------------------------------


def test_missing_run_directory(tmp_path):
    assert_clean_error(invoke(tmp_path / "nope", SENTENCE), "run directory not found")


def test_run_without_checkpoint(tmp_path):
    assert_clean_error(invoke(tmp_path, SENTENCE), "no checkpoint")


def test_encoder_without_edges(runs):
    assert_clean_error(invoke(runs["lstm"], SENTENCE), "'lstm'", "learns no edge weights")


@pytest.mark.parametrize("args, fragments", [
    (["--layer", "3"], ["--layer 3", "2 graph layers"]),
    (["--layer", "0"], ["--layer 0", "out of range"]),
    (["--word", "zebra"], ["--word 'zebra'", "4:capital"]),
    (["--word", "12"], ["--word '12'"]),
    (["--out", "edges.pdf"], ["'.pdf'", ".png, .svg, .html"]),
])
def test_bad_options(runs, args, fragments):
    assert_clean_error(invoke(runs["trec"], SENTENCE, *args), *fragments)


def test_wrong_number_of_sentences(runs):
    assert_clean_error(invoke(runs["trec"], SENTENCE, "Where is Lima ?"), "takes one sentence, got 2")
    assert_clean_error(invoke(runs["sick"], PREMISE), "sentence-pair task", "got 1")


def test_too_long_for_a_figure(runs, tmp_path):
    long = " ".join(["word"] * 81)
    assert_clean_error(invoke(runs["trec"], long, "--out", tmp_path / "x.png"), "81 words", "at most 80")
    assert invoke(runs["trec"], long).exit_code == 0  # the terminal table has no limit


def test_unsupported_extension_fails_before_loading(tmp_path):
    assert_clean_error(invoke(tmp_path / "nope", SENTENCE, "--out", "x.txt"), "'.txt'")


def _side(edge_weights: str):
    import numpy as np

    from cn3.visualize.edges import SideEdges

    alpha = np.array([[0.1, 0.9, 0.0, 0.0], [0.0, 0.7, 0.3, 0.0], [0.0, 0.6, 0.4, 0.0], [0.0, 0.0, 0.8, 0.2]])
    return SideEdges("sentence", ["a", "b", "c", "d"], [alpha], [np.full(4, 0.5)], heads=[1, -1, 1, 2],
                     deprels=["det", "root", "obj", "amod"], edge_weights=edge_weights)


def test_views_draw_the_best_tree_for_tree_runs_and_only_non_zero_edges_for_sparse_ones():
    from rich.console import Console

    from cn3.visualize.edges import EdgeView, hub_line
    from cn3.visualize.figure import render_figure
    from cn3.visualize.terminal import render_terminal

    tree, sparse, soft = _side("tree"), _side("entmax15"), _side("softmax")
    assert tree.best_tree(0) == [1, -1, 1, 2]  # the parse itself
    assert tree.shown_arcs(0) == [(0, 1), (1, 1), (2, 1), (3, 2)]  # dependent -> head, the root on itself
    assert sparse.shown_arcs(0) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 1), (2, 2), (3, 2), (3, 3)]
    assert soft.shown_arcs(0) == [(0, 1), (1, 1), (2, 1), (3, 2)]
    assert sparse.shown_arcs(0, word=3) == [(3, 2), (3, 3)]
    assert "best tree: 100% of its heads are the parse's" in hub_line(tree, 0)
    assert "2.0 non-zero edges per word" in hub_line(sparse, 0)
    console = Console(record=True, width=160)
    render_terminal(console, EdgeView("trec", "cn3", "graph", "HUM", "gold", [tree]), [0])
    text = console.export_text()
    assert "learned head (best tree)" in text and "root" in text
    fig = render_figure(EdgeView("trec", "cn3", "graph", "HUM", "gold", [tree]), [0])
    assert "best tree of the learned marginals" in fig.axes[0].get_title()
