#!/bin/bash
# SIGINT/SIGTERM/SIGKILL to hbgrun run at random moments with a store on disk; then store verify.
H=/tmp/outside/hbgrun
S=/tmp/outside/sigstore
rm -rf $S; mkdir -p /tmp/outside/sig
N=${1:-30}
for i in $(seq 1 $N); do
  sig=$(shuf -n1 -e INT TERM INT TERM KILL)
  # a fresh form every few iterations so that recordings (and store writes) happen mid-flight
  form=$(shuf -n1 -e full blocks pair auto full)
  d=$(python3 -c "import random; print(round(random.uniform(0.05, 2.5), 2))")
  extra=$(shuf -n1 -e "" "--no-retain" "--preload=false" "--ranks 2" "--in-flight 1")
  nice $H run --form $form --rounds 40 --store $S $extra > /tmp/outside/sig/$i.out 2> /tmp/outside/sig/$i.err &
  pid=$!
  sleep $d
  kill -$sig $pid 2>/dev/null
  ( sleep 20; kill -KILL $pid 2>/dev/null && echo "HUNG $i" ) & w=$!
  wait $pid; rc=$?
  kill $w 2>/dev/null; wait $w 2>/dev/null
  v=$($H store verify --store $S 2>&1); vrc=$?
  intr=$(grep -o 'interrupted: [0-9]* of [0-9]* passes ended' /tmp/outside/sig/$i.out /tmp/outside/sig/$i.err | head -1)
  pan=$(grep -l -E 'goroutine |panic:' /tmp/outside/sig/$i.out /tmp/outside/sig/$i.err)
  echo "$i sig=$sig form=$form extra='$extra' after=${d}s rc=$rc verify_rc=$vrc [$intr] ${pan:+PANIC} | $(echo "$v" | tail -1 | cut -c1-160) | $(tail -1 /tmp/outside/sig/$i.err | cut -c1-160)"
done
