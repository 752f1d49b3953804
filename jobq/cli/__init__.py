"""The command lines: `jobq` and `jobq-supervise` (commands), the operator's commands on jobs
(controls) and the reports they print (reports)."""
