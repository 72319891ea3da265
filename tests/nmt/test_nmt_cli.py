"""``cn3 nmt train/translate/evaluate/gates`` on a tiny synthetic corpus, errors, exact resume."""

from __future__ import annotations

import json
import random

import pytest
import torch
from typer.testing import CliRunner

from cli.main import app
from cn3.kinds import train
from cn3.nmt.config import resolve_nmt_config
from cn3.nmt.data import absolutize

runner = CliRunner()

LEXICON = {"a": "ein", "the": "der", "red": "rot", "blue": "blau", "big": "gross", "small": "klein",
           "cat": "Katze", "dog": "Hund", "man": "Mann", "girl": "Mädchen", "runs": "rennt", "sits": "sitzt",
           "sleeps": "schläft", "on": "auf", "grass": "Gras", "street": "Strasse"}
TINY = ["model.d_model=32", "model.ff=64", "model.heads=2", "model.encoder_layers=2", "model.decoder_layers=1",
        "model.hybrid.layers=1", "model.rnn.chunk_size=4", "data.vocab_size=80", "data.valid_size=20",
        "train.max_tokens=400", "train.epochs=2", "train.warmup=20", "train.lr=0.003", "train.final_beam=2",
        "train.final_splits=[val]", "train.eval_batch_size=32"]


pytestmark = pytest.mark.usefixtures("one_thread")


def corpus(directory, name: str, n: int, seed: int):
    rng = random.Random(seed)
    words = list(LEXICON)
    src = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 7))) for _ in range(n)]
    tgt = [" ".join(LEXICON[w] for w in s.split()) for s in src]
    (directory / f"{name}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (directory / f"{name}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return directory / f"{name}.en", directory / f"{name}.de"


def invoke(*args, input=None):
    return runner.invoke(app, ["nmt", *[str(a) for a in args]], input=input)


def tiny_args(*extra):
    return [x for s in (*TINY, *extra) for x in ("--set", s)]


def assert_clean_error(result, *fragments):
    """Exit 1 and one error line, after any warnings of --set options the encoder ignores (TINY sets
    the hybrid and rnn sections for every encoder, as a script driving several might)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().split("\n")
    while lines[0].startswith("warning: --set ") and " changes nothing: " in lines[0]:
        lines.pop(0)
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output  # one line
    for fragment in fragments:
        assert fragment in lines[0], result.output


@pytest.fixture(scope="module")
def hybrid_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("nmt")
    src, tgt = corpus(root, "train", 300, seed=1)
    run = root / "run-hybrid"
    result = invoke("train", "--encoder", "hybrid", "--src", src, "--tgt", tgt, "--run-dir", run,
                    "--device", "cpu", *tiny_args())
    assert result.exit_code == 0, result.output
    return root, run


def test_train_writes_a_self_describing_run(hybrid_run):
    _, run = hybrid_run
    for name in ("config.yaml", "log.txt", "metrics.jsonl", "latest.pt", "best.pt", "results.json",
                 "spm.joint.model", "translations/val.beam2.txt"):
        assert (run / name).is_file(), name
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2] and all("dev_bleu" in m for m in metrics)
    results = json.loads((run / "results.json").read_text())
    assert results["encoder"] == "hybrid" and "tok:13a" in results["scores"]["val"]["signature"]
    ckpt = torch.load(run / "best.pt", weights_only=False)
    assert (ckpt["kind"] == "cn3-nmt" and set(ckpt["spm"]) == {"joint"}
            and ckpt["config"]["model"]["encoder"] == "hybrid")


def test_translate_reads_stdin_and_keeps_lines(hybrid_run):
    _, run = hybrid_run
    result = invoke("translate", run, "--beam", "2", "--device", "cpu", input="a red cat\n\nthe dog runs on grass\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    greedy = invoke("translate", run, "a red cat", "--beam", "1")
    assert greedy.exit_code == 0 and greedy.stdout.count("\n") == 1


def test_evaluate_prints_bleu_and_signature(hybrid_run):
    root, run = hybrid_run
    result = invoke("evaluate", run, "--split", "val", "--beam", "2", "--device", "cpu")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["sentences"] == 20
    assert "tok:13a" in record["signature"] and "sacreBLEU signature" in result.output
    src, tgt = corpus(root, "test", 15, seed=7)
    out = root / "hyps.txt"
    result = invoke("evaluate", run, "--src", src, "--tgt", tgt, "--beam", "1", "--output", out)
    assert result.exit_code == 0, result.output
    hyps = out.read_text().splitlines()
    assert len(hyps) == 15
    refs = [line.rstrip("\n") for line in open(tgt, encoding="utf-8")]
    import sacrebleu

    scored = json.loads(result.stdout.strip().splitlines()[-1])["bleu"]
    assert scored == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=0.01)  # the written hypotheses
    missing = invoke("evaluate", run, "--split", "test")
    assert_clean_error(missing, "no test files")


def test_gates_table_and_chart(hybrid_run, tmp_path):
    _, run = hybrid_run
    result = invoke("gates", run, "--split", "val", "--out", tmp_path, "--device", "cpu")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "gates.json").read_text())
    assert len(report["per_layer"]) == 1 and 0.0 <= report["per_layer"][0]["mean"] <= 1.0
    assert report["per_upos"] and {"NOUN", "DET"} & {r["upos"] for r in report["per_upos"]}
    # training recorded the same mean gate on val in results.json, for `cn3 experiment report`
    recorded = json.loads((run / "results.json").read_text())["gates"]
    assert recorded["split"] == "val" and recorded["words"] == report["per_layer"][0]["words"]
    assert recorded["per_layer"] == [pytest.approx(report["per_layer"][0]["mean"], abs=1e-4)] == [recorded["mean"]]
    assert (tmp_path / "gates.png").read_bytes()[:4] == b"\x89PNG"
    assert "layer" in result.output


def test_gates_needs_a_gated_encoder(tmp_path):
    src, tgt = corpus(tmp_path, "train", 60, seed=2)
    run = tmp_path / "run-t"
    result = invoke("train", "--encoder", "transformer", "--src", src, "--tgt", tgt, "--run-dir", run,
                    *tiny_args("train.max_steps=2", "train.final_splits=[]"))
    assert result.exit_code == 0, result.output
    assert_clean_error(invoke("gates", run), "has no gates", "transformer")


def test_clear_errors(tmp_path):
    src, tgt = corpus(tmp_path, "train", 10, seed=3)
    short = tmp_path / "short.de"
    short.write_text("\n".join(tgt.read_text().splitlines()[:7]) + "\n", encoding="utf-8")
    assert_clean_error(invoke("train", "--src", src, "--tgt", short, "--run-dir", tmp_path / "r1"),
                       "train.en, line 8", "short.de has 7", "line-aligned")
    empty = tmp_path / "empty.de"
    empty.write_text("")
    assert_clean_error(invoke("train", "--src", src, "--tgt", empty, "--run-dir", tmp_path / "r2"),
                       "empty.de", "empty file")
    assert_clean_error(invoke("train", "--src", src, "--tgt", tgt, "--set", "model.dmodel=64"),
                       "unknown key 'model.dmodel'", "did you mean 'model.d_model'")
    assert_clean_error(invoke("train", "--src", src, "--tgt", tgt, "--set", "train.final_splits=[test2018]"),
                       "unknown split 'test2018'")
    assert_clean_error(invoke("translate", tmp_path / "nope", "hello"), "run directory not found")
    (tmp_path / "empty-run").mkdir()
    assert_clean_error(invoke("evaluate", tmp_path / "empty-run"), "holds no checkpoint")


def test_resume_is_exact(tmp_path):
    """Stopping mid-epoch and resuming ends with the same weights as one uninterrupted run."""
    src, tgt = corpus(tmp_path, "train", 120, seed=4)
    flags = {"model.encoder": "onlstm", "data.corpus": "files", "data.train_src": src, "data.train_tgt": tgt}
    extra = ["train.final_splits=[]", "train.epochs=2"]

    def cfg(*more):
        c = resolve_nmt_config(None, flags, [*TINY, *extra, *more])
        absolutize(c)
        return c

    train(cfg(), tmp_path / "full", device_name="cpu")
    train(cfg("train.max_steps=3"), tmp_path / "split", device_name="cpu")
    assert torch.load(tmp_path / "split" / "latest.pt", weights_only=False)["state"]["batch_in_epoch"] == 3
    train(cfg(), tmp_path / "split", resume=True, device_name="cpu")
    a = torch.load(tmp_path / "full" / "latest.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "latest.pt", weights_only=False)
    assert a["state"]["step"] == b["state"]["step"]
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    bleu = lambda run: [json.loads(x)["dev_bleu"] for x in (run / "metrics.jsonl").read_text().splitlines()  # noqa: E731
                        if "stop" not in x]
    assert bleu(tmp_path / "full") == bleu(tmp_path / "split")
    with pytest.raises(Exception, match="cannot resume: model.d_model"):
        train(cfg("model.d_model=64"), tmp_path / "split", resume=True, device_name="cpu")


def test_cli_resume_uses_the_runs_own_config(tmp_path):
    src, tgt = corpus(tmp_path, "train", 60, seed=5)
    run = tmp_path / "run"
    first = invoke("train", "--encoder", "lstm", "--src", src, "--tgt", tgt, "--run-dir", run,
                   *tiny_args("train.max_steps=2", "train.final_splits=[]"))
    assert first.exit_code == 0, first.output
    again = invoke("train", "--run-dir", run, "--resume", "--set", "train.max_steps=4")  # no other flags needed
    assert again.exit_code == 0, again.output
    ckpt = torch.load(run / "latest.pt", weights_only=False)
    assert ckpt["state"]["step"] == 4 and ckpt["config"]["model"]["encoder"] == "lstm"
    done = invoke("train", "--run-dir", run, "--resume", "--set", "train.max_steps=4")  # nothing left: no step
    assert done.exit_code == 0 and torch.load(run / "latest.pt", weights_only=False)["state"]["step"] == 4
    assert_clean_error(invoke("train", "--run-dir", run, "--resume", "--set", "model.ff=128"),
                       "cannot resume: model.ff")
    assert_clean_error(invoke("train", "--src", src, "--tgt", tgt, "--run-dir", run, *tiny_args()),
                       "already holds a run")


def test_learning_rate_warms_up_then_decays():
    from cn3.nmt.task import learning_rate

    assert learning_rate(50, 1e-3, 100) == pytest.approx(5e-4)
    assert learning_rate(100, 1e-3, 100) == pytest.approx(1e-3)
    assert learning_rate(400, 1e-3, 100) == pytest.approx(5e-4)
    assert learning_rate(7, 1e-3, 0) == 1e-3


def test_a_family_option_the_encoder_does_not_read_is_warned_of_before_training(tmp_path):
    """Every encoder shares the model sections, so ``--set model.rnn.residual=true`` on a transformer is
    accepted, and changes nothing: the command says so first (here the missing corpus then stops it)."""
    result = invoke("train", "--encoder", "transformer", "--src", tmp_path / "none.en", "--tgt", tmp_path / "none.de",
                    "--run-dir", tmp_path / "run", "--set", "model.rnn.residual=true", "--set", "model.hybrid.window=2",
                    "--set", "model.heads=2")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert [w.split(" changes nothing")[0] for w in warnings] == ["warning: --set model.rnn.residual",
                                                                  "warning: --set model.hybrid.window"], result.output
    assert "the transformer encoder does not read it (the family options it reads: none;" in warnings[0]
    assert "none.en" in result.output.splitlines()[-1]
    reads = invoke("train", "--encoder", "onlstm_san", "--src", tmp_path / "none.en", "--tgt", tmp_path / "none.de",
                   "--run-dir", tmp_path / "run", "--set", "model.rnn.residual=true", "--set", "model.rnn.layers=1")
    assert reads.exit_code == 1 and "warning" not in reads.output, reads.output
