"""The supervising master: a pool of worker children whose leases it renews and fences."""
