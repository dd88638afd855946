// Package deploy holds no code: its directories are what an operator deploys
// beside budgetd (Prometheus alert rules under prometheus/, a Grafana
// dashboard under grafana/), and its tests check them — the rules with
// promtool and against budgetd's metric names, the dashboard's SQL against
// the schema and on the real store engines.
package deploy
