#!/usr/bin/env bash
# Prepare a self-contained folder for benchmarks/gpu_encoder.py on a GPU machine that has
# torch + transformers but no network and none of our other dependencies:
#   benchmarks/gpu_bundle.sh [PAGES] [DIR]      (defaults: 2500 pages, .gpubench)
# DIR then holds a snapshot of the committed package (plus the working copy of
# pulpie_spark/classify), the benchmark script, DIR/pages.parquet (zstd), a cp312
# selectolax wheel and EuroBERT's tokenizer (Llama 3's, rebuilt by
# benchmarks/llama3_tokenizer.py from npm; skipped with a warning where npm is missing).
# On the GPU machine:
#   pip install --no-index --no-deps --target /tmp/site DIR/whl/*.whl && export PYTHONPATH=/tmp/site
#   cd DIR && python3 benchmarks/gpu_encoder.py --data . --pages PAGES --workers 14 \
#       --tokenizer llama3/tokenizer.json [--compile layers]     (after gunzip -k llama3/tokenizer.json.gz)
# Snapshotting keeps the run independent of half-edited files in the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES="${1:-2500}"
DIR="${2:-.gpubench}"
PY="${PYTHON:-.venv/bin/python}"
rm -rf "$DIR" && mkdir -p "$DIR/whl" "$DIR/benchmarks"
git archive HEAD pulpie_spark | tar -x -C "$DIR"
rm -rf "$DIR/pulpie_spark/models" "$DIR/pulpie_spark/resources"
cp pulpie_spark/classify/*.py "$DIR/pulpie_spark/classify/"
cp benchmarks/gpu_encoder.py "$DIR/benchmarks/"
if "$PY" benchmarks/llama3_tokenizer.py --out "$DIR/llama3/tokenizer.json"; then
    gzip -9 "$DIR/llama3/tokenizer.json"   # 17 MB -> 2.5 MB of the carry limit; gunzip there
else
    echo "warning: no Llama 3 tokenizer in the bundle (npm unreachable?): the run trains its own BPE" >&2
fi
version="$("$PY" -c 'import selectolax; print(selectolax.__version__)')"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DIR/whl" "selectolax==$version"
"$PY" - "$PAGES" "$DIR" <<'PYEOF'
import sys
from pathlib import Path

sys.path.insert(0, "benchmarks")
import pyarrow as pa
import pyarrow.parquet as pq
from gpu_encoder import ROOT, load_pages

n, out = int(sys.argv[1]), Path(sys.argv[2])
pages = load_pages(ROOT.parent / "shared" / "data" / "extraction", n)
pq.write_table(pa.table({"html": pa.array(pages, pa.binary())}), out / "pages.parquet",
               compression="zstd", compression_level=9)
print(f"{n} pages, {(out / 'pages.parquet').stat().st_size / 1e6:.1f} MB -> {out}")
PYEOF
du -sh "$DIR"
