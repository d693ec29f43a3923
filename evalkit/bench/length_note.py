"""What a bench run's output length was, in the one wording the terminal and the report share (issue 57).

Three states (evalkit.client.field_support.length_state), each said apart:
- forced: nothing to say (the rates rest on the forced length);
- sent, not observable: "ignore_eos sent; its effect could not be observed with this model", with what the run
  itself saw: every request ran to max_tokens (so the lengths are equal either way), or how many stopped short;
- not forced: "no output length was forced (why)", the prompts ran as long as they ran.

A summary written before the state had a name (`length_forced` false, `length_why` starting "ignore_eos taken,
effect not shown") is read as the state it was: ignore_eos was sent there (only a refused field is not sent).
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from evalkit.client.field_support import FORCED, NOT_FORCED, NOT_SHOWN, OLD_NOT_SHOWN, UNOBSERVED

# How `length_why` opens where ignore_eos was sent and its effect not observable (now, and as earlier releases said it).
_SENT = (f"ignore_eos {OLD_NOT_SHOWN}", f"ignore_eos {NOT_SHOWN}")


class LengthFields(TypedDict, total=False):
    """The fields of a bench summary (of any version: older ones lack `length_state`) that say its output length."""

    length_state: str
    length_forced: bool | None
    length_why: str | None
    length_mode: str
    ignore_eos: bool
    max_tokens: int
    stopped_early: list[dict[str, str | int | None]]
    measured_requests: int
    errors: int


def state_of(summary: LengthFields) -> str:
    """The run's length state, from `length_state` where written, else from the older fields."""
    state = summary.get("length_state")
    if state in (FORCED, UNOBSERVED, NOT_FORCED):
        return str(state)
    forced = summary.get("length_forced")
    if forced is True:
        return FORCED
    why = str(summary.get("length_why") or "")
    if forced is None and summary.get("length_mode") == "prompt":
        return UNOBSERVED
    if forced is False and why.startswith(_SENT):
        return UNOBSERVED
    return NOT_FORCED if forced is False else FORCED


def _why(summary: LengthFields) -> str:
    why = str(summary.get("length_why") or "")
    for old in _SENT:
        if why.startswith(old):
            return why[len(old) :].split(";", 1)[0].strip()
    return ""


def length_note(written: dict[str, Any]) -> str | None:
    """One sentence on the run's output length where it was not shown forced; None where it was."""
    summary = cast(LengthFields, written)  # the summary as written, read for its length fields
    state = state_of(summary)
    if state == FORCED:
        return None
    if state == NOT_FORCED:
        why = summary.get("length_why") or (
            "--no-ignore-eos" if summary.get("ignore_eos") is False else "the preflight saw no length forced"
        )
        return (
            f"no output length was forced ({why}): each prompt ran as long as it ran, up to max_tokens; "
            "rates marked length_forced false"
        )
    cap = summary.get("max_tokens")
    early = summary.get("stopped_early") or []
    measured = summary.get("measured_requests")
    errors = summary.get("errors") or 0
    ran = measured - errors if isinstance(measured, int) else None
    why = _why(summary)
    seen = f" {why}" if why else ""
    text = f"ignore_eos sent; its effect could not be observed with this model{seen}"
    if early:
        return (
            text + f"; {len(early)} request(s) stopped before max_tokens"
            f"{f' ({cap})' if cap else ''} although it was sent: their lengths differ"
        )
    # an older summary wrote false for this state: its field is named as written
    marked = "; length_forced null (sent, not observable)" if summary.get("length_forced") is None else ""
    if ran:
        return (
            text + f"; every measured request ran to max_tokens ({ran} of {ran} at {cap}/{cap} tokens), so the "
            "rates compare equal lengths" + marked
        )
    return text + marked
