"""`evalkit report`: before/after markdown tables, noise marks and plots, read only from run directories."""
