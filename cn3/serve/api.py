"""The JSON API of ``cn3 serve`` as plain functions: a request (method, route, query, body) in, a
status and a JSON-ready dict out; no sockets (:mod:`cn3.serve.server` moves the bytes).

Routes (every answer a JSON object; an error is ``{"error": "<one sentence>"}``):

* ``GET /api/runs``: the runs served, the word cap, the grid.
* ``POST /api/view`` ``{"run", "text", "pretokenized"}``: the prediction and each layer's graph
  (:mod:`cn3.serve.views`).
* ``POST /api/compare`` ``{"runs": [a, b], "text", "pretokenized"}``: two views and, where the
  tokens match, ``b - a`` of their head-averaged matrices per side for the layers both have (a note
  says so when their depths differ).
* ``GET /api/items?run=&other=&split=dev|test&order=disagree|hub|entropy|length|file&errors=0|1&limit=``:
  items of the run's prepared split with gold, predictions and graph statistics, optionally only the
  run's errors (:mod:`cn3.serve.items`).
* ``GET /api/run?run=``: config, results and learning curves.
* ``GET /api/grid``: the grid's report (Markdown and its PNG names).

Statuses: 400 a bad request (malformed JSON, nested deeper than :data:`MAX_DEPTH`, a control
character or lone surrogate in the text), 404 an unknown run, item or route, 413 a body over
:data:`MAX_BODY` or text over the word cap, 503 a model busy for :data:`BUSY_SECONDS`, 500 anything
else (logged to stderr, never a traceback in the body).

The word cap (``cn3 serve --max-words``, 120 by default) counts a sentence's tokens, as the model
reads them; the same number and wording appear on the page and in the 413's sentence.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
import unicodedata

import numpy as np

from cn3.serve.runs import Grid, ServedRun, name_runs
from cn3.util.errors import ArgumentError, Cn3Error, DataError

#: the largest request body read (bytes)
MAX_BODY = 64 * 1024
#: the deepest nesting of arrays and objects a request body may have
MAX_DEPTH = 8
#: seconds a request waits for a model another request is using before a 503
BUSY_SECONDS = 30.0


class ApiError(Exception):
    """An answer other than 200: ``status`` and one sentence."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ServeApp:
    """The served runs and the API over them.

    Args:
        runs: the loaded runs, ids ``r0, r1, ...`` in argument order.
        max_words: the most tokens per sentence a view takes (413 above).
        grid: the report of a grid given as a run, or ``None``.
    """

    def __init__(self, runs: list[ServedRun], max_words: int = 120, grid: Grid | None = None):
        self.runs = {run.id: run for run in runs}
        name_runs(runs)
        self.max_words = max_words
        self.grid = grid
        self._items: dict = {}  # (run id, split) -> cached items of the split (cn3.serve.items)
        self._items_lock = threading.Lock()

    def add_runs(self, runs: list[ServedRun]) -> None:
        """Serve ``runs`` too (``cn3 serve`` binds its port first, then loads the models)."""
        self.runs.update((run.id, run) for run in runs)
        name_runs(list(self.runs.values()))

    # ---- dispatch ---------------------------------------------------------------------------

    def handle(self, method: str, route: str, query: dict[str, str], body: bytes | None = None) -> tuple[int, dict]:
        """Answer one API request: ``(status, JSON object)``. ``query``: the URL's parameters (first
        value of each); ``body``: a POST's bytes."""
        routes = {("GET", "/api/runs"): lambda: self.list_runs(),
                  ("POST", "/api/view"): lambda: self.view(parse_body(body)),
                  ("POST", "/api/compare"): lambda: self.compare(parse_body(body)),
                  ("GET", "/api/items"): lambda: self.items(query),
                  ("GET", "/api/run"): lambda: self.run_page(query),
                  ("GET", "/api/grid"): lambda: self.grid_report()}
        try:
            if (method, route) not in routes:
                raise ApiError(404, f"{method} {route[:80]} is not a route of this server")
            return 200, routes[method, route]()
        except ApiError as err:
            return err.status, {"error": str(err)}
        except ArgumentError as err:
            from cn3.serve.views import TooLong

            return (413 if isinstance(err, TooLong) else 400), {"error": str(err)}
        except (DataError, Cn3Error) as err:  # e.g. an empty sentence, a formula's unbalanced brackets
            return 400, {"error": str(err)}
        except Exception as err:  # noqa: BLE001 - the page gets a sentence, stderr the traceback
            return self.failure(err)

    @staticmethod
    def failure(err: Exception) -> tuple[int, dict]:
        """The 500 of an unexpected error: its traceback on stderr, one sentence for the client."""
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
        return 500, {"error": f"the server failed on this request ({type(err).__name__}); its console "
                              "has the details"}

    def run(self, run_id) -> ServedRun:
        """The served run ``run_id``; 404 naming the ids served otherwise."""
        if not isinstance(run_id, str) or run_id not in self.runs:
            raise ApiError(404, f"unknown run {str(run_id)[:40]!r}; this server has: {', '.join(self.runs)}")
        return self.runs[run_id]

    # ---- routes -----------------------------------------------------------------------------

    def list_runs(self) -> dict:
        return {"runs": [run.describe() for run in self.runs.values()], "max_words": self.max_words,
                "grid": {"name": self.grid.name} if self.grid else None}

    def view(self, request: dict) -> dict:
        """``/api/view``: one run's view of one input."""
        run = self.run(request.get("run"))
        text, pretokenized = request_text(request)
        return {"run": run.id, **self.view_of(run, text, pretokenized)}

    def view_of(self, run: ServedRun, text, pretokenized: bool) -> dict:
        """The view of ``run`` (under its lock: one request at a time per model; 503 when it stays busy
        for :data:`BUSY_SECONDS`)."""
        from cn3.serve.views import sentence_view, translation_view

        if not run.lock.acquire(timeout=BUSY_SECONDS):
            raise ApiError(503, f"the model of {run.id} is busy with other requests; try again")
        try:
            if run.kind == "translation":
                return translation_view(run, text, self.max_words)
            return sentence_view(run, text, pretokenized, self.max_words)
        finally:
            run.lock.release()

    def compare(self, request: dict) -> dict:
        """``/api/compare``: two views of the same input and the difference of their graphs."""
        ids = request.get("runs")
        if not isinstance(ids, list) or len(ids) != 2:
            raise ApiError(400, '"runs" must be a list of two run ids')
        runs = [self.run(i) for i in ids]
        text, pretokenized = request_text(request)
        views = [{"run": run.id, **self.view_of(run, text, pretokenized)} for run in runs]
        difference, reason = graph_difference(*views, names=[run.name for run in runs])
        return {"views": views, "difference": difference, "difference_reason": reason}

    def items(self, query: dict) -> dict:
        """``/api/items``: items of a prepared split (:func:`cn3.serve.items.select_items`)."""
        from cn3.serve.items import ItemsUnavailable, select_items

        run = self.run(query.get("run"))
        other = self.run(query["other"]) if query.get("other") else None
        from cn3.serve.items import ORDERS

        split = query.get("split", "dev")
        order = query.get("order", "disagree" if other else "hub")
        try:
            limit = int(query.get("limit", "20"))
        except ValueError:
            raise ApiError(400, "limit must be a whole number") from None
        if split not in ("dev", "test") or order not in ORDERS or not 1 <= limit <= 500:
            raise ApiError(400, f"split must be dev or test, order one of {', '.join(ORDERS)}, limit 1..500")
        if query.get("errors", "0") not in ("0", "1"):
            raise ApiError(400, "errors must be 0 (every item) or 1 (only the run's errors)")
        if order == "disagree" and other is None:
            raise ApiError(400, "order=disagree needs other=<run id> to disagree with")
        try:
            with self._items_lock:  # one reading and scoring of a split at a time
                items = select_items(self._items, run, other, split, order, limit, query.get("errors") == "1")
        except ItemsUnavailable as err:
            raise ApiError(404, str(err)) from None
        return {"items": items}

    def run_page(self, query: dict) -> dict:
        """``/api/run``: the run's config, results and learning curves."""
        from cn3.serve.items import run_page

        return run_page(self.run(query.get("run")))

    def grid_report(self) -> dict:
        if self.grid is None:
            raise ApiError(404, "no grid is served (give a grid directory from cn3 experiment run --out)")
        return {"name": self.grid.name, "markdown": self.grid.markdown, "images": list(self.grid.images)}

    def grid_image(self, name: str) -> bytes:
        """A PNG of the grid's report, by name from its list only (never a path)."""
        if self.grid is None or name not in self.grid.images:
            raise ApiError(404, "no such image in the grid's report")
        return self.grid.images[name].read_bytes()


def parse_body(body: bytes | None) -> dict:
    """A POST body as a JSON object; 413 past :data:`MAX_BODY`, 400 for anything else (not UTF-8 JSON,
    nested deeper than :data:`MAX_DEPTH`, not an object)."""
    if body is None or not body.strip():
        raise ApiError(400, "the request has no body: send a JSON object")
    if len(body) > MAX_BODY:
        raise ApiError(413, f"the request body is over {MAX_BODY // 1024} KB")
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ApiError(400, "the request body is not valid UTF-8 JSON") from None
    except RecursionError:  # nested past the parser's stack
        raise ApiError(400, f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    if json_depth(value) > MAX_DEPTH:
        raise ApiError(400, f"the request body is nested deeper than {MAX_DEPTH} levels")
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return value


def json_depth(value) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:  # deeper is refused whatever lies below
                stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def check_text(text) -> None:
    """Refuse (400) a sentence holding a lone surrogate (``\\ud800`` in JSON, which no encoder can read)
    or a control character other than TAB (TAB separates a pair's sentences), naming it and its place."""
    for side, sentence in enumerate(text if isinstance(text, list) else [text]):
        if not isinstance(sentence, str):
            continue  # the view says what a text must be
        for at, char in enumerate(sentence):
            code = ord(char)
            if 0xD800 <= code <= 0xDFFF:
                problem = "a lone surrogate"
            elif char != "\t" and unicodedata.category(char) == "Cc":
                problem = "a control character"
            else:
                continue
            where = f"sentence {side + 1}, " if isinstance(text, list) else ""
            raise ApiError(400, f"the text holds {problem} (U+{code:04X}) at {where}character {at + 1}: "
                                "remove it and send plain text")


def request_text(request: dict) -> tuple[object, bool]:
    """``(text, pretokenized)`` of a view request (their types checked; the sides by the view)."""
    if "text" not in request:
        raise ApiError(400, 'the request has no "text"')
    pretokenized = request.get("pretokenized", False)
    if not isinstance(pretokenized, bool):
        raise ApiError(400, '"pretokenized" must be true or false')
    check_text(request["text"])
    return request["text"], pretokenized


def _layers(count: int) -> str:
    return "1 layer" if count == 1 else f"{count} layers"


def graph_difference(a: dict, b: dict, names: list[str] | None = None) -> tuple[list | None, str | None]:
    """``b - a`` of the head-averaged matrices per side, for the layers both runs have, and a note
    (``None`` when the runs have the same depth); ``(None, why not)`` when the sides' tokens differ, a
    run has no graph or a run's rows are not words. ``names``: the runs' names for the note (default
    their ids)."""
    from cn3.serve.views import rounded

    if not a["sides"][0]["layers"] or not b["sides"][0]["layers"]:
        return None, "a run has no graph to compare (its encoder returns no attention weights)"
    if [s["tokens"] for s in a["sides"]] != [s["tokens"] for s in b["sides"]]:
        return None, "the runs split the text into different tokens"
    if any(s["rows"] != "words" for s in (*a["sides"], *b["sides"])):
        return None, "a run's rows are not words (SelfAtt1's annotation hops)"
    depths = [len(v["sides"][0]["layers"]) for v in (a, b)]
    names = names or [a["run"], b["run"]]
    shared = "layer 1, which both have" if min(depths) == 1 else f"layers 1-{min(depths)}, which both have"
    note = None if depths[0] == depths[1] else (
        f"{names[0]} has {_layers(depths[0])} and {names[1]} {_layers(depths[1])}: the difference covers {shared}")
    difference = []
    for sa, sb in zip(a["sides"], b["sides"]):
        for la, lb in zip(sa["layers"], sb["layers"]):  # zip: the layers both have
            mean = [np.asarray(layer["heads"], dtype=np.float64).mean(0) for layer in (la, lb)]
            difference.append({"side": sa["name"], "layer": la["layer"], "matrix": rounded(mean[1] - mean[0])})
    return difference, note
