"""Statistics of learned attention graphs: is a sentence's soft graph a tree, a chain or a star?

One sentence's attention in one layer is ``A (rows, n)``: row ``i`` is a distribution ``alpha_i.``
over the ``n`` words. For token-to-token encoders row ``i`` is word ``i``'s query (``rows == n``);
for Lin et al.'s ``selfatt1`` the rows are annotation hops, and only :func:`hub` and
:func:`row_entropy` apply.

``keys (rows, n)`` bool, where given, says which words row ``i`` can read (:func:`visible_keys`);
``None`` means every word. A row that can read no word is left out of every statistic, and
statistics normalised by "the number of words" use the row's visible words.

Ties are broken by position (the first maximum; stable sorts): a uniform row "points at" word 0,
so a uniform matrix has hub share 1 and entropy 1. Read hub share together with entropy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import jensenshannon

#: what each aggregated statistic is, in the order reports list them.
STATISTICS = {
    "hub_share": "hub share: rows whose argmax is the most-chosen word",
    "entropy": "row entropy / log(words visible)",
    "query_dependence": "query dependence: mean pairwise JS divergence of rows (bits)",
    "static_share": "static: sentences whose rows all rank the words alike",
    "mean_distance": "mean attended distance sum_k alpha_ik |i - k|",
    "tree_agreement": "argmax is a tree neighbour (head or dependent)",
    "tree_chance": "chance: a uniformly random other word",
    "tree_adjacent": "adjacent: word i-1 or i+1",
    "head_agreement": "argmax is the parse head (the root: itself)",
    "head_chance": "chance: a uniformly random visible word",
    "tree_attachment": "attachment score of the best tree (Chu-Liu-Edmonds)",
}
#: the longest sentence whose best tree is searched (``tree_attachment``); longer ones go without it.
TREE_MAX_WORDS = 80
#: bins of the per-sentence hub-share histogram: [0, 0.1), ..., [0.9, 1.0].
HUB_BINS = 10


def visible_keys(n: int, window: int | None = None, causal: bool = False) -> np.ndarray:
    """The words each word can read: ``(n, n)`` bool, True where query ``i`` sees key ``k``: the band
    ``|i - k| <= window`` (local attention), ``k < i`` if ``causal`` (the LSTMN), else all.
    """
    i, k = np.arange(n)[:, None], np.arange(n)[None, :]
    keys = np.ones((n, n), dtype=bool)
    if window is not None:
        keys &= np.abs(i - k) <= window
    if causal:
        keys &= k < i
    return keys


def _live(A: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
    """``(rows,)`` bool: rows that can read at least one word."""
    return np.ones(A.shape[0], dtype=bool) if keys is None else keys.any(1)


def hub(A: np.ndarray, keys: np.ndarray | None = None) -> tuple[int, float]:
    """The sentence's most-chosen word and the share of rows that choose it.

    ``hub = mode_i argmax_k alpha_ik`` (ties: the first word), ``share = |{i : argmax_k alpha_ik = hub}|
    / rows`` over the rows that can read a word: 1 for a star, ``1 / n`` when every row picks a
    different word.

    Shapes: ``A (rows, n)``, ``keys (rows, n)`` -> ``(word index, share in [0, 1])``.
    """
    choice = A.argmax(1)[_live(A, keys)]
    counts = np.bincount(choice, minlength=A.shape[1])
    word = int(counts.argmax())
    return word, float(counts[word] / choice.size)


def row_entropy(A: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """Each row's entropy as a fraction of its maximum: ``H_i / log m_i``, ``H_i = -sum_k alpha_ik log
    alpha_ik``, ``m_i`` the words row ``i`` can read. 0 one-hot, 1 uniform, NaN where ``m_i < 2``.

    Shapes: ``A (rows, n)``, ``keys (rows, n)`` -> ``(rows,)``.
    """
    m = np.full(A.shape[0], A.shape[1]) if keys is None else keys.sum(1)
    p = np.clip(A, 0.0, None)
    h = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(1)
    h = np.maximum(h, 0.0)  # a one-hot row gives -0.0
    return np.where(m >= 2, h / np.log(np.maximum(m, 2)), np.nan)


def query_dependence(A: np.ndarray) -> float:
    """How much the rows differ: the mean Jensen-Shannon divergence over all pairs ``i < j`` of rows.

    ``JSD(p, q) = 1/2 KL(p || M) + 1/2 KL(q || M)``, ``M = (p + q) / 2``, in bits (so in ``[0, 1]``):
    the square of ``scipy.spatial.distance.jensenshannon(p, q, base=2)``. 0 when every query reads
    the words alike, 1 for one-hot rows on different words. Only for rows that can all read every word.

    Shapes: ``A (rows, n)`` with ``rows >= 2`` -> a float.
    """
    i, j = np.triu_indices(A.shape[0], k=1)
    with np.errstate(invalid="ignore"):
        distance = jensenshannon(A[i], A[j], base=2, axis=1)
    # (near-)identical rows: scipy takes the square root of a rounding error below 0 and returns NaN
    return float(np.mean(np.nan_to_num(distance, nan=0.0) ** 2))


def is_static(A: np.ndarray) -> bool:
    """Static attention (Brody et al., ICLR 2022): every row ranks the words in the same order
    (``argsort_k(-alpha_ik)``, stable). Shapes: ``A (rows, n)`` -> bool.
    """
    order = np.argsort(-A, axis=1, kind="stable")
    return bool((order == order[0]).all())


def attended_distance(A: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """How far each word reads on average: ``d_i = sum_k alpha_ik |i - k|``, in words.

    NaN for rows that can read no word. Shapes: ``A (n, n)``, ``keys (n, n)`` -> ``(n,)``.
    """
    positions = np.arange(A.shape[0])
    d = (A * np.abs(positions[:, None] - positions[None, :])).sum(1)
    return np.where(_live(A, keys), d, np.nan)


def argmax_distance(A: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """``|i - argmax_k alpha_ik|`` for every row that can read a word. Shapes: ``A (n, n)``,
    ``keys (n, n)`` -> ``(live rows,)`` int.
    """
    rows = np.arange(A.shape[0])
    return np.abs(rows - A.argmax(1))[_live(A, keys)]


def tree_neighbours(heads: np.ndarray) -> list[set[int]]:
    """``N(i)``: each word's head and dependents; ``heads (n,)`` 0-based, -1 for the root."""
    out: list[set[int]] = [set() for _ in heads]
    for i, h in enumerate(heads):
        if h >= 0:
            out[i].add(int(h))
            out[int(h)].add(i)
    return out


def head_agreement(A: np.ndarray, heads: np.ndarray, keys: np.ndarray | None = None) -> dict[str, float]:
    """How well one sentence's graph reads as its parse: ``head_agreement`` (the share of words whose
    strongest key is their parse head, the root's being itself), ``head_chance`` (the same for a uniformly
    random visible word) and ``tree_attachment`` (the attachment score of :func:`~cn3.analysis.trees.best_tree`,
    the diagonal read as the root's share; left out past :data:`TREE_MAX_WORDS` words or without a tree
    among the visible arcs); ``{}`` without a square matrix.

    Shapes: ``A (n, n)``, ``heads (n,)`` (0-based, -1 root), ``keys (n, n)``.
    """
    from cn3.analysis.trees import attachment_score, best_tree

    n = A.shape[0]
    if A.shape[1] != n or n == 0:
        return {}
    target = np.where(heads < 0, np.arange(n), heads)  # the root reads itself
    visible = visible_keys(n) if keys is None else keys
    out = {"head_agreement": float(np.mean(A.argmax(1) == target)),
           "head_chance": float(np.mean([1.0 / max(1, visible[i].sum()) for i in range(n)]))}
    if n > TREE_MAX_WORDS:  # Edmonds over n^2 arcs in Python: seconds per sentence past this
        return out
    try:
        out["tree_attachment"] = attachment_score(best_tree(A, keys), heads)
    except ValueError:  # no spanning tree among the visible arcs (a causal or windowed encoder may have one)
        pass
    return out


@dataclass
class TreeAgreement:
    """One sentence: how often a word's strongest key is a tree neighbour, and two baselines.

    Over the ``rows`` words that can read another word (``K_i = visible words - {i}`` not empty):

    * ``agreement = mean_i [argmax_k alpha_ik in N(i)]`` (a word reading itself is a miss);
    * ``chance = mean_i |N(i) & K_i| / |K_i|``, the agreement of a uniformly random other word
      (``deg(i) / (n - 1)`` when every word is visible);
    * ``adjacent = mean_i |N(i) & A_i| / |A_i|``, ``A_i = {i-1, i+1} & K_i``: a word picked at
      random among the adjacent ones (0 where ``A_i`` is empty).
    """

    rows: int
    agreement: float
    chance: float
    adjacent: float


def tree_agreement(A: np.ndarray, heads: np.ndarray, keys: np.ndarray | None = None) -> TreeAgreement | None:
    """The :class:`TreeAgreement` of one sentence; None when no word can read another.

    Shapes: ``A (n, n)``, ``heads (n,)`` (0-based, -1 root), ``keys (n, n)``.
    """
    n = A.shape[0]
    others = (visible_keys(n) if keys is None else keys) & ~np.eye(n, dtype=bool)  # K_i
    choice = A.argmax(1)
    hits, chance, adjacent = [], [], []
    for i, near in enumerate(tree_neighbours(heads)):
        visible = np.flatnonzero(others[i])
        if visible.size == 0:
            continue
        hits.append(int(choice[i]) in near)
        chance.append(sum(int(k) in near for k in visible) / visible.size)
        beside = [k for k in (i - 1, i + 1) if 0 <= k < n and others[i, k]]
        adjacent.append(sum(k in near for k in beside) / len(beside) if beside else 0.0)
    if not hits:
        return None
    return TreeAgreement(len(hits), float(np.mean(hits)), float(np.mean(chance)), float(np.mean(adjacent)))


@dataclass
class ArcCounts:
    """Arcs of one relation and how often the model follows them (summed over sentences).

    For an arc ``i -> head(i)``: ``to_head`` counts ``argmax_k alpha_ik = head(i)``, ``from_head``
    counts ``argmax_k alpha_{head(i),k} = i``; the ``_chance`` fields sum what a uniformly random other
    visible word would score (``1 / |K|`` per arc whose other end is visible).
    """

    arcs: int = 0
    to_head: int = 0
    from_head: int = 0
    to_head_chance: float = 0.0
    from_head_chance: float = 0.0

    def add(self, other: ArcCounts) -> None:
        self.arcs += other.arcs
        self.to_head += other.to_head
        self.from_head += other.from_head
        self.to_head_chance += other.to_head_chance
        self.from_head_chance += other.from_head_chance


def relation_arcs(A: np.ndarray, heads: np.ndarray, deprels: np.ndarray,
                  keys: np.ndarray | None = None) -> dict[int, ArcCounts]:
    """Relation id (of the arc into the dependent) -> :class:`ArcCounts` of one sentence.

    Shapes: ``A (n, n)``, ``heads (n,)`` (0-based, -1 root), ``deprels (n,)``, ``keys (n, n)``.
    """
    n = A.shape[0]
    others = (visible_keys(n) if keys is None else keys) & ~np.eye(n, dtype=bool)
    width = others.sum(1)  # |K_i|
    choice = A.argmax(1)
    out: dict[int, ArcCounts] = {}
    for i, h in enumerate(int(x) for x in heads):
        if h < 0:
            continue
        c = out.setdefault(int(deprels[i]), ArcCounts())
        c.arcs += 1
        c.to_head += int(choice[i] == h)
        c.from_head += int(choice[h] == i)
        c.to_head_chance += 1.0 / int(width[i]) if others[i, h] else 0.0
        c.from_head_chance += 1.0 / int(width[h]) if others[h, i] else 0.0
    return out


@dataclass
class SentenceStatistics:
    """Every statistic of one sentence in one layer that applies to it: ``rows`` measured (0: skipped),
    ``values`` (keys of :data:`STATISTICS`), ``distances`` (:func:`argmax_distance`), ``relations``
    (:func:`relation_arcs`).
    """

    rows: int
    values: dict[str, float] = field(default_factory=dict)
    distances: np.ndarray | None = None
    relations: dict[int, ArcCounts] | None = None


def sentence_statistics(A: np.ndarray, rows_are_words: bool = True, heads: np.ndarray | None = None,
                        deprels: np.ndarray | None = None, keys: np.ndarray | None = None) -> SentenceStatistics:
    """All statistics of one attention matrix that apply to it (``rows == 0`` for a one-word sentence).

    Args:
        A: ``(rows, n)`` attention, rows summing to 1 (over ``keys``).
        rows_are_words: row ``i`` is word ``i``'s query; False for annotation hops (hub share and
            entropy only).
        heads, deprels: ``(n,)`` dependency tree (0-based heads, -1 root) and relation ids, or None.
        keys: ``(rows, n)`` visible words; query dependence and static share are skipped under a mask.
    """
    live = _live(A, keys)
    if A.shape[1] < 2 or not live.any():
        return SentenceStatistics(0)
    out = SentenceStatistics(int(live.sum()))
    out.values["hub_share"] = hub(A, keys)[1]
    entropy = row_entropy(A, keys)
    if not np.isnan(entropy).all():
        out.values["entropy"] = float(np.nanmean(entropy))
    if not rows_are_words:
        return out
    if keys is None:
        out.values["query_dependence"] = query_dependence(A)
        out.values["static_share"] = float(is_static(A))
    out.values["mean_distance"] = float(np.nanmean(attended_distance(A, keys)))
    out.distances = argmax_distance(A, keys)
    if heads is not None:
        tree = tree_agreement(A, heads, keys)
        if tree is not None:
            out.values.update(tree_agreement=tree.agreement, tree_chance=tree.chance, tree_adjacent=tree.adjacent)
        out.values.update(head_agreement(A, heads, keys))
        if deprels is not None:
            out.relations = relation_arcs(A, heads, deprels, keys)
    return out


@dataclass
class _LayerTotals:
    """What :class:`GraphStatistics` keeps of one layer: per-sentence values, counts, sums."""

    values: dict[str, list[float]] = field(default_factory=dict)
    rows: int = 0
    sentences: int = 0
    skipped: int = 0
    distances: Counter = field(default_factory=Counter)
    relations: dict[int, ArcCounts] = field(default_factory=dict)


class GraphStatistics:
    """Per-layer aggregate of :class:`SentenceStatistics` over a dataset: each statistic averaged over
    sentences (each sentence's row mean counts once); the argmax-distance histogram counts rows, the
    per-relation table arcs.
    """

    def __init__(self) -> None:
        self.layers: dict[tuple[int, int | None], _LayerTotals] = {}

    def add(self, layer: int, s: SentenceStatistics, head: int | None = None) -> None:
        """Add one sentence's statistics of ``layer`` (0-based), or of one ``head`` (0-based) of it;
        one without any (``rows == 0``: a single word) is only counted as skipped."""
        t = self.layers.setdefault((layer, head), _LayerTotals())
        if s.rows == 0:
            t.skipped += 1
            return
        t.sentences += 1
        t.rows += s.rows
        for name, value in s.values.items():
            t.values.setdefault(name, []).append(value)
        if s.distances is not None:
            t.distances.update(s.distances.tolist())
        for rel, counts in (s.relations or {}).items():
            t.relations.setdefault(rel, ArcCounts()).add(counts)

    def summary(self, relation_names: list[str] | None = None) -> list[dict]:
        """One JSON-ready dict per layer (1-based ``layer``), in order, each layer's heads (1-based ``head``)
        after it: ``sentences``, ``rows``, ``skipped``; ``stats``: name -> ``{"mean", "sentences"}``;
        ``hub_share_histogram`` (:data:`HUB_BINS` bins); ``argmax_distance``: rows per distance (word rows
        only); ``relations`` (:func:`relation_table`, with trees; ``relation_names`` the ``rel`` vocabulary).
        """
        out = []
        for layer, head in sorted(self.layers, key=lambda key: (key[0], -1 if key[1] is None else key[1])):
            t = self.layers[(layer, head)]
            stats = {name: {"mean": float(np.mean(t.values[name])), "sentences": len(t.values[name])}
                     for name in STATISTICS if name in t.values}
            hubs = np.histogram(t.values.get("hub_share", []), bins=HUB_BINS, range=(0.0, 1.0))[0]
            entry = {"layer": layer + 1, **({} if head is None else {"head": head + 1}), "sentences": t.sentences,
                     "rows": t.rows, "skipped": t.skipped, "stats": stats, "hub_share_histogram": hubs.tolist()}
            if t.distances:
                entry["argmax_distance"] = [t.distances.get(d, 0) for d in range(max(t.distances) + 1)]
            if t.relations:
                entry["relations"] = relation_table(t.relations, relation_names)
            out.append(entry)
        return out


def layer_label(entry: dict) -> str:
    """``layer L`` or ``layer L head h`` for a :meth:`GraphStatistics.summary` entry."""
    return f"layer {entry['layer']}" + (f" head {entry['head']}" if "head" in entry else "")


def relation_table(relations: dict[int, ArcCounts], names: list[str] | None = None) -> dict[str, dict]:
    """Relation name -> arcs, rates and chance rates, most frequent first; ``followed_share``: the
    relation's share of all followed arcs (an arc followed from both ends counts twice).
    """
    followed = sum(c.to_head + c.from_head for c in relations.values())
    table = {}
    for rel, c in sorted(relations.items(), key=lambda item: (-item[1].arcs, item[0])):
        name = names[rel] if names is not None and rel < len(names) else str(rel)
        table[name] = {"arcs": c.arcs, "to_head": c.to_head / c.arcs, "to_head_chance": c.to_head_chance / c.arcs,
                       "from_head": c.from_head / c.arcs, "from_head_chance": c.from_head_chance / c.arcs,
                       "followed_share": (c.to_head + c.from_head) / followed if followed else 0.0}
    return table
