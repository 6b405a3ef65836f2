"""A named model and what it holds: the kind catalogue and its parameters, the family
adapters (labels, scores, progressive learning), the live model with its locks and
lifecycle, the registry of one process's models and the pending-prediction cache."""
