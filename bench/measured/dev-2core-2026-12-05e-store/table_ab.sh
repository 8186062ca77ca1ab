#!/bin/sh
# `survey table` on the 30,000-slot store (slots30k.py), two checkouts alternating:
#   PY=.venv/bin/python table_ab.sh OLD_CHECKOUT NEW_CHECKOUT STORE.db  (python -m survey from each checkout)
# Each prints the wall time and peak RSS (GNU time) and the output's md5.
set -eu
old=$1 new=$2 db=$3 PY=${PY:-python3}
case $PY in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac  # a venv's python, not what it links to
for i in 1 2; do
  for tree in "$old" "$new"; do
    (cd "$tree" && /usr/bin/time -f "$tree %e s %M KB" "$PY" -m survey table --db "sqlite:///$db" \
      | md5sum)
  done
done
