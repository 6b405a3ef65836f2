"""The deployment: Prometheus, Grafana and Kubernetes configuration, and the load tools
(:mod:`deploy.loadtest`), run from the repository root as ``python -m deploy.loadtest.<module>``."""
