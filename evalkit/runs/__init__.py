"""Run directories and what they hold (core): the run directory, request records, the run context, the schemas of
every file evalkit reads, summaries, run failures, and the outcome of one request."""
