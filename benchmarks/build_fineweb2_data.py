"""Build pulpie_spark/resources/quality/fineweb2_quality.json.gz from FineWeb-2's per-language
filter configs (../shared/data/fineweb2/configs/<label>.yml, huggingface/fineweb-2 commit
d0defb24, Apache-2.0). The package reads only the generated file, never ../shared.

    .venv/bin/python benchmarks/build_fineweb2_data.py [--configs DIR]

Per label it keeps what the quality gates take (fineweb-2-pipeline.py's arguments):
stopwords, max_non_alpha_words_ratio, min/max_avg_word_length, dup_line_frac, dup_n_grams,
top_n_grams, line_punct_thr, new_line_ratio (language_score is the language stage's,
resources/language/min_scores.json). A language without a config gets the package's own
default (quality.py, ``language_quality``), not a value from here.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT.parent / "shared" / "data" / "fineweb2" / "configs"
OUT = ROOT / "pulpie_spark" / "resources" / "quality" / "fineweb2_quality.json.gz"
SCALARS = ("max_non_alpha_words_ratio", "min_avg_word_length", "max_avg_word_length", "dup_line_frac",
           "line_punct_thr", "new_line_ratio")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=str(CONFIGS))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    langs = {}
    for path in sorted(Path(a.configs).glob("*.yml")):
        cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
        entry = {k: cfg[k] for k in SCALARS}
        entry["stopwords"] = [str(w) for w in cfg.get("stopwords") or []]
        entry["top_n_grams"] = [[int(n), float(f)] for n, f in cfg["top_n_grams"]]
        entry["dup_n_grams"] = [[int(n), float(f)] for n, f in cfg["dup_n_grams"]]
        langs[path.stem] = entry
    data = {"source": "huggingface/fineweb-2 commit d0defb24, configs/*.yml, Apache-2.0", "languages": langs}
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "wb") as fh:  # mtime 0: the same configs give the same bytes
        with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
            gz.write(raw)
    print(f"{len(langs)} languages -> {a.out} ({Path(a.out).stat().st_size} bytes)")


if __name__ == "__main__":
    main()
