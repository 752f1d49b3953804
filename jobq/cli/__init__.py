"""The command lines: `jobq` (commands) and `jobq-supervise` (supervise), the operator's
commands on jobs (controls) and the reports they print (reports)."""
