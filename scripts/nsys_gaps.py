#!/usr/bin/env python3
"""Where a GPU sits idle in an nsys profile: reads the CSV of
`nsys stats --report cuda_gpu_trace --format csv` and prints the busy and
idle time between a first and a last kernel, and the largest idle gaps by
the kernels on either side. Used on decode steps (scripts/gpu-run.sh decode).

  python3 scripts/nsys_gaps.py trace.csv [--after NAME_SUBSTRING] [--min-gap-us 2]
      [--step-marker NAME_SUBSTRING [--steps 50]]

With --step-marker (a kernel that runs once per decode step, such as the
sampler's), it also prints the last --steps steps between consecutive
markers: the mean step, the GPU's busy and idle time in it, and each
kernel's mean time and count per step.
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
    parser.add_argument('--step-marker', default='')
    parser.add_argument('--steps', type=int, default=50)
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
    if args.step_marker:
        print_steps(rows, args.step_marker, args.steps)


def print_steps(rows, marker, steps):
    starts = [i for i, r in enumerate(rows) if marker in r[2]]
    starts = starts[-(steps + 1):]
    if len(starts) < 2:
        print(f'fewer than two kernels named like {marker!r}')
        return
    n = len(starts) - 1
    span = busy = kernels = 0
    per_kernel = collections.Counter()
    per_count = collections.Counter()
    gaps = collections.Counter()
    for a, b in zip(starts, starts[1:]):
        step, step_end = rows[a:b], rows[b][0]
        span += step_end - step[0][0]
        end, previous = step[0][0], '(start)'
        for start, stop, name in step:
            if start > end:
                gaps[(short(previous, 28), short(name, 28))] += start - end
            busy += stop - max(start, end) if stop > end else 0
            end = max(end, stop)
            per_kernel[short(name)] += stop - start
            per_count[short(name)] += 1
            previous = name
        if step_end > end:
            gaps[(short(previous, 28), short(rows[b][2], 28))] += step_end - end
        kernels += len(step)
    print(f'{n} steps between {marker!r}: {span / n / 1e3:.1f} us a step, '
          f'busy {busy / n / 1e3:.1f} us, idle {(span - busy) / n / 1e3:.1f} us, '
          f'{kernels / n:.0f} kernels and copies')
    for name, total in per_kernel.most_common(25):
        print(f'  {total / n / 1e3:9.1f} us  x{per_count[name] / n:5.1f}  {name}')
    print('idle a step, by the kernels on either side:')
    for (before, after), total in gaps.most_common(12):
        print(f'  {total / n / 1e3:9.1f} us  {before} -> {after}')


if __name__ == '__main__':
    main()
