"""The supervised worker child: claims jobs, reports them to its master, runs them."""
