#!/usr/bin/env python3
"""Checks the BpeTokenizer test fixture against Hugging Face `tokenizers`:
encodes every corpus line of the expected-ids file with
tokenizers.Tokenizer.from_file(tokenizer.json) (add_special_tokens=False, as
BpeTokenizer::Encode), compares with the stored ids, and decodes the stored
ids back to the text. Exit status 0 when everything agrees, 1 otherwise.

  pip install tokenizers
  scripts/tokenizer_parity_hf.py                      # the GPT-2 fixture
  scripts/tokenizer_parity_hf.py --tokenizer /models/Qwen2.5-7B/tokenizer.json \\
      --emit /tmp/qwen_expected.jsonl                 # Hugging Face's ids for the
                                                      # same corpus, no comparison

--emit writes {"text": ..., "ids": [...]} lines in the fixture's format, so
that BpeTokenizer can be diffed against another vocabulary (Qwen, Llama 3).
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "data", "tokenizer")


def read_expected(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default=os.path.join(FIXTURES, "gpt2", "tokenizer.json"))
    parser.add_argument("--expected", default=os.path.join(FIXTURES, "gpt2_expected.jsonl"))
    parser.add_argument("--emit", help="write Hugging Face's ids for the corpus here instead")
    parser.add_argument("--max-report", type=int, default=20, help="mismatches printed")
    args = parser.parse_args()

    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("needs Hugging Face tokenizers: pip install tokenizers")
    import tokenizers

    tok = Tokenizer.from_file(args.tokenizer)
    rows = read_expected(args.expected)
    print(f"tokenizers {tokenizers.__version__}: {args.tokenizer}, {len(rows)} lines "
          f"from {args.expected}")

    if args.emit:
        with open(args.emit, "w", encoding="utf-8") as out:
            for row in rows:
                ids = tok.encode(row["text"], add_special_tokens=False).ids
                out.write(json.dumps({"text": row["text"], "ids": ids}, ensure_ascii=False) + "\n")
        print(f"wrote {args.emit}")
        return 0

    encode_bad = decode_bad = 0
    for n, row in enumerate(rows, start=1):
        text, want = row["text"], row["ids"]
        got = tok.encode(text, add_special_tokens=False).ids
        if got != want:
            encode_bad += 1
            if encode_bad + decode_bad <= args.max_report:
                i = first_difference(want, got)
                print(f"line {n}: encode differs at id {i}: {text!r}\n"
                      f"  expected {want[max(0, i - 3):i + 5]}\n"
                      f"  hf       {got[max(0, i - 3):i + 5]}")
        decoded = tok.decode(want, skip_special_tokens=False)
        if decoded != text:
            decode_bad += 1
            if encode_bad + decode_bad <= args.max_report:
                print(f"line {n}: decode differs:\n  expected {text!r}\n  hf       {decoded!r}")

    print(f"encode: {len(rows) - encode_bad}/{len(rows)} agree; "
          f"decode: {len(rows) - decode_bad}/{len(rows)} agree")
    return 1 if encode_bad or decode_bad else 0


if __name__ == "__main__":
    sys.exit(main())
