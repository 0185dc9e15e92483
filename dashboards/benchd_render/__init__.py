"""Draws a committed Grafana dashboard (dashboards/json) from a real
Prometheus with matplotlib, laid out as Grafana lays it out: for READMEs and
results on machines where no Grafana server can run (dashboards/render.py)."""
