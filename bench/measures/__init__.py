"""One module per section of the run: jobq's drains, the SQL limit and the psycopg floor,
prefetch and its crash test, scale, pickup latency, renewal cost, a worker's profile, and the
status page's own timing (`python -m bench.measures.status_page`)."""
