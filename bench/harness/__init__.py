"""What every measurement stands on: the run's settings and state, private servers, child
processes, CPU meters, jobq's table, the jobq app the supervisors run, and the code snapshot."""
