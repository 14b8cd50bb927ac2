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

The evaluation is local (pandas + multiprocessing): it starts no SparkSession and
takes no Spark flags (--input, --output and its own).
"""

from __future__ import annotations

import json
from pathlib import Path

from pulpie_spark.cli import SparkJob, run_job
from pulpie_spark.render.fallback import DEFAULT_FALLBACK, FALLBACKS


class EvaluateJob(SparkJob):
    name = "pulpie-evaluate"
    description = "Extraction quality and speed of a model vs trafilatura on a labelled table"
    uses_spark = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("--model", default="default", help="classifier name for Extractor(model=...)")
        parser.add_argument("--split", default="dev", help="split to evaluate ('all' for every page)")
        parser.add_argument("--sources", default=None, help="comma-separated sources to keep")
        parser.add_argument("--limit", type=int, default=None, help="first N pages (after sorting)")
        parser.add_argument("--workers", type=int, default=1, help="extraction processes")
        parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
        parser.add_argument("--fallback", choices=list(FALLBACKS), default=DEFAULT_FALLBACK,
                            help="Extractor fallback for pages where the model finds no content")
        parser.add_argument("--compare", choices=["auto", "text", "markdown"], default="auto",
                            help="model output compared with the reference (auto: markdown for JSONL)")

    def run(self, spark, args) -> int:
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
                                 threads=args.threads, fallback=args.fallback)
        scores = score(results)
        print(f"model={args.model} input={args.input} split={args.split} pages={len(table)} "
              f"compare={compare} workers={args.workers} fallback={args.fallback}")
        print(format_table(scores))
        if args.output:
            out = Path(args.output)
            out.mkdir(parents=True, exist_ok=True)
            results.to_parquet(out / "pages.parquet", index=False)
            scores.to_csv(out / "scores.csv", index=False)
            (out / "scores.json").write_text(json.dumps(scores.to_dict(orient="records"), indent=2) + "\n")
        return 0


if __name__ == "__main__":
    run_job(EvaluateJob())
