"""User files are data (issue #39): a user eval's prompt and `[sim] answer`, and a report template, render in
Jinja's sandbox, so each known escape to Python ends in one line and exit 2 with no command run (a marker file
each payload would create stays absent); a regex extractor with nested quantifiers grades `error` within its time
limit and the run still stops on Ctrl-C; the `tests` scorer runs under the code sandbox with a wall limit per answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit_evals.code_judge import CodeJudge
from evalkit_evals.isolation import Isolation, find_bubblewrap
from evalkit_evals.math_judge import MathJudge
from evalkit_evals.protocol import Judges
from evalkit_evals.sandbox import SandboxLimits
from evalkit_evals.user_eval import REGEX_TIMEOUT_S, load_user_eval

EVALKIT = [sys.executable, "-m", "evalkit"]
BWRAP = find_bubblewrap()
needs_bwrap = pytest.mark.skipif(not isinstance(BWRAP, Isolation), reason=f"{BWRAP}")

# Each payload creates @marker@ if its escape works. The first four are the classic ones; the rest reach the
# same globals another way.
ESCAPES = {
    "cycler_globals_os": "{{ cycler.__init__.__globals__.os.popen('touch @marker@').read() }}",
    "subclasses_popen": (
        "{% for c in ''.__class__.__mro__[1].__subclasses__() %}"
        "{% if c.__name__ == 'Popen' %}{{ c(['touch', '@marker@']).wait() }}{% endif %}{% endfor %}"
    ),
    "self_init_globals": ("{{ self.__init__.__globals__.__builtins__.__import__('os').system('touch @marker@') }}"),
    "lipsum_globals": "{{ lipsum.__globals__['os'].popen('touch @marker@').read() }}",
    "joiner_getattr_filter": ("{{ (joiner|attr('__init__')|attr('__globals__'))['os'].system('touch @marker@') }}"),
    "namespace_globals": "{{ namespace.__init__.__globals__.sys.modules.os.system('touch @marker@') }}",
    "format_string": (
        "{{ '{0.__class__.__mro__}'.format(q) }}{{ cycler.__init__.__globals__.os.system('touch @marker@') }}"
    ),
    "only_on_a_later_row": (
        "{% if q == 'second' %}{{ cycler.__init__.__globals__.os.system('touch @marker@') }}{% endif %}{{ q }}"
    ),
}

BODY = (
    'name = "esc"\nprompt = """{prompt}"""\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n'
    "[extract]\nkind = \"regex\"\npattern = 'Answer: (.+)'\n"
)


def _eval_file(tmp_path: Path, prompt: str, sim_answer: str | None = None) -> Path:
    (tmp_path / "rows.jsonl").write_text('{"q": "first", "gold": "1"}\n{"q": "second", "gold": "2"}\n')
    body = BODY.format(prompt=prompt) + (f'[sim]\nanswer = """{sim_answer}"""\n' if sim_answer else "")
    path = tmp_path / "esc.toml"
    path.write_text(body, encoding="utf-8")
    return path


def _payload(name: str, marker: Path) -> str:
    return ESCAPES[name].replace("@marker@", str(marker))


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_prompt_escapes_end_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    marker = tmp_path / "pwned"
    path = _eval_file(tmp_path, _payload(name, marker))
    argv = ["capability", "--eval", str(path), "--thinking", "off", "--base-url", "http://127.0.0.1:9/v1"]
    code = main([*argv, "--out", str(tmp_path), "--name", "x"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert not marker.exists(), "the template ran a command"
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert "prompt:" in err[0] and any(w in err[0] for w in ("unsafe", "no attribute", "undefined")), err


@pytest.mark.parametrize("name", ["cycler_globals_os", "subclasses_popen", "only_on_a_later_row"])
def test_sim_answer_escapes_stop_the_sim_at_start(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    path = _eval_file(tmp_path, "{{ q }}", _payload(name, marker))
    proc = subprocess.run(
        [*EVALKIT, "sim", "--port", "0", "--eval", str(path)], capture_output=True, text=True, timeout=60
    )
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert not marker.exists(), "the template ran a command"
    assert proc.returncode == 2 and len(err) == 1 and "[sim] answer" in err[0], proc.stderr[-2000:]


def test_report_template_escape_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runfixtures import bench_run

    run = bench_run(tmp_path / "x1", "one", {"code": 100.0}, jitter=0.0)
    marker = tmp_path / "pwned"
    tpl = tmp_path / "mine.md.j2"
    tpl.write_text(_payload("cycler_globals_os", marker) + "\n")
    code = main(["report", str(run), "--template", str(tpl), "-o", str(tmp_path / "r.md")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert not marker.exists(), "the template ran a command"
    assert code == 2 and len(err) == 1 and "unsafe" in err[0], err


def test_the_sandbox_still_renders_ordinary_templates(tmp_path: Path) -> None:
    prompt = "{% for w in q.split('i') %}[{{ w | upper }}]{% endfor %} {{ '%s!' % q }} {{ range(3) | list }}"
    ev = load_user_eval(_eval_file(tmp_path, prompt))
    from evalkit_evals.prompting import render_template

    items = ev.load(None)
    assert render_template(ev.template(), items[0].row) == "[F][RST] first! [0, 1, 2]\n"


# --- regex extractors under a time limit --------------------------------------------------------------------
CATASTROPHIC = (
    'name = "cat"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n'
    "[extract]\nkind = \"regex\"\npattern = '(a|aa)+$'\n"
)
EVIL_ANSWER = "a" * 40 + "b"


@pytest.fixture(scope="module")
def judges() -> Iterator[Judges]:
    j = Judges(None, MathJudge())
    yield j
    j.math.close()


def test_catastrophic_regex_grades_error_within_its_limit(tmp_path: Path, judges: Judges) -> None:
    (tmp_path / "rows.jsonl").write_text('{"q": "x", "gold": "a"}\n')
    (tmp_path / "cat.toml").write_text(CATASTROPHIC)
    ev = load_user_eval(tmp_path / "cat.toml")
    [item] = ev.load(None)
    t0 = time.monotonic()
    verdict = ev.grade(item, EVIL_ANSWER, judges)
    took = time.monotonic() - t0
    assert verdict.outcome == "error" and "time limit" in verdict.why, verdict
    assert took < REGEX_TIMEOUT_S + 10, took
    assert ev.grade(item, "a", judges).outcome == "correct"  # an ordinary answer still matches
    # The issue's own pattern: the `regex` module does not backtrack on it at all, so it ends at once.
    (tmp_path / "cat2.toml").write_text(CATASTROPHIC.replace("(a|aa)+$", "(a+)+$").replace('"cat"', '"cat2"'))
    ev2 = load_user_eval(tmp_path / "cat2.toml")
    t0 = time.monotonic()
    assert ev2.grade(ev2.load(None)[0], EVIL_ANSWER, judges).outcome == "unparsed"
    assert time.monotonic() - t0 < REGEX_TIMEOUT_S + 10


def test_catastrophic_regex_replay_stops_on_ctrl_c(tmp_path: Path) -> None:
    rows = [{"id": str(i), "q": "x", "gold": "aaa"} for i in range(50)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "cat.toml").write_text(
        CATASTROPHIC.replace('path = "rows.jsonl"', 'path = "rows.jsonl"\nid_column = "id"')
    )
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": f"cat:{i}", "content": EVIL_ANSWER}) + "\n" for i in range(50)))
    proc = subprocess.Popen(
        [*EVALKIT, "capability", "--eval", str(tmp_path / "cat.toml"), "--replay", str(answers)]
        + ["--out", str(tmp_path), "--name", "r"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(4)  # well inside the grading of 50 answers at the time limit each
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - t0 < REGEX_TIMEOUT_S + 20
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode != 0 and "Traceback" not in err, err[-2000:]


# --- the tests scorer under the code sandbox ----------------------------------------------------------------
TESTS_EVAL = (
    'name = "tst"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\n'
    '[extract]\nkind = "code"\n[score]\nkind = "tests"\nentry_point = "f"\n'
)


def _tests_item(tmp_path: Path, n_tests: int) -> tuple:
    tests = [[[i], i + 1] for i in range(n_tests)]
    (tmp_path / "rows.jsonl").write_text(json.dumps({"q": "x", "gold": "", "tests": tests}) + "\n")
    (tmp_path / "t.toml").write_text(TESTS_EVAL)
    ev = load_user_eval(tmp_path / "t.toml")
    return ev, ev.load(None)[0]


@needs_bwrap
def test_tests_scorer_has_a_wall_limit_per_answer(tmp_path: Path) -> None:
    assert isinstance(BWRAP, Isolation)
    ev, item = _tests_item(tmp_path, 20)
    judges = Judges(None, MathJudge(), CodeJudge(BWRAP, SandboxLimits(wall_s=3.0, cpu_s=30)))
    slow = "```python\nimport time\ndef f(x):\n    time.sleep(0.8)\n    return x + 1\n```"
    try:
        t0 = time.monotonic()
        verdict = ev.grade(item, slow, judges)
        took = time.monotonic() - t0
        assert verdict.outcome == "wrong" and "wall limit" in verdict.why, verdict
        assert took < 3.0 + 10, took  # 20 calls of 0.8 s would take 16 s
        right = ev.grade(item, "```python\ndef f(x):\n    return x + 1\n```", judges)
        assert right.outcome == "correct", right
    finally:
        judges.math.close()


@needs_bwrap
def test_tests_scorer_answers_run_inside_the_sandbox(tmp_path: Path) -> None:
    assert isinstance(BWRAP, Isolation)
    ev, item = _tests_item(tmp_path, 2)
    marker = tmp_path / "pwned"
    os.chmod(tmp_path, 0o777)  # only the sandbox's walls keep the answer out
    judges = Judges(None, MathJudge(), CodeJudge(BWRAP, SandboxLimits(wall_s=10.0)))
    hostile = f"```python\ndef f(x):\n    open({str(marker)!r}, 'w').write('x')\n    return x + 1\n```"
    try:
        verdict = ev.grade(item, hostile, judges)
        assert verdict.outcome == "wrong" and not marker.exists(), verdict
    finally:
        judges.math.close()
