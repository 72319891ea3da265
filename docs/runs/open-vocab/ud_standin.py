"""UD-EWT dev: what spaCy's trees cost a run trained on gold trees; paired tests on per-token predictions.

    cd <dir with runs/ov> && CN3_DATA=../shared/data python docs/runs/open-vocab/ud_standin.py
"""
import json
import os

import torch

from cn3.sentence.inference import examples_dataset, read_task_file, run_vectors
from cn3.runs.layout import RunDir
from cn3.stats import paired_test
from cn3.sentence.inference import load_model, predict

torch.set_num_threads(1)
DEV = os.path.join(os.environ.get("CN3_DATA", "../shared/data"), "ud_english_ewt", "en_ewt-ud-dev.conllu")


def tags(run: str, annotator: str | None):
    loaded = load_model(RunDir(run), torch.device("cpu"))
    vectors, _ = run_vectors(loaded.manifest)
    ds = examples_dataset(read_task_file(loaded.manifest, DEV), loaded.vocabs, loaded.manifest, True, vectors,
                          annotator=annotator).dataset
    preds, _ = predict(loaded.model, ds, torch.device("cpu"))
    labels = loaded.vocabs["labels"].itos
    gold = [[labels[t] for t in ds[i].y.tolist()] for i in range(len(ds))]
    return gold, [[labels[t] for t in p] for p in preds]


gold, dep_gold = tags("runs/ov/ud_pos-cn3dep-seed1", None)
_, dep_spacy = tags("runs/ov/ud_pos-cn3dep-seed1", "spacy")
_, plain = tags("runs/ov/ud_pos-cn3-seed1", None)
out = {}
for name, a, b in (("dep_gold_vs_dep_spacy", dep_gold, dep_spacy), ("dep_gold_vs_plain", dep_gold, plain),
                   ("dep_spacy_vs_plain", dep_spacy, plain)):
    r = paired_test(gold, a, b, "token_accuracy", resamples=10_000)
    out[name] = {"a": r.score_a, "b": r.score_b, "difference": r.difference, "ci95": [r.ci_low, r.ci_high],
                 "p": r.p_value, "method": r.method, "items": r.n_items}
    print(name, r.sentence("dev"))
json.dump(out, open("ud_standin_significance.json", "w"), indent=1)
