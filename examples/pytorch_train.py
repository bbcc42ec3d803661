#!/usr/bin/env python3
"""A small PyTorch training loop to run under dsmemtrace.

    LD_PRELOAD=$PWD/build/interpose/libdsmemtrace.so DSMEMTRACE_DIR=/tmp/traces \\
        python3 examples/pytorch_train.py
    build/decode/dsmemdecode --per-step /tmp/traces/dsmemtrace.*.zst

A 4-layer transformer encoder on random tokens, AdamW, one NVTX range named
"train_step" per iteration (torch.cuda.nvtx.range_push/range_pop), nothing
else.  After each step it prints what PyTorch itself says, with the peaks reset
at every step:

    torch.cuda.max_memory_allocated()  memory_allocated()
    torch.cuda.max_memory_reserved()   memory_reserved()

dsmemdecode must print the same numbers, byte for byte, from the trace alone.
--json FILE writes them in the format the tests compare (tests/preload).
"""
import argparse
import json
import sys

import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab=8192, d_model=512, heads=8, layers=4, ff=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--json", help="write the per-step counters here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("pytorch_train.py needs a CUDA GPU (examples/standin_train.c runs without one)")

    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    model = TinyLM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    vocab = model.head.out_features

    rows = []
    print("%4s %16s %16s %16s %16s" % ("step", "max_allocated", "allocated", "max_reserved", "reserved"))
    torch.cuda.reset_peak_memory_stats(dev)
    for step in range(1, args.steps + 1):
        torch.cuda.nvtx.range_push("train_step")
        # vary the batch so steps differ, as real data does
        batch = args.batch // 2 if step % 3 == 0 else args.batch
        tokens = torch.randint(0, vocab, (batch, args.seq), device=dev)
        logits = model(tokens[:, :-1])
        loss = loss_fn(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        del tokens, logits, loss
        torch.cuda.nvtx.range_pop()

        row = {
            "step": step,
            "device": 0,
            "peak_allocated": torch.cuda.max_memory_allocated(dev),
            "end_allocated": torch.cuda.memory_allocated(dev),
            "peak_reserved": torch.cuda.max_memory_reserved(dev),
            "end_reserved": torch.cuda.memory_reserved(dev),
        }
        torch.cuda.reset_peak_memory_stats(dev)
        rows.append(row)
        print("%4d %16d %16d %16d %16d" % (step, row["peak_allocated"], row["end_allocated"],
                                           row["peak_reserved"], row["end_reserved"]))
    torch.cuda.synchronize()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"format": "victim-steps/1", "devices": 1, "baseline": [], "steps": rows}, f, indent=1)


if __name__ == "__main__":
    main()
