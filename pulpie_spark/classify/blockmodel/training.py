"""Training and distillation of the default block model (pure torch, no Spark).

Examples are pages: block features (``page_features``), block labels (1 main / 0
other, from gold text through ``pulpie_spark.classify.blockmodel.labels`` or given), optional teacher
probabilities and the word count of each block (for the word-weighted dev score).

* loss: class-weighted cross-entropy (main is the minority class on most sources);
  distillation: ``alpha * T^2 * KL(teacher_T || student_T) + (1 - alpha) * CE(hard)``
  with alpha 0.7 and T 2.0 (the Pulpie student recipe).
* early stopping on the dev word-weighted F1 of main blocks (words, not blocks:
  missing a long paragraph costs more than missing a date).
* ``ema_decay`` > 0: the weights evaluated, kept and saved are an exponential moving
  average of the trained ones (updated after every step), which the model of one seed
  wanders around: with two short epochs, leave-one-source-out scores of one recipe
  moved by up to 0.036 shingle F1 on a fold between two seeds.
* ``teachers`` = K > 0 (``train_from_cache``): K models of the same recipe are trained
  first, model k with seed ``seed + k`` (so on its own per-source page sample, initial
  weights and batch order), and the model kept is distilled from the mean of their
  P(main) on its training pages: one model's size and speed, trained towards an
  ensemble's less seed-dependent decisions.
* ``resample_epochs`` (with ``max_pages_per_source``, ``train_from_cache``): epoch e trains
  on its own seeded sample of the capped sources (seed ``seed + e``; epoch 0 is the usual
  sample), so the model sees more of the large sources' pages while every epoch keeps the
  sources' balance (a higher cap shifts that balance towards the large English sets).
* ``members`` = N > 1 (``train_from_cache``): N models of the recipe, model k with seed
  ``seed + k`` (each as a run of that seed trains it), saved as one ensemble (ensemble.py):
  the first model's P(main), averaged with the others' on the pages where it is unsure.
* reproducible: seeded torch + numpy shuffling, deterministic algorithms, a fixed
  thread count (``threads``; the result does not depend on the machine's core count).
* distributed: when launched with ``WORLD_SIZE > 1`` (TorchDistributor / torchrun) each
  rank trains on its shard of the pages under DistributedDataParallel (gloo on CPU,
  nccl on GPU); rank 0 evaluates and saves.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from pulpie_spark.classify.blockmodel.data import (PageExample, check_cache_version, examples_to_frame,  # noqa: F401
                                                  frame_to_examples)
from pulpie_spark.classify.blockmodel.model import (BlockModelConfig, BlockSequenceModel, batch_groups, collate,
                                                   save_model)

log = logging.getLogger("pulpie_spark.classify.blockmodel")


@dataclass
class TrainConfig:
    epochs: int = 20
    batch_pages: int = 16
    lr: float = 2e-3
    weight_decay: float = 1e-4
    patience: int = 4
    seed: int = 13
    threads: int = 1
    main_weight: float | None = None     # None: n_other / n_main of the train blocks, clipped to [1, 5]
    distill_alpha: float = 0.7
    distill_temperature: float = 2.0
    max_blocks: int = 1024               # longer pages are cut into windows of this many blocks
    max_minutes: float | None = None     # stop after the epoch that crosses this wall-clock budget
    max_pages_per_source: int | None = None  # seeded sample of at most this many train pages per source
    token_dropout: float = 0.0           # share of a block's hashed tokens dropped per training step
    ema_decay: float = 0.0               # > 0: evaluate and keep an exponential moving average of the weights
    teachers: int = 0                    # > 0: distil from the mean of this many models of other seeds (train_from_cache)
    resample_epochs: bool = False        # each epoch its own seeded per-source sample (train_from_cache)
    members: int = 1                     # > 1: an ensemble of this many models of seeds seed, seed+1, .. (train_from_cache)
    cascade_share: float = 0.05          # the ensemble's members after the first run where this share of a page is unsure
    device: str = "cpu"
    model: BlockModelConfig = field(default_factory=BlockModelConfig)


# ----------------------------------------------------------------------------- training

def set_reproducible(seed: int, threads: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(max(1, threads))
    torch.use_deterministic_algorithms(True, warn_only=True)


def _windows(examples: Sequence[PageExample], max_blocks: int) -> list[PageExample]:
    """Cut very long pages into windows so one page cannot dominate a batch's memory."""
    out = []
    for e in examples:
        n = len(e.labels)
        if n == 0:
            continue
        for s in range(0, n, max_blocks):
            sl = slice(s, s + max_blocks)
            out.append(PageExample(e.ids[sl], e.numeric[sl], e.labels[sl], e.words[sl],
                                   None if e.teacher is None else e.teacher[sl],
                                   None if e.groups is None else e.groups[sl]))
    return out


def _length_bucketed_batches(examples: Sequence[PageExample], batch_pages: int,
                             rng: np.random.RandomState) -> list[np.ndarray]:
    """Shuffled batches of pages of similar length: padding a 40-block page to the
    1,000 blocks of its batch neighbour would waste most of the GRU's work."""
    order = rng.permutation(len(examples))
    pool = batch_pages * 20
    batches = []
    for s in range(0, len(order), pool):
        chunk = order[s:s + pool]
        chunk = chunk[np.argsort([len(examples[i].labels) for i in chunk], kind="stable")]
        batches.extend(chunk[b:b + batch_pages] for b in range(0, len(chunk), batch_pages))
    return [batches[i] for i in rng.permutation(len(batches))]


def word_f1(examples: Sequence[PageExample], probs: Sequence[np.ndarray]) -> dict:
    """Word-weighted precision/recall/F1 of main blocks over all pages."""
    tp = fp = fn = 0.0
    for e, p in zip(examples, probs):
        pred = np.asarray(p) >= 0.5
        gold = e.labels == 1
        w = e.words.astype(np.float64) + 1.0
        tp += float(w[pred & gold].sum())
        fp += float(w[pred & ~gold].sum())
        fn += float(w[~pred & gold].sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def predict_examples(model: BlockSequenceModel, examples: Sequence[PageExample],
                     batch_pages: int = 32, device: str = "cpu") -> list[np.ndarray]:
    model.eval()
    out = []
    with torch.inference_mode():
        for s in range(0, len(examples), batch_pages):
            chunk = examples[s:s + batch_pages]
            ids, num, lengths, _ = collate([(e.ids, e.numeric) for e in chunk])
            logits = model(ids.to(device), num.to(device), lengths, batch_groups(model, [e.groups for e in chunk], ids.shape[1]))
            probs = torch.softmax(logits, dim=-1)[..., 1].cpu().numpy()
            out.extend(probs[i, :len(e.labels)] for i, e in enumerate(chunk))
    return out


def drop_tokens(ids: torch.Tensor, rate: float, rng: np.random.RandomState) -> torch.Tensor:
    """``ids`` with each real token (id > 0) replaced by padding (0) with probability ``rate``.

    Training-time regularisation of the hashed-token bag: a held-out site's class names and
    words are new buckets, so the model must also decide from the tokens and statistics that
    remain. The embedding bag averages the tokens left (padding is excluded from the mean).
    Drawn from its own seeded generator, so rate 0 leaves training byte-identical.
    """
    if rate <= 0:
        return ids
    keep = torch.from_numpy(rng.random_sample(tuple(ids.shape)) >= rate)
    return torch.where(keep, ids, torch.zeros_like(ids))


class _WeightAverage:
    """Exponential moving average of a model's floating-point weights (others copied)."""

    def __init__(self, model: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        for name, value in model.state_dict().items():
            if value.dtype.is_floating_point:
                self.state[name].mul_(self.decay).add_(value.detach(), alpha=1.0 - self.decay)
            else:
                self.state[name].copy_(value)


def _loss(logits, labels, teacher, class_weight, cfg: TrainConfig):
    flat_logits = logits.reshape(-1, 2)
    flat_labels = labels.reshape(-1)
    hard = F.cross_entropy(flat_logits, flat_labels, weight=class_weight, ignore_index=-100)
    if teacher is None:
        return hard
    mask = flat_labels != -100
    t = cfg.distill_temperature
    p_main = teacher.reshape(-1)[mask].clamp(1e-6, 1 - 1e-6)
    teacher_logp = torch.log(torch.stack([1 - p_main, p_main], dim=-1))
    # Soften the teacher at temperature T: p_T ∝ p^(1/T).
    teacher_soft = torch.log_softmax(teacher_logp / t, dim=-1)
    student_soft = torch.log_softmax(flat_logits[mask] / t, dim=-1)
    kl = F.kl_div(student_soft, teacher_soft, log_target=True, reduction="batchmean") * (t * t)
    return cfg.distill_alpha * kl + (1 - cfg.distill_alpha) * hard


def train_model(train: Sequence[PageExample], dev: Sequence[PageExample], cfg: TrainConfig,
                output_dir: str | os.PathLike | None = None, distill: bool = False,
                epoch_train: Callable[[int], Sequence[PageExample]] | None = None
                ) -> tuple[BlockSequenceModel, dict]:
    """Train (or distil, when ``distill`` and examples carry ``teacher``) and return (model, report).

    ``epoch_train``: the training pages of epoch e >= 1 (``train`` is epoch 0's); the class
    weight is set from epoch 0's blocks. Under torchrun / TorchDistributor (``WORLD_SIZE`` > 1)
    each rank trains on its shard.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    ddp = world > 1
    if ddp:
        import torch.distributed as dist

        dist.init_process_group("nccl" if cfg.device.startswith("cuda") else "gloo")
    set_reproducible(cfg.seed, cfg.threads)
    device = cfg.device
    if device.startswith("cuda") and ddp:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"

    def windows_of(pages: Sequence[PageExample]) -> list[PageExample]:
        windows = _windows(pages, cfg.max_blocks)
        if distill and any(e.teacher is None for e in windows):
            raise ValueError("distillation needs teacher probabilities on every training page")
        return windows[rank::world] if ddp else windows

    def steps_of(windows: Sequence[PageExample]) -> int:
        # Same number of steps on every rank (DDP needs matching collectives).
        steps = len(_length_bucketed_batches(windows, cfg.batch_pages, np.random.RandomState(0)))
        if ddp:
            import torch.distributed as dist

            steps_t = torch.tensor([steps], device=device)
            dist.all_reduce(steps_t, op=dist.ReduceOp.MIN)
            steps = int(steps_t.item())
        return steps

    train_w = windows_of(train)
    dev_w = _windows(dev, cfg.max_blocks)
    labels_all = np.concatenate([e.labels for e in train_w]) if train_w else np.zeros(0)
    n_main = int((labels_all == 1).sum())
    n_other = int((labels_all == 0).sum())
    main_weight = cfg.main_weight or float(np.clip(n_other / max(1, n_main), 1.0, 5.0))
    class_weight = torch.tensor([1.0, main_weight], dtype=torch.float32, device=device)

    model = BlockSequenceModel(cfg.model).to(device)
    train_module = model
    if ddp:
        from torch.nn.parallel import DistributedDataParallel

        train_module = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = np.random.RandomState(cfg.seed + rank)
    dropout_rng = np.random.RandomState(cfg.seed + 7919 + rank)

    best_state, best_f1, best_epoch, bad_epochs = None, -1.0, -1, 0
    averaged = _WeightAverage(model, cfg.ema_decay) if cfg.ema_decay > 0 else None
    history = []
    start = time.perf_counter()
    steps = steps_of(train_w)
    for epoch in range(cfg.epochs):
        if epoch > 0 and epoch_train is not None:
            train_w = windows_of(epoch_train(epoch))
            steps = steps_of(train_w)
        model.train()
        batches = _length_bucketed_batches(train_w, cfg.batch_pages, rng)
        total = 0.0
        for step in range(steps):
            batch = [train_w[i] for i in batches[step]]
            ids, num, lengths, labels = collate([(e.ids, e.numeric) for e in batch], [e.labels for e in batch])
            ids = drop_tokens(ids, cfg.token_dropout, dropout_rng)
            teacher = None
            if distill:
                teacher = torch.zeros(labels.shape, dtype=torch.float32)
                for i, e in enumerate(batch):
                    teacher[i, :len(e.teacher)] = torch.from_numpy(e.teacher)
                teacher = teacher.to(device)
            logits = train_module(ids.to(device), num.to(device), lengths,
                                  batch_groups(model, [e.groups for e in batch], ids.shape[1]))
            loss = _loss(logits, labels.to(device), teacher, class_weight, cfg)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            if averaged is not None:
                averaged.update(model)
            total += float(loss.detach())
        trained = None
        if averaged is not None:   # evaluate (and keep) the average; training goes on from the trained weights
            trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(averaged.state)
        dev_scores = word_f1(dev_w, predict_examples(model, dev_w, device=device)) if dev_w else {"f1": 0.0}
        history.append({"epoch": epoch + 1, "loss": total / max(1, steps), **dev_scores,
                        "seconds": round(time.perf_counter() - start, 1)})
        if rank == 0:
            log.info("epoch %d loss %.4f dev word-F1 %.4f", epoch + 1, total / max(1, steps), dev_scores["f1"])
        if dev_scores["f1"] > best_f1 + 1e-6 or not dev_w:
            best_f1, best_epoch, bad_epochs = dev_scores["f1"], epoch + 1, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad_epochs += 1
        if trained is not None:
            model.load_state_dict(trained)
        if bad_epochs >= cfg.patience:
            break
        if cfg.max_minutes is not None and time.perf_counter() - start > 60 * cfg.max_minutes:
            if rank == 0:
                log.info("stopping after epoch %d: time budget of %.0f min used", epoch + 1, cfg.max_minutes)
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    report = {"best_epoch": best_epoch, "best_dev_word_f1": best_f1, "history": history,
              "train_pages": len(train), "dev_pages": len(dev), "main_weight": main_weight,
              "train_blocks": int(len(labels_all)), "train_main_share": n_main / max(1, len(labels_all)),
              "seconds": round(time.perf_counter() - start, 1), "world_size": world,
              "distill": distill, "config": {k: v for k, v in asdict(cfg).items() if k != "model"}}
    if output_dir is not None and rank == 0:
        _save_trained(model, output_dir, report)
    if ddp:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    model.eval()
    return model.cpu(), report


def training_rows(frame: pd.DataFrame, max_pages_per_source: int | None = None,
                  seed: int = 13) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, dev) rows of a features cache: kept pages with blocks, sorted by (source, page_id).

    ``max_pages_per_source`` caps each source's train pages with a seeded sample (sources
    are balanced: the two 1,300-page sets would otherwise be half of every batch; it also
    bounds the training time). Dev rows are not capped. The same rule trains the shipped
    model (jobs/train.py) and every fold of the leave-one-source-out protocol.
    """
    frame = frame[frame["kept"] & (frame["n_blocks"] > 0)].sort_values(["source", "page_id"], kind="stable")
    train = frame[frame["split"] != "dev"]
    dev = frame[frame["split"] == "dev"]
    if max_pages_per_source:
        parts = []
        for _, part in train.groupby("source", sort=True):
            if len(part) > max_pages_per_source:
                part = part.sample(n=max_pages_per_source, random_state=seed).sort_values("page_id", kind="stable")
            parts.append(part)
        train = pd.concat(parts) if parts else train
    return train, dev


def _save_trained(model: BlockSequenceModel, output_dir: str | os.PathLike, report: dict,
                  members: Sequence[tuple[BlockSequenceModel, dict]] = (), cascade=None) -> None:
    """model.safetensors + config.json (with the report but its history) + training_report.json;
    with ``members`` (model, report) also an ensemble of them after ``model`` (ensemble.py).
    Page gates of an earlier model in ``output_dir`` are removed: a gate is fitted on one
    model's output (jobs/train.py copies the new model's after training)."""
    from pulpie_spark.classify.blockmodel.ensemble import clear_ensemble, member_dir, save_ensemble
    from pulpie_spark.classify.blockmodel.gate import FIRST_MEMBER_GATE_FILE, GATE_FILE

    clear_ensemble(output_dir)
    for name in (GATE_FILE, FIRST_MEMBER_GATE_FILE):
        Path(output_dir, name).unlink(missing_ok=True)
    save_model(model, output_dir, extra={k: v for k, v in report.items() if k != "history"})
    for k, (member, member_report) in enumerate(members, start=1):
        save_model(member, member_dir(output_dir, k), extra={k: v for k, v in member_report.items() if k != "history"})
    if members:
        save_ensemble(output_dir, 1 + len(members), cascade)
    Path(output_dir, "training_report.json").write_text(json.dumps(report, indent=2) + "\n")


def train_from_cache(frame: pd.DataFrame, cfg: TrainConfig, output_dir: str | os.PathLike | None = None,
                     distill: bool = False) -> tuple[BlockSequenceModel, dict, pd.DataFrame, pd.DataFrame]:
    """Train on a features cache's rows (``training_rows``): (model, report, train rows, dev rows).

    The one training path of jobs/train.py and of every leave-one-source-out fold. With
    ``cfg.teachers`` = K > 0 the K teachers of the module doc are trained first (not saved)
    and the returned model is distilled from their mean probabilities; ``distill`` (a
    teacher column already in the cache, e.g. a Pulpie checkpoint's) cannot be combined
    with it. With ``cfg.resample_epochs`` epoch e >= 1 trains on ``training_rows`` with seed
    ``seed + e``; the train rows returned are epoch 0's, and the report counts the distinct
    train pages of all epochs run (``train_pages_seen``). With ``cfg.members`` = N > 1 the N
    members of the module doc are trained one after another and saved as one ensemble; the
    model and rows returned are the first member's, the report's ``members`` lists the others
    and its ``seconds`` and ``train_pages_seen`` count all of them."""
    if cfg.members < 1:
        raise ValueError(f"members must be >= 1, got {cfg.members}")
    if cfg.members == 1:
        model, report, train_rows, dev_rows, _ = _train_one(frame, cfg, distill)
        if output_dir is not None and int(os.environ.get("RANK", "0")) == 0:
            _save_trained(model, output_dir, report)
        return model, report, train_rows, dev_rows
    from pulpie_spark.classify.blockmodel.ensemble import Cascade

    cascade = Cascade(min_share=cfg.cascade_share)   # refused here, before N trainings, when out of range
    if cfg.teachers > 0:
        raise ValueError("members > 1 averages models instead of distilling them: drop teachers")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("members > 1 trains its members one after another on one process: run without a "
                         "distributor")
    model, report, train_rows, dev_rows, seen = _train_one(frame, replace(cfg, members=1), distill)
    members = []
    for k in range(1, cfg.members):
        member, member_report, _, _, member_seen = _train_one(frame, replace(cfg, seed=cfg.seed + k, members=1),
                                                              distill)
        members.append((member, member_report))
        seen |= member_seen
    report["config"] = {k: v for k, v in asdict(cfg).items() if k != "model"}
    report["members"] = [{"seed": cfg.seed + k, "best_epoch": r["best_epoch"],
                          "best_dev_word_f1": r["best_dev_word_f1"], "seconds": r["seconds"],
                          "train_pages": r["train_pages"]} for k, (_, r) in enumerate(members, start=1)]
    report["seconds"] = round(report["seconds"] + sum(r["seconds"] for _, r in members), 1)
    report["train_pages_seen"] = len(seen)
    if output_dir is not None:
        _save_trained(model, output_dir, report, members, cascade)
    return model, report, train_rows, dev_rows


def _train_one(frame: pd.DataFrame, cfg: TrainConfig, distill: bool
               ) -> tuple[BlockSequenceModel, dict, pd.DataFrame, pd.DataFrame, set]:
    """One model of ``train_from_cache`` (teachers and resampled epochs included), not saved:
    (model, report, train rows, dev rows, the (source, page_id) of every train page it saw)."""
    if cfg.resample_epochs and not cfg.max_pages_per_source:
        raise ValueError("resample_epochs draws a sample per epoch: set max_pages_per_source")
    train_rows, dev_rows = training_rows(frame, cfg.max_pages_per_source, cfg.seed)
    train, dev = frame_to_examples(train_rows), frame_to_examples(dev_rows)
    seen = set(zip(train_rows["source"], train_rows["page_id"]))
    if cfg.teachers <= 0:
        epoch_train = None
        if cfg.resample_epochs:
            def epoch_train(epoch: int) -> list[PageExample]:
                rows, _ = training_rows(frame, cfg.max_pages_per_source, cfg.seed + epoch)
                seen.update(zip(rows["source"], rows["page_id"]))
                return frame_to_examples(rows)

        model, report = train_model(train, dev, cfg, distill=distill, epoch_train=epoch_train)
    else:
        if cfg.resample_epochs:
            raise ValueError("teachers > 0 predicts on one fixed sample: drop resample_epochs")
        if distill:
            raise ValueError("teachers > 0 distils from its own teachers: drop the cache's teacher (--teacher)")
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError("teachers > 0 trains on one process: run without a distributor")
        teacher_reports, probs = [], []
        for k in range(1, cfg.teachers + 1):
            teacher_cfg = replace(cfg, seed=cfg.seed + k, teachers=0)
            teacher_rows, _ = training_rows(frame, cfg.max_pages_per_source, teacher_cfg.seed)
            teacher, teacher_report = train_model(frame_to_examples(teacher_rows), dev, teacher_cfg)
            teacher_reports.append({"seed": teacher_cfg.seed, "best_epoch": teacher_report["best_epoch"],
                                    "best_dev_word_f1": teacher_report["best_dev_word_f1"],
                                    "seconds": teacher_report["seconds"]})
            probs.append(predict_examples(teacher, train))
        for i, example in enumerate(train):
            example.teacher = np.mean([p[i] for p in probs], axis=0).astype(np.float32)
        model, report = train_model(train, dev, cfg, distill=True)
        report["teachers"] = teacher_reports
        report["seconds"] = round(report["seconds"] + sum(t["seconds"] for t in teacher_reports), 1)
    report["train_pages_seen"] = len(seen)
    return model, report, train_rows, dev_rows, seen


def train_entry(cache_path: str, output: str, config_json: str, distill: bool) -> dict:
    """Training on one process (driver or a TorchDistributor worker): features cache -> model dir.

    Module-level (not in jobs/) so TorchDistributor workers can import it by name.
    """
    cfg_dict = json.loads(config_json)
    model_cfg = BlockModelConfig.from_dict(cfg_dict.pop("model", {}))
    cfg = TrainConfig(**cfg_dict, model=model_cfg)
    cache = pd.read_parquet(cache_path)
    check_cache_version(cache, model_cfg.feature_version, f"features cache {cache_path}")
    _, report, _, _ = train_from_cache(cache, cfg, output_dir=output, distill=distill)
    return {k: v for k, v in report.items() if k != "history"}
