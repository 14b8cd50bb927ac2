"""The embedded default block classifier: hashed block summaries -> context over blocks.

A page is a sequence of blocks; each block becomes one vector (mean of its hashed
token embeddings + a projection of its numeric statistics); a context encoder reads
the sequence so a block sees its neighbours (a short heading between two article
paragraphs is content, the same heading in a link list is not), and a linear head
gives P(main) per block. One position per block instead of one per HTML token is
what makes it CPU-cheap.

Context encoders (``BlockModelConfig.encoder``):
* ``conv`` (default): residual dilated 1-D convolutions (receptive field ~60 blocks)
  plus the page's mean block vector; parallel over positions, so cheap on CPU.
* ``gru``: a 2-layer bidirectional GRU (sequential, ~5x slower to train on CPU).

Weights: safetensors; config: JSON. No pickle anywhere.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pulpie_spark.classify.blockmodel.containers import container_groups
from pulpie_spark.classify.blockmodel.features import (FEATURE_VERSION, FEATURE_VERSIONS, MAX_TOKENS, N_NUMERIC,
                                                      n_numeric, page_features)
from pulpie_spark.classify.inference import plan_batches

# The shipped model's name in output tables (model_id). v6: an ensemble of v5's recipe with
# seeds 13, 14, 15 (ensemble.py: the first is v5's weights; the other two averaged in on
# pages where it is unsure); v5: v4's recipe retrained on pages
# decoded by uchardet where undeclared (segment/decode.py: 11 GBK pages that were mojibake
# are training pages now); v4: v3's recipe on feature version 3 (landmarks.py); v3: container
# pooling and token dropout on feature version 2 (v2: feature version 2 alone; v1: feature
# version 1).
MODEL_ID = "pulpie-spark/default-v6"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


@dataclass
class BlockModelConfig:
    n_buckets: int = 1 << 15
    embed_dim: int = 48
    numeric_dim: int | None = None   # None: the numeric columns of feature_version
    max_tokens: int = MAX_TOKENS
    hidden: int = 96
    layers: int = 2
    dropout: float = 0.1
    encoder: str = "conv"
    kernel: int = 5
    dilations: tuple[int, ...] = (1, 2, 4, 8)
    feature_version: int = FEATURE_VERSION
    container_levels: int = 0      # ancestor levels whose blocks are pooled together (containers.py)
    container_stats: bool = False  # also each ancestor's share of the page's text and its block count
    model_id: str = MODEL_ID

    def __post_init__(self):
        if self.numeric_dim is None:
            self.numeric_dim = n_numeric(self.feature_version)

    @classmethod
    def from_dict(cls, data: dict) -> "BlockModelConfig":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "dilations" in known:
            known["dilations"] = tuple(known["dilations"])
        return cls(**known)


class BlockSequenceModel(nn.Module):
    def __init__(self, config: BlockModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.EmbeddingBag(config.n_buckets, config.embed_dim, mode="mean", padding_idx=0)
        self.numeric = nn.Sequential(nn.Linear(config.numeric_dim, config.embed_dim), nn.GELU())
        self.block = nn.Sequential(nn.Linear(2 * config.embed_dim, config.hidden), nn.GELU(),
                                   nn.Dropout(config.dropout))
        if config.encoder == "gru":
            self.gru = nn.GRU(config.hidden, config.hidden, num_layers=config.layers, batch_first=True,
                              bidirectional=True, dropout=config.dropout if config.layers > 1 else 0.0)
            context_dim = 2 * config.hidden
        elif config.encoder == "conv":
            self.convs = nn.ModuleList(
                nn.Conv1d(config.hidden, config.hidden, config.kernel, dilation=d,
                          padding=d * (config.kernel - 1) // 2) for d in config.dilations)
            self.norms = nn.ModuleList(nn.LayerNorm(config.hidden) for _ in config.dilations)
            self.page = nn.Linear(config.hidden, config.hidden)
            context_dim = 2 * config.hidden
        else:
            raise ValueError(f"unknown encoder {config.encoder!r} (conv or gru)")
        if config.container_levels > 0:
            # Mean block vector of each ancestor's blocks, before and after the context encoder.
            per_level = config.hidden + (_N_CONTAINER_STATS if config.container_stats else 0)
            pooled_dim = config.container_levels * per_level
            self.container_in = nn.Linear(pooled_dim, config.hidden)
            self.container_out = nn.Linear(pooled_dim, config.hidden)
            context_dim += config.hidden
        self.head = nn.Sequential(nn.Dropout(config.dropout), nn.Linear(context_dim + config.hidden, 2))

    def forward(self, token_ids: torch.Tensor, numeric: torch.Tensor,
                lengths: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
        """token_ids [B, T, K] int64, numeric [B, T, F], lengths [B], groups [B, T, L] int64
        (``collate_groups``; needed when ``container_levels`` > 0) -> logits [B, T, 2]."""
        b, t, k = token_ids.shape
        bag = self.embed(token_ids.reshape(b * t, k)).reshape(b, t, -1)
        x = self.block(torch.cat([bag, self.numeric(numeric)], dim=-1))
        mask = (torch.arange(t, device=x.device)[None, :] < lengths.to(x.device)[:, None]).unsqueeze(-1)
        x = x * mask
        levels = self.config.container_levels
        if levels > 0:
            if groups is None or groups.shape[-1] < levels:
                raise ValueError(f"this model pools {levels} container levels: pass their group ids")
            groups = groups[..., :levels].to(x.device)
            stats = _container_stats(numeric, groups, mask) if self.config.container_stats else None
            x = (x + F.gelu(self.container_in(_with_stats(_group_means(x, groups, mask), stats)))) * mask
        if self.config.encoder == "gru":
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                                       enforce_sorted=False)
            out, _ = self.gru(packed)
            context, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=t)
        else:
            h = x
            for conv, norm in zip(self.convs, self.norms):
                # Padded positions stay zero after every layer, so a page scores the same
                # alone or in a batch with longer pages.
                h = (h + F.gelu(norm(_conv_over_blocks(h, conv)))) * mask
            page = h.sum(dim=1, keepdim=True) / lengths.to(x.device).clamp(min=1)[:, None, None].float()
            context = torch.cat([h, self.page(page).expand(-1, t, -1)], dim=-1)
        if levels > 0:
            # The encoder's block states (conv: h; gru: its forward direction) pooled per ancestor.
            states = context[..., :self.config.hidden]
            context = torch.cat([context, self.container_out(_with_stats(_group_means(states, groups, mask), stats))],
                                dim=-1)
        # The block's own vector next to its context: a residual path for local evidence.
        return self.head(torch.cat([context, x], dim=-1))


def _group_sums(x: torch.Tensor, groups: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per block and level, the sum of ``x`` [B, T, C] over the real blocks of that level's
    group, and the number of those blocks as one more column -> [B, T, L, C+1].
    ``groups`` [B, T, L] (``collate_groups``): page-local ids shared across levels (below
    T*L; padded positions have ids of their own), a block being a member of each of its L
    groups; one ``index_add`` for all levels."""
    b, t, c = x.shape
    levels = groups.shape[-1]
    weight = mask.to(x.dtype)
    # The count rides along as one more column: one index_add gives sums and counts.
    values = torch.cat([x * mask, weight], dim=-1).unsqueeze(2).expand(b, t, levels, c + 1).reshape(-1, c + 1)
    index = (groups + (torch.arange(b, device=x.device) * (t * levels))[:, None, None]).reshape(-1)
    sums = torch.zeros(b * t * levels, c + 1, dtype=x.dtype, device=x.device).index_add_(0, index, values)
    return sums.index_select(0, index).reshape(b, t, levels, c + 1)


def _group_means(x: torch.Tensor, groups: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per block and level, the mean of ``x`` [B, T, C] over the real blocks of that
    level's group -> [B, T, L*C] (groups as in ``_group_sums``)."""
    b, t, c = x.shape
    sums = _group_sums(x, groups, mask)
    return (sums[..., :c] / sums[..., c:].clamp(min=1.0)).reshape(b, t, -1)


_N_CONTAINER_STATS = 2


def _container_stats(numeric: torch.Tensor, groups: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per block and level: the share of the page's characters inside that ancestor and
    log(1 + its blocks) / 8 -> [B, T, L, 2]. An article body holds most of a page's text
    in a few large blocks, a link list little text in many small ones; the pooled means
    alone cannot tell a large container from a small one."""
    # Feature column 0 is log1p(characters) / 8 in every feature version.
    chars = torch.expm1(numeric[..., :1].to(torch.float32) * 8.0) * mask
    sums = _group_sums(chars, groups, mask)
    page = chars.sum(dim=1, keepdim=True).clamp(min=1.0)[:, :, None, :]
    return torch.cat([sums[..., :1] / page, torch.log1p(sums[..., 1:]) / 8.0], dim=-1)


def _with_stats(means: torch.Tensor, stats: torch.Tensor | None) -> torch.Tensor:
    """Pooled means [B, T, L*C] with each level's container stats [B, T, L, S] after them."""
    if stats is None:
        return means
    return torch.cat([means, stats.reshape(*stats.shape[:2], -1)], dim=-1)


def _conv_over_blocks(h: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
    """``conv`` over the block axis of ``h`` [B, T, C] -> [B, T, C_out], as one matrix product.

    The same function as ``conv(h.transpose(1, 2)).transpose(1, 2)`` (equal up to float
    rounding): the K dilated shifts of the padded sequence side by side [B, T, K*C] times
    the kernel [K*C, C_out]. On CPU, PyTorch runs a dilated Conv1d over one page of fewer
    than ~210 blocks through its unvectorized im2col path (slow_conv_dilated2d): about two
    thirds of the model's CPU time on dev pages; one sgemm per layer is several times faster.
    """
    t = h.shape[1]
    (k,), (d,), (pad,) = conv.kernel_size, conv.dilation, conv.padding
    if 2 * pad != d * (k - 1) or conv.stride != (1,) or conv.groups != 1 or conv.padding_mode != "zeros":
        return conv(h.transpose(1, 2)).transpose(1, 2)   # not a length-preserving plain conv
    padded = F.pad(h, (0, 0, pad, pad))
    shifted = torch.cat([padded[:, j * d:j * d + t] for j in range(k)], dim=-1)
    out = shifted @ _kernel_matrix(conv)
    return out + conv.bias if conv.bias is not None else out


def _kernel_matrix(conv: nn.Conv1d) -> torch.Tensor:
    """The kernel of ``conv`` as the [K*C_in, C_out] matrix of ``_conv_over_blocks``.

    The permuted copy costs more than half as much as the product itself, so without
    gradients (inference) it is made once and kept on the module, keyed by the weight's
    storage and version counter: moving the model or changing a weight in place (an
    optimizer step, ``load_state_dict``) makes a new one.
    """
    weight = conv.weight
    if torch.is_grad_enabled():
        return weight.permute(2, 1, 0).reshape(-1, conv.out_channels)
    key = (weight.data_ptr(), weight._version, weight.device, weight.dtype, weight.shape)
    cached = conv.__dict__.get("_pulpie_kernel_matrix")
    if cached is None or cached[0] != key:
        cached = (key, weight.detach().permute(2, 1, 0).reshape(-1, conv.out_channels))
        conv.__dict__["_pulpie_kernel_matrix"] = cached
    return cached[1]


def collate(features: Sequence[tuple[np.ndarray, np.ndarray]], labels: Sequence[np.ndarray] | None = None):
    """Pad pages to one batch: (ids [B,T,K], numeric [B,T,F], lengths [B], labels [B,T] or None).

    Padded label positions are -100 (ignored by the loss).
    """
    lengths = [len(f[0]) for f in features]
    t = max(1, max(lengths, default=1))
    b = len(features)
    k = features[0][0].shape[1] if b and features[0][0].ndim == 2 else MAX_TOKENS
    f = features[0][1].shape[1] if b and features[0][1].ndim == 2 else N_NUMERIC
    ids = np.zeros((b, t, k), dtype=np.int64)
    num = np.zeros((b, t, f), dtype=np.float32)
    lab = np.full((b, t), -100, dtype=np.int64) if labels is not None else None
    for i, feature in enumerate(features):
        pid, pnum = feature[0], feature[1]
        n = len(pid)
        ids[i, :n] = pid
        num[i, :n] = pnum
        if lab is not None:
            lab[i, :n] = labels[i]
    return (torch.from_numpy(ids), torch.from_numpy(num),
            torch.tensor([max(1, n) for n in lengths], dtype=torch.int64),
            torch.from_numpy(lab) if lab is not None else None)


def collate_groups(groups: Sequence[np.ndarray | None], t: int, levels: int) -> torch.Tensor:
    """Container group ids of a batch padded to ``t`` blocks: int64 [B, t, levels].

    Each page's ids (its first ``levels`` columns) are renumbered from 0 in order of first
    appearance (a window of a long page keeps only some groups), so they stay below
    n * levels; padded position p, level l gets p * levels + l, which no real block shares."""
    out = (np.arange(t, dtype=np.int64)[:, None] * levels + np.arange(levels, dtype=np.int64)[None, :])
    out = np.tile(out[None], (len(groups), 1, 1))
    for i, g in enumerate(groups):
        if g is None or g.ndim != 2 or g.shape[1] < levels:
            raise ValueError(f"the model pools {levels} container levels; page {i} has "
                             f"{0 if g is None or g.ndim != 2 else g.shape[1]}: rebuild the features cache")
        n = len(g)
        if n == 0:
            continue
        flat = g[:, :levels].reshape(-1)
        _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        out[i, :n] = rank[inverse.reshape(-1)].reshape(n, levels)
    return torch.from_numpy(out)


def batch_groups(model: BlockSequenceModel, groups: Sequence[np.ndarray | None], t: int) -> torch.Tensor | None:
    """``collate_groups`` of a batch for ``model``, or None when the model pools no containers."""
    levels = model.config.container_levels
    return collate_groups(groups, t, levels) if levels > 0 else None


def save_model(model: BlockSequenceModel, directory: str | os.PathLike, extra: dict | None = None) -> Path:
    from safetensors.torch import save_file

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    # One metadata key only: safetensors writes the metadata map in hash order, and a
    # second key would make the file bytes differ between identical trainings.
    save_file(state, str(out / WEIGHTS_FILE), metadata={"format": "pt"})
    config = asdict(model.config)
    if extra:
        config["training"] = extra
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def load_model(directory: str | os.PathLike, device: str | None = None) -> BlockSequenceModel:
    from safetensors.torch import load_file

    directory = Path(directory)
    raw = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    if "feature_version" not in raw:
        raise ValueError(f"model at {directory} does not record its block feature version (config.json "
                         f"feature_version); this code computes versions {FEATURE_VERSIONS}")
    config = BlockModelConfig.from_dict(raw)
    if config.feature_version not in FEATURE_VERSIONS:
        raise ValueError(f"model at {directory} was trained on block features v{config.feature_version}, "
                         f"this code computes versions {FEATURE_VERSIONS}: retrain or use a matching version")
    model = BlockSequenceModel(config)
    model.load_state_dict(load_file(str(directory / WEIGHTS_FILE)))
    model.eval()
    return model.to(device or "cpu")


# Padded blocks per model call on CPU. Pages are grouped longest first under this budget
# (inference.plan_batches): one call per page pays PyTorch's per-operator overhead for every
# page, while a fixed number of pages per call (16, before) pads short pages to the longest
# of the group (a 1,000-block page made 15 pages of 100 blocks cost 10x). Model CPU time per
# page over 445 pages of 13 sources (benchmarks/extract_batch_speed.py, docs/BENCHMARKS.md):
# one page a call 3.62 ms; 512 blocks 2.41, 1,024 blocks 2.19, 2,048 blocks 2.23, 4,096 2.26.
CPU_BATCH_BLOCKS = 1024
# On an accelerator (not measured: no session has had a GPU yet) calls are kept large, since
# each kernel launch costs more than on CPU; memory bounds them (a few KB a block).
ACCELERATOR_BATCH_BLOCKS = 32768


# What a page's features depend on: members of one ensemble must agree on all of it.
_FEATURE_FIELDS = ("n_buckets", "feature_version", "numeric_dim", "container_levels")
# model_id of an ensemble's first member loaded alone: its output tables must not claim the ensemble.
FIRST_ONLY_SUFFIX = "-fast"


def load_block_classifier(directory: str | os.PathLike, device: str | None = None,
                          first_only: bool = False) -> "DefaultBlockClassifier":
    """A model directory of jobs/train.py's layout as a classifier: its weights, the other
    members when it is an ensemble (ensemble.py) and, when the directory has one, its page gate.

    ``first_only``: the ensemble's first member alone (the other members' time saved, model
    "default-fast"), with the gate fitted on that member's own output (FIRST_MEMBER_GATE_FILE;
    none when the directory has none: the ensemble's gate was fitted on other probabilities).
    On a single model it changes nothing."""
    from pulpie_spark.classify.blockmodel.ensemble import load_ensemble
    from pulpie_spark.classify.blockmodel.gate import FIRST_MEMBER_GATE_FILE, load_page_gate

    first = load_model(directory, device=device)
    ensemble = load_ensemble(directory)
    if ensemble is None:
        return DefaultBlockClassifier(first, device=device, page_gate=load_page_gate(directory))
    if first_only:
        classifier = DefaultBlockClassifier(first, device=device,
                                            page_gate=load_page_gate(directory, FIRST_MEMBER_GATE_FILE))
        classifier.model_id = f"{classifier.model_id}{FIRST_ONLY_SUFFIX}"
        return classifier
    paths, cascade = ensemble
    members = [load_model(path, device=device) for path in paths]
    for path, member in zip(paths, members):
        differs = [f for f in _FEATURE_FIELDS if getattr(member.config, f) != getattr(first.config, f)]
        if differs:
            raise ValueError(f"ensemble member {path} computes other block features than the first "
                             f"member of {directory} ({', '.join(differs)} differ): retrain it")
    return DefaultBlockClassifier(first, device=device, page_gate=load_page_gate(directory),
                                  members=members, cascade=cascade)


class DefaultBlockClassifier:
    """BlockClassifier over BlockSequenceModel (pages of block HTML + optional paths).

    ``members``: further models of the same features (an ensemble, ensemble.py); on the
    pages ``cascade`` picks from ``model``'s output, P(main) is the mean over all models."""

    def __init__(self, model: BlockSequenceModel, device: str | None = None, batch_blocks: int | None = None,
                 page_gate=None, members: Sequence[BlockSequenceModel] = (), cascade=None):
        from pulpie_spark.classify.blockmodel.ensemble import Cascade

        self.model = model
        self.members = list(members)
        self.cascade = cascade if cascade is not None else Cascade()
        self.device = device or "cpu"
        self.model_id = model.config.model_id
        if batch_blocks is None:
            batch_blocks = CPU_BATCH_BLOCKS if str(self.device) == "cpu" else ACCELERATOR_BATCH_BLOCKS
        self.batch_blocks = batch_blocks
        # gate.PageGate saved with the model (page_gate.json), or None: which pages the
        # fallback should take although the model marked main blocks (page.classify_pages).
        self.page_gate = page_gate

    def features(self, pages, paths=None):
        """Per page (ids, numeric), plus container group ids when the model pools them."""
        # Each model runs with the feature version it was trained on (config.json).
        config = self.model.config
        out = []
        for i, blocks in enumerate(pages):
            page_paths = paths[i] if paths is not None else None
            ids, numeric = page_features(blocks, page_paths, n_buckets=config.n_buckets,
                                         version=config.feature_version)
            if config.container_levels > 0:
                out.append((ids, numeric, container_groups(blocks, page_paths, config.container_levels)))
            else:
                out.append((ids, numeric))
        return out

    def predict_proba_features(self, feats: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """P(main) per block of each page, in the order given: the first model's, or on the
        pages the cascade picks the mean of all members'."""
        out = self._model_probs(self.model, feats)
        if not self.members:
            return out
        from pulpie_spark.classify.blockmodel.gate import chars_from_features

        picked = [i for i, (p, f) in enumerate(zip(out, feats))
                  if self.cascade.wants_members(p, chars_from_features(f[1]))]
        if not picked:
            return out
        sums = [out[i].astype(np.float64) for i in picked]
        for member in self.members:
            for k, p in enumerate(self._model_probs(member, [feats[i] for i in picked])):
                sums[k] += p
        for k, i in enumerate(picked):
            out[i] = (sums[k] / (1 + len(self.members))).astype(np.float32)
        return out

    def _model_probs(self, model: BlockSequenceModel, feats: Sequence[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
        """``model``'s P(main) per block of each page; pages are run in groups of at most
        ``batch_blocks`` padded blocks (a longer page alone)."""
        out: list[np.ndarray | None] = [None] * len(feats)
        with torch.inference_mode():
            for batch in plan_batches([len(f[0]) for f in feats], self.batch_blocks):
                chunk = [feats[i] for i in batch]
                ids, num, lengths, _ = collate(chunk)
                groups = batch_groups(model, [f[2] if len(f) > 2 else None for f in chunk], ids.shape[1])
                logits = model(ids.to(self.device), num.to(self.device), lengths, groups)
                probs = torch.softmax(logits.float(), dim=-1)[..., 1].cpu().numpy()
                for row, i in enumerate(batch):
                    out[i] = probs[row, :len(feats[i][0])].astype(np.float32)
        return out

    def predict_proba(self, pages: Sequence[Sequence[str]],
                      paths: Sequence[Sequence[str]] | None = None) -> list[np.ndarray]:
        return self.predict_proba_features(self.features(pages, paths))

    def predict_with_gate_features(self, pages: Sequence[Sequence[str]],
                                   paths: Sequence[Sequence[str]] | None = None
                                   ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """P(main) per block and ``gate.page_gate_features`` per page, from one features pass."""
        feats = self.features(pages, paths)
        probs = self.predict_proba_features(feats)
        return probs, self.gate_features(probs, feats)

    @staticmethod
    def gate_features(probs: Sequence[np.ndarray], feats: Sequence[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
        """``gate.page_gate_features`` of each page from its P(main) and its ``features`` (the
        characters per block come from the numeric features: no second pass over the text)."""
        from pulpie_spark.classify.blockmodel.gate import chars_from_features, page_gate_features

        return [page_gate_features(p, chars_from_features(f[1])) for p, f in zip(probs, feats)]

    def predict(self, pages, paths=None) -> list[list[int]]:
        from pulpie_spark.classify.base import probs_to_labels

        return probs_to_labels(self.predict_proba(pages, paths))
