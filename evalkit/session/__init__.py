"""A run's session (above the core): connect to the server, open the run directory, measure, finish the run."""
