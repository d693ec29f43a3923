"""`evalkit sim`: a simulated OpenAI-compatible inference server with a timed engine model and ground-truth events.

Modules: `tokens` (the token rule), `questions` (recognising dataset and stress questions), `answers` (what the
sim writes), `thinking` (reasoning on/off and its text), `faults` (deterministic fault choice), `settings` and
`profiles` (the engine's knobs and the write-up presets), `engine` (the scheduler loop), `trace` (per-request
ground truth), `server` (aiohttp routes and SSE), `launch` (start a sim as a subprocess from tests and demos).
"""
