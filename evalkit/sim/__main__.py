"""`python -m evalkit.sim FLAGS` = `evalkit sim FLAGS`, without importing every other command (starts ~1 s faster)."""

import sys

from evalkit.cli import _Parser
from evalkit.commands import sim
from evalkit.errors import UsageError

parser = _Parser(prog="evalkit sim", description="the simulated OpenAI-compatible inference server")
sim.add_arguments(parser)
try:
    sys.exit(sim.run(parser.parse_args()))
except UsageError as e:
    sys.stderr.write(f"evalkit sim: error: {e}\n")
    sys.exit(2)
