"""What makes a model survive a crash: the feedback log (written before anything is
learned or acknowledged), snapshot capture, format and stores, the snapshot writer, the
answers of keyed (idempotent) requests and the model-file interchange format."""
