"""The training loop, as a generator of log records; the CLI (cli/train.py) drives it with tqdm.

Diffusion models train on the masked-LM loss (uniform or ELBO 1/t weighting); the AR baseline on
next-char cross-entropy. Checkpoints carry the weights, configs, curves and the training position,
so `resume` continues a run across sessions (Adam's moments restart with a short re-warmup).
Under torchrun the same loop trains data-parallel (explorer/distributed.py): every rank draws the
whole batch from the same generator and trains its slice of the rows; only rank 0 validates and saves.
"""
from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import torch

from . import diffusion, distributed
from .checkpoint import load_checkpoint, save_checkpoint
from .data.corpus import load_corpus
from .devices import autocast_dtype, resolve_device
from .model import LIMITS, ModelConfig, Transformer
from .names import DEVICES, KINDS, LR_SCHEDULES, PRECISIONS, PROCESSES, TIME_CONDITIONING, WEIGHTINGS

EVAL_LENGTHS = (32, 64, 128)  # shorter canvases whose NELBO and accuracy the final metrics report
CARRIED_META = ("sampler_defaults",)  # metadata a resumed run keeps from the checkpoint it continues
# what a resumed run takes from the checkpoint it continues, whatever its config says: the network and its data
RESUMED_FIELDS = ("corpus", "data", "kind", "process", "time_conditioning", "block_size", "n_layer", "n_head",
                  "n_embd", "dropout", "init_from", "shift_logits")
# The valid values of TrainConfig's fields. TrainConfig checks them, whoever builds one (the CLI, the Python
# API, the train_config a resumed checkpoint carries), and `run.py train` parses its flags with them, so a
# value out of range is an error naming the flag. Numbers: (lowest, highest[, which ends are included]);
# the integers' two ends are always included.
CHOICES = {"kind": KINDS, "process": PROCESSES, "time_conditioning": TIME_CONDITIONING, "weighting": WEIGHTINGS,
           "lr_schedule": LR_SCHEDULES, "device": DEVICES, "precision": PRECISIONS}
RANGES = {
    "eps": (0.0, 1.0, "()"), "block_size": (1, LIMITS["block_size"]), "n_layer": (1, LIMITS["n_layer"]),
    "n_head": (1, LIMITS["n_head"]), "n_embd": (1, LIMITS["n_embd"]), "dropout": (0.0, 1.0, "[)"),
    "batch_size": (1, 1 << 16), "max_steps": (1, 10**9), "lr": (0.0, 10.0, "(]"), "min_lr_ratio": (0.0, 1.0, "[]"),
    "warmup_steps": (0, 10**9), "weight_decay": (0.0, 10.0, "[]"), "grad_clip": (0.0, 1e6, "(]"),
    "eval_every": (1, 10**9), "eval_sequences": (0, 10**6), "save_every": (1, 10**9), "seed": (0, 2**63 - 1),
    "threads": (0, 1024), "max_minutes": (0.0, 1e7, "[]"), "ema": (0.0, 1.0, "[)"),
    "min_length": (0, LIMITS["block_size"]), "short_fraction": (0.0, 1.0, "[]"),
}
# fp32 weights, their gradients and Adam's two moments (the EMA copy comes on top when asked for)
TRAIN_BYTES_PER_PARAM = 16


def _check_number(name: str, value, lo, hi, brackets: str | None = None) -> None:
    """An integer in [lo, hi] (brackets None), else a finite number between lo and hi."""
    if brackets is None:
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if brackets[0] == "(" else value >= lo)
    ok = ok and (value < hi if brackets[1] == ")" else value <= hi)
    if not ok:
        raise ValueError(f"{name} must be a number in {brackets[0]}{lo:g}, {hi:g}{brackets[1]}, got {value!r}")


@dataclass(frozen=True)
class TrainConfig:
    corpus: str = "shakespeare"  # "shakespeare", "patterns" or a name for --data
    data: str | None = None  # path of a UTF-8 text file (overrides the download)
    kind: str = "diffusion"  # "diffusion" or "ar"
    # a diffusion model's forward process: "masked" ([MASK], MDLM) or "uniform" (tokens redrawn from the
    # vocabulary, trained on the UDLM / Duo continuous-time ELBO: diffusion.uniform_elbo_terms)
    process: str = "masked"
    time_conditioning: str = "none"
    weighting: str = "elbo"  # diffusion loss weighting: "elbo" or "uniform"
    stratified: bool = True  # stratified t across the batch
    eps: float = 1e-3
    block_size: int = 256
    n_layer: int = 6
    n_head: int = 4
    n_embd: int = 256
    dropout: float = 0.0
    batch_size: int = 32
    max_steps: int = 5000
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 200
    lr_schedule: str = "cosine"
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 250
    eval_sequences: int = 64  # held-out sequences for periodic validation
    save_every: int = 500
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"  # "auto" (bf16 on CUDA and on CPUs with bf16 matmul), "fp32", "bf16"
    threads: int = 0  # torch threads on CPU (0: torch default)
    max_minutes: float = 0.0  # stop (and save) after this much training, earlier runs resumed included; 0: no limit
    ema: float = 0.0  # decay of an exponential moving average of the weights (e.g. 0.999); 0: none
    # Variable-length canvases: a sampled canvas shorter than the training window is out of
    # distribution (accuracy at 64 chars was a third of that at 256). With min_length > 0, a share
    # `short_fraction` of steps trains a canvas of L ~ U[min_length, block_size] (positions 0..L-1),
    # with more rows so a step still sees about batch_size * block_size tokens.
    min_length: int = 0  # 0: every step trains full block_size windows
    short_fraction: float = 0.5
    # AR-to-diffusion adaptation (Dream from Qwen): start from the weights of a checkpoint of the same
    # shape and tokenizer (the AR baseline), with shift_logits so each position keeps predicting from
    # where the causal model did.
    init_from: str | None = None
    shift_logits: bool = False

    def __post_init__(self):
        for name, bounds in RANGES.items():
            _check_number(name, getattr(self, name), *bounds)
        for name, valid in CHOICES.items():
            if not isinstance(getattr(self, name), str) or getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}, got {getattr(self, name)!r}")
        for name in ("stratified", "shift_logits"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("corpus", "data", "init_from"):
            if not isinstance(getattr(self, name), str) and (name == "corpus" or getattr(self, name) is not None):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.corpus == "patterns" and self.data is not None:  # load_corpus would train on patterns
            raise ValueError("corpus patterns is generated, not read: a data file would be ignored; leave it out "
                             "(a text file trains the text corpus)")
        if self.process == "uniform" and self.kind != "diffusion":
            raise ValueError("process uniform is a diffusion process; it needs kind diffusion, not ar")
        if self.process == "uniform" and self.weighting != "elbo":
            raise ValueError("process uniform trains on its own ELBO; weighting uniform is for the masked "
                             "process only (leave weighting elbo)")
        if not self.min_length <= self.block_size:
            raise ValueError(f"min_length must be in [0, block_size={self.block_size}], got {self.min_length}")
        # The architecture's own rules (heads dividing the width; adaLN and shift_logits for diffusion
        # models only) are ModelConfig's, checked when a new model is built: a resumed run takes its
        # architecture from the checkpoint, whatever these fields say.

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def lr_at(step: int, cfg: TrainConfig, rewarm_from: int = -1) -> float:
    """Warmup then cosine / linear / constant decay to min_lr_ratio * lr (the comparison of "Training with the ELBO").
    After a resume, Adam's moments are fresh, so the LR re-warms over warmup_steps from `rewarm_from`."""
    if step < cfg.warmup_steps:
        factor = (step + 1) / cfg.warmup_steps
    else:
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
        floor = cfg.min_lr_ratio
        if cfg.lr_schedule == "cosine":
            factor = floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
        elif cfg.lr_schedule == "linear":
            factor = 1 - (1 - floor) * progress
        else:
            factor = 1.0
    if rewarm_from >= 0 and step - rewarm_from < cfg.warmup_steps:
        factor *= (step - rewarm_from + 1) / cfg.warmup_steps
    return cfg.lr * factor


def free_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on `device`: the GPU's free memory, or the system's MemAvailable
    (Linux); None where it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            fields_ = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields_["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


class Trainer:
    """Holds model, optimizer and run state; `run()` yields log records; `save()` writes a checkpoint."""

    def __init__(self, cfg: TrainConfig, out: str | Path, resume: str | Path | None = None,
                 command: str = "", corpus=None, ranks: distributed.Ranks | None = None):
        self.ranks = ranks or distributed.Ranks()
        if cfg.batch_size < self.ranks.world_size:
            raise ValueError(f"--batch-size {cfg.batch_size} is smaller than the {self.ranks.world_size} processes: "
                             "each process trains at least one row of every batch")
        self.device = distributed.rank_device(self.ranks, resolve_device(cfg.device))
        distributed.init(self.ranks, self.device)
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)  # denormals made CPU training ~37x slower here
            if cfg.threads:
                torch.set_num_threads(cfg.threads)
        self.out = Path(out)
        self.carried: dict = {}  # CARRIED_META of a resumed checkpoint
        self.state = {"step": 0, "tokens": 0, "seconds": 0.0, "commands": [], "resumed_at": [],
                      "curves": {"train": [], "val": [], "grad_norm": []}}
        prior = load_checkpoint(resume, self.device) if resume else None
        if prior is not None:
            cfg = self._merge_resume(cfg, prior)
        self.cfg = cfg
        with distributed.main_first(self.ranks):  # one download into the shared cache, not N at once
            self.corpus = corpus or load_corpus(cfg.corpus, cfg.data)
        self._check_tokenizer(prior)
        self.model = prior.train() if prior is not None else self._build_model().to(self.device)
        self.net = distributed.wrap(self.model, self.ranks, self.device)  # what the training step calls
        # MDLM's practice: the 1/t-weighted loss is very noisy, and an average of the recent weights
        # is a better model than the last step's. The checkpoint holds the average (what is sampled
        # and evaluated); a resumed run continues from it.
        self.ema_model = copy.deepcopy(self.model).eval().requires_grad_(False) if cfg.ema else None
        self.optimizer = self._build_optimizer()
        self.autocast = autocast_dtype(self.device, cfg.precision)
        self.generator = torch.Generator().manual_seed(cfg.seed + self.state["step"])
        self.val = self.corpus.val_tensor(cfg.block_size, cfg.eval_sequences)
        self.state["commands"].append(command or "(python api)")
        self.rewarm_from = self.state["step"] if prior is not None else -1

    def _merge_resume(self, cfg: TrainConfig, prior) -> TrainConfig:
        """Architecture and corpus come from the checkpoint; the schedule (max_steps, lr...) from cfg. The
        text's path comes from cfg when it names one: the file may have moved since (a shipped checkpoint
        records a bare file name), and _check_tokenizer still refuses a text of another vocabulary."""
        old = TrainConfig.from_dict(prior.meta.get("train_config") or {})
        state = prior.meta.get("training_state") or {}
        self.state.update({k: state.get(k) for k in ("step", "tokens", "seconds")})
        resumed_at, commands = state.get("resumed_at", []), prior.meta.get("commands", [])
        curves = prior.meta.get("curves", {})
        # a file written by hand or by another program: its run state must be what save() writes
        if not (all(isinstance(self.state[k], int) and self.state[k] >= 0 for k in ("step", "tokens"))
                and isinstance(self.state["seconds"], (int, float)) and isinstance(resumed_at, list)
                and isinstance(commands, list) and isinstance(curves, dict)):
            raise ValueError(f"{prior.path}: its training state is incomplete or malformed; it cannot be resumed")
        self.state["commands"] = list(commands)
        # the sampler knobs the checkpoint recommends (config.recommended) go on with it: without them a
        # uniform-state model samples at the generic entropy bound, under which its canvas never clears
        self.carried = {k: prior.meta[k] for k in CARRIED_META if k in prior.meta}
        self.state["curves"] = {"train": [], "val": [], "grad_norm": [], **curves}
        self.state["resumed_at"] = resumed_at + [self.state["step"]]
        kept = {k: getattr(old, k) for k in RESUMED_FIELDS if not (k == "data" and cfg.data)}
        return replace(cfg, **kept)

    def _check_tokenizer(self, prior):
        if prior is not None and prior.tokenizer.chars != self.corpus.tokenizer.chars:
            raise ValueError("the corpus vocabulary differs from the checkpoint's; resume with the same data")

    def _build_model(self) -> Transformer:
        tok = self.corpus.tokenizer
        c = self.cfg
        model_cfg = ModelConfig(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=c.block_size,
                                n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, dropout=c.dropout,
                                kind=c.kind, time_conditioning=c.time_conditioning, shift_logits=c.shift_logits)
        self._check_memory(model_cfg)
        torch.manual_seed(c.seed)
        model = Transformer(model_cfg)
        if c.init_from:
            self._init_from(model, c.init_from)
        return model

    def _check_memory(self, model_cfg: ModelConfig) -> None:
        """Refuse a model too large to train in the free memory, before building it: an allocation that
        fails is a traceback, and one the system grants on credit ends with the process killed."""
        params = model_cfg.parameter_count()
        need = params * (TRAIN_BYTES_PER_PARAM + (4 if self.cfg.ema else 0))
        free = free_memory(self.device)
        if free is not None and need > free:
            raise ValueError(f"a model of {params:,} parameters needs about {need / 1e9:.1f} GB to train (weights, "
                             f"gradients, optimizer state) and {self.device} has {free / 1e9:.1f} GB free; "
                             f"choose a smaller --n-layer, --n-embd or --block-size")

    def _init_from(self, model: Transformer, source: str) -> None:
        """Copy every weight of checkpoint `source` (same shapes and tokenizer; its kind may differ)."""
        src = load_checkpoint(source)
        if src.tokenizer.chars != self.corpus.tokenizer.chars:
            raise ValueError(f"--init-from {source}: its vocabulary differs from the corpus's")
        theirs, mine = src.state_dict(), model.state_dict()
        wrong = sorted(k for k in mine if k not in theirs or theirs[k].shape != mine[k].shape)
        if wrong or set(theirs) - set(mine):
            raise ValueError(f"--init-from {source}: its weights do not fit this architecture "
                             f"({', '.join((wrong or sorted(set(theirs) - set(mine)))[:3])} ...); "
                             "give the same --n-layer, --n-embd, --n-head, --block-size and --time-conditioning")
        model.load_state_dict(theirs)

    def _build_optimizer(self):
        # No weight decay on norms, biases and embeddings' 1-D params (nanoGPT's split).
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": self.cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.cfg.lr, betas=(0.9, 0.99))

    def _amp(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def _loss_share(self, x0):
        """This rank's share of the loss of the whole batch x0 (B, L), which every rank draws alike
        (a single process: the whole loss). The noise is drawn for all B rows, so the stream is the same."""
        B, rows, mask_id = x0.shape[0], self.ranks.rows(x0.shape[0]), self.model.config.mask_id
        if self.cfg.kind == "ar":
            x = x0[rows].to(self.device)  # (b, L)
            with self._amp():
                return diffusion.ar_loss(self.net, x, mask_id) * (x.shape[0] / B)  # a mean over b of B rows
        if self.cfg.process == "uniform":  # the [MASK] id is also the number of real tokens
            t, xt, _ = diffusion.draw_uniform_noise(x0, mask_id, self.cfg.eps, self.cfg.stratified, self.generator)
            x0, t, xt = (v[rows].to(self.device) for v in (x0, t, xt))  # (b, L), (b,), (b, L)
            with self._amp():
                return diffusion.uniform_loss_share(self.net, x0, xt, t, B)
        t, xt, masked = diffusion.draw_noise(x0, mask_id, self.cfg.eps, self.cfg.stratified, self.generator)
        n_masked = int(masked.sum())
        x0, t, xt, masked = (v[rows].to(self.device) for v in (x0, t, xt, masked))  # (b, L), (b,), (b, L), (b, L)
        with self._amp():
            return diffusion.loss_share(self.net, x0, xt, t, masked, mask_id, self.cfg.weighting, B, n_masked)

    def train_step(self) -> dict:
        """One optimizer step; returns its log record (the loss of the whole batch, on every rank)."""
        step = self.state["step"]
        lr = lr_at(step, self.cfg, self.rewarm_from)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        B, L = self.batch_shape()
        x0 = self.corpus.batch(B, L, self.generator)  # (B, L) on the CPU: the same rows on every rank
        share = self._loss_share(x0)
        loss = distributed.sum_over_ranks(share, self.ranks)
        if not torch.isfinite(loss):  # every rank sees the same sum, so all stop together
            raise FloatingPointError(f"loss became {loss.item()} at step {step}; lower --lr")
        self.optimizer.zero_grad(set_to_none=True)
        # DDP averages the ranks' gradients; N x the mean of the shares' gradients is the whole batch's.
        (share * self.ranks.world_size).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self._update_ema()
        self.state["step"] += 1
        self.state["tokens"] += x0.numel()
        return {"type": "train", "step": self.state["step"], "loss": loss.item(), "lr": lr,
                "grad_norm": grad_norm.item()}

    def batch_shape(self) -> tuple[int, int]:
        """(rows, length) of the next batch: full windows, or with --min-length a share of shorter ones.

        No random draw is made without --min-length, so older runs resume on the same data stream."""
        c = self.cfg
        if not c.min_length or torch.rand(1, generator=self.generator).item() >= c.short_fraction:
            return c.batch_size, c.block_size
        L = int(torch.randint(c.min_length, c.block_size + 1, (1,), generator=self.generator))
        return max(1, c.batch_size * c.block_size // L), L

    @torch.no_grad()
    def _update_ema(self) -> None:
        if self.ema_model is None:
            return
        ema, live = list(self.ema_model.parameters()), list(self.model.parameters())
        torch._foreach_lerp_(ema, live, 1.0 - self.cfg.ema)  # ema += (1 - decay) * (live - ema)

    @property
    def eval_model(self):
        """The weights that are evaluated and saved: the average when --ema is on."""
        return self.ema_model if self.ema_model is not None else self.model

    def validate(self, tokens=None) -> dict:
        tokens = self.val if tokens is None else tokens
        model = self.eval_model
        with self._amp():
            if self.cfg.kind == "ar":
                res = diffusion.ar_cross_entropy(model, tokens)
            elif self.cfg.process == "uniform":
                res = diffusion.uniform_nelbo(model, tokens, n_t=4)
            else:
                res = diffusion.nelbo(model, tokens, n_t=4)
        return {"type": "val", "step": self.state["step"], **res}

    def run(self):
        """Yield a record per step and per validation until max_steps (or max_minutes)."""
        self.model.train()
        t_last = time.perf_counter()
        while self.state["step"] < self.cfg.max_steps:
            tokens_before = self.state["tokens"]
            rec = self.train_step()
            now = time.perf_counter()
            self.state["seconds"] += now - t_last
            rec["tokens_per_s"] = (self.state["tokens"] - tokens_before) / max(now - t_last, 1e-9)
            t_last = now
            self.state["curves"]["train"].append([rec["step"], round(rec["loss"], 5)])
            # before clipping: how large the steps wanted to be (spikes of the noisy 1/t loss show here)
            self.state["curves"]["grad_norm"].append([rec["step"], float(f"{rec['grad_norm']:.6g}")])
            # the LR actually used (re-warm-ups after resumes, changed schedules): the Model tab draws it
            self.state["curves"].setdefault("lr", []).append([rec["step"], float(f"{rec['lr']:.6g}")])
            yield rec
            # Rank 0 alone validates and saves; the others wait for it in the next step's all-reduce.
            if self.ranks.is_main and (yield from self._periodic_work()):
                t_last = time.perf_counter()  # validation and saving time is not training time
            if self._out_of_time():
                break

    def _periodic_work(self):
        """The validation (yielded) and the save due after this step; returns True if it did either."""
        step, done = self.state["step"], False
        if step % self.cfg.eval_every == 0 or step == self.cfg.max_steps:
            val = self.validate()
            self.state["curves"]["val"].append([step, round(val["nats_per_char"], 5)])
            self.state["last_val"] = val["nats_per_char"]
            yield val
            done = True
        if step % self.cfg.save_every == 0:
            self.save()
            done = True
        return done

    def _out_of_time(self) -> bool:
        """--max-minutes reached (by any rank: they must all stop at the same step)."""
        if not self.cfg.max_minutes:
            return False
        late = torch.tensor([float(self.state["seconds"] > 60 * self.cfg.max_minutes)], device=self.device)
        return bool(distributed.sum_over_ranks(late, self.ranks) > 0)

    def final_metrics(self) -> dict:
        """Held-out figures on the full validation set (deterministic), stored in the checkpoint."""
        full = self.corpus.val_tensor(self.cfg.block_size)
        model = self.eval_model
        with self._amp():
            if self.cfg.kind == "ar":
                res = diffusion.ar_cross_entropy(model, full)
                return {"val_ce_nats_per_char": res["nats_per_char"], "val_ce_bits_per_char": res["bits_per_char"]}
            res = (diffusion.uniform_nelbo if self.cfg.process == "uniform" else diffusion.nelbo)(model, full, n_t=8)
            out = {"nelbo_nats_per_char": res["nats_per_char"], "nelbo_bits_per_char": res["bits_per_char"]}
            if self.corpus.kind == "text":
                out.update(self.length_metrics())
        return out

    def length_metrics(self) -> dict:
        """NELBO and argmax accuracy at t = 0.3 at shorter canvases (positions 0..L-1), whole held-out split:
        a sampled canvas can be any length up to the context, so the model must be right at each."""
        model, out, uniform = self.eval_model, {}, self.cfg.process == "uniform"
        for L in sorted({L for L in EVAL_LENGTHS if L < self.cfg.block_size} | {self.cfg.block_size}):
            val = self.corpus.val_tensor(L)
            if L != self.cfg.block_size:
                bound = diffusion.uniform_nelbo if uniform else diffusion.nelbo
                out[f"nelbo_nats_per_char_L{L}"] = bound(model, val, n_t=8)["nats_per_char"]
            if uniform:  # every position is predicted; "changed": those the noise changed, unknown to the model
                acc = diffusion.uniform_accuracy(model, val, 0.3)
                out[f"accuracy_t0.3_L{L}"], out[f"changed_accuracy_t0.3_L{L}"] = acc["all"], acc["changed"]
            else:
                out[f"accuracy_t0.3_L{L}"] = diffusion.masked_accuracy(model, val, 0.3)
        return out

    def metadata(self, metrics: dict | None = None) -> dict:
        tok = self.corpus.tokenizer
        return {
            "tokenizer": tok.to_dict(),
            "train_config": asdict(self.cfg),
            # the forward process a diffusion model denoises (samplers and evaluators read it; the loader checks it)
            **({"process": self.cfg.process} if self.cfg.kind == "diffusion" else {}),
            "commands": self.state["commands"],
            "training_state": {k: self.state[k] for k in ("step", "tokens", "seconds", "resumed_at")},
            "curves": self.state["curves"],
            # Until final metrics exist (an interrupted run), keep the last periodic validation figure.
            "metrics": metrics or {"val_estimate_nats_per_char": self.state.get("last_val")},
            "corpus": {"name": self.corpus.name, "sha256": self.corpus.sha256, "kind": self.corpus.kind},
            "words": self.corpus.words,
            "n_params": self.model.n_params,
            "device": str(self.device),
            "precision": "bf16" if self.autocast is not None else "fp32",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **self.carried,
        }

    def save(self, metrics: dict | None = None, path: str | Path | None = None) -> Path:
        return save_checkpoint(self.eval_model, path or self.out, self.metadata(metrics))
