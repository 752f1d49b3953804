"""What the tests share: bounded waits, job classes, servers, drivers, the supervisor runner,
the TCP proxy, and (in apps/) the applications that workers import."""
