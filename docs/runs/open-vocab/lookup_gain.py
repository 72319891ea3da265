"""What the open-vocabulary lookup buys: each run scores its held-out file with the pretrained vectors
of the words outside its vocabulary (the default) and without them (`--no-vectors`: <unk>), the same
model on the same items; paired approximate randomization per item (sentence).

    cd <dir holding runs/ov> && CN3_DATA=../shared/data python docs/runs/open-vocab/lookup_gain.py
"""
import json
import os

import torch

from cn3.sentence.inference import examples_dataset, read_task_file, run_vectors
from cn3.runs.layout import RunDir
from cn3.stats import paired_test
from cn3.sentence.inference import load_model, predict

torch.set_num_threads(1)
DATA = os.environ.get("CN3_DATA", "../shared/data")
CASES = [("trec", "runs/ov/trec-cn3-seed1", "trec/TREC_10.label"),
         ("conll2000", "runs/ov/conll2000-cn3-seed1", "conll2000/test.txt.gz"),
         ("conll2003", "runs/ov/conll2003-cn3-seed1", "conll2003/eng.testa"),
         ("ud_pos", "runs/ov/ud_pos-cn3-seed1", "ud_english_ewt/en_ewt-ud-test.conllu")]


def labelled(run: str, path: str, use_vectors: bool):
    loaded = load_model(RunDir(run), torch.device("cpu"))
    vectors, _ = run_vectors(loaded.manifest, use=use_vectors)
    ds = examples_dataset(read_task_file(loaded.manifest, path), loaded.vocabs, loaded.manifest, True, vectors).dataset
    preds, _ = predict(loaded.model, ds, torch.device("cpu"))
    labels = loaded.vocabs["labels"].itos
    if loaded.manifest["level"] == "node":
        gold = [[labels[t] for t in ds[i].y.tolist()] for i in range(len(ds))]
        return gold, [[labels[t] for t in p] for p in preds], loaded.manifest.get("tag_scheme")
    return [labels[int(y)] for y in ds.t["y"]], [labels[p] for p in preds], None


out = {}
for task, run, relative in CASES:
    gold, with_vectors, scheme = labelled(run, os.path.join(DATA, relative), True)
    _, without, _ = labelled(run, os.path.join(DATA, relative), False)
    metric = {"conll2000": "span_f1", "conll2003": "span_f1", "ud_pos": "token_accuracy"}.get(task, "accuracy")
    r = paired_test(gold, with_vectors, without, metric, tag_scheme=scheme, resamples=10_000)
    out[task] = {"file": relative, "with_vectors": r.score_a, "unk": r.score_b, "difference": r.difference,
                 "ci95": [r.ci_low, r.ci_high], "p": r.p_value, "items": r.n_items, "method": r.method}
    print(task, r.sentence(relative))
json.dump(out, open("lookup_gain_significance.json", "w"), indent=1)
