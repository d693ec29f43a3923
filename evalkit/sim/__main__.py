"""`python -m evalkit.sim FLAGS` = `evalkit sim FLAGS`, without importing every other command (starts ~1 s faster)."""

import sys

from evalkit.config.argtypes import Parser
from evalkit.errors import UsageError
from evalkit.sim import command as sim

parser = Parser(prog="evalkit sim", description="the simulated OpenAI-compatible inference server")
sim.add_arguments(parser)
try:
    sys.exit(sim.run(parser.parse_args()))
except UsageError as e:
    sys.stderr.write(f"evalkit sim: error: {e}\n")
    sys.exit(2)
