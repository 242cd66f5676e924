#!/usr/bin/env bash
# Per-group costs of idle nodes: 3 shale-server processes with N groups each.
set -u
bin=/tmp/new/shale-server
for n in 1 16 64; do
  dir=$(mktemp -d /tmp/gc.XXXX)
  splits=()
  for i in $(seq 1 $((n-1))); do splits+=(--split "$(printf 'k%03d' $i)"); done
  ports=(0 27101 27102 27103)
  pids=()
  for id in 1 2 3; do
    peers=()
    for p in 1 2 3; do [ $p = $id ] || peers+=(--peer "$p=127.0.0.1:${ports[$p]}"); done
    boot=(); [ $id = 1 ] && boot=(--bootstrap)
    $bin --id $id --listen 127.0.0.1:${ports[$id]} --data-dir $dir/node-$id "${peers[@]}" "${splits[@]}" "${boot[@]}" > $dir/node-$id.log 2>&1 &
    pids+=($!)
  done
  sleep 15
  cpu0=(); for p in "${pids[@]}"; do cpu0+=($(awk '{print $14+$15}' /proc/$p/stat)); done
  sleep 20
  i=0
  for p in "${pids[@]}"; do
    cpu1=$(awk '{print $14+$15}' /proc/$p/stat)
    rss=$(awk '/VmRSS/{print $2}' /proc/$p/status)
    thr=$(awk '/Threads/{print $2}' /proc/$p/status)
    fds=$(ls /proc/$p/fd | wc -l)
    echo "groups=$n node=$((i+1)) rss_kib=$rss threads=$thr fds=$fds cpu_ticks_20s=$((cpu1-${cpu0[$i]})) dir_kib=$(du -sk $dir/node-$((i+1)) | cut -f1)"
    i=$((i+1))
  done
  leaders=$(grep -c "this node is the leader" $dir/node-*.log | paste -sd' ')
  echo "groups=$n leader-lines per node log: $leaders"
  kill "${pids[@]}"; wait 2>/dev/null
  rm -rf $dir
done
