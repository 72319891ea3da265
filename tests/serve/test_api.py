"""The JSON API of ``cn3 serve`` at the handler level (:meth:`cn3.serve.api.ServeApp.handle`, no
sockets), on tiny real runs: the contract's shapes, rows summing to 1, the same predictions as
``cn3 predict``, the same graphs as ``cn3 visualize edges`` and the encoder's own attention,
errors with their statuses and one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

# slow: the session's runs train first (tests/serve/conftest.py, about 10 s on one core)
pytestmark = pytest.mark.slow

CPU = torch.device("cpu")
QUESTION = "What is the capital city of Peru ?"
PAIR = ["A man is playing a guitar .", "A person plays music ."]


def post(app, route: str, **body):
    return app.handle("POST", route, {}, json.dumps(body).encode("utf-8"))


def view(app, run: str, text, **extra):
    status, answer = post(app, "/api/view", run=run, text=text, **extra)
    assert status == 200, answer
    return answer


def assert_error(result, status: int, *fragments: str):
    code, answer = result
    assert code == status, answer
    assert list(answer) == ["error"] and isinstance(answer["error"], str)
    assert "Traceback" not in answer["error"] and "\n" not in answer["error"]
    for fragment in fragments:
        assert fragment in answer["error"], answer


def assert_layers(side: dict, n_layers: int, n_heads: int | None = None):
    """Every head of every layer ``n x n``, each row a distribution; gate, stats and marks well formed."""
    n = len(side["tokens"])
    assert len(side["layers"]) == n_layers
    for l, layer in enumerate(side["layers"]):
        assert layer["layer"] == l
        heads = np.asarray(layer["heads"], dtype=np.float64)
        assert heads.shape[1:] == (n, n) and (n_heads is None or heads.shape[0] == n_heads)
        assert (heads >= 0).all()
        np.testing.assert_allclose(heads.sum(-1), 1.0, atol=1e-3)
        assert 0.0 < layer["hub_share"] <= 1.0 and 0.0 <= layer["row_entropy"] <= 1.0 + 1e-6
        if layer["gate"] is not None:
            assert len(layer["gate"]) == n and all(0.0 <= g <= 1.0 for g in layer["gate"])
        for i, k, what in layer["tree_marks"]:
            row = heads.mean(0)[i]  # k is its argmax before rounding
            assert row[k] >= row.max() - 1e-4 and k != i
            parse = side["parse"]["heads"]
            assert (parse[i] == k) if what == "head" else (what == "dependent" and parse[k] == i)
        if side["parse"] is None:
            assert layer["tree_marks"] == []


def loaded(app, run_id: str):
    return app.runs[run_id].model


# ---- /api/runs --------------------------------------------------------------------------------


def test_runs_lists_every_run_in_argument_order(serve_app, serve_runs, serve_ids):
    from cn3.runs.records import read_results

    status, answer = serve_app.handle("GET", "/api/runs", {})
    assert status == 200 and answer["max_words"] == 120 and answer["grid"] is None
    runs = {r["id"]: r for r in answer["runs"]}
    assert [r["id"] for r in answer["runs"]] == ["r0", "r1", "r2", "r3", "r4", "r5"]
    expected = {  # name: (kind, level, encoder, graph, layers, heads)
        "trec": ("sentence", "sentence", "cn3", "cn3", 2, 2),
        "trec_transformer": ("sentence", "sentence", "transformer", "attention", 2, 2),
        "sick": ("sentence", "pair", "cn3", "cn3", 1, 1),
        "conll2003": ("sentence", "tagging", "cn3", "cn3", 1, 1),
        "multi30k": ("translation", None, "hybrid", "attention", 2, 2),
        "trec_lstm": ("sentence", "sentence", "lstm", None, 0, 1),
    }
    for name, (kind, level, encoder, graph, layers, heads) in expected.items():
        r = runs[serve_ids[name]]
        assert (r["kind"], r["level"], r["encoder"], r["graph"], r["layers"], r["heads"]) == \
            (kind, level, encoder, graph, layers, heads), r
        assert r["name"] == serve_runs[name].name
    trec = runs[serve_ids["trec"]]
    assert trec["labels"] == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"] and trec["task"] == "trec"
    scores = read_results(serve_runs["trec"])["scores"]
    assert trec["scores"] == {"dev": scores["dev"]["score"], "test": scores["test"]["score"], "metric": "accuracy"}
    assert runs[serve_ids["multi30k"]]["scores"]["metric"] == "bleu" and runs[serve_ids["multi30k"]]["labels"] == []


# ---- /api/view: sentence runs -------------------------------------------------------------------


def test_view_predicts_as_cn3_predict_does(serve_app, serve_ids):
    from cn3.sentence.inference import examples_dataset, predict_with_probabilities, text_examples

    answer = view(serve_app, serve_ids["trec"], QUESTION)
    model = loaded(serve_app, serve_ids["trec"])
    examples = text_examples([QUESTION], model.manifest)
    dataset = examples_dataset(examples, model.vocabs, model.manifest, with_labels=False).dataset
    (pred,), (probs,) = predict_with_probabilities(model.model, dataset, CPU)
    labels = model.vocabs["labels"].itos
    assert answer["run"] == serve_ids["trec"] and answer["level"] == "sentence" and answer["translation"] is None
    assert answer["prediction"]["label"] == labels[pred]
    assert list(answer["prediction"]["probs"]) == labels
    np.testing.assert_allclose(list(answer["prediction"]["probs"].values()), probs, atol=1e-5)
    (side,) = answer["sides"]
    assert side["name"] == "sentence" and side["tokens"] == examples[0].sentences[0].tokens
    assert_layers(side, 2, 2)


def test_cn3_graph_is_the_one_visualize_edges_draws(serve_app, serve_ids):
    from cn3.analysis.graphs import hub, row_entropy
    from cn3.visualize.edges import edge_view

    side = view(serve_app, serve_ids["trec"], QUESTION)["sides"][0]
    edges = edge_view(loaded(serve_app, serve_ids["trec"]), [QUESTION], CPU).sides[0]
    assert side["tokens"] == edges.tokens
    for layer, alpha, gate in zip(side["layers"], edges.alphas, edges.gates):
        mean = np.asarray(layer["heads"]).mean(0)  # two energy heads: their mean is the layer's alpha
        np.testing.assert_allclose(mean, alpha, atol=1e-4)
        np.testing.assert_allclose(layer["gate"], gate, atol=1e-4)
        assert layer["hub_share"] == pytest.approx(hub(alpha)[1], abs=1e-4)
        assert layer["row_entropy"] == pytest.approx(float(np.mean(row_entropy(alpha))), abs=1e-4)
        assert not np.allclose(layer["heads"][0], layer["heads"][1])  # two heads, not one copied


def test_attention_heads_are_the_encoders_own(serve_app, serve_ids):
    """Each head of the Transformer is captured; their mean is the encoder's returned attention, and
    capturing changes no prediction."""
    from cn3.sentence.inference import examples_dataset, predict_with_probabilities, scored_batches, text_examples

    answer = view(serve_app, serve_ids["trec_transformer"], QUESTION)
    side = answer["sides"][0]
    assert_layers(side, 2, 2)
    assert all(layer["gate"] is None and layer["tree_marks"] is not None for layer in side["layers"])
    model = loaded(serve_app, serve_ids["trec_transformer"])
    dataset = examples_dataset(text_examples([QUESTION], model.manifest), model.vocabs, model.manifest,
                               with_labels=False).dataset
    _, out, _ = next(iter(scored_batches(model.model, dataset, CPU)))
    for layer, alpha in zip(side["layers"], out.info["a"]["alphas"]):
        np.testing.assert_allclose(np.asarray(layer["heads"]).mean(0), alpha[0].numpy(), atol=1e-4)
    (_,), (probs,) = predict_with_probabilities(model.model, dataset, CPU)
    np.testing.assert_allclose(list(answer["prediction"]["probs"].values()), probs, atol=1e-5)


def assert_marks(sent: list, expected: list, matrix: np.ndarray) -> None:
    """The marks sent (from unrounded weights) are those of ``matrix`` (rounded) on every row whose
    strongest key is clear of the next by more than the rounding; the others point at a near-maximum."""
    top2 = np.sort(matrix, 1)[:, -2:]
    clear = {i for i in range(len(matrix)) if top2[i, 1] - top2[i, 0] > 1e-4}
    assert [m for m in sent if m[0] in clear] == [m for m in expected if m[0] in clear]
    assert all(matrix[i, k] >= matrix[i].max() - 1e-4 for i, k, _ in sent)
    assert any(m[0] in clear for m in sent) or not sent or len(clear) < len(matrix)


def test_each_head_has_its_own_statistics_and_marks(serve_app, serve_ids):
    """``per_head[h]`` is head h's own hub share, row entropy and tree marks; the top level is the mean's."""
    from cn3.analysis.graphs import hub, row_entropy
    from cn3.serve.views import tree_marks

    for name in ("trec", "trec_transformer"):
        side = view(serve_app, serve_ids[name], QUESTION)["sides"][0]
        parse = side["parse"]["heads"] if side["parse"] else None
        for layer in side["layers"]:
            heads = np.asarray(layer["heads"], dtype=np.float64)
            assert len(layer["per_head"]) == len(heads) == 2
            for matrix, own in zip(heads, layer["per_head"]):
                assert own["hub_share"] == pytest.approx(hub(matrix)[1], abs=1e-4)
                assert own["row_entropy"] == pytest.approx(float(np.mean(row_entropy(matrix))), abs=1e-3)
                assert_marks(own["tree_marks"], tree_marks(matrix, parse), matrix)
            mean = heads.mean(0)
            assert layer["hub_share"] == pytest.approx(hub(mean)[1], abs=1e-4)
            assert_marks(layer["tree_marks"], tree_marks(mean, parse), mean)
    stats = [(h["hub_share"], h["row_entropy"]) for layer in side["layers"] for h in layer["per_head"]]
    assert len(set(stats)) > 1  # the heads differ: not the mean repeated


def test_pos_tags_come_with_the_parse(serve_app, serve_ids):
    side = view(serve_app, serve_ids["trec"], QUESTION)["sides"][0]
    if side["parse"] is None:
        pytest.skip("no parser here (spaCy and its English model are not installed)")
    assert side["pos"] is not None and len(side["pos"]) == len(side["tokens"]) and "NOUN" in side["pos"]


def test_pair_view_has_premise_and_hypothesis(serve_app, serve_ids):
    as_list = view(serve_app, serve_ids["sick"], PAIR)
    as_tab = view(serve_app, serve_ids["sick"], "\t".join(PAIR))
    assert as_list == as_tab and as_list["level"] == "pair"
    premise, hypothesis = as_list["sides"]
    assert (premise["name"], hypothesis["name"]) == ("premise", "hypothesis")
    assert premise["tokens"] == PAIR[0].split() and hypothesis["tokens"] == PAIR[1].split()
    for side in as_list["sides"]:
        assert_layers(side, 1, 1)
    assert set(as_list["prediction"]["probs"]) == {"entailment", "neutral", "contradiction"}
    assert sum(as_list["prediction"]["probs"].values()) == pytest.approx(1.0, abs=1e-3)


def test_tagging_view_tags_and_marginals_line_up(serve_app, serve_ids):
    from cn3.sentence.inference import examples_dataset, predict_with_probabilities, text_examples

    model = loaded(serve_app, serve_ids["conll2003"])
    for pretokenized, tokens in ((False, ["1", ".", "Obama", "visited", "Paris", "."]),
                                 (True, ["1.", "Obama", "visited", "Paris", "."])):
        answer = view(serve_app, serve_ids["conll2003"], "1. Obama visited Paris .", pretokenized=pretokenized)
        assert answer["level"] == "tagging" and answer["sides"][0]["tokens"] == tokens
        tags, marginals = answer["prediction"]["tags"], answer["prediction"]["marginals"]
        assert len(tags) == len(marginals) == len(tokens)
        for m in marginals:
            assert list(m) == model.vocabs["labels"].itos and sum(m.values()) == pytest.approx(1.0, abs=1e-3)
        examples = text_examples(["1. Obama visited Paris ."], model.manifest, pretokenized=pretokenized)
        dataset = examples_dataset(examples, model.vocabs, model.manifest, with_labels=False).dataset
        (pred,), _ = predict_with_probabilities(model.model, dataset, CPU)
        assert tags == [model.vocabs["labels"].itos[t] for t in pred]
        assert_layers(answer["sides"][0], 1, 1)


def test_hostile_text_comes_back_as_tokens(serve_app, serve_ids):
    text = "<script>alert(1)</script> \"quoted\" 'single' שלום עולם & done"
    answer = view(serve_app, serve_ids["trec"], text, pretokenized=True)
    assert answer["sides"][0]["tokens"] == text.split()


# ---- /api/view: translation ---------------------------------------------------------------------


def test_translation_view(serve_app, serve_ids):
    from cn3.nmt.search import translate_lines

    source = "Two dogs run on the grass ."
    answer = view(serve_app, serve_ids["multi30k"], source)
    run = loaded(serve_app, serve_ids["multi30k"])
    (expected,) = translate_lines(run.model, run.tokenizer, [source], beam=1, device=CPU)
    assert answer["level"] is None and answer["prediction"] == {"translation": expected}
    t = answer["translation"]
    pieces = [run.tokenizer.src.id_to_piece(i) for i in run.tokenizer.encode_src([source])[0]]
    assert t["source_tokens"] == [*pieces, "</s>"] and t["target_tokens"][-1] == "</s>"
    assert len(t["source_attention"]) == run.config.model.decoder_layers
    for layer in t["source_attention"]:
        weights = np.asarray(layer)
        assert weights.shape == (len(t["target_tokens"]), len(t["source_tokens"]))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-3)
    assert len(t["local_gate"]) == len(t["source_tokens"]) and all(0 <= g <= 1 for g in t["local_gate"])
    (side,) = answer["sides"]
    assert side["name"] == "source" and side["tokens"] == t["source_tokens"]
    assert_layers(side, 2)
    assert side["layers"][0]["gate"] == pytest.approx(t["local_gate"], abs=1e-4)  # one gated layer: the same gate


# ---- errors -------------------------------------------------------------------------------------


def test_caps(serve_app, serve_ids):
    """One word cap, stated alike however far over it a text is."""
    for words in (121, 1000, 20_000):
        assert_error(post(serve_app, "/api/view", run=serve_ids["trec"], text=" ".join(["w"] * words)), 413,
                     f"the text has {words} words; this server takes at most 120 words per sentence")
    assert view(serve_app, serve_ids["trec"], " ".join(["word"] * 120))["sides"][0]["tokens"] == ["word"] * 120
    assert_error(post(serve_app, "/api/view", run=serve_ids["multi30k"], text=" ".join(["a"] * 121)), 413)
    body = json.dumps({"run": serve_ids["trec"], "text": "x " * 40_000}).encode()
    assert_error(serve_app.handle("POST", "/api/view", {}, body), 413, "64 KB")


@pytest.mark.parametrize(("body", "fragment"), [
    (b"", "no body"), (b"[1, 2]", "JSON object"), (b"{not json", "not valid"), (b"\xff\xfe", "not valid"),
    (b'{"run": "r0"}', '"text"'), (b'{"run": "r0", "text": 5}', '"text" must be'),
    (b'{"run": "r0", "text": "a", "pretokenized": "yes"}', "pretokenized"), (b'{"run": "r0", "text": "   "}', "empty"),
    (b'{"run": "r2", "text": "only one sentence"}', "two sentences"), (b'{"run": "r0", "text": ["a", "b"]}', "one"),
    (b'{"run": "r0", "text": "a \\ud800 b"}', "lone surrogate (U+D800) at character 3"),
    (b'{"run": "r0", "text": "a \\udfff"}', "lone surrogate"),
    (b'{"run": "r0", "text": "bell \\u0007"}', "control character (U+0007) at character 6"),
    (b'{"run": "r0", "text": "nul \\u0000 x"}', "control character (U+0000)"),
    (b'{"run": "r0", "text": "del \\u007f"}', "control character (U+007F)"),
    (b'{"run": "r2", "text": ["ok", "a\\u001bb"]}', "sentence 2, character 2"),
    (b'{"run": "r0", "text": "a", "x": ' + b"[" * 9 + b"]" * 9 + b"}", "nested deeper than 8"),
    (b"[" * 60_000, "nested deeper than 8"),
    (b'{"a":' * 5_000 + b"1" + b"}" * 5_000, "nested deeper than 8"),
])
def test_bad_bodies_are_400(serve_app, body, fragment):
    assert_error(serve_app.handle("POST", "/api/view", {}, body), 400, fragment)


def test_unknown_runs_and_routes_are_404(serve_app):
    assert_error(post(serve_app, "/api/view", run="r9", text="hello"), 404, "unknown run", "r0")
    assert_error(post(serve_app, "/api/view", run=["r0"], text="hello"), 404, "unknown run")
    assert_error(serve_app.handle("GET", "/api/nothing", {}), 404, "not a route")
    assert_error(serve_app.handle("GET", "/api/view", {}), 404, "not a route")
    assert_error(serve_app.handle("GET", "/api/run", {"run": "../../etc"}), 404, "unknown run")
    assert_error(serve_app.handle("GET", "/api/grid", {}), 404, "no grid")


def test_a_model_busy_too_long_is_503(serve_app, serve_ids, monkeypatch):
    import cn3.serve.api as api

    monkeypatch.setattr(api, "BUSY_SECONDS", 0.05)
    run = serve_app.runs[serve_ids["trec"]]
    with run.lock:  # another request holds the model
        assert_error(post(serve_app, "/api/view", run=serve_ids["trec"], text="hello"), 503, "busy", "try again")
    assert view(serve_app, serve_ids["trec"], "hello")["run"] == serve_ids["trec"]


def test_a_failure_is_500_without_a_traceback(serve_app, monkeypatch, capsys):
    import cn3.serve.views as views

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals /home/user/path")

    monkeypatch.setattr(views, "sentence_view", broken)
    assert_error(post(serve_app, "/api/view", run="r0", text="hello"), 500, "RuntimeError")
    assert "secret" not in post(serve_app, "/api/view", run="r0", text="hello")[1]["error"]
    assert "Traceback" in capsys.readouterr().err  # the console has it


# ---- /api/compare ---------------------------------------------------------------------------------


def test_compare_two_runs(serve_app, serve_ids):
    a, b = serve_ids["trec"], serve_ids["trec_transformer"]
    status, answer = post(serve_app, "/api/compare", runs=[a, b], text=QUESTION)
    assert status == 200 and answer["difference_reason"] is None
    assert answer["views"] == [view(serve_app, a, QUESTION), view(serve_app, b, QUESTION)]
    assert [(d["side"], d["layer"]) for d in answer["difference"]] == [("sentence", 0), ("sentence", 1)]
    for d, la, lb in zip(answer["difference"], *(v["sides"][0]["layers"] for v in answer["views"])):
        expected = np.asarray(lb["heads"]).mean(0) - np.asarray(la["heads"]).mean(0)
        np.testing.assert_allclose(d["matrix"], expected, atol=1e-4)
        np.testing.assert_allclose(np.asarray(d["matrix"]).sum(-1), 0.0, atol=2e-3)
    status, answer = post(serve_app, "/api/compare", runs=[a, serve_ids["conll2003"]], text=QUESTION)
    depths = [len(v["sides"][0]["layers"]) for v in answer["views"]]
    assert status == 200 and depths[0] != depths[1], depths  # runs of different depths: the layers both have
    assert [d["layer"] for d in answer["difference"]] == list(range(min(depths)))
    plural = {1: "1 layer"}
    shared = "layer 1" if min(depths) == 1 else f"layers 1-{min(depths)}"
    assert answer["difference_reason"] == (
        f"{serve_app.runs[a].name} has {plural.get(depths[0], f'{depths[0]} layers')} and "
        f"{serve_app.runs[serve_ids['conll2003']].name} {plural.get(depths[1], f'{depths[1]} layers')}: "
        f"the difference covers {shared}, which both have")
    for d, la, lb in zip(answer["difference"], *(v["sides"][0]["layers"] for v in answer["views"])):
        expected = np.asarray(lb["heads"]).mean(0) - np.asarray(la["heads"]).mean(0)
        np.testing.assert_allclose(d["matrix"], expected, atol=1e-4)
    assert_error(post(serve_app, "/api/compare", runs=[a], text=QUESTION), 400, "two run ids")


# ---- /api/items, /api/run -------------------------------------------------------------------------


def test_items_where_two_runs_disagree(serve_app, serve_runs, serve_ids):
    from cn3.runs.records import load_predictions

    a, b = serve_ids["trec"], serve_ids["trec_transformer"]
    status, answer = serve_app.handle("GET", "/api/items", {"run": a, "other": b, "split": "dev", "limit": "5"})
    assert status == 200 and 0 < len(answer["items"]) <= 5
    mine, theirs = (load_predictions(serve_runs[n], "dev") for n in ("trec", "trec_transformer"))
    disagree = [i for i in range(len(mine.gold)) if mine.pred[i] != theirs.pred[i]]
    assert [item["index"] for item in answer["items"]] == disagree[:5]
    for item in answer["items"]:
        i = item["index"]
        assert (item["gold"], item["pred"], item["other_pred"]) == (mine.gold[i], mine.pred[i], theirs.pred[i])
        assert isinstance(item["text"], str) and item["tokens_pretokenized"] is True


def test_items_with_the_highest_hub_share(serve_app, serve_ids):
    """The item list's hub share is the one the view shows for the item's text (last layer, heads averaged)."""
    run = serve_ids["trec"]
    status, answer = serve_app.handle("GET", "/api/items", {"run": run, "order": "hub", "split": "test",
                                                            "limit": "3"})
    assert status == 200 and len(answer["items"]) == 3
    shares = [item["hub_share"] for item in answer["items"]]
    assert shares == sorted(shares, reverse=True) and all(0 < s <= 1 for s in shares)
    for item in answer["items"]:
        layers = view(serve_app, run, item["text"], pretokenized=True)["sides"][0]["layers"]
        assert layers[-1]["hub_share"] == pytest.approx(item["hub_share"], abs=1e-4)
    pair = serve_app.handle("GET", "/api/items", {"run": serve_ids["sick"], "order": "hub", "limit": "2"})[1]
    assert all(isinstance(item["text"], list) and len(item["text"]) == 2 for item in pair["items"])


def test_items_ordered_by_a_statistic_and_filtered_to_errors(serve_app, serve_ids):
    run = serve_ids["trec"]
    everything = serve_app.handle("GET", "/api/items", {"run": run, "order": "file", "limit": "500"})[1]["items"]
    assert [item["index"] for item in everything] == list(range(len(everything)))
    for order, highest in (("entropy", True), ("sharp", False)):
        items = serve_app.handle("GET", "/api/items", {"run": run, "order": order, "limit": "50"})[1]["items"]
        values = [item["row_entropy"] for item in items]
        assert values == sorted(values, reverse=highest) and len(set(values)) > 5  # a statistic that varies
    for item in everything[:3]:
        layers = view(serve_app, run, item["text"], pretokenized=True)["sides"][0]["layers"]
        assert layers[-1]["row_entropy"] == pytest.approx(item["row_entropy"], abs=1e-4)
    longest = serve_app.handle("GET", "/api/items", {"run": run, "order": "length", "limit": "5"})[1]["items"]
    lengths = [len(item["text"].split()) for item in longest]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == max(len(i["text"].split()) for i in everything)
    errors = serve_app.handle("GET", "/api/items", {"run": run, "order": "file", "errors": "1", "limit": "500"})[1]
    wrong = [item["index"] for item in everything if item["pred"] != item["gold"]]
    assert [item["index"] for item in errors["items"]] == wrong[:500] and wrong
    assert all(not item["correct"] for item in errors["items"])


def test_items_errors(serve_app, serve_ids):
    run = serve_ids["trec"]
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "order": "disagree"}), 400, "other")
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "split": "train"}), 400, "dev or test")
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "limit": "many"}), 400, "whole number")
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "order": "random"}), 400, "entropy")
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "errors": "yes"}), 400, "errors must be")
    assert_error(serve_app.handle("GET", "/api/items", {"run": run, "other": serve_ids["sick"]}), 404, "different")
    assert_error(serve_app.handle("GET", "/api/items", {"run": serve_ids["multi30k"]}), 404, "sentence runs")


def test_run_page(serve_app, serve_runs, serve_ids):
    import yaml

    from cn3.runs.records import read_results

    status, answer = serve_app.handle("GET", "/api/run", {"run": serve_ids["trec"]})
    assert status == 200 and answer["name"] == serve_runs["trec"].name
    assert answer["config"] == yaml.safe_load((serve_runs["trec"] / "config.yaml").read_text())
    assert answer["results"] == read_results(serve_runs["trec"])
    records = [json.loads(line) for line in (serve_runs["trec"] / "metrics.jsonl").read_text().splitlines()]
    assert {(c["step"], c["split"], c["metric"], c["value"]) for c in answer["curves"]} >= {
        (r["step"], "train", "loss", r["train_loss"]) for r in records} | {
        (r["step"], "dev", "accuracy", r["dev"]) for r in records}
    nmt = serve_app.handle("GET", "/api/run", {"run": serve_ids["multi30k"]})[1]
    assert {(c["split"], c["metric"]) for c in nmt["curves"]} >= {("dev", "bleu"), ("train", "loss")}


# ---- a grid -----------------------------------------------------------------------------------


def test_a_grid_directory_serves_its_finished_runs_and_report(serve_runs, tmp_path):
    from cn3.serve.api import ServeApp
    from cn3.serve.runs import expand, load_served

    grid = tmp_path / "my-grid"
    (grid / "trec" / "cn3").mkdir(parents=True)
    (grid / "trec" / "cn3" / "seed1").symlink_to(serve_runs["trec"])
    (grid / "sick-seed1").symlink_to(serve_runs["sick"])
    (grid / "unfinished").mkdir()
    (grid / "unfinished" / "config.yaml").write_text("data: {task: trec}\n")
    (grid / "report").mkdir()
    (grid / "report" / "report.md").write_text("| task | cn3 |\n|---|---|\n| trec | 19.0 |\n")
    (grid / "report" / "report.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "secret.png").write_bytes(b"not served")
    paths, report = expand([grid])
    assert paths == [grid / "sick-seed1", grid / "trec" / "cn3" / "seed1"]
    app = ServeApp([load_served(p, f"r{i}", CPU) for i, p in enumerate(paths)], grid=report)
    runs = app.handle("GET", "/api/runs", {})[1]
    assert runs["grid"] == {"name": "my-grid"} and [r["name"] for r in runs["runs"]] == ["sick-seed1", "seed1"]
    status, answer = app.handle("GET", "/api/grid", {})
    assert status == 200 and answer == {"name": "my-grid", "markdown": (grid / "report" / "report.md").read_text(),
                                        "images": ["report.png"]}
    assert app.grid_image("report.png") == b"\x89PNG\r\n\x1a\n"
    for name in ("../secret.png", "../../secret.png", str(tmp_path / "secret.png"), "report.md"):
        with pytest.raises(Exception, match="no such image"):
            app.grid_image(name)


def test_runs_are_named_by_the_shortest_path_tail_no_other_run_shares(tmp_path):
    """A grid's cells are all ``seed1``: the page must still tell them apart (and messages name them so)."""
    from cn3.serve.runs import ServedRun, name_runs

    def run(*parts):
        return ServedRun("r", tmp_path.joinpath(*parts), "sentence", model=None, device=CPU)

    runs = [run("g", "trec", "tree", "seed1"), run("g", "trec", "parse", "seed1"), run("g", "sick", "parse", "seed1"),
            run("other-run"), run("g", "trec", "tree", "seed2")]
    name_runs(runs)
    assert [r.name for r in runs] == ["tree/seed1", "trec/parse/seed1", "sick/parse/seed1", "other-run", "seed2"]
    alone = [run("x", "seed1")]
    name_runs(alone)
    assert alone[0].name == "seed1"
