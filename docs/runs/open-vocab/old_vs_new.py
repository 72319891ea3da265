"""Paired test: cn3 0.3 runs (train-only vocabulary + open lookup) against the cn3 0.2 zoo runs
(transductive vocabulary), CN3 on TREC and SICK test, seeds matched and pooled.

    cd <dir holding runs/ov and runs/zoo> && CN3_DATA=../shared/data python docs/runs/open-vocab/old_vs_new.py
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
FILES = {"trec": f"{DATA}/trec/TREC_10.label", "sick": "sick_test.txt"}
lines = open(f"{DATA}/sick/SICK.txt", encoding="utf-8").read().splitlines()  # SICK's TEST rows, as a file
open("sick_test.txt", "w", encoding="utf-8").write("\n".join([lines[0]] + [x for x in lines[1:] if x.endswith("\tTEST")]) + "\n")
out = {}
for task in ("trec", "sick"):
    gold, new, old = [], [], []
    for seed in (1, 2, 3):
        preds = {}
        for kind, run in (("new", f"runs/ov/{task}-cn3-seed{seed}"), ("old", f"runs/zoo/{task}-cn3-seed{seed}")):
            loaded = load_model(RunDir(run), torch.device("cpu"))
            vectors, _ = run_vectors(loaded.manifest)
            ds = examples_dataset(read_task_file(loaded.manifest, FILES[task]), loaded.vocabs, loaded.manifest, True, vectors).dataset
            p, _ = predict(loaded.model, ds, torch.device("cpu"))
            labels = loaded.vocabs["labels"].itos
            preds[kind] = [labels[i] for i in p]
            g = [labels[int(y)] for y in ds.t["y"]]
        gold += g; new += preds["new"]; old += preds["old"]
    r = paired_test(gold, new, old, "accuracy", resamples=10000)
    out[task] = {"new_0.3": r.score_a, "old_0.2": r.score_b, "difference": r.difference, "ci95": [r.ci_low, r.ci_high], "p": r.p_value, "method": r.method, "items": r.n_items}
    print(task, r.sentence("test"))
json.dump(out, open("old_vs_new_significance.json", "w"), indent=1)
