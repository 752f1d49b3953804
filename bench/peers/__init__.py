"""The other queues jobq is measured against, with the apps and worker processes they run.

Kept import-light: the peers' worker processes import their app from here."""
