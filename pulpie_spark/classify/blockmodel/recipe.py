"""The training recipe's command-line flags and the config dict they give (no torch import).

jobs/train.py and jobs/evaluate.py --protocol loso take the same flags, since every
leave-one-source-out fold is trained by the recipe the shipped model is; the dict is what
``training.train_entry`` (as JSON) and each LOSO fold turn into a ``TrainConfig``. Kept apart
from training.py so that building a job's argument parser does not import torch.
"""

from __future__ import annotations


def add_recipe_arguments(parser, *, epochs: int, max_pages_per_source: int | None) -> None:
    """The training recipe's flags (TrainConfig and BlockModelConfig fields) on ``parser`` (or an
    argument group): jobs/train.py and jobs/evaluate.py --protocol loso take the same ones, since
    every leave-one-source-out fold is trained by the recipe the shipped model is. The two jobs
    differ only in the defaults given here. ``--threads`` is each job's own (its meaning differs)."""
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="stop after the epoch that crosses this training-time budget")
    parser.add_argument("--max-pages-per-source", type=int, default=max_pages_per_source,
                        help="seeded sample of at most N train pages per source (balance, time)")
    parser.add_argument("--main-weight", type=float, default=None,
                        help="class weight of main blocks (default: n_other / n_main clipped to [1, 5])")
    parser.add_argument("--token-dropout", type=float, default=0.0,
                        help="share of hashed block tokens dropped per training step (regularisation)")
    parser.add_argument("--container-levels", type=int, default=0,
                        help="ancestor levels whose blocks the model pools together (0: none)")
    parser.add_argument("--container-stats", action="store_true",
                        help="with --container-levels: also each ancestor's text share and block count")
    parser.add_argument("--ema-decay", type=float, default=0.0,
                        help="keep a moving average of the weights with this decay per step (0: off)")
    parser.add_argument("--teachers", type=int, default=0,
                        help="distil from the mean of this many models of seeds seed+1.. (0: off)")
    parser.add_argument("--members", type=int, default=1,
                        help="an ensemble of this many models of seeds seed, seed+1, .. (1: one model)")
    parser.add_argument("--cascade-share", type=float, default=0.05,
                        help="with --members: the members after the first run on a page where at least this "
                             "share of its characters is in blocks the first scores 0.3-0.7 (0: every page)")
    parser.add_argument("--resample-epochs", action="store_true",
                        help="with --max-pages-per-source: each epoch its own seeded sample of each source")
    parser.add_argument("--batch-pages", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--hidden", type=int, default=96)
    parser.add_argument("--embed-dim", type=int, default=48)
    parser.add_argument("--buckets", type=int, default=1 << 15)
    parser.add_argument("--feature-version", type=int, default=None,
                        help="block feature version (default: the current FEATURE_VERSION)")


def recipe_config(args, **fields) -> dict:
    """The recipe flags of ``add_recipe_arguments`` as TrainConfig fields plus ``model``
    (BlockModelConfig fields): the dict ``train_entry`` (as JSON) and the LOSO folds take.
    ``fields``: the job's own TrainConfig fields (threads, device)."""
    from pulpie_spark.classify.blockmodel.features import FEATURE_VERSION

    feature_version = FEATURE_VERSION if args.feature_version is None else args.feature_version
    return {"epochs": args.epochs, "batch_pages": args.batch_pages, "lr": args.lr, "patience": args.patience,
            "seed": args.seed, "max_minutes": args.max_minutes, "max_pages_per_source": args.max_pages_per_source,
            "main_weight": args.main_weight, "token_dropout": args.token_dropout, "ema_decay": args.ema_decay,
            "teachers": args.teachers, "resample_epochs": args.resample_epochs,
            "members": args.members, "cascade_share": args.cascade_share, **fields,
            "model": {"hidden": args.hidden, "embed_dim": args.embed_dim, "n_buckets": args.buckets,
                      "feature_version": feature_version, "container_levels": args.container_levels,
                      "container_stats": args.container_stats}}
