"""`evalkit load`: capacity under closed- and open-loop load, latency targets and the search for the largest load
meeting them."""
