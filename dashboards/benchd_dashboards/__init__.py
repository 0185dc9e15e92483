"""benchd's Grafana dashboards, generated with grafana-foundation-sdk."""
