// Package deploy holds no code: its directories are what an operator deploys
// beside budgetd (Prometheus alert rules under prometheus/, a Grafana
// dashboard under grafana/, a ClickHouse cluster's configuration under
// clickhouse-cluster/, the loadbalancing Collector in front of budgetd
// replicas under collector/, which crashtest runs), and its tests check them — the rules with
// promtool and against budgetd's metric names, the dashboard's SQL against
// the schema and on the real store engines, the cluster's configuration
// against what the cluster test gives its servers.
package deploy
