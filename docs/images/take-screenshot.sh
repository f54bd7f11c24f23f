#!/usr/bin/env bash
# Makes docs/images/spend-per-service.png: configs/tail.yaml under
# telemetrygen load, a Prometheus evaluating the shipped rules, and headless
# Chromium on Prometheus' graph of the headline query (projected monthly
# spend per service, tier-wide recording rule). Needs `make build`,
# .tools/telemetrygen (make tools), and Debian's prometheus and chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
export OTLP_GRPC_ENDPOINT=127.0.0.1:24317 OTLP_HTTP_ENDPOINT=127.0.0.1:24318 \
  HEALTH_CHECK_ENDPOINT=127.0.0.1:23133 METRICS_HOST=127.0.0.1 METRICS_PORT=28888 \
  OTELCOL_COST_DATA_DIR="$work" BUDGET_SPANS_PER_SECOND=300 PRICING_PRESET=saas_indexed \
  DECISION_WAIT=4s DECISION_WAIT_AFTER_ROOT=1s ADJUST_INTERVAL=2s LOG_LEVEL=warn
bin/otelcol-cost --config configs/tail.yaml > "$work/collector.log" 2>&1 &
cp charts/otelcol-cost/files/alerts.yaml "$work/alerts.yaml"
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [alerts.yaml]
scrape_configs:
  - job_name: sampler
    static_configs: [{targets: ["127.0.0.1:28888"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address=127.0.0.1:29090 > "$work/prometheus.log" 2>&1 &
sleep 3
# Three services at different rates, as a newcomer's telemetrygen would send.
for svc in checkout:60 search:30 payments:10; do
  .tools/telemetrygen traces --otlp-insecure --otlp-endpoint 127.0.0.1:24317 \
    --service "${svc%%:*}" --rate "${svc##*:}" --duration 150s --child-spans 3 > /dev/null 2>&1 &
done
sleep 150
query='otelcol_cost:service_projected_monthly_cost:sum{stage="kept"}'
url="http://127.0.0.1:29090/graph?g0.expr=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1]))' "$query")&g0.tab=0&g0.range_input=3m&g0.stacked=0"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,900 \
  --virtual-time-budget=10000 --screenshot=docs/images/spend-per-service.png "$url" > /dev/null 2>&1
echo "wrote docs/images/spend-per-service.png"
