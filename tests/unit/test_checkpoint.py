import json
import math

import pytest
import torch
from safetensors.torch import save_file

from explorer.checkpoint import (CheckpointError, load_checkpoint, read_metadata, resolve_checkpoint,
                                 save_checkpoint)
from explorer.data import CharTokenizer
from tests.support.models import make_model


def _save(tmp_path, name="m", dtype=torch.float32, **extra):
    tok = CharTokenizer(list("abcdefghijk"))  # 11 chars + mask = vocab 12, mask id 11
    m = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, time_conditioning="adaln")
    path = save_checkpoint(m, tmp_path / f"{name}.safetensors", {"tokenizer": tok.to_dict(), **extra}, dtype=dtype)
    return m, path


def test_round_trip_gives_identical_logits(tmp_path):
    m, path = _save(tmp_path, dtype=torch.float32, words=["a"])
    loaded = load_checkpoint(path)
    x = torch.randint(0, 11, (2, 10))
    t = torch.tensor([0.3, 0.8])
    assert torch.equal(m(x, t), loaded(x, t))
    assert not loaded.training
    assert loaded.tokenizer.decode([0, 11]) == "a█"
    assert loaded.meta["words"] == ["a"]
    assert loaded.head.weight is loaded.tok_emb.weight  # tying survives the round trip


def test_fp16_storage_is_close(tmp_path):
    m, path = _save(tmp_path, dtype=torch.float16)
    x = torch.randint(0, 11, (2, 10))
    assert torch.allclose(m(x, torch.ones(2)), load_checkpoint(path)(x, torch.ones(2)), atol=1e-2)


def test_bare_name_resolves_inside_checkpoints_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    _save(tmp_path, name="tiny")
    assert resolve_checkpoint("tiny") == (tmp_path / "tiny.safetensors").resolve()
    assert load_checkpoint("tiny").config.vocab_size == 12
    with pytest.raises(CheckpointError, match="available: \\['tiny'\\]"):
        load_checkpoint("nope")


@pytest.mark.parametrize("name", ["../tiny", "/etc/passwd", "..", ".hidden", "sub/tiny"])
def test_paths_refused_when_only_names_allowed(tmp_path, monkeypatch, name):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    _save(tmp_path, name="tiny")
    with pytest.raises(CheckpointError):
        load_checkpoint(name, allow_paths=False)


def test_corrupted_file_fails_clearly(tmp_path):
    _, path = _save(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable safetensors|unreadable"):
        load_checkpoint(path)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(CheckpointError):
        load_checkpoint(junk)


def test_metadata_less_and_foreign_checkpoints_fail_clearly(tmp_path):
    bare = tmp_path / "bare.safetensors"
    save_file({"w": torch.zeros(2)}, str(bare))
    with pytest.raises(CheckpointError, match="no mdlm-explorer metadata"):
        load_checkpoint(bare)
    future = tmp_path / "future.safetensors"
    save_file({"w": torch.zeros(2)}, str(future), metadata={"format": "mdlm-explorer", "format_version": "99",
                                                            "meta": "{}"})
    with pytest.raises(CheckpointError, match="format version"):
        load_checkpoint(future)
    broken = tmp_path / "broken.safetensors"
    save_file({"w": torch.zeros(2)}, str(broken), metadata={"format": "mdlm-explorer", "format_version": "1",
                                                            "meta": "{not json"})
    with pytest.raises(CheckpointError, match="corrupted metadata"):
        read_metadata(broken)


def test_weights_that_do_not_fit_the_config_fail_clearly(tmp_path):
    _, path = _save(tmp_path)
    meta = read_metadata(path)
    meta["model_config"]["n_embd"] = 64
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata={"format": "mdlm-explorer", "format_version": "1",
                                            "meta": json.dumps(meta)})
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(path)


# ---------------------------------------------------------------------------------- lying files
# A checkpoint is refused from its header alone: no model is built (but the one-block shape probe on the
# meta device, which allocates nothing) and no weight is read before every check has passed.

@pytest.fixture
def builds(monkeypatch):
    """(device type, layers) of every Transformer the loader builds; reading the weights fails the test."""
    import explorer.checkpoint as checkpoint_module
    from explorer.model import Transformer

    seen = []

    class Recording(Transformer):
        def __init__(self, cfg):
            super().__init__(cfg)
            seen.append((self.tok_emb.weight.device.type, cfg.n_layer))

    monkeypatch.setattr(checkpoint_module, "Transformer", Recording)
    monkeypatch.setattr(checkpoint_module, "_read_weights", lambda path: pytest.fail(f"{path}: weights were read"))
    return seen


def _rewrite(path, config=None, tensors=None, meta=None):
    """The checkpoint at `path` rewritten: model_config keys set from `config`, tensors passed through
    `tensors(dict) -> dict`, or the raw metadata string replaced by `meta`."""
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        header, stored = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    full = json.loads(header["meta"])
    full["model_config"].update(config or {})
    stored = tensors(stored) if tensors else stored
    save_file(stored, str(path), metadata={**header, "meta": json.dumps(full) if meta is None else meta})
    return path


def _swap(a, b):
    def change(t):
        t[a], t[b] = t[b], t[a]
        return t
    return change


LYING_CONFIGS = {
    "a million layers": ({"n_layer": 10**6}, "n_layer must be an integer in [1, 512], got 1000000"),
    "a 10^12 context": ({"block_size": 10**12}, "block_size must be an integer in [1, 65536], got 1000000000000"),
    "a huge width": ({"n_embd": 2**40}, "n_embd must be an integer in [1, 32768]"),
    "a huge vocabulary": ({"vocab_size": 10**9}, "vocab_size must be an integer in [1, 1114113]"),
    "no heads": ({"n_head": 0}, "n_head must be an integer in [1, 512], got 0"),
    "negative layers": ({"n_layer": -1}, "n_layer must be an integer in [1, 512], got -1"),
    "layers as a string": ({"n_layer": "2"}, "n_layer must be an integer in [1, 512], got '2'"),
    "layers as a float": ({"n_layer": 2.0}, "n_layer must be an integer in [1, 512], got 2.0"),
    "layers as a bool": ({"n_layer": True}, "n_layer must be an integer in [1, 512], got True"),
    "layers as null": ({"n_layer": None}, "n_layer must be an integer in [1, 512], got None"),
    "width not divisible": ({"n_head": 5}, "n_embd (32) must be divisible by n_head (5)"),
    "mask id outside": ({"mask_id": 12}, "mask_id 12 outside vocabulary of 12"),
    "mask id a float": ({"mask_id": 11.0}, "mask_id must be an integer, got 11.0"),
    "dropout a string": ({"dropout": "0"}, "dropout must be a number in [0, 1), got '0'"),
    "dropout NaN": ({"dropout": float("nan")}, "dropout must be a number in [0, 1), got nan"),
    "unknown kind": ({"kind": "gpt"}, "kind must be one of ('diffusion', 'ar'), got 'gpt'"),
    "kind a list": ({"kind": ["ar"]}, "kind must be a string, got ['ar']"),
    "shift_logits a string": ({"shift_logits": "yes"}, "shift_logits must be true or false, got 'yes'"),
    "adaLN on a causal model": ({"kind": "ar"}, "time_conditioning 'adaln' is for diffusion models"),
}


@pytest.mark.parametrize("case", list(LYING_CONFIGS))
def test_config_out_of_range_is_refused_before_anything_is_built(tmp_path, builds, case):
    change, needle = LYING_CONFIGS[case]
    _, path = _save(tmp_path)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(_rewrite(path, config=change))
    assert needle in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)
    assert builds == []


LYING_TENSORS = {
    "more layers than stored": ({"n_layer": 512}, None,
                                "(missing: blocks.2.ln_1.weight, blocks.2.ln_1.bias, blocks.2.attn.qkv.weight ..."),
    "a wider config": ({"n_embd": 64}, None, "wrong shape: tok_emb.weight (12, 32) != (12, 64)"),
    "swapped shapes": (None, _swap("blocks.0.mlp.fc.weight", "blocks.0.mlp.proj.weight"),
                       "wrong shape: blocks.0.mlp.fc.weight (32, 128) != (128, 32), blocks.0.mlp.proj.weight"),
    "a missing tensor": (None, lambda t: {k: v for k, v in t.items() if k != "ln_f.weight"},
                         "(missing: ln_f.weight; the config implies"),
    "an extra tensor": (None, lambda t: {**t, "extra.weight": torch.zeros(3)}, "(unexpected: extra.weight; the config"),
    "integer weights": (None, lambda t: {**t, "ln_f.bias": torch.zeros(32, dtype=torch.int32)},
                        "not floating point: ln_f.bias I32"),
}


@pytest.mark.parametrize("case", list(LYING_TENSORS))
def test_tensors_that_do_not_fit_the_config_are_refused_from_the_header(tmp_path, builds, case):
    config, tensors, needle = LYING_TENSORS[case]
    _, path = _save(tmp_path)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(_rewrite(path, config=config, tensors=tensors))
    assert "weights do not fit the stored config" in str(e.value) and needle in str(e.value), str(e.value)
    assert all(device == "meta" and layers == 1 for device, layers in builds)  # the shape probe only


def test_parameter_count_is_reported_when_it_differs(tmp_path, builds):
    _, path = _save(tmp_path)  # 2 layers of width 32 with adaLN
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(_rewrite(path, config={"n_layer": 3}))
    from explorer.model import ModelConfig
    cfg = ModelConfig.from_dict({**read_metadata(path)["model_config"]})
    assert f"the config implies {cfg.parameter_count():,} parameters, the file holds " in str(e.value)


@pytest.mark.parametrize("meta, needle", [
    ("{not json", "corrupted metadata"),
    ("[1, 2]", "a JSON list, not an object"),
    (json.dumps({"model_config": [1], "tokenizer": {}}), "'model_config' is a JSON list, not an object"),
    (json.dumps({"model_config": {}, "tokenizer": "abc"}), "'tokenizer' is a JSON str, not an object"),
    (json.dumps({"model_config": {}, "tokenizer": None}), "'tokenizer' is a JSON null, not an object"),
    (json.dumps({"model_config": {}, "tokenizer": {}, "metrics": [0.5]}), "'metrics' is a JSON list, not an object"),
    (json.dumps({"model_config": {"vocab_size": 12}, "tokenizer": {"type": "char", "chars": "abcdefghijk"}}),
     "incompatible metadata"),
])
def test_malformed_metadata_is_refused(tmp_path, builds, meta, needle):
    _, path = _save(tmp_path)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(_rewrite(path, meta=meta))
    assert needle in str(e.value) and builds == []


def test_a_header_claiming_more_data_than_the_file_holds_is_refused(tmp_path, builds):
    """safetensors checks the header against the file's size when it opens it, before any check of ours."""
    header = {"__metadata__": {"format": "mdlm-explorer", "format_version": "1", "meta": "{}"},
              "tok_emb.weight": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}
    raw = json.dumps(header).encode()
    path = tmp_path / "liar.safetensors"
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * 16)
    with pytest.raises(CheckpointError, match="is not a readable safetensors checkpoint"):
        load_checkpoint(path)
    assert builds == []


@pytest.mark.parametrize("kind, time_conditioning, n_layer", [("diffusion", "none", 2), ("diffusion", "adaln", 3),
                                                              ("ar", "none", 1)])
def test_expected_shapes_are_those_of_the_built_model(kind, time_conditioning, n_layer):
    """The one-block probe, repeated per block, names exactly the full model's tensors and shapes."""
    from explorer.checkpoint import expected_shapes
    from explorer.model import ModelConfig, Transformer

    cfg = ModelConfig(vocab_size=13, mask_id=12, block_size=20, n_layer=n_layer, n_head=3, n_embd=48, kind=kind,
                      time_conditioning=time_conditioning)
    model = Transformer(cfg)
    built = {k: tuple(v.shape) for k, v in model.state_dict().items() if k != "head.weight"}
    assert expected_shapes(cfg) == built
    assert cfg.parameter_count() == model.n_params == sum(math.prod(s) for s in built.values())
