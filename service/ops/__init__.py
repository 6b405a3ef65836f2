"""Running the service: the Prometheus metrics (each defined once), the background worker,
start-up, the status page's history, the command line and offline learning from files."""
