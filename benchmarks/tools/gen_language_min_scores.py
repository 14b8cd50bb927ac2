#!/usr/bin/env python3
"""Generate pulpie_spark/resources/language/min_scores.json: the minimum language-ID
score per FineWeb-2 label that the language stage uses by default.

    python benchmarks/tools/gen_language_min_scores.py [--configs ../shared/data/fineweb2/configs]

Reads ``language_score`` from FineWeb-2's ``configs/<label>.yml`` (huggingface/fineweb-2,
commit d0defb24, Apache-2.0) for every label the language stage can output
(pulpie_spark.curate.language.labels()), then applies the overrides for fastText lid.176
below (FineWeb-2's values were set on GlotLID; see docs/curation.md). The package reads
only the generated JSON: it never reads ../shared at run time.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from pulpie_spark.curate.language import labels

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "pulpie_spark" / "resources" / "language" / "min_scores.json"
SOURCE = "huggingface/fineweb-2 configs/<label>.yml language_score, commit d0defb24 (Apache-2.0)"

# lid.176 is not GlotLID: FineWeb-2 raised Marathi and Nepali to ~0.9 against GlotLID's
# Hindi confusions; lid.176 scores genuine Marathi 0.61-0.99 and Nepali 0.53-0.93 and never
# sends Hindi there (notes/langid.md). English has no FineWeb-2 config: FineWeb used 0.65
# with this same model.
OVERRIDES = {
    "eng_Latn": (0.65, "no FineWeb-2 config; FineWeb's threshold for lid.176"),
    "npi_Deva": (0.5, "lid.176 scores genuine Nepali 0.53-0.93 (FineWeb-2/GlotLID: 0.896)"),
    "mar_Deva": (0.6, "lid.176 scores genuine Marathi 0.61-0.99 (FineWeb-2/GlotLID: 0.9)"),
}
_SCORE = re.compile(r"^language_score:\s*([0-9.]+)\s*$", re.M)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=str(ROOT.parent / "shared" / "data" / "fineweb2" / "configs"))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    conf = Path(args.configs)
    scores, missing = {}, []
    for label in sorted(labels()):
        path = conf / f"{label}.yml"
        if not path.exists():
            missing.append(label)
            continue
        m = _SCORE.search(path.read_text(encoding="utf-8"))
        if not m:
            raise SystemExit(f"{path}: no language_score")
        scores[label] = float(m.group(1))
    overrides = {}
    for label, (score, why) in OVERRIDES.items():
        overrides[label] = {"fineweb2": scores.get(label), "used": score, "why": why}
        scores[label] = score
    unset = sorted(set(missing) - set(OVERRIDES))
    if unset:
        raise SystemExit(f"labels without a FineWeb-2 config and without an override: {unset}")
    data = {"source": SOURCE, "generated_by": "benchmarks/tools/gen_language_min_scores.py",
            "overrides": overrides, "min_scores": dict(sorted(scores.items()))}
    Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=True) + "\n", encoding="utf-8")
    print(f"{len(scores)} labels -> {args.out} (overrides: {', '.join(OVERRIDES)})")


if __name__ == "__main__":
    main()
