"""Extract main content: a table with ``url`` + ``html`` (or WARC files) -> Markdown and text.

    python jobs/extract.py                                   # bundled sample -> ./output/extract
    spark-submit --properties-file conf/dataproc-gpu.conf jobs/extract.py \
        --input gs://bucket/records --output gs://bucket/extract --format delta --model orange-small

Output: every input column unchanged + doc_id, markdown, text, [main_html], n_blocks,
n_main, model_id, error, fallback. Rows that cannot be processed go to the rejects table
(``<output>_rejects`` or ``--rejects``) with ``reason`` and ``stage``: none is lost.
"""

from __future__ import annotations

import json

from pulpie_spark.classify.base import MAIN_THRESHOLD
from pulpie_spark.classify.hf import COMPILE_CHOICES
from pulpie_spark.cli import SparkJob, main_threshold_arg, run_job, unsure_threshold_arg
from pulpie_spark.render.fallback import DEFAULT_FALLBACK, FALLBACKS
from pulpie_spark.resources import SAMPLE_WARC

# GPUs per classify task, from a preset (conf/*-gpu.conf) when --gpu-amount is not given.
GPU_AMOUNT_CONF = "spark.pulpie.classify.gpuAmount"


class ExtractJob(SparkJob):
    name = "pulpie-extract"
    description = "HTML pages (table or WARC) -> main content as Markdown and text, with a rejects table"
    default_input = str(SAMPLE_WARC)
    default_output = "output/extract"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--input-format", choices=["auto", "parquet", "delta", "warc"], default="auto",
                            help="auto: warc for *.warc[.gz] files/dirs of them, delta if _delta_log, else parquet")
        parser.add_argument("--model", default="default",
                            help="'default' (embedded), 'default-fast' (its first model alone: ~15%% faster, "
                                 "-0.004 LOSO shingle F1), orange-small|base|large, a Hub id or a checkpoint dir")
        parser.add_argument("--fallback", choices=list(FALLBACKS), default=DEFAULT_FALLBACK,
                            help="extractor for pages the model cannot serve (no blocks, an error, empty or short output, unsure)")
        parser.add_argument("--main-threshold", type=main_threshold_arg, default=MAIN_THRESHOLD,
                            help="P(main) at or above which a block is main: higher for precision, lower "
                                 "for recall (docs/model-card.md, 'Precision or recall')")
        parser.add_argument("--unsure-threshold", type=unsure_threshold_arg, default=None,
                            help="'model' (default: the model's page gate, shipped with the default model), 'off', "
                                 "or a gate score at or above which a page goes to the fallback (docs/model-card.md)")
        parser.add_argument("--rejects", default=None, help="rejects table path (default <output>_rejects)")
        parser.add_argument("--keep-main-html", action="store_true", help="also write main_html")
        parser.add_argument("--drop-html", action="store_true",
                            help="leave the input html column out of the output (rejects keep it)")
        parser.add_argument("--links", action="store_true", help="keep [text](href) links in Markdown")
        parser.add_argument("--images", action="store_true", help="keep ![alt](src) images in Markdown")
        parser.add_argument("--device", default=None, help="classifier device (cpu, cuda); default: auto")
        parser.add_argument("--gpu-amount", type=float, default=None,
                            help=f"GPUs per classify task (stage-level profile); default: {GPU_AMOUNT_CONF}, else the cluster's task GPU amount")
        parser.add_argument("--batch-tokens", type=int, default=None, help="classifier token budget per batch")
        parser.add_argument("--compile", default="auto", choices=COMPILE_CHOICES,
                            help="torch.compile a transformers encoder: its layers, its MLPs and norms, or none "
                                 "(default auto: layers on CUDA, none on CPU; docs/BENCHMARKS.md 'GPU encoder')")
        parser.add_argument("--mode", default="overwrite", choices=["overwrite", "append", "error", "ignore"],
                            help="save mode for output and rejects")
        parser.add_argument("--show", type=int, default=1, help="print the Markdown of this many pages")

    def run(self, spark, args) -> int:
        from pulpie_spark.io import read_table
        from pulpie_spark.spark_pipeline import ExtractOptions, run_extract
        from pulpie_spark.ingest.spark_adapter import load_input

        df = load_input(spark, args.input, args.input_format)
        gpu_amount = args.gpu_amount
        if gpu_amount is None and spark.conf.get(GPU_AMOUNT_CONF, None):
            gpu_amount = float(spark.conf.get(GPU_AMOUNT_CONF))
        options = ExtractOptions(model=args.model, keep_main_html=args.keep_main_html, drop_html=args.drop_html,
                                 links=args.links,
                                 images=args.images, device=args.device, gpu_amount=gpu_amount,
                                 batch_tokens=args.batch_tokens, compile=args.compile, fallback=args.fallback,
                                 main_threshold=args.main_threshold, unsure_threshold=args.unsure_threshold)
        from pulpie_spark.memory import InputTooLarge

        try:
            summary = run_extract(df, args.output, fmt=args.format, rejects=args.rejects, options=options,
                                  mode=args.mode)
        except InputTooLarge as exc:  # raised before any work: a message, not a stack trace
            raise SystemExit(f"{self.name}: {exc}") from None
        print(f"rows {summary['rows']}  output {summary['output_rows']}  rejects {summary['rejects']}"
              f"  mean n_blocks {summary['mean_n_blocks'] or 0:.1f}  mean n_main {summary['mean_n_main'] or 0:.1f}"
              f"  time {summary['seconds']:.1f}s")
        print(f"output  -> {summary['output']} ({summary['format']})")
        print(f"rejects -> {summary['rejects_path']}  reasons {json.dumps(summary['reject_reasons'])}")
        if args.show > 0:
            out = read_table(spark, args.output, args.format)
            for row in out.where("n_main > 0").orderBy("doc_id").select("url", "title", "markdown").limit(args.show).collect():
                print(f"\n--- {row['url']}\ntitle: {row['title']}\n{(row['markdown'] or '')[:800]}")
        return 0


if __name__ == "__main__":
    run_job(ExtractJob())
