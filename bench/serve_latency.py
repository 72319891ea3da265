"""``cn3 serve``: the time of one ``/api/view`` of a 30-word and a 120-word sentence with every layer's
graph, on the CPU, once the model is loaded, alone and with 64 clients at once. Target: a 30-word
view under 150 ms.

    .venv/bin/python bench/serve_latency.py                      # trains a TREC run first (about a minute)
    .venv/bin/python bench/serve_latency.py --run runs/trec-cn3-seed1 --repeats 50

Without ``--run``, TREC is prepared with its default annotator (spaCy: POS input and trees, so each
request is parsed as the run's data was) and trained for a few updates with the shipped config
(``cn3/configs/trec.yaml``: word vectors, character CNN, POS and spelling features) and
``--layers`` graph layers and ``--heads`` energy heads: the weights do not change the time, the
shapes do. Timed, each the median of ``--repeats`` after ``--warmup`` calls:

* ``handler``: :meth:`cn3.serve.api.ServeApp.handle` of the request (tokenise, annotate, encode,
  the forward pass with every layer's graph, the probabilities, the statistics) and the JSON bytes;
* ``http``: the same request through the server on 127.0.0.1 (``urllib``), the socket included;
* ``64 clients``: ``--clients`` threads each sending ``--per-client`` views of the 30-word sentence
  on a keep-alive connection; p50 and p99 of the answers' latencies (the model answers one request
  at a time, so p50 is about ``clients / 2`` views' time) and every answer checked to be 200.

Prints the CPU, the torch threads, the times and their ratio to the handler's (the reference, same
process) and to 150 ms (< 1 = within target).
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MS = 150.0
SENTENCE = ("When the old lighthouse keeper finally retired after forty years , the small fishing village on the "
            "northern coast held a party that lasted until the morning tide came in")
#: 120 words: the default word cap
LONG = " ".join((SENTENCE.split() * 4)[:120])


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def train_run(out: Path, layers: int, heads: int) -> Path:
    """A TREC run of the shipped config, ``layers`` graph layers, trained for a few updates."""
    from cn3.kinds import train
    from cn3.sentence.resolve import resolve_config
    from data_prep.prepare import PrepareSettings, prepare

    prepared = prepare(PrepareSettings(task="trec", out=out / "prepared-trec")).out
    overrides = [f"model.graph_layers={layers}", f"model.energy_heads={heads}", "train.max_steps=5",
                 "train.epochs=1", "train.evals_per_epoch=1"]
    cfg = resolve_config("trec", None, {"data.prepared": prepared}, overrides)
    train(cfg, out / "trec-cn3", device_name="cpu")
    return out / "trec-cn3"


def median_ms(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def concurrent_ms(url: str, body: bytes, clients: int, per_client: int) -> tuple[float, float, int]:
    """p50 and p99 (ms) of ``clients x per_client`` views sent at once on keep-alive connections, and
    how many answers were not 200."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    times: list[float] = []
    bad = [0]

    def client() -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=600)
        for _ in range(per_client):
            start = time.perf_counter()
            connection.request("POST", "/api/view", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            times.append(time.perf_counter() - start)
            bad[0] += response.status != 200
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ordered = sorted(times)
    return 1000 * statistics.median(ordered), 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], bad[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="A sentence run to serve (default: train a TREC run)")
    parser.add_argument("--layers", type=int, default=2, help="graph layers of the trained run")
    parser.add_argument("--heads", type=int, default=1, help="energy heads of the trained run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients")
    parser.add_argument("--per-client", type=int, default=3, help="views each concurrent client sends")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from cn3.serve.api import ServeApp
    from cn3.serve.runs import load_served
    from cn3.serve.server import json_bytes, make_server, serve_in_thread

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or train_run(Path(tmp), args.layers, args.heads)
        app = ServeApp([load_served(run, "r0", torch.device("cpu"))], max_words=120)
        server = make_server(app, port=0, quiet=True)
        serve_in_thread(server)
        for text in (SENTENCE, LONG):
            body = json.dumps({"run": "r0", "text": text, "pretokenized": True}).encode()
            status, answer = app.handle("POST", "/api/view", {}, body)
            assert status == 200, answer
            side = answer["sides"][0]
            words, layers, heads = len(side["tokens"]), len(side["layers"]), len(side["layers"][0]["heads"])
            handler = median_ms(lambda: json_bytes(app.handle("POST", "/api/view", {}, body)[1]), args.warmup,
                                args.repeats)
            request = urllib.request.Request(server.url + "api/view", data=body,
                                             headers={"Content-Type": "application/json"})
            over_http = median_ms(lambda: urllib.request.urlopen(request).read(), args.warmup, args.repeats)
            rows.append((f"{words} words, handler", handler, handler))
            rows.append((f"{words} words, http", over_http, handler))
            if text is SENTENCE:
                p50, p99, bad = concurrent_ms(server.url, body, args.clients, args.per_client)
                assert bad == 0, f"{bad} answers were not 200"
                rows.append((f"{words} words, {args.clients} clients p50", p50, handler))
                rows.append((f"{words} words, {args.clients} clients p99", p99, handler))
        server.shutdown()
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, {args.threads} thread(s)")
    print(f"run: {Path(run).name} ({app.runs['r0'].encoder}, annotation {answer['annotation']}); "
          f"{layers} layers x {heads} heads; medians of {args.repeats}")
    for name, ms, reference in rows:
        print(f"{name:30s} {ms:8.1f} ms   ratio to the handler: {ms / reference:6.2f}   to {TARGET_MS:.0f} ms: "
              f"{ms / TARGET_MS:6.2f}")


if __name__ == "__main__":
    main()
