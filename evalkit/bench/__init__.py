"""`evalkit bench`: decode throughput per prompt and of concurrent streams (`throughput`), as one measurement of a
run session (`measure`)."""
