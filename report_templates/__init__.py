"""Jinja templates for `evalkit report` (`evalkit_report_templates`)."""
