"""The sweep file's points and command templates, without a server: grid x named points, names, placeholders."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.errors import UsageError
from evalkit.sweep.points import command_line, expand
from evalkit.sweep.sweep_file import SweepFile


def sweep(**kw: Any) -> SweepFile:
    """A sweep file with a trivial server and one run, plus what the case sets."""
    return SweepFile.model_validate({"server": {"command": "srv --port {port}"}, "run": [{"command": "bench"}], **kw})


@pytest.mark.parametrize(
    ("kw", "names"),
    [
        ({}, ["default"]),
        ({"grid": {"b": [512, 2048]}}, ["b512", "b2048"]),
        ({"grid": {"b": [512], "flag": ["--no-yield", ""]}}, ["b512-flagno-yield", "b512-flagnone"]),
        ({"point": [{"name": "np1", "params": {"np": 1}}]}, ["np1"]),
        (
            {"grid": {"b": [512, 2048]}, "point": [{"name": "np1", "params": {"np": 1}}, {"name": "np2"}]},
            ["np1-b512", "np1-b2048", "np2-b512", "np2-b2048"],
        ),
        ({"grid": {"on": [True, False]}}, ["ontrue", "onfalse"]),
    ],
)
def test_points_are_named_from_the_grid_and_the_named_points(kw: dict[str, Any], names: list[str]) -> None:
    assert [p.name for p in expand(sweep(**kw))] == names


def test_named_points_carry_their_linked_parameters_across_the_grid() -> None:
    points = expand(sweep(grid={"b": [512]}, point=[{"name": "np2", "params": {"np": 2, "ctx": 131072}}]))
    assert points[0].params == {"b": "512", "np": "2", "ctx": "131072"}


def test_a_named_point_may_not_set_what_the_grid_varies() -> None:
    with pytest.raises(UsageError, match="which the grid also varies"):
        expand(sweep(grid={"np": [1, 2]}, point=[{"name": "x", "params": {"np": 3}}]))


@pytest.mark.parametrize(
    ("template", "values", "argv"),
    [
        (
            "srv -np {np} {flags}",
            {"np": "2", "flags": "--max_batch 2 --chunked_prefill_size 4096"},
            ["srv", "-np", "2", "--max_batch", "2", "--chunked_prefill_size", "4096"],
        ),
        ("srv {extra} --port {port}", {"extra": "", "port": "1"}, ["srv", "--port", "1"]),
        (["srv", "{extra}", "--path", "{p}"], {"extra": "", "p": "a b"}, ["srv", "--path", "a b"]),
        ("srv --json '{{\"a\": {n}}}'", {"n": "1"}, ["srv", "--json", '{"a": 1}']),
    ],
)
def test_command_templates_fill_and_split(template: Any, values: dict[str, str], argv: list[str]) -> None:
    assert command_line(template, values, "t") == argv


def test_an_unknown_placeholder_is_named() -> None:
    with pytest.raises(UsageError, match=r"unknown placeholder \{model\}"):
        command_line("srv -m {model}", {"port": "1"}, "[server] command")
