"""Reasoning-channel forms: where the reasoning stands around the answer (`<think>` blocks, gpt-oss analysis and
final channels arriving as plain text when the server has no reasoning parser, "Reasoning:/Answer:" sections, a
draft rejected before the answer). The reasoning names the competing value; only the answer counts."""

from __future__ import annotations

from evalkit_evals.forms.form import Form, Subject, kinds
from evalkit_evals.forms.markers import inline


def _draft(s: Subject) -> str:
    if s.kind == "choice":
        return s.text_of(s.other)
    if s.kind == "code":
        return "a quadratic double loop"
    return inline(s, s.other)


ALL = kinds("number", "math", "choice", "code")
CHANNELS: tuple[Form, ...] = (
    Form("no_channel", "channel", ALL, lambda s, t: t, example=""),
    Form(
        "think_block",
        "channel",
        ALL,
        lambda s, t: f"<think>\nLet me try. Maybe it is {_draft(s)}? Let me recompute.\n</think>\n\n{t}",
        example="<think>Maybe it is 12?</think>\\n\\n...",
    ),
    Form(
        "harmony_tokens",
        "channel",
        ALL,
        lambda s, t: (
            f"<|channel|>analysis<|message|>We need to work it out. Maybe {_draft(s)}? Recheck.<|end|>"
            f"<|start|>assistant<|channel|>final<|message|>{t}<|return|>"
        ),
        example="<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...",
    ),
    Form(
        "harmony_plain",
        "channel",
        ALL,
        lambda s, t: f"analysisWe need to work it out. Maybe {_draft(s)}? Recheck.assistantfinal{t}",
        example="analysisWe need ... Maybe 12?assistantfinal...",
    ),
    Form(
        "reasoning_sections",
        "channel",
        kinds("number", "math", "choice"),
        lambda s, t: f"Reasoning:\nA first guess of {_draft(s)} ignored one step, so I redid it.\n\nAnswer:\n{t}",
        example="Reasoning:\\n...\\n\\nAnswer:\\n...",
    ),
    Form(
        "rejected_draft",
        "channel",
        kinds("number", "math", "choice"),
        lambda s, t: f"Draft: {_draft(s)}. No, that draft is wrong: I miscounted one step.\n\n{t}",
        example="Draft: 12. No, that draft is wrong: ...\\n\\n...",
    ),
)
