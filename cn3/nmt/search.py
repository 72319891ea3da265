"""Decoding: batched greedy and beam search with a length penalty, and sentence translation.

Both generate at most ``max_len_a * source_length + max_len_b`` tokens (``</s>`` forced there) and
return token lists without ``<s>``/``</s>``.

Beam search keeps ``beam`` live hypotheses per sentence; each step takes the best ``2 * beam``
extensions, ends those among the top ``beam`` that are ``</s>`` and continues the best ``beam``
others. A sentence is done when ``beam`` hypotheses have ended; the best by ``score / lp`` wins,
``lp = ((5 + |y|) / 6) ** alpha`` (GNMT; ``|y|`` counts ``</s>``). ``beam = 1`` is greedy search.
"""

from __future__ import annotations

import torch
from torch import Tensor

from cn3.nmt.data import EOS, PAD, Tokenizer, pad


def _max_lengths(src: Tensor, a: float, b: int) -> Tensor:
    lengths = (src != PAD).sum(1)
    return (lengths.float() * a + b).long().clamp(min=1)


@torch.no_grad()
def greedy_search(model, src: Tensor, max_len_a: float = 1.5, max_len_b: int = 10) -> list[list[int]]:
    """Arg-max decoding of ``src (B, S)``."""
    model.eval()
    b = src.shape[0]
    memory, mask, _ = model.encode(src)
    state = model.start(memory, mask)
    limit = _max_lengths(src, max_len_a, max_len_b)
    token = torch.full((b,), model.args.bos, dtype=torch.long, device=src.device)
    out = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for t in range(int(limit.max()) + 1):
        logp = model.step(token, state)
        logp[:, model.args.bos] = -float("inf")
        logp[:, model.args.pad] = -float("inf")
        token = logp.argmax(-1)
        token = torch.where(limit <= t, torch.full_like(token, model.args.eos), token)
        for i in (~done).nonzero().flatten().tolist():
            if int(token[i]) != model.args.eos:
                out[i].append(int(token[i]))
        done |= token == model.args.eos
        if bool(done.all()):
            break
    return out


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model, src: Tensor, beam: int = 5, alpha: float = 0.6, max_len_a: float = 1.5,
                max_len_b: int = 10) -> list[list[int]]:
    """Batched beam search (see the module docstring) of ``src (B, S)``."""
    model.eval()
    b, k, dev = src.shape[0], beam, src.device
    eos, bos = model.args.eos, model.args.bos
    memory, mask, _ = model.encode(src)
    rows = torch.arange(b, device=dev).repeat_interleave(k)  # (B*K,) sentence of each beam row
    state = model.start(memory.index_select(0, rows), mask.index_select(0, rows))
    limit = _max_lengths(src, max_len_a, max_len_b)  # (B,)
    scores = torch.full((b, k), -float("inf"), device=dev)
    scores[:, 0] = 0.0
    tokens = torch.full((b * k, 0), bos, dtype=torch.long, device=dev)
    last = torch.full((b * k,), bos, dtype=torch.long, device=dev)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    base = (torch.arange(b, device=dev) * k).unsqueeze(1)  # (B, 1)
    for t in range(int(limit.max()) + 1):
        logp = model.step(last, state)  # (B*K, V)
        vocab = logp.shape[-1]
        logp[:, bos] = -float("inf")
        logp[:, model.args.pad] = -float("inf")
        at_limit = (limit <= t).repeat_interleave(k)
        if bool(at_limit.any()):
            forced = torch.full_like(logp, -float("inf"))
            forced[:, eos] = logp[:, eos].clamp(min=-1e4)
            logp = torch.where(at_limit.unsqueeze(1), forced, logp)
        cand = (scores.view(-1, 1) + logp).view(b, k * vocab)
        top_scores, top_index = cand.topk(min(2 * k, k * vocab), dim=1)  # (B, 2K)
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token == eos
        # End hypotheses: </s> among the first K candidates of sentences still running.
        ends = is_eos[:, :k] & torch.isfinite(top_scores[:, :k]) & ~done.unsqueeze(1)
        if bool(ends.any()):
            for i, j in ends.nonzero().tolist():
                if len(finished[i]) < k:
                    row = int(base[i, 0] + top_beam[i, j])
                    seq = tokens[row].tolist()
                    finished[i].append((float(top_scores[i, j]) / length_penalty(len(seq) + 1, alpha), seq))
            done |= torch.tensor([len(f) >= k for f in finished], device=dev)
        done |= limit <= t  # </s> was forced: whatever ended is all there is
        if bool(done.all()):
            break
        # Go on with the best K candidates that are not </s>.
        rank = torch.arange(top_scores.shape[1], device=dev).expand_as(top_scores)
        order = (rank + is_eos.long() * top_scores.shape[1]).topk(k, dim=1, largest=False).indices  # (B, K)
        new_scores = top_scores.gather(1, order)
        new_rows = (base + top_beam.gather(1, order)).view(-1)
        new_tokens = top_token.gather(1, order).view(-1)
        scores = torch.where(done.unsqueeze(1), torch.full_like(new_scores, -float("inf")), new_scores)
        tokens = torch.cat([tokens.index_select(0, new_rows), new_tokens.unsqueeze(1)], 1)
        last = new_tokens
        model.reorder(state, new_rows)
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]


def decode_batch(model, src: Tensor, beam: int, alpha: float) -> list[list[int]]:
    return greedy_search(model, src) if beam <= 1 else beam_search(model, src, beam, alpha)


@torch.no_grad()
def translate_ids(model, sources: list[list[int]], beam: int = 5, alpha: float = 0.6, batch_size: int = 128,
                  device=None, on_batch=None) -> list[list[int]]:
    """Translate encoded sources (each ending with ``</s>``), batched by length, in input order.

    ``batch_size`` is in sentences; beam search uses ``batch_size // beam`` per batch.
    ``on_batch(n)`` is called after each batch of ``n`` sentences.
    """
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    per_batch = max(1, batch_size // max(1, beam))
    out: list[list[int]] = [[] for _ in sources]
    for start in range(0, len(order), per_batch):
        chunk = order[start : start + per_batch]
        src = pad([sources[i] for i in chunk]).to(device)
        for i, hyp in zip(chunk, decode_batch(model, src, beam, alpha)):
            out[i] = hyp
        if on_batch is not None:
            on_batch(len(chunk))
    return out


def translate_lines(model, tok: Tokenizer, lines: list[str], beam: int = 5, alpha: float = 0.6,
                    batch_size: int = 128, device=None, on_batch=None) -> list[str]:
    """Detokenized translations of raw source sentences (an empty line stays empty)."""
    encoded = [ids + [EOS] for ids in tok.encode_src(lines)]
    hyps = translate_ids(model, encoded, beam, alpha, batch_size, device, on_batch)
    text = tok.decode_tgt(hyps)
    return [t if line.strip() else "" for t, line in zip(text, lines)]
