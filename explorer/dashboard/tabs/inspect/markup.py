"""Inspect's text views as HTML: the masked text at t, the top-k candidates under each masked
character (coloured correct / wrong), their legend and the candidates as a table. A uniform-state
model's text is noised, not masked: its changed characters are shown as the noise left them, on the
heatmap's noise tint and underlined (not hue alone), where a masked one shows █."""
from __future__ import annotations

import numpy as np

from ....metrics import single_loss
from ...ui.palette import CORRECT, MASKED_BG, MIN_ALPHA, STATE_COLORS, WRONG
from ...ui.safe import literal

SHOWN_AS = {" ": "␣", "\n": "↵", "\t": "⇥"}  # whitespace made visible where a candidate is shown
NOISED_BG = STATE_COLORS["noise"]  # a character the uniform-state noise changed (as the heatmap draws noise)


def _shown(c: str) -> str:
    return literal(SHOWN_AS.get(c, c))


def _plain(c: str) -> str:
    """A character of running text: spaces kept (non-breaking so a column keeps its width)."""
    return "&nbsp;" if c == " " else "↵" if c == "\n" else literal(c)


def forward_html(text, mask: np.ndarray) -> str:
    """The text (a string, or one string per position: tokens) as the model sees it at t (the forward
    process): masked positions as █ on a dark cell."""
    parts = []
    for c, m in zip(text, mask):
        parts.append('<span class="mk">█</span>' if m else literal(c))
        if c == "\n" and not m:
            parts[-1] = "↵\n"
    return '<div class="fwd">' + "".join(parts) + "</div>"


def noised_html(seen, changed: np.ndarray) -> str:
    """A uniform-state model's text at t (the forward process): each position as the noise left it, the
    characters it changed on the noise tint (whitespace made visible there: a space the noise wrote)."""
    parts = []
    for c, m in zip(seen, changed):
        parts.append(f'<span class="nz">{_shown(c)}</span>' if m else "↵\n" if c == "\n" else literal(c))
    return '<div class="fwd">' + "".join(parts) + "</div>"


def _candidate(ch: str, p: float, ok: bool, top: bool) -> str:
    """One candidate: blue with a solid outline when right, vermillion dashed when wrong (not hue
    alone); the more probable, the more intense."""
    alpha = MIN_ALPHA + (1 - MIN_ALPHA) * float(np.clip(p, 0, 1))
    rgb = (0, 114, 178) if ok else (213, 94, 0)
    ink = "#fff" if alpha > 0.55 else "#000"
    cls = "cd ok" if ok else "cd no"
    return (f'<span class="{cls}{" t1" if top else ""}" style="background:rgba({rgb[0]},{rgb[1]},{rgb[2]},'
            f'{alpha:.2f});color:{ink}">{_shown(ch)}</span>')


def _column(row, k: int, seen: str | None = None) -> str:
    """One masked position: █ (a uniform-state model's: the character the noise put there, `seen`),
    then its k candidates (top first) with probability as intensity."""
    cands = [(row[f"top{r}"], row[f"p{r}"]) for r in range(1, k + 1) if f"top{r}" in row]
    shown = "" if seen is None else f"sees {SHOWN_AS.get(seen, seen)!r}, "
    tip = (f"position {row['position']}: {shown}true {SHOWN_AS.get(row['true'], row['true'])!r}, "
           f"p(true) = {row['p_true']:.2f}; " + ", ".join(f"{SHOWN_AS.get(c, c)!r} {p:.2f}" for c, p in cands))
    body = "".join(_candidate(c, p, c == row["true"], r == 0) for r, (c, p) in enumerate(cands))
    head = '<span class="mk">█</span>' if seen is None else f'<span class="nz">{_shown(seen)}</span>'
    return f'<span class="col" title="{literal(tip)}">{head}{body}</span>'


def _rewrite_column(position: int, c: str, top1: str, p: float) -> str:
    """A position the uniform-state noise left alone whose top-1 is another character: the character,
    and under it that wrong guess (the model is not told which positions changed)."""
    tip = f"position {position}: unchanged {SHOWN_AS.get(c, c)!r}; the model would write {SHOWN_AS.get(top1, top1)!r} {p:.2f}"
    return (f'<span class="col" title="{literal(tip)}"><span class="ch">{_plain(c)}</span>'
            f'{_candidate(top1, p, False, True)}</span>')


def predictions_html(text, result: dict, k: int) -> str:
    """The figure of "The Forward Process" for text: each position a column, masked ones with their top-k candidates.
    Columns are grouped into words (a word never breaks across lines); a newline is a column of its own
    (↵), not a line break: Shakespeare's short lines would otherwise make the grid very tall."""
    rows = {int(r["position"]): r for r in result["table"].to_dict("records")}
    seen = result.get("seen") if "changed" in result else None  # a uniform-state model's noised text
    words, word = [], []
    for i, c in enumerate(text):
        if seen is not None and i not in rows and result["top1"][i] != c:  # it would rewrite an untouched one
            word.append(_rewrite_column(i, c, result["top1"][i], float(result["top1_p"][i])))
        else:
            word.append(_column(rows[i], k, None if seen is None else seen[i]) if i in rows
                        else f'<span class="col"><span class="ch">{_plain(c)}</span></span>')
        if c in " \n":
            words.append('<span class="w">' + "".join(word) + "</span>")
            word = []
    if word:
        words.append('<span class="w">' + "".join(word) + "</span>")
    return '<div class="grid">' + "".join(words) + "</div>"


def predictions_table(result: dict, k: int):
    """The candidates as a table for the page and the CSV: whitespace made visible, ✓ / ✗ spelled out."""
    table = result["table"].copy()
    for col in ["true"] + [f"top{r}" for r in range(1, k + 1)]:
        if col in table:
            table[col] = table[col].map(lambda c: SHOWN_AS.get(c, c))
    if "correct" in table:
        table["correct"] = table["correct"].map({True: "✓ yes", False: "✗ no"})
    cols = ["position", "true"] + [c for r in range(1, k + 1) for c in (f"top{r}", f"p{r}")] + ["p_true", "correct"]
    return table[[c for c in cols if c in table]]


def style(size: dict) -> str:
    """CSS of the two text views; sizes from palette.FONT (presentation mode: projector type)."""
    return f"""<style>
.fwd {{ font: calc(1.3 * {size['text']})/1.5 ui-monospace, 'DejaVu Sans Mono', monospace; white-space: pre-wrap;
        word-break: break-all; margin: 0; }}
.fwd .mk {{ color: {MASKED_BG}; }}
.nz {{ background: {NOISED_BG}; text-decoration: underline wavy {MASKED_BG}; text-underline-offset: 0.15em; }}
.grid {{ display: flex; flex-wrap: wrap; align-items: flex-start; row-gap: 0.5em;
         font: calc(1.3 * {size['text']})/1.25 ui-monospace, 'DejaVu Sans Mono', monospace; }}
.grid .w {{ display: inline-flex; align-items: flex-start; }}
.grid .col {{ display: inline-flex; flex-direction: column; align-items: center; min-width: 1.05ch; }}
.grid .mk {{ color: {MASKED_BG}; }}
.grid .cd {{ min-width: 1.2ch; text-align: center; margin-top: 2px; font-size: 0.85em; }}
.grid .cd.t1 {{ font-weight: bold; font-size: 1em; }}
.grid .cd.ok {{ outline: 2px solid {CORRECT}; }}
.grid .cd.no {{ outline: 1px dashed {WRONG}; }}
.cap {{ font-size: {size['base']}; margin: 0.2em 0; }}
.key {{ padding: 0 0.4em; margin: 0 0.2em; }}
</style>"""


def legend_html(size: dict, noised: bool = False) -> str:
    """How to read the candidates: the two colours and outlines, and that paler means less probable.
    `noised`: a uniform-state model's, whose candidates stand under the characters the noise changed."""
    under = ('Under each character the noise changed (<span class="nz">as it left it</span>; the model is not '
             'told which) ' if noised else 'Under each masked character (█) ')
    return (style(size) + f'<p class="cap">{under}'
            'the model\'s candidates, most likely first: '
            f'<span class="key" style="background:{CORRECT};color:#fff;outline:2px solid {CORRECT}">correct</span> '
            f'<span class="key" style="background:{WRONG};color:#fff;outline:1px dashed {WRONG}">wrong</span> '
            '— the paler, the less probable. Hover a column for the numbers.</p>')


def forward_caption(t: float, n: int, length: int, seed: int, unit: str = "characters") -> str:
    """What the masked text shows: how many positions (characters or tokens) are masked at t, against
    the expected share."""
    return (f'<p class="cap"><b>t = {t:.2f}</b>: {n} of {length} {unit} masked '
            f"({100 * n / length:.1f}%; expected {100 * t:.0f}%), mask seed {seed}</p>")


def noised_caption(t: float, redrawn: int, changed: int, length: int, seed: int, n_tokens: int,
                   unit: str = "characters") -> str:
    """What a uniform-state model's noised text shows: how many positions the noise redrew at t, and how
    many of them it changed (a redrawn token keeps its value one time in n_tokens), against the expected share."""
    expected = 100 * t * (n_tokens - 1) / n_tokens
    return (f'<p class="cap"><b>t = {t:.2f}</b>: the noise redrew {redrawn} of {length} {unit} at random and '
            f"changed {changed} ({100 * changed / max(length, 1):.1f}%; expected {expected:.1f}%), seed {seed}; the "
            "model is not told which</p>")


def predictions_caption(result: dict, unit: str = "characters") -> str:
    """How many masked characters the model got right at t, and its mean top-1 probability (a uniform-state
    model's: the characters the noise changed, and how many it left alone the model would change)."""
    table = result["table"]
    n, hits = len(table), int(table["correct"].sum()) if len(table) else 0
    noised = "changed" in result
    where = "the changed positions" if noised else "the masked positions"
    mean_conf = float(table["p1"].mean()) if n else float("nan")
    mean, total, _ = single_loss(table)
    loss = (f"; loss of this example (cross-entropy at {where}) <b>{mean:.3f}</b> nats on average, "
            f"{total:.2f} summed" if n else "")
    kept = len(result["changed"]) - n if noised else 0
    wrongly = (f"; of the {kept} {unit} the noise left alone its top-1 would change {result['miscorrected']}"
               if noised else "")
    if not n:  # t = 0, or a draw that hit nothing: no mean of nothing ("nan")
        return (f'<p class="cap"><b>Predictions at t = {result["t"]:.2f}</b>: no {unit} '
                f'{"changed" if noised else "masked"} at this t, so nothing to predict{wrongly}</p>')
    return (f'<p class="cap"><b>Predictions at t = {result["t"]:.2f}</b>: {hits} of {n} '
            f'{"changed" if noised else "masked"} {unit} '
            f"right ({100 * hits / max(n, 1):.0f}%), mean top-1 probability {mean_conf:.2f}{loss}{wrongly}</p>")


# ---------------------------------------------------------------- several texts and t (state/several.py)

def _running(c: str) -> str:
    """A character of a row of running text (newlines shown as ↵, so every row stays one block)."""
    return "↵" if c == "\n" else literal(c)


def _words(shown) -> list[range]:
    """The positions of `shown` grouped into words, each with the space or newline after it: where every row
    of one text may wrap (the same places in each, so that its rows stay aligned column for column)."""
    words, start = [], 0
    for i, piece in enumerate(shown):
        if piece[-1:].isspace():
            words.append(range(start, i + 1))
            start = i + 1
    return words + ([range(start, len(shown))] if start < len(shown) else [])


def _wrapped(cells: list[str], words: list[range]) -> str:
    """A row's cells, one inline block per word: a row wraps between words only (a word longer than the
    row still breaks, inside its block)."""
    return "".join('<span class="w">' + "".join(cells[i] for i in word) + "</span>" for word in words)


def _seen_row(shown, row: dict, words: list[range]) -> str:
    """The text as the model sees it at t: █ where masked (a uniform-state model's: the noise's
    characters where it changed them)."""
    if "changed" in row:
        return _wrapped([f'<span class="nz">{_shown(c)}</span>' if m else _running(c)
                         for c, m in zip(row["seen"], row["changed"])], words)
    return _wrapped(['<span class="mk">█</span>' if m else _running(c) for c, m in zip(shown, row["mask"])], words)


def _predicted_row(shown, result: dict, words: list[range]) -> str:
    """The text as the model fills it in: its top-1 guess at each masked position, blue when right and
    vermillion when wrong (solid / dashed outline: not hue alone), paler the less probable."""
    guesses = {int(r["position"]): r for r in result["table"].to_dict("records")}
    # a uniform-state model predicts every position, not told which changed: where it would rewrite a
    # character the noise left alone, that is a wrong guess too
    rewrites = result.get("top1") if "changed" in result else None
    parts = []
    for i, c in enumerate(shown):
        row = guesses.get(i)
        if row is not None:
            parts.append(_candidate(row["top1"], row["p1"], bool(row["correct"]), False))
        elif rewrites is not None and rewrites[i] != c:
            parts.append(_candidate(rewrites[i], float(result["top1_p"][i]), False, False))
        else:
            parts.append(_running(c))
    return _wrapped(parts, words)


def several_html(result: dict, pieces_of, unit: str = "characters") -> str:
    """The rows of state/several.py as one figure: for each text its original once, then for each t the
    text as the model sees it and as it predicts it, and, under the t, how many masked positions it got
    right (there rather than in a column of its own: the rows keep the width, on a projector too).
    pieces_of(text): the text's positions (masking.pieces)."""
    groups, n_ts = [], len(result["ts"])
    for g in range(len(result["texts"])):
        rows = result["rows"][g * n_ts:(g + 1) * n_ts]
        shown = pieces_of(rows[0]["text"])
        words = _words(shown)
        body = [f'<tr><th>text {g + 1}</th><td class="lab">original</td><td class="txt">'
                f'{_wrapped([_running(c) for c in shown], words)}</td></tr>']
        for row in rows:
            n, hits = len(row["table"]), int(row["table"]["correct"].sum()) if len(row["table"]) else 0
            hit = "changed" if "changed" in row else "masked"
            right = f"{hits} of {n} right ({100 * hits / n:.0f}%)" if n else f"no {unit} {hit}"
            short = f"{hits} of {n} right" if n else f"none {hit}"  # the share in the tooltip
            body.append(f'<tr class="t0"><th>t = {row["t"]:.2f}</th><td class="lab">sees</td>'
                        f'<td class="txt">{_seen_row(shown, row, words)}</td></tr>'
                        f'<tr><th class="acc" title="{literal(right)}">{literal(short)}</th><td class="lab">predicts</td>'
                        f'<td class="txt">{_predicted_row(shown, row, words)}</td></tr>')
        groups.append('<table class="sev">' + "".join(body) + "</table>")
    return "".join(groups)


def several_style(size: dict, presentation: bool = False) -> str:
    """CSS of the several-rows figure: monospace rows wrapping between words, a narrow label column with
    each t's accuracy under it. `presentation`: the rows closer together (a projector's 768 px high)."""
    line = 1.15 if presentation else 1.35
    return f"""<style>
.sev {{ border-collapse: collapse; width: 100%; margin: 0 0 {0.2 if presentation else 0.6}em 0; font-size: {size['base']}; }}
.sev th {{ text-align: left; white-space: nowrap; padding: 0 0.6em 0 0; vertical-align: top; font-weight: bold; }}
.sev th.acc {{ font-weight: normal; color: #333; }}
.sev td {{ vertical-align: top; padding: 0 0.4em 0 0; }}
.sev tr.t0 td, .sev tr.t0 th {{ border-top: 1px solid #ccc; padding-top: 0.1em; }}
.sev .lab {{ color: #555; white-space: nowrap; }}
.sev .txt {{ font: {size['text']}/{line} ui-monospace, 'DejaVu Sans Mono', monospace; white-space: normal; width: 100%; }}
.sev .w {{ display: inline-block; max-width: 100%; white-space: break-spaces; word-break: break-all; }}
.sev .mk {{ color: {MASKED_BG}; }}
.sev .nz {{ background: {NOISED_BG}; text-decoration: underline wavy {MASKED_BG}; }}
.sev .cd.ok {{ outline: 2px solid {CORRECT}; }}
.sev .cd.no {{ outline: 1px dashed {WRONG}; }}
</style>"""
