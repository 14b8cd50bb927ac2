"""Score a model against trafilatura on a labelled table, side by side in one run.

    python jobs/evaluate.py --input ../shared/data/extraction --split dev --model default
    python jobs/evaluate.py --input WebMainBench.jsonl --model orange-small --workers 2

Input: our Parquet schema (``html``, ``gold_text``, ``source``, ``split``) as a file or
folder, or WebMainBench JSONL (``html``, ``convert_main_content``, ``meta.level``).
Both extractors see every page; the table gives, per source (or WebMainBench level)
and overall: ROUGE-5 F1 (WebMainBench), 4-gram shingle F1 (ScrapingHub benchmark),
empty pages and pages/s per core (pages / summed single-core seconds per extractor).
The model runs end to end through ``pulpie_spark.extractor.Extractor`` (segment +
classify + text, or Markdown for WebMainBench whose reference is Markdown).

``--protocol loso`` (leave one source out; pulpie_spark/evaluate/loso.py): for every source
of the input folder (small sources grouped, near-duplicates counted once) train a model
without it, with the recipe the flags give (below: the shipped model's), and score it on
that source; trafilatura and resiliparse run on the same pages. The table quoted in
docs/model-card.md, over two seeds (OUTPUT/seed-<n>, then OUTPUT/seeds.md):

    .venv/bin/python jobs/evaluate.py --protocol loso --input ../shared/data/extraction \
        --output /tmp/pulpie-loso --workers 2 --epochs 2 --max-pages-per-source 300 \
        --main-weight 1.0 --token-dropout 0.25 --container-levels 3 --seeds 13,14

``--main-threshold T`` (as jobs/extract.py takes it) scores the model, or every fold model,
with blocks main at P(main) >= T: the precision knob measured on a user's own labelled pages.

``--train-only PATH`` adds labelled pages every fold model trains on that are never held out
or scored (``../shared/data/extraction-weak``, whose gold is another extractor's output).

The evaluation is local (pandas + multiprocessing): it starts no SparkSession and
takes no Spark flags (--input, --output and its own).
"""

from __future__ import annotations

import json
from pathlib import Path

from pulpie_spark.classify.blockmodel.recipe import add_recipe_arguments, recipe_config
from pulpie_spark.classify.base import MAIN_THRESHOLD
from pulpie_spark.cli import SparkJob, main_threshold_arg, run_job
from pulpie_spark.render.fallback import DEFAULT_FALLBACK, FALLBACKS


class EvaluateJob(SparkJob):
    name = "pulpie-evaluate"
    description = "Extraction quality and speed of a model vs trafilatura on a labelled table"
    uses_spark = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("--protocol", choices=["split", "loso"], default="split",
                            help="split: score --model on --split; loso: leave-one-source-out training + scoring")
        parser.add_argument("--model", default="default", help="classifier name for Extractor(model=...)")
        parser.add_argument("--split", default="dev", help="split to evaluate ('all' for every page)")
        parser.add_argument("--sources", default=None, help="comma-separated sources to keep")
        parser.add_argument("--limit", type=int, default=None, help="first N pages (after sorting)")
        parser.add_argument("--workers", type=int, default=1, help="extraction processes")
        parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
        parser.add_argument("--fallback", choices=list(FALLBACKS), default=DEFAULT_FALLBACK,
                            help="Extractor fallback for pages where the model finds no content")
        parser.add_argument("--main-threshold", type=main_threshold_arg, default=MAIN_THRESHOLD,
                            help="P(main) at or above which a block is main (the model's, and with "
                                 "--protocol loso every fold model's): the precision knob of jobs/extract.py")
        parser.add_argument("--compare", choices=["auto", "text", "markdown"], default="auto",
                            help="model output compared with the reference (auto: markdown for JSONL)")
        loso = parser.add_argument_group("loso", "leave-one-source-out (--protocol loso)")
        loso.add_argument("--min-fold-pages", type=int, default=100,
                          help="sources with fewer pages join their family's fold or 'small-sources'")
        loso.add_argument("--limit-per-source", type=int, default=None, help="first N pages per source (smoke)")
        loso.add_argument("--features-cache", default=None, help="feature cache (default: OUTPUT/features.parquet)")
        loso.add_argument("--reuse-cache", action="store_true", help="reuse --features-cache if it exists")
        loso.add_argument("--keep-models", action="store_true", help="keep each fold's model under OUTPUT/models")
        loso.add_argument("--reference-model", default=None,
                          help="also run this fixed model (e.g. default: the shipped one) on every page")
        add_recipe_arguments(loso, epochs=2, max_pages_per_source=300)
        loso.add_argument("--label-ceiling", action="store_true",
                          help="also score every page rendered with its training labels; write conventions.csv")
        loso.add_argument("--seeds", default=None,
                          help="comma-separated seeds: the protocol once per seed under OUTPUT/seed-<n>, "
                               "then seeds.md / seeds.csv (scores per seed, mean and spread)")
        loso.add_argument("--train-sources", default=None,
                          help="comma-separated sources the fold models train on (default: all but the fold)")
        loso.add_argument("--page-gate", type=float, default=None, metavar="THRESHOLD",
                          help="fit the page gate at this threshold (per fold on the others' pages; gated "
                               "pages take the fallback's text and time) and write OUTPUT/page_gate.json")
        loso.add_argument("--train-only", default=None,
                          help="labelled Parquet file or folder every fold model also trains on, never held out "
                               "or scored (e.g. ../shared/data/extraction-weak)")

    def run(self, spark, args) -> int:
        if args.protocol == "loso":
            return self.run_loso(args)
        from pulpie_spark.evaluate.harness import format_table, load_labelled_table, run_extractors, score

        if not args.input:
            raise SystemExit("--input is required")
        split = None if args.split == "all" else args.split
        sources = [s.strip() for s in args.sources.split(",")] if args.sources else None
        table = load_labelled_table(args.input, split=split, sources=sources, limit=args.limit)
        if table.empty:
            raise SystemExit(f"no pages in {args.input} for split={args.split} sources={args.sources}")
        compare = args.compare
        if compare == "auto":
            compare = "markdown" if str(args.input).endswith((".jsonl", ".json")) else "text"
        results = run_extractors(table, model=args.model, output=compare, workers=args.workers,
                                 threads=args.threads, fallback=args.fallback, main_threshold=args.main_threshold)
        scores = score(results)
        print(f"model={args.model} input={args.input} split={args.split} pages={len(table)} "
              f"compare={compare} workers={args.workers} fallback={args.fallback} "
              f"main_threshold={args.main_threshold}")
        print(format_table(scores))
        if args.output:
            out = Path(args.output)
            out.mkdir(parents=True, exist_ok=True)
            results.to_parquet(out / "pages.parquet", index=False)
            scores.to_csv(out / "scores.csv", index=False)
            (out / "scores.json").write_text(json.dumps(scores.to_dict(orient="records"), indent=2) + "\n")
        return 0

    def run_loso(self, args) -> int:
        from pulpie_spark.evaluate.loso import run_loso

        if not args.input or not args.output:
            raise SystemExit("--protocol loso needs --input (a labelled Parquet folder) and --output")
        train_config = recipe_config(args, threads=args.threads)
        sources = [s.strip() for s in args.sources.split(",")] if args.sources else None
        options = dict(min_fold_pages=args.min_fold_pages, workers=args.workers, fallback=args.fallback,
                       main_threshold=args.main_threshold,
                       features_cache=args.features_cache, reuse_cache=args.reuse_cache, sources=sources,
                       limit_per_source=args.limit_per_source, keep_models=args.keep_models,
                       reference_model=args.reference_model,
                       train_sources=[s.strip() for s in args.train_sources.split(",")]
                       if args.train_sources else None, label_ceiling=args.label_ceiling,
                       train_only=args.train_only, page_gate=args.page_gate)
        if args.seeds:
            from pulpie_spark.evaluate.loso import run_loso_seeds

            seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
            result = run_loso_seeds(args.input, args.output, seeds=seeds, train_config=train_config, **options)
            print(f"protocol=loso seeds={seeds} input={args.input} output={args.output}")
            print(result["markdown"])
            return 0
        result = run_loso(args.input, args.output, train_config=train_config, **options)
        s = result["summary"]
        print(f"protocol=loso input={args.input} pages={s['pages']} (of {s['input_pages']}, "
              f"{s['duplicates_dropped']} near-duplicates dropped) folds={len(s['folds'])} "
              f"epochs={args.epochs} max_pages_per_source={args.max_pages_per_source} "
              f"fallback={args.fallback} main_threshold={args.main_threshold} workers={args.workers} "
              f"wall={s['wall_seconds']:.0f}s")
        for fold, members in s["folds"].items():
            print(f"  fold {fold}: {', '.join(members)}")
        print(result["markdown"])
        return 0


if __name__ == "__main__":
    run_job(EvaluateJob())
