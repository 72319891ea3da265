"""Statistics of attention graphs (``cn3.analysis``) on hand-made matrices, and ``cn3 analyze graphs``
on tiny real runs (TREC questions parsed by spaCy)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.main import app
from cn3.analysis.graphs import (
    GraphStatistics,
    argmax_distance,
    attended_distance,
    hub,
    is_static,
    query_dependence,
    relation_arcs,
    row_entropy,
    sentence_statistics,
    tree_agreement,
    tree_neighbours,
    visible_keys,
)

# slow: trains the runs it analyses (`pytest -m "not slow"` is the quick loop)
pytestmark = pytest.mark.slow

runner = CliRunner()


def one_hot(columns: list[int], n: int | None = None) -> np.ndarray:
    """Row ``i`` all on word ``columns[i]``."""
    A = np.zeros((len(columns), n or len(columns)))
    A[np.arange(len(columns)), columns] = 1.0
    return A


#: "What is the capital of Peru": What <-attr- is (root), the <-det- capital <-nsubj- is,
#: of <-prep- capital, Peru <-pobj- of. 0-based heads, -1 root; one relation id per word.
HEADS = np.array([1, -1, 3, 1, 3, 4])
DEPRELS = np.array([0, 1, 2, 3, 4, 5])  # attr, ROOT, det, nsubj, prep, pobj
RELATIONS = ["attr", "ROOT", "det", "nsubj", "prep", "pobj"]
#: every word reads its head; the root reads its dependent "capital"
TREE = one_hot([1, 3, 3, 1, 3, 4])


# ---- one sentence -----------------------------------------------------------------------------


def test_star():
    star = one_hot([2] * 5)
    assert hub(star) == (2, 1.0)
    assert row_entropy(star).tolist() == [0.0] * 5
    assert query_dependence(star) == 0.0
    assert is_static(star)
    assert attended_distance(star).tolist() == [2.0, 1.0, 0.0, 1.0, 2.0]
    assert argmax_distance(star).tolist() == [2, 1, 0, 1, 2]


def test_previous_word_chain():
    # self-attention masked to the previous word; the first word reads the next one
    chain = one_hot([1, 0, 1, 2, 3])
    assert hub(chain) == (1, pytest.approx(2 / 5))  # word 1 is chosen by rows 0 and 2
    assert attended_distance(chain).tolist() == [1.0] * 5
    assert argmax_distance(chain).tolist() == [1] * 5
    # one-hot rows on different words diverge by 1 bit; rows 0 and 2 are equal: 9 of 10 pairs
    assert query_dependence(chain) == pytest.approx(0.9)
    assert not is_static(chain)


def test_uniform_rows():
    uniform = np.full((4, 4), 0.25)
    assert row_entropy(uniform) == pytest.approx([1.0] * 4)
    assert query_dependence(uniform) == pytest.approx(0.0, abs=1e-12)
    assert is_static(uniform)  # equal weights rank by position in every row
    assert hub(uniform) == (0, 1.0)  # ties go to the first word: read hub share with entropy


def test_tree_agreement_against_chance_and_adjacent():
    assert [sorted(s) for s in tree_neighbours(HEADS)] == [[1], [0, 3], [3], [1, 2, 4], [3, 5], [4]]
    tree = tree_agreement(TREE, HEADS)
    assert tree.rows == 6 and tree.agreement == 1.0
    # chance: mean_i deg(i) / (n - 1) = (1 + 2 + 1 + 3 + 2 + 1) / 6 / 5
    assert tree.chance == pytest.approx(10 / 30)
    # adjacent: What {is}: 1; is {What, the}: 1/2; the {is, capital}: 1/2; capital {the, of}: 1;
    # of {capital, Peru}: 1; Peru {of}: 1
    assert tree.adjacent == pytest.approx(5 / 6)
    star = tree_agreement(one_hot([3] * 6), HEADS)  # "capital" reads itself: a miss
    assert star.agreement == pytest.approx(3 / 6)  # the, is (via nsubj), of


def test_relation_counts_on_a_small_tree():
    arcs = relation_arcs(TREE, HEADS, DEPRELS)
    assert sorted(arcs) == [0, 2, 3, 4, 5]  # the root has no incoming arc
    assert all(c.arcs == 1 and c.to_head == 1 for c in arcs.values())  # every dependent reads its head
    assert [rel for rel, c in arcs.items() if c.from_head] == [3]  # only "is" reads its dependent "capital"
    assert all(c.to_head_chance == pytest.approx(1 / 5) for c in arcs.values())
    stats = GraphStatistics()
    stats.add(0, sentence_statistics(TREE, heads=HEADS, deprels=DEPRELS))
    table = stats.summary(RELATIONS)[0]["relations"]
    assert table["nsubj"] == {"arcs": 1, "to_head": 1.0, "to_head_chance": pytest.approx(0.2), "from_head": 1.0,
                              "from_head_chance": pytest.approx(0.2), "followed_share": pytest.approx(2 / 6)}
    assert table["det"]["followed_share"] == pytest.approx(1 / 6) and "ROOT" not in table


def test_masks_count_only_the_visible_words():
    assert visible_keys(3, window=1).astype(int).tolist() == [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
    causal = visible_keys(4, causal=True)
    previous = one_hot([0, 0, 1, 2], 4)
    previous[0] = 0.0  # the LSTMN's first word reads nothing
    s = sentence_statistics(previous, heads=np.array([1, -1, 1, 2]), deprels=np.zeros(4, int), keys=causal)
    assert s.rows == 3 and s.values["hub_share"] == pytest.approx(1 / 3)
    assert s.values["entropy"] == 0.0  # row 1 sees one word: no entropy; rows 2, 3 are one-hot
    assert "query_dependence" not in s.values and "static_share" not in s.values
    # chance over the earlier words: row 1 {0}: 1; row 2 {0, 1}: 1/2; row 3 {0, 1, 2}: 1/3
    assert s.values["tree_chance"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    band = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.5, 0.5]])
    assert row_entropy(band, visible_keys(3, window=1)) == pytest.approx([1.0, 1.0, 1.0])


def test_annotation_rows_get_hub_share_and_entropy_only():
    hops = one_hot([2, 2, 0], 4)  # r = 3 hops over 4 words
    s = sentence_statistics(hops, rows_are_words=False, heads=HEADS[:4], deprels=DEPRELS[:4])
    assert s.values == {"hub_share": pytest.approx(2 / 3), "entropy": 0.0}


def test_aggregate_means_over_sentences():
    stats = GraphStatistics()
    for A in (one_hot([2] * 5), one_hot([1, 0, 1, 2, 3]), np.ones((1, 1))):
        stats.add(0, sentence_statistics(A))
    layer = stats.summary()[0]
    assert (layer["layer"], layer["sentences"], layer["rows"], layer["skipped"]) == (1, 2, 10, 1)
    assert layer["stats"]["hub_share"] == {"mean": pytest.approx(0.7), "sentences": 2}
    assert layer["stats"]["static_share"]["mean"] == 0.5
    assert layer["stats"]["mean_distance"]["mean"] == pytest.approx((1.2 + 1.0) / 2)
    assert layer["argmax_distance"] == [1, 7, 2]  # rows per distance, over both sentences
    assert layer["hub_share_histogram"] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert "tree_agreement" not in layer["stats"] and "relations" not in layer


def test_local_windows_read_from_the_modules():
    from torch import nn

    from cn3.analysis import local_windows
    from cn3.encoders.san import SelfAttentionEncoder

    enc = SelfAttentionEncoder(8, 8, layers=3, heads=2, ff=16, window_layers=2, window=1, mode="local")
    assert local_windows(nn.ModuleDict({"encoder": enc})) == [1, 1, None]
    hybrid = SelfAttentionEncoder(8, 8, layers=2, heads=2, ff=16, window_layers=2, window=1, mode="hybrid")
    assert local_windows(hybrid) == [None, None]  # gated with global weights: every word is visible


def test_visualize_states_the_hub_share():
    from cn3.visualize.edges import SideEdges, hub_line

    side = SideEdges("sentence", ["What", "is", "it", "?"], [one_hot([0, 0, 0, 0])], [np.zeros(4)])
    line = hub_line(side, 0)
    assert "100% of rows point at 'What'" in line and "a star, not a tree" in line and "entropy 0.00" in line


# ---- cn3 analyze graphs -------------------------------------------------------------------------

TINY = ["train.max_steps=10", "train.batch_size=16", "data.limit=150", "data.embeddings=null", "model.hidden=16",
        "model.energy_dim=8", "model.mlp_hidden=16", "model.word_dim=16", "model.char=none", "model.pos_dim=0",
        "model.spell_dim=0", "model.heads=2", "model.ff=32"]


def _small_trec(data_root: Path, out: Path) -> Path:
    """A data root holding every 20th training and every 8th test question of TREC (spaCy parses
    a few hundred questions in a second)."""
    (out / "trec").mkdir(parents=True)
    for name, step in (("train_5500.label", 20), ("TREC_10.label", 8)):
        lines = (data_root / "trec" / name).read_bytes().splitlines(keepends=True)
        (out / "trec" / name).write_bytes(b"".join(lines[::step]))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_root, one_thread):
    """Tiny runs: CN3 (one and two energy heads), selfatt1 and NBoW on spaCy-parsed questions, local
    attention on unparsed ones."""
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config
    from data_prep.prepare import PrepareSettings, prepare

    tmp = tmp_path_factory.mktemp("analyze")
    small = _small_trec(data_root, tmp / "data")
    parsed = prepare(PrepareSettings(task="trec", data=small, out=tmp / "spacy", annotator="spacy", workers=1)).out
    plain = prepare(PrepareSettings(task="trec", data=small, out=tmp / "none", annotator="none")).out
    out = {}
    local = ["model.encoder=local", "model.graph_layers=2", "model.hybrid.layers=1"]  # layer 1 local, layer 2 global
    for name, prepared, extra in (("cn3", parsed, []), ("selfatt1", parsed, ["model.encoder=selfatt1"]),
                                  ("nbow", parsed, ["model.encoder=nbow"]), ("local", plain, local),
                                  ("heads", parsed, ["model.energy_heads=2"])):
        cfg = resolve_config("trec", None, {"data.prepared": prepared}, [*TINY, *extra])
        train(cfg, tmp / name, device_name="cpu")
        out[name] = tmp / name
    return out


def analyze(*args):
    return runner.invoke(app, ["analyze", "graphs", *[str(a) for a in args], "--device", "cpu"])


def test_cn3_run_table_json_and_png(runs, tmp_path):
    import torch

    from cn3.runs.layout import RunDir
    from cn3.sentence.inference import load_model, predict
    from data_prep.dataset import load_prepared

    result = analyze(runs["cn3"], "--out", tmp_path)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "hub share" in out and "layer 1" in out and "tree neighbour" in out and "dependency trees: spacy" in out
    assert "arcs followed, per relation" in out and "det" in out
    record = json.loads((tmp_path / "graphs.json").read_text())
    assert (record["encoder"], record["split"], record["kind"]) == ("cn3", "dev", "graph")
    assert record["attention_layers"] == 1
    layer = record["layers"][0]
    assert layer["sentences"] + layer["skipped"] == record["items"]
    assert set(layer["stats"]) == {"hub_share", "entropy", "query_dependence", "static_share", "mean_distance",
                                   "tree_agreement", "tree_chance", "tree_adjacent", "head_agreement", "head_chance",
                                   "tree_attachment"}
    assert sum(layer["argmax_distance"]) == layer["rows"] and layer["relations"]
    assert (tmp_path / "graphs.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # the same hub shares read straight from `predict`'s attention, item by item
    loaded = load_model(RunDir(runs["cn3"]), torch.device("cpu"))
    dev = load_prepared(loaded.config.data.prepared).splits["dev"]
    shares = []
    for items, info in predict(loaded.model, dev, torch.device("cpu"), keep_info=True)[1]:
        for row, i in enumerate(items):
            n = len(dev.record(i)["tokens"][0])  # the item's one sentence
            if n > 1:
                shares.append(hub(info["a"]["alphas"][0][row, :n, :n].double().numpy())[1])
    assert layer["stats"]["hub_share"]["mean"] == pytest.approx(np.mean(shares))


def test_limit_and_layer(runs, tmp_path):
    result = analyze(runs["cn3"], "--split", "test", "--limit", "20", "--layer", "1", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "graphs.json").read_text())
    assert record["items"] == 20 and record["split"] == "test" and len(record["layers"]) == 1
    result = analyze(runs["cn3"], "--layer", "2")
    assert result.exit_code == 1 and "--layer 2 is out of range" in result.output
    assert "1 attention layer" in result.output


def test_local_attention_without_trees(runs):
    result = analyze(runs["local"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # rich wraps long notes
    assert "averaged over its 2 attention heads" in out
    assert "layer 1 attends only within |i - k| <= 1" in out
    assert "dependency trees: none" in out and "no tree statistics" in out and "--annotator spacy" in out
    assert "tree neighbour" not in out and "per relation" not in out
    assert "layer 2" in out


def test_selfatt1_reports_hops_only(runs, tmp_path):
    result = analyze(runs["selfatt1"], "--out", tmp_path)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "annotation hops, not words" in out and "query dependence" not in out and "tree neighbour" not in out
    layer = json.loads((tmp_path / "graphs.json").read_text())["layers"][0]
    assert set(layer["stats"]) == {"hub_share", "entropy"} and "argmax_distance" not in layer
    assert (tmp_path / "graphs.png").is_file()


def test_encoder_without_attention_weights(runs):
    result = analyze(runs["nbow"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    out = " ".join(result.output.split())
    assert ("'nbow', which returns no attention weights" in out
            and "selfatt1, selfatt2, transformer, cn3, hybrid, local, onlstm_san, lstm_san" in out)


def test_analyze_energy_trained_and_at_init(runs, tmp_path):
    result = runner.invoke(app, ["analyze", "energy", str(runs["cn3"]), "--split", "test", "--limit", "20",
                                 "--out", str(tmp_path), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "query share" in result.output and "trained" in result.output and "init" in result.output
    record = json.loads((tmp_path / "energy.json").read_text())
    assert record["items"] == 20 and len(record["trained"]) == len(record["init"]) == 1
    trained, init = record["trained"][0]["stats"], record["init"][0]["stats"]
    assert 0 <= trained["query_share"] <= 1 and trained["linear_share"] + trained["saturated_share"] <= 1
    assert init["energy_spread"] != trained["energy_spread"]  # the re-initialised encoder is another model
    result = runner.invoke(app, ["analyze", "energy", str(runs["local"]), "--device", "cpu"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no CN3 graph layers" in " ".join(result.output.split())


def test_per_head_statistics(runs, tmp_path):
    result = analyze(runs["heads"], "--heads", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert "layer 1 head 1" in result.output and "layer 1 head 2" in result.output
    layers = json.loads((tmp_path / "graphs.json").read_text())["layers"]
    assert [(e["layer"], e.get("head")) for e in layers] == [(1, None), (1, 1), (1, 2)]
    assert all(e["sentences"] == layers[0]["sentences"] for e in layers)
    # the layer's weights are the heads' mean: its mean entropy is at least the heads' mean entropy (concavity)
    assert layers[0]["stats"]["entropy"]["mean"] >= min(e["stats"]["entropy"]["mean"] for e in layers[1:]) - 1e-9
    result = analyze(runs["cn3"], "--heads")
    assert result.exit_code == 1 and "model.energy_heads > 1" in " ".join(result.output.split())


def test_heads_follow_their_layer_in_the_summary():
    stats = GraphStatistics()
    star = sentence_statistics(one_hot([0, 0, 0]))
    for layer, head in ((1, 1), (0, None), (1, None), (0, 1), (0, 0)):
        stats.add(layer, star, head=head)
    assert [(e["layer"], e.get("head")) for e in stats.summary()] == [(1, None), (1, 1), (1, 2), (2, None), (2, 2)]


def test_head_agreement_and_the_best_trees_attachment_by_hand():
    from cn3.analysis.graphs import head_agreement

    heads = np.array([1, -1, 1, 2])  # 0 <- 1 (root) -> 2 -> 3
    A = np.array([[0.1, 0.8, 0.1, 0.0],  # word 0 reads its head 1
                  [0.1, 0.7, 0.1, 0.1],  # the root reads itself
                  [0.6, 0.3, 0.1, 0.0],  # word 2 reads 0, not its head 1
                  [0.0, 0.0, 0.9, 0.1]])  # word 3 reads its head 2
    out = head_agreement(A, heads)
    assert out["head_agreement"] == 0.75 and out["head_chance"] == 0.25
    assert out["tree_attachment"] == 0.75  # the best tree takes 0 as word 2's head (weight 0.6 > 0.3)
    star = np.zeros((4, 4))
    star[:, 0] = 1.0
    assert head_agreement(star, heads)["tree_attachment"] == 0.0  # the star's tree: root 0, all on it


def test_best_tree_is_the_heaviest_single_root_tree_by_brute_force():
    import itertools

    from cn3.analysis.trees import best_tree

    rng = np.random.default_rng(0)
    for n in range(1, 6):
        A = rng.random((n, n))
        trees = []
        for heads in itertools.product(range(n), repeat=n):
            roots = [i for i in range(n) if heads[i] == i]
            walks = []
            for i in range(n):
                seen, j = set(), i
                while heads[j] != j and j not in seen:
                    seen.add(j)
                    j = heads[j]
                walks.append(heads[j] == j)
            if len(roots) == 1 and all(walks):
                trees.append((sum(A[i, heads[i]] for i in range(n)), [-1 if heads[i] == i else heads[i]
                                                                      for i in range(n)]))
        assert list(best_tree(A)) == max(trees)[1]
