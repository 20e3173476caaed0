#!/usr/bin/env bash
# A liuyi cluster on this machine's loopback: redis-server, N `liuyi serve` replicas sharing it as
# their cache, and nginx in front with deploy/nginx/liuyi.conf. Everything runs as a child of this
# script and is stopped when it gets Ctrl-C or SIGTERM (or when nginx exits).
#
#   bash deploy/local-cluster.sh [--replicas N] [--port P] [--run-dir DIR]
#                                [--upstream HOST:PORT]... [--redis-url URL] [--trust-forwarded-for CIDR]
#
#   --replicas N      replicas to start (default 2), on ports P+1 ... P+N
#   --port P          nginx's port on 127.0.0.1 (default 8080); redis-server gets P+N+1
#   --run-dir DIR     where logs, cluster.env and the rendered nginx config go (default: a new temp dir)
#   --upstream H:P    front replicas that are already running instead of starting any (repeat)
#   --redis-url URL   replicas use this Redis instead of starting redis-server
#   --trust-forwarded-for CIDR
#                     a load balancer at CIDR sits in front of nginx: take the client address from
#                     its X-Forwarded-For (this decides who may read /metrics)
#
# Replicas inherit every LIUYI_* variable of this script's environment (e.g. LIUYI_THREADS=1).
# `liuyi` must be on PATH (e.g. `PATH=.venv/bin:$PATH`); set LIUYI_BIN to use another command.
# When everything answers, DIR/cluster.env lists the URLs and process ids (for scripts and tests;
# LOCAL_CLUSTER_PID is this script: SIGTERM it to stop the cluster).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
replicas=2
port=8080
run_dir=""
redis_url=""
trust=""
upstreams=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed -n 's/^# \{0,1\}//p'; }
die() { echo "local-cluster: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas=${2:?}; shift 2 ;;
    --port) port=${2:?}; shift 2 ;;
    --run-dir) run_dir=${2:?}; shift 2 ;;
    --upstream) upstreams+=("${2:?}"); shift 2 ;;
    --redis-url) redis_url=${2:?}; shift 2 ;;
    --trust-forwarded-for) trust=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || die "--replicas must be a positive integer"
[[ "$port" =~ ^[1-9][0-9]*$ ]] || die "--port must be a port number"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || die "nginx is not installed (Debian: apt-get install nginx)"
read -r -a liuyi_cmd <<< "${LIUYI_BIN:-liuyi}"
if [ ${#upstreams[@]} -eq 0 ]; then
  command -v "${liuyi_cmd[0]}" >/dev/null || die "'${liuyi_cmd[0]}' not found: put liuyi on PATH or set LIUYI_BIN"
fi

run_dir=${run_dir:-$(mktemp -d -t liuyi-cluster.XXXXXX)}
mkdir -p "$run_dir/nginx-tmp"
run_dir=$(cd "$run_dir" && pwd)
rm -f "$run_dir/cluster.env"

pids=()        # everything we started, stopped in reverse order
names=()
stopping=0

stop_all() {
  [ "$stopping" -eq 1 ] && return
  stopping=1
  trap '' INT TERM
  local i pid running
  # all at once, nginx first: replicas drain their streams (--shutdown-grace) in parallel
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
  done
  for _ in $(seq 1 300); do  # 30 s for everything together, then no more waiting
    running=0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && running=1
    done
    [ "$running" -eq 0 ] && break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    pid=${pids[i]}
    if kill -0 "$pid" 2>/dev/null; then
      echo "local-cluster: ${names[i]} (pid $pid) did not stop; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  echo "local-cluster: stopped (logs kept in $run_dir)"
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
trap 'stop_all' EXIT

start() {  # start NAME LOG COMMAND...: a background child whose pid we keep
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  pids+=("$!")
  names+=("$name")
}

wait_for() {  # wait_for NAME PID CHECK...: until CHECK succeeds, while PID lives (60 s at most)
  local name=$1 pid=$2
  shift 2
  for _ in $(seq 1 600); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || { echo "local-cluster: $name exited; its log:" >&2; return 1; }
    sleep 0.1
  done
  echo "local-cluster: $name did not become ready in 60 s" >&2
  return 1
}

answers() { curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null; }           # 2xx
listening() { curl -sS -o /dev/null --max-time 1 "$1" 2>/dev/null; }  # any HTTP answer

env_lines=("LIUYI_CLUSTER_URL=http://127.0.0.1:$port" "RUN_DIR=$run_dir" "LOCAL_CLUSTER_PID=$$")

if [ ${#upstreams[@]} -eq 0 ]; then
  if [ -z "$redis_url" ]; then
    redis_port=$((port + replicas + 1))
    command -v redis-server >/dev/null || die "redis-server is not installed (Debian: apt-get install redis-server)"
    start redis "$run_dir/redis.log" redis-server --port "$redis_port" --bind 127.0.0.1 \
      --save "" --appendonly no
    redis_url="redis://127.0.0.1:$redis_port/0"
    wait_for redis "${pids[-1]}" redis-cli -p "$redis_port" ping >/dev/null \
      || { cat "$run_dir/redis.log" >&2; exit 1; }
    env_lines+=("REDIS_PID=${pids[-1]}")
  fi
  env_lines+=("REDIS_URL=$redis_url")
  for i in $(seq 1 "$replicas"); do
    replica_port=$((port + i))
    start "replica-$i" "$run_dir/replica-$i.log" \
      env LIUYI_HOST=127.0.0.1 LIUYI_PORT="$replica_port" LIUYI_REDIS_URL="$redis_url" "${liuyi_cmd[@]}" serve
    upstreams+=("127.0.0.1:$replica_port")
    env_lines+=("REPLICA_${i}_URL=http://127.0.0.1:$replica_port" "REPLICA_${i}_PID=${pids[-1]}")
  done
  for i in $(seq 1 "$replicas"); do  # started together, waited for in turn (models load in parallel)
    pid_var="REPLICA_${i}_PID"
    pid=$(printf '%s\n' "${env_lines[@]}" | sed -n "s/^$pid_var=//p")
    wait_for "replica-$i" "$pid" answers "http://127.0.0.1:$((port + i))/readyz" \
      || { cat "$run_dir/replica-$i.log" >&2; exit 1; }
  done
fi

# nginx: deploy/nginx/liuyi.conf with this cluster's replicas, port and log, inside a main config
# of our own (no daemon, pid file, temp directories and logs in the run directory).
replica_lines=""
for upstream in "${upstreams[@]}"; do
  replica_lines+="    server $upstream max_fails=0;  # liuyi:replica"$'\n'
done
realip=""
if [ -n "$trust" ]; then
  realip="    set_real_ip_from $trust;"$'\n'"    real_ip_header X-Forwarded-For;"$'\n'"    real_ip_recursive on;"$'\n'
fi
REPLICAS="$replica_lines" REALIP="$realip" LISTEN="    listen 127.0.0.1:$port;" \
ACCESS_LOG="    access_log $run_dir/nginx-access.log liuyi;" awk '
  /# liuyi:replica$/ { if (!done_replicas) printf "%s", ENVIRON["REPLICAS"]; done_replicas = 1; next }
  /# liuyi:listen$/ { print ENVIRON["LISTEN"]; printf "%s", ENVIRON["REALIP"]; next }
  /# liuyi:access_log$/ { print ENVIRON["ACCESS_LOG"]; next }
  { print }
' "$here/nginx/liuyi.conf" >"$run_dir/liuyi.conf"

{
  # started by root, nginx would hand its workers to "nobody", who cannot enter a private run dir
  [ "$(id -u)" -eq 0 ] && echo "user root;"
  echo "worker_processes 1;"
  echo "pid $run_dir/nginx.pid;"
  echo "error_log $run_dir/nginx-error.log notice;"
  echo "events { worker_connections 1024; }"
  echo "http {"
  for kind in client_body proxy fastcgi uwsgi scgi; do
    echo "    ${kind}_temp_path $run_dir/nginx-tmp/$kind;"
  done
  echo "    include $run_dir/liuyi.conf;"
  echo "}"
} >"$run_dir/nginx.conf"

nginx_args=(-p "$run_dir" -e "$run_dir/nginx-error.log" -c "$run_dir/nginx.conf")
"$nginx_bin" -t -q "${nginx_args[@]}" || die "the rendered nginx configuration is invalid: $run_dir/nginx.conf"
start nginx "$run_dir/nginx.log" "$nginx_bin" "${nginx_args[@]}" -g "daemon off;"
nginx_pid=${pids[-1]}
# any answer will do: the replicas behind it may be down on purpose (then nginx answers 502)
wait_for nginx "$nginx_pid" listening "http://127.0.0.1:$port/healthz" \
  || { cat "$run_dir/nginx-error.log" >&2; exit 1; }
env_lines+=("NGINX_PID=$nginx_pid")

printf '%s\n' "${env_lines[@]}" >"$run_dir/cluster.env.tmp"
mv "$run_dir/cluster.env.tmp" "$run_dir/cluster.env"  # appears complete or not at all

echo "liuyi cluster: http://127.0.0.1:$port/ (nginx) -> ${upstreams[*]}"
echo "  logs:   $run_dir/nginx-access.log, $run_dir/nginx-error.log"
for i in $(seq 1 "${#names[@]}"); do
  case "${names[i - 1]}" in replica-*|redis) echo "          $run_dir/${names[i - 1]}.log" ;; esac
done
echo "  config: $run_dir/nginx.conf, $run_dir/liuyi.conf"
echo "  Ctrl-C stops everything."

# Replicas may die and be restarted by someone else; the cluster lives as long as nginx does.
wait "$nginx_pid" || true
echo "local-cluster: nginx exited" >&2
