"""The run's output: the table on stdout, RESULTS.md with its verdicts, and the chart."""
