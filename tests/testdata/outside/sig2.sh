#!/bin/bash
H=/tmp/outside/hbgrun
N=${1:-20}
extras=("" "--no-retain" "--preload=false" "--ranks 2" "--in-flight 1" "--images /tmp/outside/sigimg")
for i in $(seq 1 $N); do
  S=/tmp/outside/sigstore2/$i; mkdir -p $S
  sig=$(shuf -n1 -e INT TERM KILL KILL)
  form=$(shuf -n1 -e full blocks pair full)
  d=$(python3 -c "import random; print(round(random.uniform(0.02, 0.8), 3))")
  extra=${extras[$((RANDOM % ${#extras[@]}))]}
  rm -rf /tmp/outside/sigimg
  nice $H run --form $form --rounds 40 --store $S $extra > /tmp/outside/sig/b$i.out 2> /tmp/outside/sig/b$i.err &
  pid=$!
  sleep $d
  kill -$sig $pid 2>/dev/null
  ( sleep 20; kill -KILL $pid 2>/dev/null && echo "HUNG $i" ) & w=$!
  wait $pid 2>/dev/null; rc=$?
  kill $w 2>/dev/null; wait $w 2>/dev/null
  v=$($H store verify --store $S 2>&1); vrc=$?
  ls=$(ls -A $S $S/* 2>/dev/null | tr '\n' ' ' | cut -c1-200)
  pan=$(grep -l -E 'goroutine |panic:' /tmp/outside/sig/b$i.out /tmp/outside/sig/b$i.err)
  echo "$i sig=$sig form=$form extra='$extra' after=${d}s rc=$rc verify_rc=$vrc ${pan:+PANIC} | $(echo "$v" | tail -1 | cut -c1-130) | $(tail -1 /tmp/outside/sig/b$i.err | cut -c1-120)"
done
