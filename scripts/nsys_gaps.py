#!/usr/bin/env python3
"""Where a GPU sits idle in an nsys profile: reads the CSV of
`nsys stats --report cuda_gpu_trace --format csv` and prints the busy and
idle time between a first and a last kernel, and the largest idle gaps by
the kernels on either side. Used on decode steps (scripts/gpu-run.sh decode).

  python3 scripts/nsys_gaps.py trace.csv [--after NAME_SUBSTRING] [--min-gap-us 2]
"""
import argparse
import collections
import csv


def short(name, width=60):
    name = name.replace('void ', '')
    return name[:width]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('trace')
    parser.add_argument('--after', default='', help='start at the first row whose name contains this')
    parser.add_argument('--min-gap-us', type=float, default=2.0)
    args = parser.parse_args()
    rows = []
    with open(args.trace) as f:
        for r in csv.DictReader(f):
            start = int(r['Start (ns)'])
            duration = int(r['Duration (ns)'])
            rows.append((start, start + duration, r.get('Name', '')))
    rows.sort()
    if args.after:
        first = next(i for i, r in enumerate(rows) if args.after in r[2])
        rows = rows[first:]
    busy = 0
    idle = collections.Counter()
    count = collections.Counter()
    end = rows[0][0]
    previous = '(start)'
    for start, stop, name in rows:
        gap = start - end
        if gap > args.min_gap_us * 1000:
            key = (short(previous), short(name))
            idle[key] += gap
            count[key] += 1
        busy += stop - max(start, end) if stop > end else 0
        end = max(end, stop)
        previous = name
    span = end - rows[0][0]
    print(f'span {span / 1e6:.1f} ms, busy {busy / 1e6:.1f} ms ({100 * busy / span:.0f}%), '
          f'idle gaps > {args.min_gap_us} us: {sum(idle.values()) / 1e6:.1f} ms')
    for key, total in idle.most_common(12):
        print(f'  {total / 1e6:8.2f} ms in {count[key]:5d} gaps  after {key[0]}  before {key[1]}')


if __name__ == '__main__':
    main()
