"""The lessons: every figure and printed result of the five teaching documents, each with the dashboard view
that shows it live, the link that opens that view, what to notice, and where the shipped model disagrees
with the document's claim.

One source for three readers: the page's lesson mode (ui/lesson.py: a bar above the tabs, Previous / Next),
docs/teaching.md and the README's lesson index (both written by tools/lessons_doc.py, which a test runs
with --check). Plain data, no Panel. A figure's `query` is a link's query without the '?'; figure_url adds
`lesson=<slug>&figure=<n>`, which the link keeps (urlstate.UrlState) so that every figure is a shareable
link. The notice and differs lines were measured on the shipped checkpoints (Python API, 16 samples per
setting unless they say otherwise; docs/results.md for the sweeps).
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

BASE = "http://localhost:5006/"  # `python run.py`'s address: the links as the documentation shows them


@dataclass(frozen=True)
class Figure:
    """One figure or printed result of a lesson, and the live view that shows it."""

    lesson: str  # the lesson's slug
    index: int  # 1-based within the lesson
    section: str  # e.g. "§4.2"
    shows: str  # the notebook's figure / printed result, one line
    view: str  # the live counterpart, one line (Markdown: the documentation's; the page does not show it)
    query: str  # the main link's query, without '?'
    notice: str  # one line: what to notice
    differs: str = ""  # where this model disagrees with the notebook's claim, said plainly ('' = agrees)
    variants: tuple[tuple[str, str], ...] = ()  # (label, query): more links, e.g. other t values
    label: str = "open"  # the main link's label beside the variants' ("0.2" before "0.6" and "1.0")
    # the css class of the view the figure names where it is not its tab's main figure (projector.py's
    # FIGURES): the page scrolls it into view, and `rehearse` checks that one ('' = the tab's)
    target: str = ""

    @property
    def tab(self) -> str:
        """The tab the query opens (Explore when it names none)."""
        return dict(parse_qsl(self.query)).get("tab", "Explore")


@dataclass(frozen=True)
class Lesson:
    """One teaching document as a sequence of figures."""

    slug: str
    title: str
    summary: str  # what it teaches, one line
    checkpoint_note: str  # which checkpoint its links open and how it differs from the document's model
    figures: tuple[Figure, ...]
    document: str = ""  # the document's full title


def _fig(section, shows, view, query, notice, differs="", *, label="open", variants=(), target="") -> dict:
    return dict(section=section, shows=shows, view=view, query=query, notice=notice, differs=differs,
                label=label, variants=tuple(variants), target=target)


def _lesson(slug, title, document, summary, checkpoint_note, rows) -> Lesson:
    figures = tuple(Figure(lesson=slug, index=i, **row) for i, row in enumerate(rows, start=1))
    return Lesson(slug, title, summary, checkpoint_note, figures, document)


_P = "checkpoint=patterns&seed=42"
_S = "checkpoint=shakespeare&seed=42"
_GEN = _S + "&length=64"  # the generation notebook's canvas
_U = "checkpoint=shakespeare-uniform&seed=42"  # the masked model's uniform-state twin
_Q = "&strategy=confidence&schedule=remaining"  # the notebooks' unmasking rule and order
_SWEEP = (_P + "&tab=Sweep&sweep.schedules=remaining&sweep.steps_grid=1,2,3,5,8,12,16,24,32&sweep.samples=30"
          "&sweep.include_ar=false&sweep.metric=pattern_quality")


# The masked and the uniform-state process side by side: one Compare column per checkpoint. The uniform-state
# sampler's default bound (0.1 nats) is a large vocabulary's: on 65 characters it accepts one position a step
# and the canvas never clears; 5 nats at temperature 0.5 clears it in 9 steps on seed 42's ROMEO: prompt (at
# 0.8, never in 32).
# both processes at one temperature; the uniform one with the entropy bound its checkpoint recommends
_UNIFORM_PAIR = (_GEN + "&steps=32&temperature=0.5" + _Q + "&template=ROMEO:&tab=Compare"
                 "&compare.columns=model=shakespeare%7Cmodel=shakespeare-uniform,entropy_bound=5")


def _inspect(base: str, t: str, text: str = "", first: str = "predictions") -> str:
    """Inspect at masking ratio `t` (on `text`, else the validation excerpt); `first`: the figure a
    projector shows at the top (the text's predictions, or the validation `statistics`)."""
    query = f"{base}&tab=Inspect&inspect.t={t}" + ("" if first == "statistics" else f"&inspect.first={first}")
    return query + (f"&inspect.default_text=false&inspect.text={text}" if text else "")


def _several(base: str, ts: str, text: str = "") -> str:
    """Inspect with one row per masking ratio in `ts` (the notebook's figure in one view)."""
    query = f"{base}&tab=Inspect&inspect.ts={ts}"
    return query + (f"&inspect.default_text=false&inspect.text={text}" if text else "")


_ALL_T = "0,0.2,0.4,0.6,0.8,1"


_CITIZEN = "First%20Citizen:%0ABefore%20we%20proceed%20any%20further,%20hear%20me%20speak."
_ROMEO = "ROMEO:%0ABut,%20soft!%20what%20light%20through%20yonder%20window%20breaks%3F"
_HAMLET = "To%20be,%20or%20not%20to%20be,%20that%20is%20the%20question"
_GOLD = "All%20that%20glitters%20is%20not%20gold%3B%20often%20have%20you%20heard%20that%20told"
_QUOTES_T05 = "%7C".join((_CITIZEN, _HAMLET + ":", _GOLD))  # inspect.texts: separated by |
_QUOTES_T04 = "%7C".join((_CITIZEN, _ROMEO, _HAMLET + ":%20whether%20%27tis"))

FORWARD = _lesson(
    "forward-process", "The Forward Process", "Masked Diffusion for Text: The Forward Process",
    "how text is corrupted: the forward process at every masking ratio t, the denoiser's predictions and its "
    "accuracy across t",
    "Checkpoint `patterns`: 24 positions, with its 15 symbols shown as letters A–O; the notebook uses 32 positions "
    "and numbers 1–15.",
    [_fig("§4.1", "print: five example pattern sequences",
          "Model: five training sequences under the Data table (seeded); Inspect at t = 0 shows one validation "
          "pattern", _P + "&tab=Model",
          "Each sequence tiles one short unit of symbols (2 to 6 long here, 2 to 4 in the notebook): the "
          "repetition is all there is to learn."),
     _fig("§4.2", "plot: forward process at t = 0, 0.2, …, 1.0",
          "Inspect: one validation pattern masked at t = 0, 0.2, …, 1.0, one row per t; the single-t links show the "
          "text the model sees at the slider's t", _several(_P, _ALL_T),
          "Each position is masked by its own coin flip with probability t: the count varies around t × 24 and "
          "the masks fall anywhere, never as a block.",
          label="all t", variants=(("0.2", _inspect(_P, "0.2")), ("0.6", _inspect(_P, "0.6")),
                                   ("1.0", _inspect(_P, "1")))),
     _fig("§4.3", "plot: masked fraction vs t against y = t",
          'Inspect: "Forward process: fraction masked vs t"', _inspect(_P, "0.5", first="statistics"),
          "The measured fraction lies on y = t: on average the forward process masks exactly t of the positions."),
     _fig("§4.4", "bar: BERT's fixed 15 % vs diffusion's uniform t",
          'Inspect: "Masking ratios trained on: BERT vs diffusion"', _inspect(_P, "0.5", first="statistics"),
          "BERT trains only around 15 % masked (a coin flip per position); a diffusion LM trains at every ratio "
          "up to 100 %, which is what lets it start from an all-[MASK] canvas.", target=".inspect-ratios"),
     _fig("§4.5", "print: model parameters", "Model: Architecture (0.21 M parameters, 3 layers, d 64, adaLN)",
          _P + "&tab=Model",
          "0.21 M parameters suffice for the pattern task; t reaches every block through adaLN (the notebook "
          "adds it to the input instead)."),
     _fig("§4.6", "plot: training loss (smoothed)", "Model: stored loss curves (raw, smoothed, validation)",
          _P + "&tab=Model",
          "The training loss falls from 2.7 to about 1.2 in 6,000 steps, steeply at first; the validation "
          "loss ends at 0.76 nats per symbol."),
     _fig("§5 TODO 1", "print: loss of one example at t = 0.5",
          'Inspect: predictions caption, "loss of this example" (mean and summed nats)', _inspect(_P, "0.5"),
          "Only masked positions count: the mean is nats per masked symbol, the sum is what the ELBO weights "
          "by 1/t."),
     _fig("§5 TODO 2", "print: top-3 predictions per masked position", "Inspect: candidate grid and table, k = 3",
          _inspect(_P, "0.5") + "&inspect.k=3",
          "The first guess takes most of the probability (0.85 on average at t = 0.5, on validation patterns) and "
          "is right as often; the second and third share what is left."),
     _fig("§6", "print: one sequence masked at t = 0.2, 0.5, 0.8, accuracy each",
          'Inspect: the sequence masked at each t, one row per t, with "n of m masked right"',
          _several(_P, "0.2,0.5,0.8"),
          "Accuracy falls as t grows: on 256 validation patterns 99 % at t = 0.1, 85 % at 0.5, 40 % at 0.9.",
          label="0.2, 0.5, 0.8",
          variants=(("0.2", _inspect(_P, "0.2")), ("0.5", _inspect(_P, "0.5")), ("0.8", _inspect(_P, "0.8")))),
     _fig("§7", "plot: masked sequence with top-3 predictions, correct / wrong, t = 0.5 (seed 99)",
          "Inspect: candidate grid under each █, mask seed 99",
          _inspect(_P, "0.5") + "&inspect.k=3&inspect.mask_seed=99",
          "Blue first guesses are right, vermillion ones wrong; at t = 0.5 about 85 % of masked symbols come "
          "back right."),
     _fig("§7", "plot: accuracy vs masking ratio",
          'Inspect: "Accuracy vs masking ratio (validation)", t = 0.1 … 0.9', _inspect(_P, "0.5", first="statistics"),
          "Higher masking, less context, lower accuracy: from 1.00 at t = 0.1 down to 0.44 at t = 0.9 on the 16 "
          "validation patterns drawn (0.99 and 0.40 on 256), as the notebook says.", target=".inspect-accuracy")])

ELBO = _lesson(
    "training-elbo", "Training with the ELBO", "Training a Diffusion LLM: The ELBO and Beyond",
    "training on Tiny Shakespeare with the ELBO: the data, loss curves, learning-rate schedules and predictions "
    "at a masking ratio",
    "Checkpoint `shakespeare`. Inspect uses validation text, or the quoted text when a link passes it (mask seed "
    "0, as in the notebook).",
    [_fig("§4.1", "prints: dataset size, first characters, vocabulary, encoding test, train/val split",
          "Model: Data table (corpus, sha256, the vocabulary as characters), the corpus's size and first 200 "
          "characters when its text is on the server, and Architecture (66 ids incl. mask, context); the train / "
          "validation split sizes under the first characters", _S + "&tab=Model",
          "65 characters and [MASK] make the 66 ids: the model reads and writes characters, not words."),
     _fig("§4.2", "print: a sequence masked at t = 0.2, 0.5, 0.8",
          "Inspect: the text masked at each t, one row per t; a single-t link adds the caption counting masked vs "
          "expected (a line short enough that every row fits a projector's first screen)",
          _several(_S, "0.2,0.5,0.8", _HAMLET),
          "Each row hides about t of the characters, with one mask seed for all rows: a character masked at 0.2 "
          "stays masked at 0.5 and 0.8 (nested masks).",
          label="0.2, 0.5, 0.8",
          variants=(("0.2", _inspect(_S, "0.2", _HAMLET)), ("0.5", _inspect(_S, "0.5", _HAMLET)),
                    ("0.8", _inspect(_S, "0.8", _HAMLET)))),
     _fig("§4.3", "print: model parameters", "Model: Architecture (4.82 M parameters, layers × heads, width)",
          _S + "&tab=Model",
          "4.8 M parameters: a transformer of GPT's shape without the causal mask.",
          "This checkpoint takes no time input: it was adapted from the causal shakespeare-ar, while the "
          "notebook's model adds a time embedding (shakespeare-large has one)."),
     _fig("§4.4", "print + plot: training and validation loss curves",
          'Model: "loss during training" (train raw and smoothed, validation dashed) and the LR schedule used',
          _S + "&tab=Model",
          "Validation tracks training all the way: the loss falls from 4.4 to about 1.8 nats per character in "
          "6,000 steps, no overfitting."),
     _fig("§4.5", "plot: accuracy vs masking ratio",
          'Inspect: "Accuracy vs masking ratio (validation)", t = 0.1 … 0.9', _inspect(_S, "0.5", first="statistics"),
          "Low masking, high accuracy: on held-out text 78 % at t = 0.1, 50 % at 0.5, 20 % at 0.9.",
          target=".inspect-accuracy"),
     _fig("§4.6", "print: predictions on 3 quotes at t = 0.5 (original / masked / predicted / accuracy)",
          'Inspect with those texts, one row each: masked text, top-k candidates, "n of m right"',
          _S + "&tab=Inspect&inspect.t=0.5&inspect.texts=" + _QUOTES_T05,
          "About half the masked characters come back right at t = 0.5; spaces and common letters are the "
          "easy ones.",
          label="all 3", variants=(("1", _inspect(_S, "0.5", _CITIZEN)), ("2", _inspect(_S, "0.5", _HAMLET + ":")),
                                   ("3", _inspect(_S, "0.5", _GOLD)))),
     _fig("beyond §4.6", "the same line under the uniform-state twin's noise at t = 0.2, 0.5, 0.8",
          "Inspect on `shakespeare-uniform`: the line as that model sees it at each t (characters redrawn at "
          "random, tinted and underlined where they changed) and what it predicts there, one row per t",
          _several(_U, "0.2,0.5,0.8", _HAMLET),
          "No [MASK]: each character is redrawn with probability t, and the model is not told which changed. "
          "At t = 0.2 it restores 5 of the 10 changed characters (\"To be, or no, to be, that it therq istion\") "
          "and rewrites one the noise left alone; at 0.8 only 9 of 34.",
          "The notebook knows only the masked process; the uniform-state twin (held-out NELBO 2.16 nats per "
          "character against 1.87) is the weaker model on this text.",
          label="0.2, 0.5, 0.8",
          variants=(("0.2", _inspect(_U, "0.2", _HAMLET)), ("0.8", _inspect(_U, "0.8", _HAMLET)))),
     _fig("§5 TODO 1", "plot: LR schedules compared (cosine / constant / linear)",
          'Model, "Train a small model live": choose a schedule and press **Train**, then another: each earlier '
          "run's smoothed loss and the LR it used stay drawn beside the live one, labelled by schedule (up to "
          "four; **Clear earlier runs** removes them)",
          _S + "&tab=Model&model.preset=shakespeare&model.lr_schedule=cosine",
          "Train once per schedule: the earlier runs stay drawn, so which converges fastest reads off one plot.",
          label="cosine",
          variants=(("linear", _S + "&tab=Model&model.preset=shakespeare&model.lr_schedule=linear"),
                    ("constant", _S + "&tab=Model&model.preset=shakespeare&model.lr_schedule=constant"))),
     _fig("§5 TODO 2", "bar: model confidence by position, t = 0.5",
          'Explore: per-position confidence, view "mean at t (validation)", over the 64-position canvas (Inspect '
          "draws it at 256)",
          _S + "&length=64&confidence_view=mean%20at%20t%20%28validation%29&confidence_t=0.5",
          "Confidence dips at both ends (0.33 at the first position, 0.36 at the last, about 0.5 in the middle): "
          "an edge has context on one side only."),
     _fig("§6", 'print: full demo on "ROMEO: But, soft! …" at t = 0.5',
          "Inspect with that text: prediction, accuracy on masked characters", _inspect(_S, "0.5", _ROMEO),
          "Every [MASK] is predicted at once from one model call: the accuracy is that one-shot guess, not "
          "step-by-step generation."),
     _fig("§7", "plot: predictions at t = 0.4, correct / wrong colouring, confidence as intensity (3 quotes)",
          "Inspect: candidate grid (blue = correct, vermillion = wrong, paler = less probable), the three quotes one "
          "under another, or one quote per link", _S + "&tab=Inspect&inspect.t=0.4&inspect.texts=" + _QUOTES_T04,
          "Confidence is honest here: at t = 0.5 the mean top-1 probability is 0.50 and the accuracy 0.50 on "
          "held-out text, so pale cells are the likely mistakes.",
          label="all 3", variants=(("1", _inspect(_S, "0.4", _CITIZEN)), ("2", _inspect(_S, "0.4", _ROMEO)),
                                   ("3", _inspect(_S, "0.4", _HAMLET + ":%20whether%20%27tis"))))])

GENERATION = _lesson(
    "generation", "Generation: Iterative Unmasking", "Generation: Iterative Unmasking — The Grand Finale",
    "generating text step by step: temperature, number of steps, infilling, prompting, top-p and left-to-right "
    "order",
    "Checkpoint `shakespeare` with `length=64`, the notebook's canvas.",
    [_fig("§4.2", "print: generated samples, 12 steps, T 1.0",
          "Explore: the text under the heatmap, and five samples, one per seed, under it",
          _GEN + "&steps=12&temperature=1&strategy=confidence&schedule=remaining&samples=5",
          "Shakespeare's shape (line breaks, short words) more than his phrases: 71 % of the words are real at "
          "12 steps.",
          label="5 samples", variants=(("one", _GEN + "&steps=12&temperature=1&strategy=confidence&schedule=remaining"),)),
     _fig("§4.3", "plot: step-by-step unmasking, 10 steps, T 0.8",
          "Explore: trajectory heatmap (step × position), step scrubber, the text at that step",
          _GEN + "&steps=10&temperature=0.8&strategy=confidence&schedule=remaining",
          "Not left to right: the first step commits only spaces (six of them), then common letters, as the "
          "notebook says."),
     _fig("§4.4", "print: temperature 0.3 / 0.7 / 1.0 / 1.5, 3 samples each, 12 steps",
          'Sweep: "Temperature comparison", whose defaults are these settings; press its **Run**. Compare shows '
          "all four side by side, one sample each", _GEN + "&strategy=confidence&schedule=remaining&tab=Sweep",
          "Lower temperature narrows the characters used (entropy 2.42 nats at T 0.3, 2.53 at T 1.0).",
          "The notebook expects low temperature to be repetitive but coherent; here it is not more coherent: at "
          "T 0.3 the judged perplexity is the worst (17.8, against 12.0 at T 1.0 and 10.7 at T 1.5) and 68 % of "
          "words are real (71-76 % above it).",
          label="Sweep",
          variants=(("Compare", _GEN + "&steps=12&strategy=confidence&schedule=remaining&tab=Compare"
                                "&compare.columns=temperature=0.3%7Ctemperature=0.7%7Ctemperature=1.0%7Ctemperature=1.5"),)),
     _fig("§4.5", "print: one seed at steps 1, 2, 5, 10, 20, T 0.7",
          "Compare: the same seed at 1, 2, 5, 10 and 20 steps (five columns side by side, a fifth of the row each: "
          "all of them in the first screen of a 1024- or 1366-pixel projector)",
          _GEN + "&temperature=0.7&strategy=confidence&schedule=remaining&tab=Compare"
          "&compare.columns=steps=1%7Csteps=2%7Csteps=5%7Csteps=10%7Csteps=20",
          "More steps, better text: judged perplexity 500 at 1 step, 73 at 2, 22 at 5, 12 at 10, 7.8 at 20.",
          "The notebook says even a few steps work; here 5 steps give 66 % real words against 91 % in held-out "
          "text, and quality still improves at 20."),
     _fig("§4.6", "print: infilling 4 templates, 20 steps, T 0.7",
          "Explore with the template as the canvas (fixed text kept, █ generated), and all four templates' "
          "fills under it, one row each",
          _GEN + "&steps=20&temperature=0.7" + _Q + "&template=To%20be%5B___%5D%5B___%5D%5B___%5D%5B___%5D"
          "%E2%96%88%E2%96%88%E2%96%88%E2%96%88that%20is%20the%20question&prompts=To%20be%5B___%5D%5B___%5D"
          "%5B___%5D%5B___%5D%E2%96%88%E2%96%88%E2%96%88%E2%96%88that%20is%20the%20question%7CROMEO:%7C"
          "%5B___%5D%5B___%5D%5B___%5D%5B___%5D%5B___%5D%E2%96%88%E2%96%88%E2%96%88light%7CFirst%20Citizen:",
          "The fixed text never changes and each blank is filled with both sides in view, which a left-to-right "
          "model cannot do; the fills are words, not the quotation.",
          label="all 4", variants=(("1", _GEN + "&steps=20&temperature=0.7" + _Q + "&template=To%20be%5B___%5D"
                                   "%5B___%5D%5B___%5D%5B___%5D%E2%96%88%E2%96%88%E2%96%88%E2%96%88that%20is%20the"
                                   "%20question"),
                               ("2", _GEN + "&steps=20&temperature=0.7" + _Q + "&template=ROMEO:"),
                               ("3", _GEN + "&steps=20&temperature=0.7" + _Q + "&template=%5B___%5D%5B___%5D"
                                "%5B___%5D%5B___%5D%5B___%5D%E2%96%88%E2%96%88%E2%96%88light"),
                               ("4", _GEN + "&steps=20&temperature=0.7" + _Q + "&template=First%20Citizen:"))),
     _fig("§4.7", "print: confidence order vs forced left-to-right, T 0.7",
          "Compare: confidence order over 12 steps vs `left_to_right` over 64 steps (one position per step), side "
          "by side",
          _GEN + "&temperature=0.7&schedule=remaining&tab=Compare"
          "&compare.columns=strategy=confidence,steps=12%7Cstrategy=left_to_right,steps=64",
          "Count the model calls before comparing: 12 for confidence order, 64 for left to right.",
          "The notebook expects confidence order to beat left to right; here left to right reads better, at "
          "5.3 times the model calls: judged perplexity 4.6 against 12.1, 87 % real words against 76 %. At the "
          "same 12 calls left to right is far worse (141)."),
     _fig("§5 TODO 1", "code: top-p (nucleus) check, p = 0.9",
          "Inspect: top-p figure at a masked position (the tokens kept, renormalised); sidebar Top-p applies it to "
          "sampling (partial: a real position, not the toy 5-token distribution)",
          _S + "&tab=Inspect&inspect.nucleus_p=0.9&inspect.first=top-p",
          "Top-p keeps the fewest most likely characters whose probability reaches p and renormalises them: a "
          "confident position keeps one or two."),
     _fig("§5 TODO 2", 'code: prompted generation "ROMEO:\\n", "To be, ", "First C", 15 steps, T 0.7',
          "Explore with the prompt as template (trailing space / newline is trimmed), and all three prompts' "
          "samples under it, one row each", _GEN + "&steps=15&temperature=0.7" + _Q
          + "&template=ROMEO:&prompts=ROMEO:%7CTo%20be,%7CFirst%20C",
          "The prompt stays fixed at the start and the model continues in its voice: after a name comes a line "
          "break and a speech.",
          label="all 3", variants=(("1", _GEN + "&steps=15&temperature=0.7" + _Q + "&template=ROMEO:"),
                                   ("2", _GEN + "&steps=15&temperature=0.7" + _Q + "&template=To%20be,"),
                               ("3", _GEN + "&steps=15&temperature=0.7" + _Q + "&template=First%20C"))),
     _fig("§6", "print: generation showcase, 8 samples, 15 steps, T 0.7",
          "Explore: the run's text and eight samples under it, one per seed", _GEN + "&steps=15&temperature=0.7" + _Q
          + "&samples=8",
          "Eight seeds, eight samples: the same seed always gives the same text, and New seed in the sidebar draws "
          "the next.",
          label="8 samples", variants=(("one", _GEN + "&steps=15&temperature=0.7" + _Q),)),
     _fig("§7", "plot: the grand visualisation, seed 7, 12 steps, T 0.7, newly revealed highlighted",
          "Explore: heatmap and scrubber; the text marks the characters committed at the selected step",
          "checkpoint=shakespeare&seed=7&length=64&steps=12&temperature=0.7" + _Q,
          "Scrub through the steps: spaces and common letters are committed first, the rarer letters that make "
          "the words last."),
     _fig("beyond §7", "the same prompt unmasked by the masked model and denoised by its uniform-state twin",
          "Compare: `shakespeare` and `shakespeare-uniform` side by side on the prompt ROMEO:, seed 42, 64 "
          "characters, up to 32 steps (one column per checkpoint, each named by its column's model=)", _UNIFORM_PAIR,
          "Masked (left): a cell is [MASK] until its one commit. Uniform (right): every cell holds a random "
          "character from step 0, re-drawn until accepted; the last row is the settled text.",
          "The notebook knows only the masked process. The uniform-state twin is a far weaker model (held-out "
          "NELBO 2.16 nats per character against 1.87), so many of its words are misspelt.")])

STRATEGIES = _lesson(
    "sampling-strategies", "Sampling Strategies & Speed Tradeoffs",
    "Sampling Strategies & Speed Tradeoffs in Diffusion LLMs",
    "which positions to unmask first, and what quality each strategy buys at each step count and speed",
    "Checkpoint `patterns`: 24 positions, as in the notebook. Quality links pick `pattern_quality`, the notebook's "
    "measure (the default `auto` requires a period of at least 2).",
    [_fig("§4.3", "print: quality of confidence / random / single-shot, 10 steps, 20 samples each",
          "Sweep: summary table, mean ± std per strategy at 1 and 10 steps. The row at 1 step, T 0 is the argmax "
          "single shot",
          _P + "&tab=Sweep&sweep.schedules=remaining&sweep.steps_grid=1,10&sweep.temperatures=1,0&sweep.samples=20"
          "&sweep.include_ar=false&sweep.metric=pattern_quality",
          "The single shot commits all 24 positions from one call and scores lowest; at 10 steps confidence "
          "order scores above random.",
          "Part of confidence order's lead is collapse: at 8-12 steps 6-12 of 30 of its samples are one symbol "
          "repeated, which the notebook's measure scores 1.0; by the period-2 quality the two orders are close "
          "(0.58-0.73 against 0.64-0.71)."),
     _fig("§5", "print: step-count sweep, steps 1–32, 30 samples, confidence and random",
          "Sweep: summary table under the plots (quality mean ± std, NFE, tokens/s per step count)", _SWEEP,
          "Quality rises steeply up to about 5 steps; after that random order flattens near 0.74 and confidence "
          "order keeps rising to 1.000.",
          "From 16 steps every confidence-order sample is one symbol repeated (30 of 30): 1.000 by the notebook's "
          "measure, 0 by the period-2 quality."),
     _fig("§6", "plot: quality vs number of steps, ±1 std bands, sweet spot",
          "Sweep: quality plot with bands and ★ sweet spot (the fewest steps reaching 90 % of the best)", _SWEEP,
          "The ★ marks the fewest steps reaching 90 % of the best: 8 for confidence order and 12 for random by "
          "the notebook's measure, inside its 5-15.",
          "Past its sweet spot confidence order does not plateau, it collapses: by the period-2 quality 0.783 at "
          "5 steps, 0.584 at 12, 0 from 16."),
     _fig("§6", "print: speed benchmark, tokens/s per step count",
          "Sweep: speed plot (tokens/s vs steps), beside the quality plot", _SWEEP,
          "Tokens/s falls about as 1/steps (a log axis): each step is one model call over the whole canvas, as "
          "the notebook says."),
     _fig("§6", "plot: the quality–speed tradeoff (quality and tokens/s on twin axes)",
          "Explore: the quality vs steps plot, with tokens/s on a second axis. It is computed after the run, or "
          "press **Compute** (fixed grid: 1, 2, 4, 8, 16 steps)",
          _P + "&steps=10&schedule=remaining&strategy=confidence&temperature=1.0&sweep_strategies=confidence"
          "&sweep_samples=30&sweep_metric=pattern_quality",
          "Read the two axes together: past the sweet spot each doubling of steps halves the speed and buys "
          "little quality.", target=".quality-plot"),
     _fig("§7", "imshow: unmasking trajectories, confidence vs random, 12 steps",
          "Compare: the two trajectory heatmaps side by side, with final texts and pattern quality",
          _P + "&steps=12&schedule=remaining&temperature=1.0&tab=Compare&compare.preset=strategies",
          "Confidence order commits the positions it is surest of first; random order ignores the scores and "
          "commits anywhere.",
          "Confidence order tends to a single repeated symbol on this model (12 of 30 samples at 12 steps), which "
          "the notebook's quality scores as a perfect pattern; Compare marks such a sample collapsed."),
     _fig("§8", "imshow: quality grid, 6 samples × steps 1, 3, 5, 10, 20",
          'Sweep: "Quality grid" (the same seeds at each step count, a score per cell). Press its **Run**; set Grid '
          "rows to 6 (default 4)",
          _P + "&schedule=remaining&temperature=1.0&tab=Sweep&sweep.strategies=confidence&sweep.include_ar=false"
          "&sweep.metric=pattern_quality",
          "Read down a column: the same seeds at more steps, and at 1 step no row is a pattern yet.",
          "The notebook expects recognisable patterns from 5 steps on; here 5 steps is confidence order's best "
          "(period-2 quality 0.783), and at 10 and 20 steps more and more rows are one symbol.")])

GUIDE = _lesson(
    "build-a-diffusion-lm", "Let's Build a Diffusion LM",
    "Let's Build a Diffusion Language Model: From Scratch, In Code, Spelled Out",
    "the long-form guide: the whole model from the data to adaLN time conditioning, training, sampling, "
    "perplexity and infilling",
    "Checkpoint `shakespeare`: 4.8 M parameters, no time conditioning, the quickest on a CPU. The guide's own "
    "size, 12 M parameters with adaLN time conditioning, is `shakespeare-large` (trained from scratch in 4 "
    "minutes on an H200; better text, about twice the CPU time per step): the rows on the time embedding and the "
    "parameter count open it. The guide samples by argmax, which is `temperature=0` here.",
    [_fig("§2.2–2.4", "prints: text length, first characters, vocabulary and [MASK] id, batch shape",
          "Model: Data table (vocabulary as characters, corpus size, split and first 200 characters when the text "
          "is on the server), Architecture, and the batch shape (batch × context) under Training",
          _S + "&tab=Model",
          "Everything is characters: 65 of them plus [MASK], read in windows of 256."),
     _fig("§3.1", 'print: "To be, or not to be, that is the question" masked at t = 0 … 1.0',
          "Inspect with that text masked at t = 0, 0.2, …, 1.0, one row per t (or one t per link)",
          _several(_S, _ALL_T, _HAMLET),
          "The same line at growing t: at 0.8 only a few letters are left, and the guesses lean on what the "
          "model knows of English.",
          label="all t", variants=(("0.2", _inspect(_S, "0.2", _HAMLET)), ("0.4", _inspect(_S, "0.4", _HAMLET)),
                                   ("0.8", _inspect(_S, "0.8", _HAMLET)))),
     _fig("§6.2", "imshow: sinusoidal time embedding, t × 64 dims",
          "Model: time-embedding heatmap of `shakespeare-large` (adaLN; drawn at its width, 352 dims)",
          "checkpoint=shakespeare-large&seed=42&tab=Model",
          "Each dimension is a sine or cosine of t at its own frequency: nearby t give nearby vectors, so every "
          "block can tell how much is masked."),
     _fig("§6.6", 'print: "Model has 12.45M parameters"',
          "Model: Architecture → parameters: 12.29 M for `shakespeare-large` (6 layers, d 352, 8 heads, adaLN: the "
          "guide's 12.45 M is the same size from a different block layout)",
          "checkpoint=shakespeare-large&seed=42&tab=Model",
          "12.29 M parameters: the guide's size, with adaLN time conditioning in every block."),
     _fig("§7.2", "plot: training loss, raw and smoothed", "Model: stored curves (raw faint, smoothed bold, validation)",
          _S + "&tab=Model",
          "The raw loss is noisy from batch to batch (each draws its own t); the smoothed curve shows the trend.",
          "The guide expects 1.2-1.5 at convergence; this checkpoint's validation loss ends at 1.83 nats per "
          "character."),
     _fig("§8.1", "print: samples of 100 characters, 50 steps, T 0.8", "Explore: one sample per run",
          "checkpoint=shakespeare&seed=42&length=100&steps=50&temperature=0.8" + _Q,
          "One sample per run: New seed draws the next.",
          "The guide finds confidence order works well; here its text leans on the commonest words (\"the more "
          "the\"), and random order, the checkpoint's own default, reads closer to real text."),
     _fig("§8.2", "print: reverse process t = 1 → 0, 60 characters, 20 steps",
          "Explore: heatmap, scrubber and the text at each step (argmax)",
          "checkpoint=shakespeare&seed=42&length=60&steps=20&temperature=0" + _Q,
          "Spaces and common letters appear first and the words form around them, as the guide says.",
          "Argmax with confidence order repeats itself on this model: \"have to your your you  have you\", where "
          "the guide's expected output reads as a sentence."),
     _fig("§9.1", "print: test perplexity",
          "Header and Model: held-out NELBO in nats/char and the perplexity bound exp(NELBO) in the header. "
          "Partial: not the guide's 5-t average", _S + "&tab=Model",
          "The header gives the held-out NELBO, 1.868 nats per character, and its perplexity bound, 6.47.",
          "The guide expects a character perplexity of about 3-4; this model's bound is 6.47 (and the guide's "
          "figure averages five masking ratios, which is not the ELBO)."),
     _fig("§9.2", "print: prompt completions (4 prompts + 60 characters, 30 steps, argmax)",
          "Explore: the four prompts' completions one under another on an 88-character canvas (the longest prompt "
          "+ 60; the shorter prompts get more than 60); one prompt per link at Length = prompt + 60",
          "checkpoint=shakespeare&seed=42&length=88&steps=30&temperature=0" + _Q + "&prompts=ROMEO:%7C"
          "To%20be%20or%20not%20to%20be%7CWhat%20light%20through%20yonder%7CFriends,%20Romans,%20countrymen,",
          "The prompt stays fixed and 60 characters are generated after it in 30 steps.",
          "Argmax completions loop on common words: ROMEO: goes on \"Now, look you lot  have you  have you  am you "
          "dog\" (at Length 66: \"Now, look you yot  you, you yot  have you\").",
          label="all 4",
          variants=(("1", "checkpoint=shakespeare&seed=42&length=66&steps=30&temperature=0" + _Q + "&template=ROMEO:"),
                    ("2", "checkpoint=shakespeare&seed=42&length=78&steps=30&temperature=0" + _Q
                     + "&template=To%20be%20or%20not%20to%20be"),
                    ("3", "checkpoint=shakespeare&seed=42&length=85&steps=30&temperature=0" + _Q
                     + "&template=What%20light%20through%20yonder"),
                    ("4", "checkpoint=shakespeare&seed=42&length=88&steps=30&temperature=0" + _Q
                     + "&template=Friends,%20Romans,%20countrymen,"))),
     _fig("§9.3", "print: infilling `[___]` blanks (3 examples, 30 steps, argmax)",
          "Explore with the template, Length = the template's length (the **Fill only the blanks** button under "
          "the template sets it), so that only the blanks are filled",
          "checkpoint=shakespeare&seed=42&length=24&steps=30&temperature=0" + _Q
          + "&template=To%20%5B___%5D%20or%20not%20to%20%5B___%5D",
          "Only the blanks change, each filled with the text on both sides in view; the fills fit the grammar "
          "more than the quotation.",
          label="1",
          variants=(("2", "checkpoint=shakespeare&seed=42&length=51&steps=30&temperature=0" + _Q
                     + "&template=ROMEO:%20O,%20she%20doth%20%5B___%5D%20the%20torches%20to%20burn%20%5B___%5D!"),
                    ("3", "checkpoint=shakespeare&seed=42&length=29&steps=30&temperature=0" + _Q
                     + "&template=Now%20is%20the%20%5B___%5D%20of%20our%20%5B___%5D")))])

LESSONS: tuple[Lesson, ...] = (FORWARD, ELBO, GENERATION, STRATEGIES, GUIDE)


def lesson(slug: str) -> Lesson:
    """The lesson called `slug`; ValueError listing the slugs when there is none."""
    for item in LESSONS:
        if item.slug == slug:
            return item
    raise ValueError(f"{slug!r} is not a lesson (one of: {', '.join(item.slug for item in LESSONS)})")


def find_figure(slug: str | None, index) -> Figure | None:
    """Figure `index` (1-based; an int or a link's digits) of lesson `slug`; None for the lesson before its
    first figure, an index out of range, or no such lesson (a link's values, checked, not trusted)."""
    item = next((x for x in LESSONS if x.slug == slug), None)
    n = int(index) if isinstance(index, int) or (isinstance(index, str) and index.isdigit()) else 0
    return item.figures[n - 1] if item is not None and 1 <= n <= len(item.figures) else None


def all_figures() -> list[Figure]:
    """Every figure of every lesson, in the lessons' order."""
    return [fig for item in LESSONS for fig in item.figures]


def query_url(fig: Figure, query: str, base: str = BASE, presentation: bool = False) -> str:
    """`query` (the figure's or one of its variants') as a link that opens lesson mode at `fig`."""
    url = f"{base}?{query}&lesson={fig.lesson}&figure={fig.index}"
    return url + "&presentation=true" if presentation else url


def figure_url(fig: Figure, base: str = BASE, presentation: bool = False) -> str:
    """The figure's main link: base + '?' + query + '&lesson=<slug>&figure=<n>' (+ '&presentation=true')."""
    return query_url(fig, fig.query, base, presentation)
