"""Tools for testing systems built on jobq: an attempt journal, a history checker, and a job
that journals its attempts."""
