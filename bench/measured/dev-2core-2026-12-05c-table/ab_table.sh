#!/bin/bash
# A/B: survey table on the 10,000-candidate store, old (HEAD) and new (working tree), alternating
for i in 1 2 3; do
  for v in old new; do
    if [ $v = old ]; then dir=/tmp/oldtree; db=/tmp/prof/t10k-old.db; else dir=/work/main; db=/tmp/prof/t10k.db; fi
    l=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "$v %e s %M KB load $l" env PYTHONPATH=$dir bash -c "cd $dir && /work/main/.venv/bin/python -m survey table --db sqlite:///$db > /tmp/prof/ab-$v.md" 2>&1 | tail -1
  done
done
cmp /tmp/prof/ab-old.md /tmp/prof/ab-new.md && echo same-bytes
