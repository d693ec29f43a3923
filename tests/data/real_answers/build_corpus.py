"""Rebuild the real-answer corpus (issue #55) from the source repositories' snapshots.

Not run by the tests: the corpus files beside this script are the record. This script shows how each line was
taken, mapped to an evalkit question id, given its source grade and its split. It needs the snapshots named in
SOURCES.md (bare git directories, read with `git show COMMIT:PATH`) and the datasets in `--data-dir`.

    python tests/data/real_answers/build_corpus.py --mirror /work/.mirror --data-dir /work/shared/datasets

The `adjudicated` field is written by hand-review (see SOURCES.md and the results file); this script fills it
with the source-independent gold comparison described per source and keeps any reviewed value already present
in the corpus file (matched by source, id, model, sample).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit_evals.datasets import load_items

HERE = Path(__file__).resolve().parent

ZEROEVAL = ("WildEval+ZeroEval", "8c1485edf12c6efb5f69135a562927c5ad484059")
GSM_EXAMPLES = ("openai+grade-school-math", "3101c7d5072418e28b9008a6636bde82a006892c")
TORA = ("microsoft+ToRA", "213c1c995038c73fab10343814df7a42f990f026")
LDB = ("FloridSleeves+LLMDebugger", "49ac191f181d47911cf38e5b9944fbbe6d4a6e60")

# ZeroEval model file -> (family, thinking)
ZEROEVAL_GSM_MODELS = {
    "gpt-4o-2024-08-06": ("openai", False),
    "gpt-4o-mini-2024-07-18": ("openai", False),
    "gpt-3.5-turbo-0125": ("openai", False),
    "o1-mini-2024-09-12": ("openai", True),
    "claude-3-5-sonnet-20241022": ("anthropic", False),
    "claude-3-opus-20240229": ("anthropic", False),
    "claude-3-haiku-20240307": ("anthropic", False),
    "gemini-1.5-pro": ("google", False),
    "gemini-1.5-flash": ("google", False),
    "gemma-2-9b-it": ("google", False),
    "gemma-2-2b-it": ("google", False),
    "Meta-Llama-3.1-8B-Instruct": ("meta-llama", False),
    "Meta-Llama-3.1-70B-Instruct": ("meta-llama", False),
    "Meta-Llama-3-8B-Instruct": ("meta-llama", False),
    "Mistral-Large-2": ("mistral", False),
    "Mixtral-8x7B-Instruct-v0.1": ("mistral", False),
    "Mistral-Nemo-Instruct-2407": ("mistral", False),
    "Qwen2-72B-Instruct": ("qwen", False),
    "Qwen2-7B-Instruct": ("qwen", False),
    "deepseek-v2.5-0908": ("deepseek", False),
    "deepseek-coder": ("deepseek", False),
    "Yi-1.5-34B-Chat": ("01-ai-yi", False),
    "command-r-plus": ("cohere", False),
    "Phi-3.5-mini-instruct": ("microsoft-phi", False),
    "reka-core-20240501": ("reka", False),
}
ZEROEVAL_MATH_MODELS = {
    "gpt-4o-2024-08-06": ("openai", False),
    "gpt-4-turbo-2024-04-09": ("openai", False),
    "o1-preview-2024-09-12": ("openai", True),
    "o1-mini-2024-09-12": ("openai", True),
    "claude-3-5-sonnet-20241022": ("anthropic", False),
    "claude-3-opus-20240229": ("anthropic", False),
    "gemini-1.5-pro": ("google", False),
    "gemma-2-27b-it": ("google", False),
    "Meta-Llama-3.1-70B-Instruct": ("meta-llama", False),
    "Meta-Llama-3.1-8B-Instruct": ("meta-llama", False),
    "Mistral-Large-2": ("mistral", False),
    "Qwen2.5-72B-Instruct": ("qwen", False),
    "Qwen2.5-7B-Instruct": ("qwen", False),
    "deepseek-v2.5-0908": ("deepseek", False),
    "Yi-1.5-34B-Chat": ("01-ai-yi", False),
    "Phi-3.5-mini-instruct": ("microsoft-phi", False),
    "grok-2-1212": ("xai", False),
}
LDB_MODELS = {
    "gpt-3.5-turbo-0613": ("openai", False),
    "gpt-4-1106-preview": ("openai", False),
    "codellama": ("meta-llama", False),
    "starcoder": ("bigcode", False),
}


def git_show(mirror: Path, repo: tuple[str, str], path: str) -> str:
    git_dir = mirror / repo[0] / "repo"
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{repo[1]}:{path}"], capture_output=True, check=True
    )
    return out.stdout.decode("utf-8")


def split_of(source: str, qid: str, model: str, sample: int) -> str:
    """A fifth held out, by a hash of (source, id, model, sample): deterministic and independent of order."""
    key = f"{source}\x1f{qid}\x1f{model}\x1f{sample}".encode()
    return "heldout" if int(hashlib.sha256(key).hexdigest()[:8], 16) % 5 == 0 else "dev"


def norm_text(s: str) -> str:
    return re.sub(r"\s+", " ", s.replace("\u2019", "'")).strip()


def first_json_answer(text: str) -> str | None:
    """The `answer` field of the first JSON object in a ZeroEval output (a reading independent of evalkit)."""
    for m in re.finditer(r"\{", text):
        depth = 0
        for j in range(m.start(), len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    blob = text[m.start() : j + 1]
                    try:
                        obj = json.loads(blob, strict=False)
                    except ValueError:
                        break
                    if isinstance(obj, dict) and "answer" in obj:
                        return str(obj["answer"])
                    break
    m2 = re.search(r'"answer"\s*:\s*"?([^"\n}]*)', text)
    return m2.group(1).strip() if m2 else None


def zeroeval_answer(model: str, output: str) -> str | None:
    """The answer ZeroEval reads: the JSON `answer` field, else (Llama-3.1 models only) a `\\boxed{word}` in the
    last 30 characters (src/evaluation/eval_utils.py, model_specific_extraction, re-stated)."""
    ans = first_json_answer(output)
    if ans is None and "Llama-3.1" in model and "boxed" in output[-30:]:
        m = re.search(r"\\boxed{([\w\d]+)}", output)
        ans = m.group(1) if m else None
    return ans


def zeroeval_rule(answer: str | None, gold: str) -> bool:
    """ZeroEval's own rule (src/evaluation/math_eval.py, re-stated): drop `$` and `,`, eval a `/`, then compare the
    first number of the answer with the first number of the gold."""

    def sanitize(a: str) -> str:
        a = a.replace("$", "").strip().replace(",", "")
        if "/" in a:
            try:
                a = str(float(eval(a, {"__builtins__": {}})))
            except Exception:  # noqa: BLE001
                pass
        return a

    if answer is None:
        return False
    num = r"-?\d+(\.\d+)?"
    ma, mg = re.search(num, sanitize(answer)), re.search(num, sanitize(gold))
    return bool(ma and mg and float(ma.group()) == float(mg.group()))


def verify_math(answer: str | None, gold: str) -> bool:
    """The JSON `answer` field against the MATH-500 gold with math-verify directly (no evalkit rewriting); every
    line where this and evalkit's grade differ is read by hand."""
    if answer is None:
        return False
    from math_verify import parse, verify

    try:
        a = answer.strip()
        a = a if "$" in a or "\\boxed" in a else f"${a}$"
        return bool(verify(parse(f"${gold}$"), parse(a)))
    except Exception:  # noqa: BLE001
        return False


def gsm_gold(row: dict[str, Any]) -> str:
    return row["answer"].split("####")[-1].strip().replace(",", "")


def num_equal(a: str | None, gold: str) -> bool:
    if a is None:
        return False
    a = a.replace(",", "").replace("$", "").strip()
    try:
        return abs(float(a) - float(gold.replace(",", ""))) < 1e-6
    except ValueError:
        return False


def answer_form(answer: str | None) -> str:
    """'plain' (a bare number), 'form' (anything else) or 'none' (no answer field): an evalkit-independent way to
    pick the lines whose form is hard to read."""
    if answer is None:
        return "none"
    return "plain" if re.fullmatch(r"\s*-?\$?\d[\d,]*(\.\d+)?\s*", answer) else "form"


def zeroeval_picks(data: list[dict], model: str, rng: random.Random, n_random: int, n_form: int, n_none: int):
    """n_random lines at random, then up to n_form lines whose answer is not a bare number and up to n_none with no
    answer field, from the rest (the 'answer-form' stratum)."""
    picks = rng.sample(range(len(data)), n_random)
    rest = [i for i in range(len(data)) if i not in set(picks)]
    forms: dict[str, list[int]] = {"form": [], "none": [], "plain": []}
    for i in rest:
        out = data[i]["output"][0] if isinstance(data[i]["output"], list) else data[i]["output"]
        forms[answer_form(zeroeval_answer(model, out))].append(i)
    hard = rng.sample(forms["form"], min(n_form, len(forms["form"])))
    hard += rng.sample(forms["none"], min(n_none, len(forms["none"])))
    return [(i, "random") for i in sorted(picks)] + [(i, "answer-form") for i in sorted(hard)]


def zeroeval_gsm(mirror: Path, gsm_by_text: dict[str, str], gsm_rows: dict[str, dict], rng: random.Random):
    for model, (family, thinking) in ZEROEVAL_GSM_MODELS.items():
        data = json.loads(git_show(mirror, ZEROEVAL, f"result_dirs/gsm/{model}.json"))
        for i, stratum in zeroeval_picks(data, model, rng, 20, 6, 4):
            item = data[i]
            qid = gsm_by_text.get(norm_text(item["question"]))
            if qid is None:
                continue
            out = item["output"][0] if isinstance(item["output"], list) else item["output"]
            gold = gsm_gold(gsm_rows[qid])
            ans = zeroeval_answer(model, out)
            yield {
                "id": qid,
                "content": out,
                "model": model,
                "family": family,
                "thinking": thinking,
                "source": "zeroeval-gsm",
                "source_grade": zeroeval_rule(ans, gold),
                "gold": gold,
                "independent": None,
                "sample": 0,
                "stratum": stratum,
            }


def zeroeval_math(mirror: Path, math_by_text: dict[str, str], math_rows: dict[str, dict], rng: random.Random):
    for model, (family, thinking) in ZEROEVAL_MATH_MODELS.items():
        data = json.loads(git_show(mirror, ZEROEVAL, f"result_dirs/math-l5/{model}.json"))
        hits = [it for it in data if norm_text(it["problem"]) in math_by_text]
        for i, stratum in zeroeval_picks(hits, model, rng, min(20, len(hits)), 6, 2):
            item = hits[i]
            qid = math_by_text[norm_text(item["problem"])]
            out = item["output"][0] if isinstance(item["output"], list) else item["output"]
            gold = math_rows[qid]["answer"]
            ans = zeroeval_answer(model, out)
            yield {
                "id": qid,
                "content": out,
                "model": model,
                "family": family,
                "thinking": thinking,
                "source": "zeroeval-math-l5",
                "source_grade": zeroeval_rule(ans, item["answer"]),
                "gold": gold,
                "independent": verify_math(ans, gold),
                "sample": 0,
                "stratum": stratum,
            }


def gsm_examples(mirror: Path, gsm_by_text: dict[str, str], gsm_rows: dict[str, dict], rng: random.Random):
    rows = [
        json.loads(x)
        for x in git_show(mirror, GSM_EXAMPLES, "grade_school_math/data/example_model_solutions.jsonl").splitlines()
    ]
    for i in sorted(rng.sample(range(len(rows)), 45)):
        r = rows[i]
        qid = gsm_by_text.get(norm_text(r["question"]))
        if qid is None:
            continue
        gold = gsm_gold(gsm_rows[qid])
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"):
            sol = r[key]["solution"]
            m = re.search(r"A:\s*(.*)\s*$", sol.strip())
            yield {
                "id": qid,
                "content": sol,
                "model": f"gpt3-{key.replace('_', '-')}",
                "family": "openai",
                "thinking": False,
                "source": "openai-gsm8k-example-solutions",
                "source_grade": bool(r[key]["is_correct"]),
                "gold": gold,
                "independent": num_equal(m.group(1) if m else None, gold),
                "sample": 0,
            }


def tora_gsm(mirror: Path, gsm_by_text: dict[str, str], gsm_rows: dict[str, dict], rng: random.Random):
    for model in ("tora-70b-v1.0", "tora-code-34b-v1.0"):
        text = git_show(mirror, TORA, f"src/outputs/llm-agents/{model}/gsm8k/test_tora_-1_seed0_t0.0_s0_e1319.jsonl")
        rows = [json.loads(x) for x in text.splitlines()]
        for i in sorted(rng.sample(range(len(rows)), 60)):
            r = rows[i]
            qid = gsm_by_text.get(norm_text(r["question"]))
            if qid is None:
                continue
            code = r["code"]
            code = ast.literal_eval(code) if isinstance(code, str) else code
            pred = r["pred"]
            pred = ast.literal_eval(pred) if isinstance(pred, str) else pred
            gold = gsm_gold(gsm_rows[qid])
            yield {
                "id": qid,
                "content": code[0],
                "model": model,
                "family": "meta-llama",
                "thinking": False,
                "source": "tora-gsm8k",
                "source_grade": num_equal(str(pred[0]), str(r["gt"])),
                "gold": gold,
                "independent": num_equal(str(pred[0]), gold),
                "sample": 0,
            }


def run_original_check(solution: str, row: dict[str, Any]) -> bool:
    """The original HumanEval `check(candidate)` (the row's `test`) run on the solution in a subprocess: a reading
    independent of evalkit (but weaker than HumanEval+'s plus inputs)."""
    program = f"{solution}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog.py"
        path.write_text(program)
        try:
            proc = subprocess.run([sys.executable, str(path)], cwd=tmp, capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            return False
    return proc.returncode == 0


def ldb_humaneval(mirror: Path, he_rows: dict[str, dict], rng: random.Random):
    for model, (family, thinking) in LDB_MODELS.items():
        text = git_show(mirror, LDB, f"input_data/humaneval/seed/{model}/seed.jsonl")
        rows = [json.loads(x) for x in text.splitlines()]
        for i in sorted(rng.sample(range(len(rows)), 40)):
            r = rows[i]
            qid = f"humanevalplus:{r['task_id']}"
            if qid not in he_rows:
                continue
            yield {
                "id": qid,
                "content": r["solution"],
                "model": model,
                "family": family,
                "thinking": thinking,
                "source": "ldb-humaneval-seed",
                "source_grade": r["is_solved"] in (True, "True"),
                "gold": None,
                "independent": run_original_check(r["solution"], he_rows[qid]),
                "sample": 0,
            }


def by_text(dataset: str, data_dir: str, field: str) -> tuple[dict[str, str], dict[str, dict]]:
    items = load_items(dataset, data_dir)
    return {norm_text(it.row[field]): it.qid for it in items}, {it.qid: it.row for it in items}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", default="/work/.mirror")
    ap.add_argument("--data-dir", default="/work/shared/datasets")
    args = ap.parse_args()
    mirror = Path(args.mirror)
    gsm_by_text, gsm_rows = by_text("gsm8k", args.data_dir, "question")
    math_by_text, math_rows = by_text("math500", args.data_dir, "problem")
    he_rows = {it.qid: it.row for it in load_items("humanevalplus", args.data_dir)}
    rng = random.Random(55)
    groups: dict[str, Iterator[dict]] = {
        "zeroeval_gsm8k.jsonl": zeroeval_gsm(mirror, gsm_by_text, gsm_rows, rng),
        "zeroeval_math500.jsonl": zeroeval_math(mirror, math_by_text, math_rows, rng),
        "openai_gsm8k_example_solutions.jsonl": gsm_examples(mirror, gsm_by_text, gsm_rows, rng),
        "tora_gsm8k.jsonl": tora_gsm(mirror, gsm_by_text, gsm_rows, rng),
        "ldb_humaneval.jsonl": ldb_humaneval(mirror, he_rows, rng),
    }
    for name, rows in groups.items():
        path = HERE / name
        reviewed = {}
        if path.exists():
            for line in path.read_text().splitlines():
                d = json.loads(line)
                if d.get("reviewed"):
                    reviewed[(d["source"], d["id"], d["model"], d.get("sample", 0))] = d
        out = []
        for r in rows:
            key = (r["source"], r["id"], r["model"], r["sample"])
            line = {
                "id": r["id"],
                "content": r["content"],
                "reasoning": None,
                "model": r["model"],
                "family": r["family"],
                "thinking": r["thinking"],
                "source": r["source"],
                "sample": r["sample"],
                "source_grade": r["source_grade"],
                "adjudicated": r["independent"] if r["independent"] is not None else r["source_grade"],
                "reviewed": False,
                "split": split_of(r["source"], r["id"], r["model"], r["sample"]),
                "stratum": r.get("stratum", "random"),
                "note": "",
            }
            if key in reviewed:
                for k in ("adjudicated", "reviewed", "note"):
                    line[k] = reviewed[key][k]
            out.append(line)
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out))
        print(f"{name}: {len(out)} lines")


if __name__ == "__main__":
    main()
