"""What the server says (core): its log, /metrics, speculative decoding, identity and kind; `capture` records them
into a run directory, `server_evidence` reads them back (the one `ServerEvidence`); the TTFT split and wait parts
built on them; GPU memory and GPU telemetry sampling."""
