"""Tools for testing systems built on jobq: an attempt journal and a history checker."""
