"""Configuration (core): server profiles from the TOML config file, and the command line's value parsers."""
