"""One module per capability; each exposes a request model, a result model and a pure function."""
