"""Quality of generated samples and the model's view of masked text, as plain numpy / pandas.

Pure functions: a model goes in, numbers come out; nothing global, no torch tensors in any output
(the dashboard plots numpy). Every random choice goes through an explicit torch.Generator seeded
from the `seed` argument, so the same call gives the same numbers.

Sample quality (the "Sampling Strategies & Speed Tradeoffs" notebook's pattern measure, and text measures):
pattern_quality, char_entropy, gen_nll / gen_ppl, word_validity, distinct_n, text_quality, reference_texts.
Readings a collapsed sample cannot fool (one repeated symbol scores 1.0 on pattern_quality, and a
repetitive text a low gen-PPL): pattern_quality_p2, distinct_symbols, collapsed
(patterns), ref_distance (text: how far gen-PPL and entropy sit from held-out text's).
The model's view of masked text (the "Training with the ELBO" and "The Forward Process" notebooks):
masked_fraction_vs_t, accuracy_vs_t, per_position_confidence, topk_predictions.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from .data.corpus import WORD_RE
from .data.tokenizer import UnknownCharacterError
from .devices import model_device
from .diffusion import forward_mask, forward_uniform, uniform_posterior_logits

PATTERN_PERIODS = range(2, 7)  # the notebook's pattern quality checks pattern lengths 2..6
ACCURACY_TS = tuple(round(0.1 * k, 1) for k in range(1, 10))  # t = 0.1 .. 0.9
# The bars for text that reads like held-out text: gen-PPL within 4x the reference's, entropy within
# 0.35 nats of it.
# ref_distance measures both in these units, so 1.0 on either term is a sample at that bar.
PPL_BAR = 4.0
ENTROPY_BAR = 0.35


# ----------------------------------------------------------------------------- samples: patterns

def pattern_quality(seq) -> float | np.ndarray:
    """measure_pattern_quality of the "Sampling Strategies & Speed Tradeoffs" notebook (§4.3), vectorised.

    For each period p in 2..6 the score is the fraction of positions i >= p with seq[i] == seq[i % p]
    (does the sequence repeat its first p symbols?); the result is the best score, 0 if none applies.
    A 1-D sequence gives a float; a (B, L) batch gives a (B,) array.
    """
    arr = np.asarray(seq.cpu() if isinstance(seq, torch.Tensor) else seq)
    batch = np.atleast_2d(arr)  # (B, L)
    L = batch.shape[1]
    best = np.zeros(batch.shape[0])
    for p in PATTERN_PERIODS:
        if L <= p:  # no position to check: the notebook skips the period (total == 0)
            continue
        idx = np.arange(p, L)
        score = (batch[:, idx] == batch[:, idx % p]).mean(axis=1)  # (B,)
        best = np.maximum(best, score)
    return float(best[0]) if arr.ndim == 1 else best


def _as_batch(seq) -> tuple[np.ndarray, bool]:
    """(B, L) ids and whether the input was one sequence."""
    arr = np.asarray(seq.cpu() if isinstance(seq, torch.Tensor) else seq)
    return np.atleast_2d(arr), arr.ndim == 1


def pattern_quality_p2(seq) -> float | np.ndarray:
    """Pattern quality that requires a period of at least 2 (the notebook's pattern_quality is unchanged).

    As pattern_quality, the best over p in 2..6 of the fraction of positions i >= p with
    seq[i] == seq[i % p], but a period counts only if its unit seq[:p] holds at least two different
    symbols: a unit of one repeated symbol is period 1 in disguise. So 'AAAA...' (1.0 by the notebook's
    measure) and 'AAAA...AB' score 0 while 'ABCABC...' keeps 1.0. The pattern corpus itself draws a
    unit's symbols independently, so about 1.4% of its rows are one symbol and score 0 here too.
    A 1-D sequence gives a float; a (B, L) batch gives a (B,) array.
    """
    batch, single = _as_batch(seq)  # (B, L)
    L = batch.shape[1]
    best = np.zeros(batch.shape[0])
    for p in PATTERN_PERIODS:
        if L <= p:
            continue
        idx = np.arange(p, L)
        score = (batch[:, idx] == batch[:, idx % p]).mean(axis=1)  # (B,)
        real_unit = (batch[:, 1:p] != batch[:, :1]).any(axis=1)  # (B,) unit uses >= 2 symbols
        best = np.maximum(best, np.where(real_unit, score, 0.0))
    return float(best[0]) if single else best


def distinct_symbols(seq) -> int | np.ndarray:
    """Number of different symbols in each sample: (B,) ints for a (B, L) batch, an int for one row."""
    batch, single = _as_batch(seq)  # (B, L)
    ordered = np.sort(batch, axis=1)
    counts = 1 + (ordered[:, 1:] != ordered[:, :-1]).sum(axis=1)  # (B,) value changes in sorted order
    return int(counts[0]) if single else counts


def collapsed(seq) -> bool | np.ndarray:
    """True where a sample is a single symbol repeated (its mean over a cell is the collapsed share)."""
    counts = distinct_symbols(seq)
    return bool(counts == 1) if np.ndim(counts) == 0 else counts == 1


# One symbol on this share of a sample's positions is a collapse even with a stray other symbol in it
# ('FFFEFFFF…' ranked above patterned text on the period->=2 quality: period 'FFFEFF' still matches 83%).
# A pattern of the corpus reaches it only as one repeated symbol: a unit of 6 with 5 alike gives 83%.
COLLAPSE_SHARE = 0.9


def dominant_share(sample: str | Sequence) -> float:
    """The share of one sample's positions (ids, or the characters of a string) held by its most frequent
    symbol: 1.0 for a one-symbol sample, 1/L for all different ones; nan for an empty sample."""
    items = list(sample.tolist() if hasattr(sample, "tolist") else sample)
    return Counter(items).most_common(1)[0][1] / len(items) if items else float("nan")


def looks_collapsed(sample: str | Sequence, share: float = COLLAPSE_SHARE) -> bool:
    """Whether one sample is a collapse: a single symbol repeated (`collapsed`), or one symbol on at least
    `share` of its positions ('FFFEFFFF…'). What a score that rewards repetition must not call a success."""
    return bool(dominant_share(sample) >= share)


def pattern_scores(final) -> pd.DataFrame:
    """One row per sample of (B, L) pattern ids: the notebook's quality beside the readings collapse cannot
    fool (period >= 2 quality, distinct symbols, collapsed as 0/1)."""
    batch, _ = _as_batch(final)
    return pd.DataFrame({"pattern_quality": pattern_quality(batch), "pattern_quality_p2": pattern_quality_p2(batch),
                         "distinct_symbols": distinct_symbols(batch), "collapsed": collapsed(batch).astype(float)})


# ----------------------------------------------------------------------------- samples: text

def char_entropy(sample: str | Sequence[int]) -> float:
    """Unigram entropy (nats) of the characters (or ids) of one sample.

    Reported beside gen-PPL because a judge rewards dull, repetitive text: 'aaaa' has PPL near 1 and
    entropy 0. English prose sits near 3 nats/char by this measure.
    """
    counts = np.array(list(Counter(sample).values()), dtype=np.float64)
    if counts.size == 0:
        return float("nan")
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def words_of(text: str) -> list[str]:
    """Lower-cased words, split exactly as the training corpus's word set was built (WORD_RE)."""
    return [w.lower() for w in WORD_RE.findall(text)]


def word_validity(text: str, words: Iterable[str]) -> float:
    """Fraction of the sample's words found in `words` (the training corpus word set); NaN if no words."""
    vocab = words if isinstance(words, (set, frozenset)) else set(words)
    found = words_of(text)
    if not found:
        return float("nan")
    return sum(w in vocab for w in found) / len(found)


def distinct_n(text: str, n: int) -> float:
    """Share of unique word n-grams among the sample's word n-grams; NaN if it has fewer than n words."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    w = words_of(text)
    grams = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def _judge_ids(judge, samples) -> list[list[int]]:
    """Samples as judge token ids. Texts are encoded with the judge's own tokenizer, so a diffusion
    model and a judge trained on different character sets still agree on what a sample says."""
    if isinstance(samples, str):
        samples = [samples]
    if len(samples) and isinstance(samples[0], str):
        out = []
        for i, text in enumerate(samples):
            try:
                out.append(judge.tokenizer.encode(text))
            except UnknownCharacterError as e:
                raise ValueError(f"sample {i} cannot be scored by the judge: {e} (a leftover [MASK] "
                                 "or a checkpoint trained on other text?)") from e
        return out
    ids = np.asarray(samples.cpu() if isinstance(samples, torch.Tensor) else samples)
    ids = np.atleast_2d(ids)
    bad = (ids < 0) | (ids >= judge.config.mask_id)  # [MASK] is no character the judge can score
    if bad.any():
        raise ValueError(f"{int(bad.sum())} id(s) are outside the judge's {judge.config.mask_id} characters "
                         f"(first at sample {int(np.argwhere(bad)[0][0])}); pass texts instead of ids")
    return ids.tolist()


@torch.no_grad()
def _mean_next_nll(judge, x: torch.Tensor) -> torch.Tensor:
    """(B,) mean next-char NLL of rows x (B, L) under a causal judge; [MASK] logit excluded."""
    was_training = judge.training
    judge.eval()  # dropout off: the same sample always gets the same score
    logits = judge(x[:, :-1]).float()  # (B, L-1, V)
    judge.train(was_training)
    if judge.config.mask_id is not None:  # a Hugging Face causal LM has no [MASK]
        logits[..., judge.config.mask_id] = float("-inf")
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, x[:, 1:, None]).squeeze(-1)  # (B, L-1)
    return nll.mean(dim=1)


def gen_nll(judge, samples, batch_size: int = 32) -> np.ndarray:
    """(N,) mean next-char NLL (nats) of each sample under the AR judge (the first char is not scored).

    samples: list of strings (encoded with judge.tokenizer) or an (N, L) array of judge ids.
    Rows of equal length are batched together; a sample shorter than 2 chars gets NaN.
    """
    if judge.config.kind != "ar":
        raise ValueError(f"the judge must be a causal (ar) model, got kind {judge.config.kind!r}")
    rows = _judge_ids(judge, samples)
    out = np.full(len(rows), np.nan)
    device = next(judge.parameters()).device
    by_len: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_len.setdefault(len(r), []).append(i)
    for L, idx in by_len.items():
        if L < 2:
            continue
        if L - 1 > judge.config.block_size:
            raise ValueError(f"samples of {L} chars exceed the judge's context of {judge.config.block_size}")
        for s in range(0, len(idx), batch_size):
            chunk = idx[s:s + batch_size]
            x = torch.tensor([rows[i] for i in chunk], dtype=torch.long, device=device)  # (b, L)
            out[chunk] = _mean_next_nll(judge, x).cpu().numpy()
    return out


def gen_ppl(judge, samples, batch_size: int = 32) -> np.ndarray:
    """(N,) generative perplexity: exp of each sample's mean next-char NLL under the AR judge."""
    return np.exp(gen_nll(judge, samples, batch_size))


def text_quality(texts: Sequence[str], *, judge=None, words: Iterable[str] | None = None,
                 batch_size: int = 32) -> pd.DataFrame:
    """One row per sample: entropy, distinct_2, distinct_3, and word_validity / gen_ppl / gen_nll when
    a word set / judge is given. Columns absent rather than NaN when their input is missing."""
    texts = list(texts)
    table = pd.DataFrame({"entropy": [char_entropy(s) for s in texts],
                          "distinct_2": [distinct_n(s, 2) for s in texts],
                          "distinct_3": [distinct_n(s, 3) for s in texts]})
    if words is not None:
        vocab = set(words)
        table["word_validity"] = [word_validity(s, vocab) for s in texts]
    if judge is not None:
        nll = gen_nll(judge, texts, batch_size)
        table["gen_nll"] = nll
        table["gen_ppl"] = np.exp(nll)
    return table


def distinct_ids(ids: Sequence[int], n: int) -> float:
    """Share of unique token n-grams among a sample's token n-grams; NaN if it has fewer than n tokens."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def token_quality(final: np.ndarray, texts: Sequence[str], *, judge=None, batch_size: int = 32) -> pd.DataFrame:
    """text_quality for a model whose positions are subword tokens (Hugging Face models): unigram
    entropy and distinct-2/3 over the token ids of `final` (B, L), gen-PPL of the decoded texts."""
    rows = [list(map(int, r)) for r in np.atleast_2d(final)]
    table = pd.DataFrame({"entropy": [char_entropy(r) for r in rows],
                          "distinct_2": [distinct_ids(r, 2) for r in rows],
                          "distinct_3": [distinct_ids(r, 3) for r in rows]})
    if judge is not None:
        nll = gen_nll(judge, list(texts), batch_size)
        table["gen_nll"] = nll
        table["gen_ppl"] = np.exp(nll)
    return table


def ref_distance(gen_nll, entropy, ref_gen_nll: float, ref_entropy: float) -> np.ndarray:
    """How far each text sample sits from held-out text, in units of the bars (lower is better):

        |gen_nll - ref_gen_nll| / ln(PPL_BAR) + |entropy - ref_entropy| / ENTROPY_BAR

    gen_nll is ln gen-PPL, so the first term is |ln(gen-PPL / gen-PPL_ref)| / ln 4: 1.0 at 4x (or 1/4)
    the reference's gen-PPL; the second is 1.0 at 0.35 nats from its unigram entropy. Both directions
    count: gen-PPL far below real text's comes with repetitive text ('the the the'), not better text.
    ref_gen_nll, ref_entropy: the reference row's means (ln of its pooled gen-PPL, its mean entropy).
    Held-out text itself scores above 0 by its own spread. NaN where a sample has no gen NLL.
    """
    nll, ent = np.asarray(gen_nll, dtype=float), np.asarray(entropy, dtype=float)
    return np.abs(nll - ref_gen_nll) / np.log(PPL_BAR) + np.abs(ent - ref_entropy) / ENTROPY_BAR


def passes_reference_bars(gen_ppl: float, entropy: float, ref_gen_ppl: float, ref_entropy: float) -> bool:
    """Whether a setting reads like held-out text: gen-PPL <= PPL_BAR x the reference's and entropy within
    ENTROPY_BAR nats of the reference's (pass like with like: pooled with pooled, means with means)."""
    return bool(gen_ppl <= PPL_BAR * ref_gen_ppl and abs(entropy - ref_entropy) <= ENTROPY_BAR)


def reference_texts(text: str, length: int, n: int, seed: int = 0) -> list[str]:
    """n crops of `length` chars from held-out text at seeded random offsets: the yardstick row."""
    if len(text) < length:
        raise ValueError(f"held-out text has {len(text)} chars, fewer than the sample length {length}")
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(text) - length + 1, (n,), generator=g).tolist()
    return [text[s:s + length] for s in starts]


# ----------------------------------------------------------------------------- the model's view

def _as_tokens(tokens) -> torch.Tensor:
    x = torch.as_tensor(np.asarray(tokens) if not isinstance(tokens, torch.Tensor) else tokens)
    if x.ndim != 2:
        raise ValueError(f"validation tokens must be (N, L), got shape {tuple(x.shape)}")
    return x.long().cpu()


def masked_fraction_vs_t(ts: Sequence[float], length: int = 256, n: int = 256, seed: int = 0,
                         n_tokens: int | None = None) -> pd.DataFrame:
    """Forward-process check: the fraction of positions masked at each t (expected: y = t).

    n_tokens: the uniform-state process over that many tokens instead, where the fraction counted is of
    the positions the noise changed: a redrawn token keeps its value with probability 1/n_tokens, so
    expected = t (n_tokens - 1) / n_tokens.
    Returns t, masked_fraction (mean over n rows of `length`), its std across rows, and expected.
    """
    rows = []
    for t in ts:
        g = torch.Generator().manual_seed(seed)
        x0 = torch.zeros(n, length, dtype=torch.long)
        if n_tokens is None:
            _, hit = forward_mask(x0, float(t), mask_id=1, generator=g)
            expected = float(t)
        else:
            xt, _ = forward_uniform(x0, float(t), n_tokens, generator=g)
            hit, expected = xt != x0, float(t) * (n_tokens - 1) / n_tokens
        per_row = hit.float().mean(dim=1)  # (n,)
        rows.append({"t": float(t), "masked_fraction": per_row.mean().item(),
                     "std": per_row.std().item() if n > 1 else 0.0, "expected": expected})
    return pd.DataFrame(rows)


def is_uniform(model) -> bool:
    """Whether `model` denoises the uniform-state process (its noise redraws tokens; it never sees [MASK])."""
    from .sampling.uniform import model_process  # the sampler reads the same field; imported late: no cycle

    return model_process(model) == "uniform"


@torch.no_grad()
def noised_view(model, x0: torch.Tensor, t: float, redrawn: torch.Tensor, noise: torch.Tensor | None = None):
    """x0 (B, L) as the model sees it at noise level t with `redrawn` (B, L) bool positions hit by the
    noise, and what the model predicts for the clean text there.

    A masked model's noise writes [MASK] (`noise` unused); a uniform-state model's writes the tokens of
    `noise` (B, L), ids below its [MASK] id. Returns x_t (B, L), the positions the model is asked about
    (B, L) bool (masked; for a uniform-state model those whose token the noise changed: it is not told
    which) and p(x0 | x_t) (B, L, V) on the CPU, [MASK]'s probability 0 (never a prediction).
    """
    tt = torch.full((x0.shape[0],), float(t))
    device = model_device(model)
    if is_uniform(model):
        if getattr(model.config, "cached", False):  # DiffusionGemma: one block over a cache, no such call
            raise ValueError("this model denoises one block at a time over a cache of the text before it: "
                             "it has no call that sees a whole noised text")
        xt = torch.where(redrawn, noise, x0)
        logits = model(xt.to(device), tt.to(device))
        logp = uniform_posterior_logits(logits, xt.to(device), tt.to(device)).float().cpu()  # (B, L, N)
        probs = torch.nn.functional.pad(logp.exp(), (0, model.config.vocab_size - logp.shape[-1]))
        return xt, xt != x0, probs
    xt = x0.masked_fill(redrawn, model.config.mask_id)
    logits = model(xt.to(device), tt.to(device)).float().cpu()  # (B, L, V)
    logits[..., model.config.mask_id] = float("-inf")
    return xt, redrawn, torch.softmax(logits, dim=-1)


@torch.no_grad()
def _masked_predictions(model, x0: torch.Tensor, t: float, g: torch.Generator):
    """Mask x0 (B, L) at ratio t (a uniform-state model: redraw its tokens) and run the denoiser once.

    Returns masked (B, L) bool (a uniform-state model: the positions the noise changed), argmax (B, L),
    max-prob (B, L) and p(true token) (B, L), all on CPU. The [MASK] logit is excluded: it is never a
    prediction (as in diffusion.masked_ce).
    """
    if is_uniform(model):  # forward_uniform's draws: the positions, then their tokens
        noise, redrawn = forward_uniform(torch.zeros_like(x0), t, model.config.mask_id, generator=g)
    else:
        noise, (_, redrawn) = None, forward_mask(x0, t, model.config.mask_id, generator=g)
    _, masked, probs = noised_view(model, x0, t, redrawn, noise)  # (B, L), (B, L, V)
    conf, pred = probs.max(dim=-1)  # (B, L) each
    p_true = probs.gather(-1, x0[..., None]).squeeze(-1)  # (B, L)
    return masked, pred, conf, p_true


def _batched_predictions(model, tokens, t: float, seed: int, batch_size: int):
    """_masked_predictions over all rows of (N, L) tokens, concatenated.

    One generator per call, seeded from `seed`: every t sees the same uniform draws, so the masks are
    nested across t (common random numbers: an accuracy curve over t is not jagged from mask noise).
    """
    x = _as_tokens(tokens)
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    parts = [_masked_predictions(model, x[s:s + batch_size], t, g) for s in range(0, len(x), batch_size)]
    model.train(was_training)
    masked, pred, conf, p_true = (torch.cat(p) for p in zip(*parts))
    return x, masked, pred, conf, p_true


def accuracy_vs_t(model, val_tokens, ts: Sequence[float] = ACCURACY_TS, seed: int = 0,
                  batch_size: int = 64) -> pd.DataFrame:
    """Argmax accuracy at masked positions vs masking ratio t on held-out (N, L) tokens (the "The Forward
    Process" notebook, §7; the "Training with the ELBO" notebook, §4.5).

    Columns: t, accuracy, n_masked, mean_confidence (max-prob), nll (mean CE of the true token, nats).
    """
    rows = []
    for t in ts:
        x, masked, pred, conf, p_true = _batched_predictions(model, val_tokens, float(t), seed, batch_size)
        n = int(masked.sum())
        hit = (pred == x)[masked]
        rows.append({"t": float(t), "accuracy": hit.float().mean().item() if n else float("nan"),
                     "n_masked": n, "mean_confidence": conf[masked].mean().item() if n else float("nan"),
                     "nll": (-p_true[masked].clamp_min(1e-30).log()).mean().item() if n else float("nan")})
    return pd.DataFrame(rows)


def per_position_confidence(model, val_tokens, t: float = 0.5, seed: int = 0,
                            batch_size: int = 64) -> pd.DataFrame:
    """Mean max-probability at masked positions, per position, at masking ratio t (the "Training with the
    ELBO" notebook, TODO 2: per-position confidence analysis).

    Columns: position, confidence, accuracy, n_masked; NaN where a position was never masked.
    """
    x, masked, pred, conf, _ = _batched_predictions(model, val_tokens, float(t), seed, batch_size)
    m = masked.float()  # (N, L)
    n = m.sum(dim=0)  # (L,)
    confidence = ((conf * m).sum(dim=0) / n).numpy()  # 0/0 -> NaN where never masked
    accuracy = (((pred == x).float() * m).sum(dim=0) / n).numpy()
    return pd.DataFrame({"position": np.arange(x.shape[1]), "confidence": confidence,
                         "accuracy": accuracy, "n_masked": n.long().numpy()})


def _given_ids(model, text_or_ids) -> torch.Tensor:
    if isinstance(text_or_ids, str):
        ids = model.tokenizer.encode(text_or_ids)  # UnknownCharacterError (a ValueError) names the chars
    else:
        ids = np.asarray(text_or_ids).reshape(-1).tolist()
    x = torch.tensor(ids, dtype=torch.long)[None]  # (1, L)
    if x.shape[1] > model.config.block_size:
        raise ValueError(f"text of {x.shape[1]} tokens exceeds the model's context of {model.config.block_size}")
    if ((x < 0) | (x >= model.config.vocab_size) | (x == model.config.mask_id)).any():
        raise ValueError("ids must be characters of the model's vocabulary (no [MASK] in the clean text)")
    return x


def _given_mask(mask, t, L: int, seed: int) -> torch.Tensor:
    """(1, L) bool: the mask given (bool array or list of positions), or one drawn at ratio t."""
    if mask is None:
        if t is None:
            raise ValueError("give either t (a masking ratio) or mask (which positions to hide)")
        g = torch.Generator().manual_seed(seed)
        return forward_mask(torch.zeros(1, L, dtype=torch.long), float(t), mask_id=1, generator=g)[1]
    m = np.asarray(mask)
    if m.dtype != bool:  # a list of positions
        pos, m = m.astype(int), np.zeros(L, dtype=bool)
        if pos.size and (pos.min() < 0 or pos.max() >= L):
            raise ValueError(f"mask positions must be in [0, {L}), got {pos.tolist()}")
        m[pos] = True
    if m.shape != (L,):
        raise ValueError(f"mask must have shape ({L},), got {m.shape}")
    return torch.from_numpy(m)[None]


@torch.no_grad()
def topk_predictions(model, text_or_ids, t: float | None = None, *, mask=None, k: int = 3,
                     seed: int = 0) -> dict:
    """Top-k predictions with probabilities at each masked position of one text (the "Training with the
    ELBO" notebook, §4.6; the "The Forward Process" notebook, TODO 2: predict masked tokens).

    Returns numpy ids (L,), x_t (L,), mask (L,) bool, the masked and argmax-filled texts and `seen` (each
    position as the model is shown it) when the model has a tokenizer, `accuracy`, and `table`: one row
    per masked position with true, top1..k, p1..pk, p_true and correct (top-1 == true). Deterministic
    for a given seed. A uniform-state model is shown its own noise instead (noised_view): the mask's
    positions redrawn with uniform_noise_tokens(seed), `table` at the positions that changed, and
    `changed` (L,) bool, `miscorrected` (unchanged positions whose top-1 is another token) and `top1`,
    `top1_p` (L,) (the top-1 and its probability at every position: the model's denoised text) added.
    """
    x = _given_ids(model, text_or_ids)  # (1, L)
    redrawn = _given_mask(mask, t, x.shape[1], seed)  # (1, L)
    tt = redrawn.float().mean().item() if t is None else float(t)  # t the model is told
    noise = uniform_noise_tokens(x.shape[1], seed, model.config.mask_id) if is_uniform(model) else None
    xt, asked, probs = noised_view(model, x, tt, redrawn, noise)
    probs = probs[0]  # (L, V)
    top_p, top_i = probs.topk(min(k, model.config.vocab_size - 1), dim=-1)  # (L, k): never [MASK]
    out = _topk_result(model, x[0], xt[0], asked[0], probs, top_p, top_i)
    out["mask"] = redrawn[0].numpy()  # the positions the noise hit (for a uniform-state model, more than it changed)
    if noise is not None:  # the model is not told which positions changed: it may "correct" a clean one
        out["changed"] = asked[0].numpy()
        out["miscorrected"] = int(((top_i[:, 0] != x[0]) & ~asked[0]).sum())
        name = _namer(model)  # its denoised text is its top-1 everywhere, those "corrections" included
        out["top1"] = np.array([name(i) for i in top_i[:, 0].tolist()], dtype=object)
        out["top1_p"] = top_p[:, 0].numpy()
    return out


def uniform_noise_tokens(length: int, seed: int, n_tokens: int) -> torch.Tensor:
    """(1, length) the tokens a uniform-state forward process with generator seed `seed` writes where it
    redraws: forward_uniform's second draw, after the positions' uniforms, so with a mask drawn from the
    same seed (forward_mask's one draw) the pair is forward_uniform's draw at every t."""
    g = torch.Generator().manual_seed(int(seed))
    return forward_uniform(torch.zeros(1, length, dtype=torch.long), 1.0, n_tokens, generator=g)[0]


NUCLEUS_HEAD = 64  # most likely tokens kept per masked position, for the top-p view (not all V: LLaDA has 126k)


def nucleus(head_p: np.ndarray, p: float) -> np.ndarray:
    """(H,) bool: which of the sorted probabilities `head_p` top-p keeps: the smallest most-likely set
    with mass >= p (a token stays while the mass strictly before it is < p, as proposals.filter_logits)."""
    before = np.cumsum(head_p) - head_p
    return before < p


def single_loss(table: pd.DataFrame) -> tuple[float, float, int]:
    """(mean, sum, n) of -log p(true token) over a text's masked positions: the loss of a single example
    (the "The Forward Process" notebook, TODO 1; the mean is what F.cross_entropy gives, the notebook's
    worked example adds them up)."""
    if not len(table):
        return float("nan"), float("nan"), 0
    nll = -np.log(np.clip(table["p_true"].to_numpy(dtype=float), 1e-30, None))
    return float(nll.mean()), float(nll.sum()), len(nll)


def training_ratios(length: int = 256, n: int = 2000, seed: int = 0, bert_rate: float = 0.15,
                    n_tokens: int | None = None) -> pd.DataFrame:
    """The BERT-vs-diffusion comparison (the "The Forward Process" notebook, §4.4) from real draws: the
    corrupted fraction of `n` training rows of `length` under BERT's fixed masking rate and under
    diffusion's t ~ U(0, 1), drawn by the training loop's own draw: diffusion.draw_noise (the share
    masked) or, with `n_tokens` (a uniform-state model's noise ids), draw_uniform_noise (the share its
    noise changed, t (N - 1) / N on average).

    Returns columns scheme and fraction, BERT's n rows first."""
    from .diffusion import draw_noise, draw_uniform_noise

    g = torch.Generator().manual_seed(seed)
    x0 = torch.zeros(n, length, dtype=torch.long)
    _, bert = forward_mask(x0, bert_rate, mask_id=1, generator=g)
    if n_tokens is None:
        _, _, corrupted = draw_noise(x0, mask_id=1, generator=g)
        scheme = "diffusion (t ~ U(0, 1))"
    else:
        _, xt, _ = draw_uniform_noise(x0, n_tokens, generator=g)
        corrupted = xt != x0  # a redraw that lands on the original changes nothing the model must undo
        scheme = "uniform-state diffusion (t ~ U(0, 1))"
    return pd.DataFrame({"scheme": [f"BERT ({bert_rate:.0%} masked)"] * n + [scheme] * n,
                         "fraction": np.concatenate([bert.float().mean(dim=1).numpy(),
                                                     corrupted.float().mean(dim=1).numpy()])})


def _namer(model):
    """id -> what a view shows of it: a token's display string (' the', not decode's), a character, or
    the id itself without a tokenizer."""
    tok = getattr(model, "tokenizer", None)
    if tok is not None and hasattr(tok, "token_strings"):
        return lambda i: tok.token_strings([i])[0]
    if tok is not None:
        return lambda i: tok.decode([i])
    return lambda i: int(i)


def _topk_result(model, x, xt, masked, probs, top_p, top_i) -> dict:
    tok = getattr(model, "tokenizer", None)
    name = _namer(model)
    rows = []
    for pos in torch.nonzero(masked).flatten().tolist():
        row = {"position": pos, "true": name(x[pos].item()), "true_id": int(x[pos]),
               "p_true": probs[pos, x[pos]].item(), "correct": bool(top_i[pos, 0] == x[pos])}
        for r in range(top_i.shape[1]):
            row[f"top{r + 1}"], row[f"p{r + 1}"] = name(top_i[pos, r].item()), top_p[pos, r].item()
        rows.append(row)
    table = pd.DataFrame(rows, columns=None if rows else ["position", "true", "true_id", "p_true", "correct"])
    filled = torch.where(masked, top_i[:, 0], x)
    head = probs[masked].topk(min(NUCLEUS_HEAD, probs.shape[-1]), dim=-1)  # (M, H) sorted, for top-p views
    out = {"ids": x.numpy(), "x_t": xt.numpy(), "mask": masked.numpy(), "table": table,
           "accuracy": float(table["correct"].mean()) if rows else float("nan"),
           "head_p": head.values.numpy(), "head_ids": head.indices.numpy(),
           "head_names": np.array([[name(i) for i in row] for row in head.indices.tolist()], dtype=object)}
    if tok is not None:
        out["masked_text"], out["predicted_text"] = tok.decode(xt.tolist()), tok.decode(filled.tolist())
        out["seen"] = np.array([name(i) for i in xt.tolist()], dtype=object)  # per position, what the model is shown
    return out
