"""Code forms (HumanEval+): how a model hands over a solution (fenced with `python`, `py` or `python3`, split over
several blocks, after a test block, before a pytest module, the function body only, with a `__main__` block, with
imports the prompt did not give). `Subject.value` is the function body written under the prompt's signature."""

from __future__ import annotations

import re

from evalkit_evals.forms.form import Form, Subject, kinds

CODE = kinds("code")


def program(s: Subject) -> str:
    """The prompt (signature and docstring) with the body under it."""
    return s.prompt.rstrip("\n") + "\n" + s.value.rstrip("\n") + "\n"


def _split(s: Subject, _: str) -> str:
    # The solution under another name in one block, the entry point calling it in the next.
    impl = f"_{s.entry_point}_impl"
    helper = re.sub(rf"^def\s+{re.escape(s.entry_point)}\s*\(", f"def {impl}(", program(s), count=1, flags=re.M)
    return (
        f"First the implementation:\n\n```python\n{helper}```\n\nThen the function itself:\n\n```python\n"
        f"def {s.entry_point}(*args, **kwargs):\n    return {impl}(*args, **kwargs)\n```"
    )


CODES: tuple[Form, ...] = (
    Form("code_fenced", "code", CODE, lambda s, _: f"```python\n{program(s)}```", example="```python ...```"),
    Form("code_py_fence", "code", CODE, lambda s, _: f"```py\n{program(s)}```", example="```py ...```"),
    Form("code_python3_fence", "code", CODE, lambda s, _: f"```python3\n{program(s)}```", example="```python3 ...```"),
    Form("code_bare", "code", CODE, lambda s, _: program(s), example="def f(...): ..."),
    Form(
        "code_body_only",
        "code",
        CODE,
        lambda s, _: f"```python\n{s.value.rstrip()}\n```",
        example="```python\\n    return len(s)\\n```",
    ),
    Form(
        "code_split_blocks", "code", CODE, _split, example="```python\\ndef _f_impl(...)```...```python\\ndef f(...)```"
    ),
    Form(
        "code_test_first",
        "code",
        CODE,
        lambda s, _: (
            f"A quick test first:\n\n```python\ndef test_{s.entry_point}():\n    assert callable({s.entry_point})\n"
            f"```\n\nAnd the solution:\n\n```python\n{program(s)}```"
        ),
        example="```python\\ndef test_f(): ...```\\n```python\\ndef f(...)```",
    ),
    Form(
        "code_main_block",
        "code",
        CODE,
        lambda s, _: (
            f'```python\n{program(s)}\n\nif __name__ == "__main__":\n    import doctest\n\n    doctest.testmod()\n```'
        ),
        example='if __name__ == "__main__": ...',
    ),
    Form(
        "code_pytest_after",
        "code",
        CODE,
        lambda s, _: (
            f"```python\n{program(s)}```\n\nAnd a pytest module for it:\n\n```python\nimport pytest\n"
            f"from solution import {s.entry_point}\n\n\ndef test_{s.entry_point}_exists():\n"
            f"    assert callable({s.entry_point})\n```"
        ),
        example="```python\\ndef f(...)```\\n```python\\nimport pytest\\nfrom solution import f ...```",
    ),
    Form(
        "code_extra_imports",
        "code",
        CODE,
        lambda s, _: f"```python\nimport math\nimport re\nfrom collections import Counter\n\n{program(s)}```",
        example="import math ... def f(...)",
    ),
)
