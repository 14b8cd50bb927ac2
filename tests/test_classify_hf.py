"""Loading HF token classifiers through the real code path, and batched inference."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers_models import MARKER, WORDS, build_tokenizer, save_tiny_classifier  # noqa: E402
from pulpie_spark.classify.chunker import SEP_TOKEN  # noqa: E402
from pulpie_spark.classify import ModelLoadError, load_classifier, resolve_model_name  # noqa: E402
from pulpie_spark.classify.hf import load_block_tokenizer, load_hf_classifier, restore_rotary_buffers  # noqa: E402
from pulpie_spark.classify.inference import scatter_page_probs  # noqa: E402


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("tiny") / "random", seed=1)


@pytest.fixture(scope="module")
def rigged_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("tiny") / "rigged", rigged=True)


def _reference_model(directory):
    # Rebuild the saved model the plain way: config + safetensors state dict, strict.
    from safetensors.torch import load_file
    from transformers import AutoConfig, EuroBertForTokenClassification

    model = EuroBertForTokenClassification(AutoConfig.from_pretrained(directory)).eval()
    model.load_state_dict(load_file(str(directory / "model.safetensors")), strict=True)
    return model


def test_loaded_outputs_equal_saved_model(random_dir):
    clf = load_hf_classifier(str(random_dir), device="cpu")
    reference = _reference_model(random_dir)
    ids = torch.tensor([[0, 7, 8, 9, 4, 10, 11, 12, 13, 4, 1]])
    with torch.inference_mode():
        got = clf.model(input_ids=ids).logits
        want = reference(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    rotary = clf.model.model.rotary_emb
    head_dim = clf.model.config.hidden_size // clf.model.config.num_attention_heads
    theta = clf.model.config.rope_parameters["rope_theta"]
    expected = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    assert rotary.inv_freq.dtype == torch.float32
    torch.testing.assert_close(rotary.inv_freq, expected)
    assert clf.model.dtype == torch.float32 and not clf.model.training
    assert clf.model_id == str(random_dir)


def test_lost_rotary_buffers_are_restored(random_dir):
    clf = load_hf_classifier(str(random_dir), device="cpu")
    ids = torch.tensor([[0, 7, 8, 9, 4, 10, 11, 4, 1]])
    with torch.inference_mode():
        want = clf.model(input_ids=ids).logits.clone()
    rotary = clf.model.model.rotary_emb
    rotary.inv_freq = torch.zeros_like(rotary.inv_freq)               # as if never initialised
    rotary.original_inv_freq = rotary.original_inv_freq.to(torch.bfloat16)  # as if cast
    with torch.inference_mode():
        broken = clf.model(input_ids=ids).logits
    assert not torch.allclose(broken, want)
    assert restore_rotary_buffers(clf.model) == 2
    assert restore_rotary_buffers(clf.model) == 0
    with torch.inference_mode():
        torch.testing.assert_close(clf.model(input_ids=ids).logits, want, rtol=0, atol=0)


def test_sep_added_when_missing_and_deterministic(tmp_path):
    directory = save_tiny_classifier(tmp_path / "nosep", with_sep=False, seed=2)
    assert SEP_TOKEN not in build_tokenizer(with_sep=False).get_vocab()
    first = load_hf_classifier(str(directory), device="cpu")
    second = load_hf_classifier(str(directory), device="cpu")
    assert first.tokenizer.convert_tokens_to_ids(SEP_TOKEN) == len(first.tokenizer) - 1
    assert first.model.get_input_embeddings().weight.shape[0] == len(first.tokenizer)
    assert first.model.config.id2label == {0: "other", 1: "main"}
    assert first.model.classifier.out_features == 2
    # The sep must be one token, not split into pieces.
    assert first.tokenizer("a <|sep|> b", add_special_tokens=False)["input_ids"].count(first.sep_id) == 1
    pages = [["alpha beta", "gamma MAIN delta"], ["hello world"]]
    a, b = first.predict_proba(pages), second.predict_proba(pages)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_pickle_weights_are_refused(tmp_path, random_dir):
    directory = tmp_path / "pickled"
    directory.mkdir()
    for f in random_dir.iterdir():
        if f.suffix != ".safetensors":
            (directory / f.name).write_bytes(f.read_bytes())
    torch.save({"w": torch.zeros(1)}, directory / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="pickle"):
        load_hf_classifier(str(directory), device="cpu")


def test_hub_names_resolve_and_offline_load_fails_clearly():
    assert resolve_model_name("orange-small") == "feyninc/pulpie-orange-small"
    assert resolve_model_name("orange-base") == "feyninc/pulpie-orange-base"
    assert resolve_model_name("orange-large") == "feyninc/pulpie-orange-large"
    assert resolve_model_name("someone/other-model") == "someone/other-model"
    assert resolve_model_name("default") == "default"
    with pytest.raises(ModelLoadError, match="HF_HUB_OFFLINE"):
        load_classifier("orange-small", device="cpu")
    with pytest.raises(ModelLoadError, match="not a checkpoint directory"):
        load_classifier("/nonexistent/model/dir", device="cpu")
    with pytest.raises(ModelLoadError):
        resolve_model_name("")


def test_default_model_delegates_to_blockmodel():
    """The shipped default model loads through the registry and predicts: no early return
    that would let a broken or missing model pass."""
    from pulpie_spark.classify.blockmodel.model import DefaultBlockClassifier

    model = load_classifier("default", device="cpu")
    assert isinstance(model, DefaultBlockClassifier)
    assert isinstance(model.model_id, str) and model.model_id
    probs = model.predict_proba([["<p _item_id=\"1\">Hello world, this is a page.</p>"], []])
    assert len(probs[0]) == 1 and len(probs[1]) == 0 and 0.0 <= float(probs[0][0]) <= 1.0


def _expected_label(block: str, max_tokens: int) -> int:
    words = block.split()
    budget = max_tokens - 2          # BOS and EOS
    kept = words[: budget - 1] if len(words) + 1 > budget else words
    return int(bool(kept) and kept[-1] == MARKER)


def _random_pages(seed: int, n_pages: int):
    rng = random.Random(seed)
    plain = [w for w in WORDS[:20]]
    pages = []
    for _ in range(n_pages):
        blocks = []
        for _ in range(rng.randint(0, 9)):
            words = [rng.choice(plain) for _ in range(rng.randint(0, 6))]
            if rng.random() < 0.4:
                words.append(MARKER)
            elif rng.random() < 0.2:
                words.insert(0, MARKER)   # a marker that is not last must not count
            blocks.append(" ".join(words))
        pages.append(blocks)
    return pages


@pytest.mark.parametrize("max_tokens,batch_tokens", [(8192, 16384), (12, 36), (9, 18)])
def test_rigged_labels_land_on_their_blocks(rigged_dir, max_tokens, batch_tokens):
    clf = load_hf_classifier(str(rigged_dir), device="cpu", max_tokens=max_tokens,
                             batch_tokens=batch_tokens)
    pages = _random_pages(seed=max_tokens, n_pages=40 if max_tokens > 100 else 14)
    pages.append(["alpha " * 30 + MARKER, "beta " + MARKER])   # first block is cut: other
    labels = clf.predict(pages)
    expected = [[_expected_label(b, max_tokens) for b in blocks] for blocks in pages]
    assert labels == expected
    assert labels[-1] == ([1, 1] if max_tokens > 40 else [0, 1])
    assert sum(map(sum, expected)) > 8   # the rig really produces both labels
    chunks, _ = clf.chunk_pages(pages)
    if max_tokens < 20:
        assert len(chunks) > len([p for p in pages if p])   # pages really span chunks


def test_chunks_from_a_tokenizer_alone_give_the_classifiers_probabilities(rigged_dir, tmp_path):
    # Worker processes tokenize with load_block_tokenizer and only the model process holds
    # the model: same ids (<|sep|> added the same way when missing), same probabilities.
    nosep = save_tiny_classifier(tmp_path / "nosep", with_sep=False, seed=3)
    pages = _random_pages(seed=5, n_pages=12) + [[]]
    for directory in (rigged_dir, nosep):
        clf = load_hf_classifier(str(directory), device="cpu", max_tokens=12, batch_tokens=48)
        alone = load_block_tokenizer(str(directory), max_tokens=12)
        chunks, chunk_pages = alone.chunk_pages(pages)
        assert alone.sep_id == clf.sep_id
        assert [c.input_ids for c in chunks] == [c.input_ids for c in clf.chunk_pages(pages)[0]]
        got = scatter_page_probs([len(p) for p in pages], chunk_pages, chunks, clf.chunk_probs(chunks))
        for x, y in zip(got, clf.predict_proba(pages), strict=True):
            assert x.tobytes() == y.tobytes()
        assert len(chunks) > len(pages)   # pages span chunks at 12 tokens
    with pytest.raises(ModelLoadError, match="tokenizer"):
        load_block_tokenizer(str(tmp_path / "absent"))


def test_batching_does_not_change_probabilities(rigged_dir, random_dir):
    pages = _random_pages(seed=7, n_pages=10)
    for directory in (rigged_dir, random_dir):
        big = load_hf_classifier(str(directory), device="cpu", max_tokens=16, batch_tokens=4096)
        small = load_hf_classifier(str(directory), device="cpu", max_tokens=16, batch_tokens=16)
        for x, y in zip(big.predict_proba(pages), small.predict_proba(pages)):
            assert x.dtype == np.float32
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-5)
        assert big.predict_proba(pages)[0].tobytes() == big.predict_proba(pages)[0].tobytes()


def test_empty_and_bad_inputs(rigged_dir):
    clf = load_hf_classifier(str(rigged_dir), device="cpu")
    out = clf.predict_proba([[], ["alpha " + MARKER, None], [""]])
    assert [len(x) for x in out] == [0, 2, 1]
    assert clf.predict([[]]) == [[]]
    assert clf.predict([]) == []


def test_published_style_config_loads_natively(tmp_path):
    """EuroBERT checkpoints on the Hub carry a top-level rope_theta and an auto_map to remote
    code: they must load with transformers' own EuroBERT, no remote code, right rotary base."""
    import json

    directory = save_tiny_classifier(tmp_path / "legacy", seed=3)
    config = json.loads((directory / "config.json").read_text())
    config.pop("rope_parameters")
    config["rope_theta"] = 250000.0
    config["auto_map"] = {"AutoModelForTokenClassification": "modeling_eurobert.EuroBertForTokenClassification"}
    (directory / "config.json").write_text(json.dumps(config))
    clf = load_hf_classifier(str(directory), device="cpu")
    assert type(clf.model).__module__.startswith("transformers.models.eurobert")
    head_dim = clf.model.config.hidden_size // clf.model.config.num_attention_heads
    expected = 1.0 / (250000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    torch.testing.assert_close(clf.model.model.rotary_emb.inv_freq, expected)


def test_packed_attention_equals_padded(random_dir, rigged_dir):
    """Packed (unpadded, per-chunk attention: the CUDA default) gives the padded path's
    probabilities, for any batch budget, and the rig's labels still land on their blocks."""
    from pulpie_spark.classify.inference import plan_packed_batches

    pages = _random_pages(seed=11, n_pages=12)
    for directory in (random_dir, rigged_dir):
        padded = load_hf_classifier(str(directory), device="cpu", max_tokens=16, batch_tokens=4096,
                                    packed=False)
        assert not padded.packed
        want = padded.predict_proba(pages)
        for budget in (4096, 40, 16):
            packed = load_hf_classifier(str(directory), device="cpu", max_tokens=16, batch_tokens=budget,
                                        packed=True)
            assert packed.packed and packed.model.config._attn_implementation == "pulpie_packed"
            got = packed.predict_proba(pages)
            for x, y in zip(got, want):
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-5)
    # Called the ordinary way (padded rows + mask, no chunk boundaries) it is plain SDPA.
    ids = torch.tensor([[0, 7, 8, 9, 4, 10, 11, 4, 1], [0, 7, 8, 4, 1, 2, 2, 2, 2]])
    mask = (torch.arange(9)[None, :] < torch.tensor([[9], [5]])).long()
    plain = load_hf_classifier(str(random_dir), device="cpu", packed=False).model
    switched = load_hf_classifier(str(random_dir), device="cpu", packed=True).model
    with torch.inference_mode():
        want_masked = plain(input_ids=ids, attention_mask=mask).logits[1, :5]
        torch.testing.assert_close(switched(input_ids=ids, attention_mask=mask).logits[1, :5], want_masked,
                                   rtol=0, atol=1e-5)
        assert not torch.allclose(plain(input_ids=ids).logits[1, :5], want_masked, atol=1e-4)   # the mask matters
    assert load_hf_classifier(str(random_dir), device="cpu").packed   # the default where supported
    rigged = load_hf_classifier(str(rigged_dir), device="cpu", max_tokens=9, batch_tokens=30, packed=True)
    assert rigged.predict(pages) == [[_expected_label(b, 9) for b in blocks] for blocks in pages]
    # Rows hold several chunks and never exceed the budget unless one chunk alone does.
    lengths = [7, 3, 9, 2, 2, 12]
    plan = plan_packed_batches(lengths, 10)
    assert sorted(i for b in plan for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 10 or len(b) == 1 for b in plan)
    assert any(len(b) > 1 for b in plan)


def test_varlen_kernel_is_checked_before_use(monkeypatch):
    """A varlen kernel that fails or disagrees with SDPA is never used (per-chunk SDPA instead)."""
    from pulpie_spark.classify import packed

    def reference(q, k, v, cu_q, cu_k, max_q, max_k, **kwargs):   # (T, H, D) varlen contract
        out = packed._per_chunk_sdpa(*(t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)), cu_q, None)
        return out[0]

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel image is available for execution on the device")

    for kernel, expected in ((reference, True), (broken, False), (lambda *a, **k: reference(*a, **k) + 1, False)):
        monkeypatch.setattr(packed, "_varlen_attn", kernel)
        monkeypatch.setattr(packed, "_VARLEN_CHECKED", {})
        assert packed.varlen_kernel_works("cpu", torch.float32) is expected
    monkeypatch.setattr(packed, "_varlen_attn", None)
    monkeypatch.setattr(packed, "_VARLEN_CHECKED", {})
    assert packed.varlen_kernel_works("cpu", torch.float32) is False


@pytest.mark.parametrize("scope", ["mlp", "layers"])
def test_compiled_encoder_gives_eager_probabilities(random_dir, scope):
    """torch.compile of the MLPs/norms or of whole layers (packed attention kept eager
    inside them) changes no label and probabilities only by rounding, across batches of
    different token counts (dynamic shapes: no recompile per batch)."""
    import torch._dynamo

    from pulpie_spark.classify.hf import compile_encoder

    pages = _random_pages(seed=5, n_pages=10)
    eager = load_hf_classifier(str(random_dir), device="cpu", max_tokens=16, batch_tokens=48)
    want = eager.predict_proba(pages)
    torch._dynamo.reset()
    compiled = load_hf_classifier(str(random_dir), device="cpu", max_tokens=16, batch_tokens=48,
                                  compile=scope)
    layer = compiled.model.model.layers[0]
    compiled_modules = [layer] if scope == "layers" else [layer.mlp, layer.input_layernorm]
    assert all(m._compiled_call_impl is not None for m in compiled_modules)
    got = compiled.predict_proba(pages[:3])   # compiles
    with torch._dynamo.config.patch(error_on_recompile=True):
        got += compiled.predict_proba(pages[3:])   # other token counts, same graphs
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-4)
    assert [list(p >= 0.5) for p in got] == [list(p >= 0.5) for p in want]
    with pytest.raises(ValueError, match="compile scope"):
        compile_encoder(compiled.model, "everything")
    assert compile_encoder(eager.model, "none") == 0


def test_compile_scope_counts(random_dir):
    from pulpie_spark.classify.hf import compile_encoder

    model = load_hf_classifier(str(random_dir), device="cpu").model
    n_layers = model.config.num_hidden_layers
    assert compile_encoder(model, "mlp") == 3 * n_layers   # mlp + two norms per layer
