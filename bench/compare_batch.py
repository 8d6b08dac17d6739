"""Compares kforge's verdicts on a GRPO-shaped batch with KernelBench's
harness on the same batch, and both with what each candidate was built to
be (bench/make_grpo_batch.py): verdict agreement, wall time per correct
candidate, batch wall time.

  python3 bench/compare_batch.py --batch batch.json --kforge kforge_batch.json \
      --peer kb_peer.json [--gpus 1]

Standard library only.
"""

import argparse
import json
import statistics
import sys


def p90(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.9 * (len(values) - 1) + 0.5))] if values else 0.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", required=True)
    parser.add_argument("--kforge", required=True, help="kforge_verifier_batch_bench --out")
    parser.add_argument("--peer", required=True, help="kernelbench_peer.py --out")
    parser.add_argument("--gpus", type=int, default=0,
                        help="which kforge run (by GPU count); default: the run with as many "
                             "GPUs as the peer used, else the first")
    args = parser.parse_args(argv)
    batch = {item["id"]: item for item in json.load(open(args.batch))}
    runs = json.load(open(args.kforge))
    peer_json = json.load(open(args.peer))
    if args.gpus <= 0:  # like for like: the same GPU count on both sides
        peer_gpus = int(peer_json["summary"].get("devices", 1))
        args.gpus = peer_gpus if any(int(r["gpus"]) == peer_gpus for r in runs) else int(runs[0]["gpus"])
    run = next((r for r in runs if int(r["gpus"]) == args.gpus), None)
    if run is None:
        parser.error(f"--gpus {args.gpus}: {args.kforge} has runs on "
                     f"{', '.join(str(int(r['gpus'])) for r in runs)} GPU(s) only")
    kforge = {it["id"]: it["verdict"] for it in run["items"]}
    peer = {r["id"]: r for r in peer_json["records"]}
    common = [i for i in batch if i in kforge and i in peer]

    agree, table = 0, {}
    disagreements = []
    for ident in common:
        kind = batch[ident]["kind"]
        k_ok = bool(kforge[ident].get("correct", False))
        p_ok = bool(peer[ident].get("correctness", False))
        agree += k_ok == p_ok
        row = table.setdefault(kind, [0, 0, 0])
        row[0] += 1
        row[1] += k_ok
        row[2] += p_ok
        if k_ok != p_ok:
            disagreements.append((ident, kind, k_ok, p_ok,
                                  (peer[ident].get("error") or "")[:120]))
    print(f"candidates in both runs: {len(common)} of {len(batch)}")
    print(f"verdict agreement (correct or not): {agree}/{len(common)}")
    print(f"{'kind':<8} {'n':>4} {'kforge correct':>15} {'KernelBench correct':>20}")
    for kind, (n, k, p) in sorted(table.items()):
        print(f"{kind:<8} {n:>4} {k:>15} {p:>20}")
    for ident, kind, k_ok, p_ok, err in disagreements:
        print(f"  differs: {ident} ({kind}): kforge {k_ok}, KernelBench {p_ok} {err}")

    k_correct = [kforge[i]["totalSeconds"] for i in common if kforge[i].get("correct")]
    p_correct = [peer[i]["wall_s"] for i in common if peer[i].get("correctness")]
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    print(f"\ns per correct candidate   kforge median {med(k_correct):.2f} "
          f"p90 {p90(k_correct):.2f}   KernelBench median "
          f"{med(p_correct):.2f} p90 {p90(p_correct):.2f}")
    k_wall = float(run["wall_s"])
    p_sum = sum(peer[i]["wall_s"] for i in common)
    p_wall = float(peer_json["summary"].get("batch_wall_s", p_sum))
    scale = len(batch) / len(common) if common else 1.0
    print(f"batch wall s              kforge {k_wall:.1f} ({len(kforge)} candidates, "
          f"{args.gpus} GPU)   KernelBench {p_wall:.1f} ({len(common)} candidates, "
          f"{peer_json['summary'].get('devices', 1)} GPU)")
    if scale != 1.0:
        print(f"KernelBench over the whole batch at its measured rate: {p_wall * scale:.1f} s "
              f"(measured on {len(common)} of {len(batch)})")
    print(f"kforge faster by          {p_wall * scale / k_wall:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
