#!/usr/bin/env bash
# The Overview shows charts after load, in a real terminal (not run by `cargo test`):
# a `buzz-relay` on a temporary directory, the stock client publishing to it while a
# second socket sends REQs and malformed EVENTs (errors by prefix), and `buzz-admin`
# in a detached tmux session of 160x48; the screen is read with `tmux capture-pane`
# and must hold the chart titles and bars.
#
#   admin-tui/tests/tmux-overview.sh            # builds debug binaries first
#   PROFILE=release admin-tui/tests/tmux-overview.sh
#   STOCK_CLIENT=/path/to/examples/stock-client ...   # where `npm ci` was run
#
# Exit status 0 when every check passes; the captured screen is printed either way.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
profile=${PROFILE:-debug}
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/$profile
stock=${STOCK_CLIENT:-$root/examples/stock-client}
load_secs=${LOAD_SECS:-20}

for tool in tmux node curl; do
  command -v "$tool" >/dev/null || { echo "error: $tool is required"; exit 2; }
done
[ -d "$stock/node_modules" ] || { echo "error: run npm ci in $stock (or set STOCK_CLIENT)"; exit 2; }

build=(cargo build -p buzz-relay -p buzz-admin)
[ "$profile" = release ] && build+=(--release)
(cd "$root" && "${build[@]}")

dir=$(mktemp -d)
session="buzz-overview-$$"
relay_pid=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port=$(free_port)
metrics=$(free_port)
cat >"$dir/config.toml" <<EOF
[server]
bind = "127.0.0.1:$port"
[storage]
database_url = "sqlite://./data/buzz.db"
[relay]
data_dir = "./data"
[[communities]]
host = "localhost"
name = "Local"
open = true
[metrics]
bind = "127.0.0.1:$metrics"
EOF

"$bin/buzz-relay" --config "$dir/config.toml" >"$dir/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$metrics/metrics" >/dev/null && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$metrics/metrics" >/dev/null || { cat "$dir/relay.log"; exit 1; }

tmux new-session -d -s "$session" -x 160 -y 48 \
  "$bin/buzz-admin --config $dir/config.toml 2>$dir/admin.log"

# Load: the stock client publishing in rounds, and beside it REQs and malformed EVENTs.
end=$((SECONDS + load_secs))
(
  cd "$stock"
  while [ $SECONDS -lt $end ]; do
    node publish-load.mjs --relay "ws://127.0.0.1:$port" --pid "$relay_pid" \
      --events 500 --connections 4 >>"$dir/load.log" 2>&1 || true
  done
) &
load_pid=$!
(
  cd "$stock"
  node --input-type=module -e "
    import WebSocket from 'ws';
    const ws = new WebSocket('ws://127.0.0.1:$port');
    ws.on('message', () => {});
    ws.on('open', () => {
      let n = 0;
      const tick = setInterval(() => {
        ws.send(JSON.stringify(['REQ', 'q' + n, { kinds: [1], limit: 5 }]));
        ws.send(JSON.stringify(['CLOSE', 'q' + n]));
        // Well formed but with a wrong id: refused with invalid:, counted by prefix.
        if (n % 4 === 0) ws.send(JSON.stringify(['EVENT', { id: '0'.repeat(64),
          pubkey: '0'.repeat(64), created_at: Math.floor(Date.now() / 1000), kind: 1,
          tags: [], content: 'bad id', sig: '0'.repeat(128) }]));
        n++;
      }, 50);
      setTimeout(() => { clearInterval(tick); ws.close(); }, $load_secs * 1000);
    });
  " >>"$dir/noise.log" 2>&1 || true
) &
noise_pid=$!
# Read the screen while the load still runs (the console refreshes every 2 s).
sleep $((load_secs - 2))
screen=$(tmux capture-pane -p -t "$session")
wait "$load_pid" "$noise_pid"
echo "$screen"
echo "--- load (last round):"
tail -n 5 "$dir/load.log"

fail=0
check() {
  if printf '%s' "$screen" | grep -q -- "$1"; then
    echo "ok: $2"
  else
    echo "FAIL: $2 (no \"$1\" on screen)"
    fail=1
  fi
}
check "Last 5 min · all processes" "the charts block"
for title in "ingest events/s · now" "queries/s · now" "connections · now" \
  "errors/s invalid: · now" "ingest p99 · now" "query p99 · now"; do
  check "$title" "chart \"${title% · now}\""
done
bars=$(printf '%s' "$screen" | grep -o '[▁▂▃▄▅▆▇█]' | wc -l)
if [ "$bars" -ge 20 ]; then
  echo "ok: $bars sparkline cells drawn"
else
  echo "FAIL: only $bars sparkline cells drawn"
  fail=1
fi
exit $fail
