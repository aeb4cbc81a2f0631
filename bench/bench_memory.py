"""The memory plan (`webr1_kit/memory.py`) against measured peaks: the embedded model on the
CPU (float32 weights, bfloat16 autocast, LoRA r=16 on every linear layer), one forward and
backward pass over micro-batches of sequences of 512 tokens, a quarter of them trained.

Measured: the process's resident memory at its peak during the pass (sampled every 2 ms),
less what it held before the model loaded; predicted: the plan's BC step without Adam's two
moments (the bare pass allocates none). Each case runs in a fresh process.

    .venv/bin/python bench/bench_memory.py [--tokens 1024 2048] [--checkpointing]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

MEASURE = textwrap.dedent('''
    import json, sys, threading, time
    import psutil
    import torch
    from webr1_kit.config import LoRA, PolicyConfig
    from webr1_kit.policy import load_policy
    from webr1_kit.training import token_logprobs
    from webr1_kit.trajectory import Packed

    tokens, share, checkpointing = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
    proc = psutil.Process()
    torch.ones(1).sum()
    before = proc.memory_info().rss
    policy = load_policy(PolicyConfig(model="embedded", lora=LoRA(r=16, alpha=32, dropout=0.0),
                                      gradient_checkpointing=checkpointing))
    model = policy.model
    model.train()
    seq_len = 512
    seqs = []
    for i in range(tokens // seq_len):
        s = Packed()
        trained = int(seq_len * share)
        s.add([(7 * i + j) % 4000 + 100 for j in range(seq_len - trained)], trained=False)
        s.add([(11 * i + j) % 4000 + 100 for j in range(trained)], trained=True, turn=0)
        seqs.append(s)
    loaded = proc.memory_info().rss
    peak = [loaded]
    done = threading.Event()
    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)
    t = threading.Thread(target=watch); t.start()
    logp, _ = token_logprobs(model, seqs)
    (-logp.mean()).backward()
    done.set(); t.join()
    print(json.dumps({"before": before, "loaded": loaded, "peak": peak[0]}))
''')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048], help="micro-batch sizes (multiples of 512)")
    ap.add_argument("--checkpointing", action="store_true", help="with gradient checkpointing")
    ap.add_argument("--share", type=float, default=0.25, help="trained share of the tokens")
    args = ap.parse_args()
    from webr1_kit.memory import plan
    from webr1_kit.pipeline import scale_config

    gib = 1024**3
    for tokens in args.tokens:
        out = subprocess.run([sys.executable, "-c", MEASURE, str(tokens), str(args.share),
                              "1" if args.checkpointing else "0"], capture_output=True, text=True, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        cfg = scale_config("cpu", {"policy": {"lora": {"r": 16, "alpha": 32}, "gradient_checkpointing": args.checkpointing},
                                   "sft": {"micro_batch_tokens": tokens}})
        p = plan(cfg, device="cpu", trained_share=args.share)
        predicted = p.phases["BC step"] - 8 * (p.parts["adapter + Adam"] // 16)
        measured = m["peak"] - m["before"]
        print(json.dumps({"tokens": tokens, "checkpointing": args.checkpointing, "predicted_gib": round(predicted / gib, 2),
                          "measured_gib": round(measured / gib, 2), "ratio": round(measured / predicted, 2)}))


if __name__ == "__main__":
    main()
