#!/usr/bin/env python3
"""Markdown rows for BENCHMARKS.md from tools/bench_1b.sh logs.

    python3 tools/bench_table.py RUN1.log [RUN2.log ...]

Each log holds '# FORMAT MODE time load' lines, each followed by one `bench --json`
object. A cell gives the runs' figures side by side (run1 / run2 ...); the
efficiency cell adds the range over the run's stretches of decode.
"""
import json
import sys


def load(path):
    runs, label = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith('#'):
                parts = line.split()
                label = (parts[1], parts[2]) if len(parts) > 2 else None
            elif line.startswith('{') and label:
                runs[label] = json.loads(line)
    return runs


def main(paths):
    logs = [load(p) for p in paths]
    labels = []
    for log in logs:
        labels += [k for k in log if k not in labels]
    print('| format | pp512 t/s | tg128 t/s | probe GB/s | tg efficiency (stretch range) | peak RSS (model) | TTFT |')
    print('|---|---|---|---|---|---|---|')
    for lab in labels:
        ds = [log[lab] for log in logs if lab in log]
        cell = lambda f: ' / '.join(f(d) for d in ds)
        name = lab[0] + ('' if lab[1] == 'mmap' else ' `%s`' % lab[1])
        eff = cell(lambda d: '%d %%' % round(d['tg_efficiency'] * 100) + (
            ' (%d–%d)' % tuple(round(x * 100) for x in d['tg_efficiency_range']) if 'tg_efficiency_range' in d else ''))
        ttft = cell(lambda d: '%.0f ms' % d['ttft_ms'] if d['ttft_ms'] < 1000 else '%.1f s' % (d['ttft_ms'] / 1000))
        print('| %s | %s | %s | %s | %s | %s | %s |' % (
            name, cell(lambda d: '%.1f' % d['pp_tps']), cell(lambda d: '%.2f ± %.2f' % (d['tg_tps'], d['tg_tps_sd'])),
            cell(lambda d: '%.1f' % d['mem_read_gbs']), eff, cell(lambda d: '%.0f MB' % d['peak_rss_model_mb']), ttft))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
