"""`evalkit sweep`: start a server per launch configuration, run evalkit commands against it, one report across."""
