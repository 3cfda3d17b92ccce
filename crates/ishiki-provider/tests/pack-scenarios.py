#!/usr/bin/env python3
"""Regenerates tests/data/*.json from the example scenarios.

Usage (from the repository root, after `cargo build --release -p ishiki-cli`):
    mkdir -p /tmp/prov && for f in examples/*.yaml; do
        ./target/release/ishiki scenario run "$f" > "/tmp/prov/$(basename "$f").jsonl"; done
    python3 crates/ishiki-provider/tests/pack-scenarios.py /tmp/prov crates/ishiki-provider/tests/data

Each file keeps every `request` event of one run, packed: unique tools and messages once,
requests as indexes. Texts over 3000 characters are shortened to keep the data small.
"""
import glob
import json
import os
import sys

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
for f in sorted(glob.glob(os.path.join(src, '*.yaml.jsonl'))):
    name = os.path.basename(f).replace('.yaml.jsonl', '')
    tools, tk, msgs, mk, reqs = [], {}, [], {}, []
    for line in open(f):
        e = json.loads(line)
        if e.get('event') != 'request':
            continue
        r = e['request']
        for m in r['messages']:
            for p in m['content']:
                v = p.get('text')
                if isinstance(v, str) and len(v) > 3000:
                    p['text'] = v[:1500] + '\n[… test data shortened …]\n' + v[-500:]
        ti, mi = [], []
        for t in r['tools']:
            k = json.dumps(t, sort_keys=True)
            if k not in tk:
                tk[k] = len(tools)
                tools.append(t)
            ti.append(tk[k])
        for m in r['messages']:
            k = json.dumps(m, sort_keys=True)
            if k not in mk:
                mk[k] = len(msgs)
                msgs.append(m)
            mi.append(mk[k])
        reqs.append({'step': e['step'], 'tools': ti, 'messages': mi})
    doc = {'scenario': name, 'tools': tools, 'messages': msgs, 'requests': reqs}
    with open(os.path.join(out, name + '.json'), 'w') as fh:
        fh.write(json.dumps(doc, separators=(',', ':')) + '\n')
