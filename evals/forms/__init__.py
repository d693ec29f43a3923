"""Answer forms: a library that writes an answer the way real models do, so grading can be tested against every
way of writing it (issue 38). A form is one named way of writing one part of an answer, in one family:

- `notation` (`notation.py`): the value itself (`1,234`, `1.234,00`, "twenty-five", `2.88e6`, `\\dfrac`, `√3`);
- `marker` (`markers.py`): where the answer stands (`ANSWER:`, `####`, Minerva's line, `\\boxed{}`, a table row,
  JSON, an answer given first);
- `trailing` (`trailing.py`): what follows it (a verification paragraph, "Let me double-check", a pleasantry, a
  correction, a retraction);
- `channel` (`channels.py`): where the reasoning stands (`<think>`, gpt-oss channels as plain text, sections,
  a rejected draft);
- `choice` (`choice.py`) and `code` (`code.py`): the marker's place for choice and code answers.

Each form says how a careful reader reads what it writes (`Form.reads`: the value, `ambiguous`, or no answer);
`compose` writes a subject (the gold or a near-miss, `subjects.py`) through one form per slot.
"""

from __future__ import annotations

from evalkit_evals.forms.channels import CHANNELS
from evalkit_evals.forms.choice import CHOICES
from evalkit_evals.forms.code import CODES
from evalkit_evals.forms.compose import SLOTS, Written, compose, compositions, plain_partners
from evalkit_evals.forms.form import AMBIGUOUS, FAMILIES, NO_ANSWER, VALUE, Form, Subject
from evalkit_evals.forms.markers import MARKERS
from evalkit_evals.forms.notation import NOTATIONS
from evalkit_evals.forms.trailing import TRAILING

FORMS: tuple[Form, ...] = (*NOTATIONS, *MARKERS, *TRAILING, *CHANNELS, *CHOICES, *CODES)
assert len({f.name for f in FORMS}) == len(FORMS), "form names are unique"

__all__ = [
    "AMBIGUOUS",
    "FAMILIES",
    "FORMS",
    "NO_ANSWER",
    "SLOTS",
    "VALUE",
    "Form",
    "Subject",
    "Written",
    "compose",
    "compositions",
    "plain_partners",
]
