#!/usr/bin/env python3
"""Checks a benchd benchmark against the plain-PyTorch CS336 reference (cs336_lm.py).

Run a benchmark with --export-parity, save the job as JSON, and give both here:

  benchctl submit benchmark --preset tiny --mode train_step --warmup-steps 0 --steps 3 \\
      --export-parity --watch                          # `get` shows "Parity  <bundle path>"
  benchctl get JOB --json > job.json
  python bench/reference/parity.py <data-dir>/artifacts/JOB/parity.pt --result job.json

The bundle holds the weights the worker started from, the batch and the logits of
its first forward. The reference loads those weights, runs the first forward on
the same batch under the same autocast and compares

  logits   max|a - b| / max|b|  (a: reference, b: benchd), over every element;
  loss     |a - b| / |b| for each step, where benchd's per-step loss is the loss of
           that step's forward (before its optimizer update). In train_step mode
           the reference then takes its own AdamW step on the same batch, so the
           loss of step i checks i updates (run the job with 4 steps and pass
           --steps 4 to check the loss after 3 updates); other modes do not
           update, and every step's loss is checked against the same forward.

Tolerances (relative), per precision:
  fp32  1e-4, the project's requirement. Measured on CPU (tiny and mini, batch up
        to 8 x 128, 3 steps): logits 3.5e-7 to 6.2e-7, losses 0 to 1.2e-7. Scaling
        any one weight matrix by 1.01 moves the logits by 3e-3 to 1e-2, so this
        check catches a 1% error anywhere.
  bf16  2e-2. Autocast rounds every matmul input and output to 8 significant
        bits (one ulp is 2^-8 to 2^-7 relative), and the two implementations
        round in fp32 at different places (rsqrt vs. sqrt and divide, the RoPE
        table), so an element now and then lands one bf16 ulp away. Measured on
        CPU (tiny and mini, 4 seeds, batch 2 to 8, context 16 to 128): logits up
        to 6.7e-3 (one ulp of the largest logit), losses 0 (on CPU the loss
        itself is a bf16 number, so one ulp there is up to 7.8e-3). 2e-2 is about
        three times the largest measurement. At this precision the check catches
        structural bugs (a wrong scale, mask, rotation, norm or update) and errors
        of a few percent, not a 1% error in one weight.
  fp16  5e-3, by the same argument with 11 significant bits: measured logits up
        to 8.8e-4, losses 0.
  --tolerance overrides these.

Exit status: 0 when every check is within tolerance, 1 when one is not, 2 for
unusable input (a bundle and a result of different runs, a bad file).
"""
import argparse
import contextlib
import json
import math
import sys

import torch

import cs336_lm  # beside this script: python3 bench/reference/parity.py puts its folder on sys.path

BUNDLE_FORMAT = "benchd-parity/1"
TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2, "fp16": 5e-3}
AUTOCAST_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}


class UsageError(Exception):
    pass


def load_bundle(path):
    try:
        bundle = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises a variety of errors for a bad file
        raise UsageError(f"cannot read the bundle {path}: {e}") from e
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise UsageError(f"{path} is not a benchd parity bundle ({BUNDLE_FORMAT})")
    return bundle


def load_result(path):
    """The BenchmarkResult from `benchctl get JOB --json` (a Job, proto3 JSON)."""
    with open(path) as f:
        doc = json.load(f)
    result = doc.get("result", {}).get("benchmark") if "result" in doc else doc
    if not result or not result.get("steps"):
        state = doc.get("state", "?")
        raise UsageError(f"{path} holds no benchmark result with steps (job state {state})")
    return result


def enum_name(value, prefix):
    """'PRECISION_BF16' -> 'bf16', 'BENCHMARK_MODE_TRAIN_STEP' -> 'train_step'."""
    return str(value).removeprefix(prefix).lower()


def check_same_run(config, result):
    spec = result.get("spec", {})  # the BenchmarkSpec the worker ran, fully resolved
    model = spec.get("model", {})
    pairs = [
        ("vocab_size", int(model.get("vocabSize", model.get("vocab_size", 0)))),
        ("d_model", int(model.get("dModel", model.get("d_model", 0)))),
        ("d_ff", int(model.get("dFf", model.get("d_ff", 0)))),
        ("num_layers", int(model.get("numLayers", model.get("num_layers", 0)))),
        ("num_heads", int(model.get("numHeads", model.get("num_heads", 0)))),
        ("batch_size", int(spec.get("batchSize", spec.get("batch_size", 0)))),
        ("context_length", int(spec.get("contextLength", spec.get("context_length", 0)))),
        ("precision", enum_name(spec.get("precision", ""), "PRECISION_")),
        ("mode", enum_name(spec.get("mode", ""), "BENCHMARK_MODE_")),
    ]
    wrong = [f"{k}: bundle {config[k]}, result {v}" for k, v in pairs if config[k] != v]
    if wrong:
        raise UsageError("the bundle and the result are of different runs (" + "; ".join(wrong) + ")")


def relative(a, b):
    """max|a - b| / max|b| for tensors, |a - b| / |b| for numbers."""
    if isinstance(a, torch.Tensor):
        a, b = a.double(), b.double()
        return ((a - b).abs().max() / b.abs().max()).item()
    return abs(a - b) / abs(b)


def run(args):
    bundle = load_bundle(args.bundle)
    result = load_result(args.result)
    config = bundle["config"]
    check_same_run(config, result)
    precision, mode = config["precision"], config["mode"]
    tolerance = args.tolerance if args.tolerance is not None else TOLERANCE[precision]

    device = torch.device(args.device)
    model = cs336_lm.TransformerLM(
        vocab_size=config["vocab_size"], context_length=config["context_length"],
        d_model=config["d_model"], num_layers=config["num_layers"], num_heads=config["num_heads"],
        d_ff=config["d_ff"], rope_theta=config["rope_theta"], init=False).to(device)
    model.load_state_dict(bundle["params"], strict=True)  # names map one to one
    optimizer = cs336_lm.AdamW(model.parameters())
    inputs = bundle["inputs"].to(device)
    targets = bundle["targets"].to(device)

    def autocast():
        if precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPE[precision])

    steps = sorted(result["steps"], key=lambda s: int(s.get("index", 0)))
    n = min(args.steps, len(steps))
    checks = []  # (name, benchd, reference, error)
    for i in range(n):
        model.zero_grad(set_to_none=True)
        with autocast():
            logits = model(inputs)
            loss = cs336_lm.cross_entropy(logits, targets)
        if i == 0:
            b = bundle["logits"]
            checks.append(("logits, first forward", b.abs().max().item(), None,
                           relative(logits.detach().float().cpu(), b)))
        checks.append((f"loss, step {i}", float(steps[i]["loss"]), loss.item(),
                       relative(loss.item(), float(steps[i]["loss"]))))
        if mode == "train_step" and i + 1 < n:
            loss.backward()
            optimizer.step()

    failed = [c for c in checks if not (c[3] <= tolerance)]  # NaN fails too
    print(f"parity: {args.bundle}")
    print(f"  model {config['preset'] or 'custom'} (vocab {config['vocab_size']}, d_model "
          f"{config['d_model']}, d_ff {config['d_ff']}, {config['num_layers']} layers, "
          f"{config['num_heads']} heads), {mode} {precision}, batch {config['batch_size']} x "
          f"{config['context_length']}, benchd on {config['device']}, reference on {device} "
          f"(torch {torch.__version__})")
    print(f"  {'check':<24}{'benchd':>14}{'reference':>14}{'rel. error':>12}{'tolerance':>11}")
    for name, ours, ref, err in checks:
        ours_s = f"max|b| {ours:.4g}" if ref is None else f"{ours:.7f}"
        ref_s = "" if ref is None else f"{ref:.7f}"
        ok = "ok" if err <= tolerance else "FAIL"
        print(f"  {name:<24}{ours_s:>14}{ref_s:>14}{err:>12.2e}{tolerance:>11.1e}  {ok}")
    verdict = "PASS" if not failed else f"FAIL ({len(failed)} of {len(checks)} over tolerance)"
    print(f"  {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passed": not failed, "tolerance": tolerance, "precision": precision,
                       "mode": mode, "device": str(device),
                       "checks": [{"name": c[0], "benchd": c[1], "reference": c[2],
                                   "error": None if math.isnan(c[3]) else c[3],
                                   "ok": c[3] <= tolerance} for c in checks]}, f, indent=1)
    return 0 if not failed else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", metavar="BUNDLE", help="parity.pt written by --export-parity")
    p.add_argument("--result", required=True, metavar="RESULT.json",
                   help="`benchctl get JOB --json` of the same job")
    p.add_argument("--steps", type=int, default=3,
                   help="steps whose loss to check (default 3; at most the job's steps)")
    p.add_argument("--device", default="cpu", help="where the reference runs: cpu or cuda[:N]")
    p.add_argument("--tolerance", type=float, help="relative tolerance (default by precision)")
    p.add_argument("--json", metavar="OUT", help="also write the checks as JSON to OUT")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    try:
        return run(args)
    except UsageError as e:
        print(f"parity: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
