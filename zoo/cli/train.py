"""`zoo train`, `zoo translate`, `zoo evaluate`: the commands that give a model a life."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from zoo.config_io import parse_assignments
from zoo.data import TaskConfig, check_files, load_task
from zoo.data.corpus import decode_utf8
from zoo.errors import RunError, ZooError
from zoo.experiment import store
from zoo.machine import bf16_warning, device_type_here
from zoo.model.decode import MAX_BEAM, DecodeConfig
from zoo.model.spec import load_spec
from zoo.proofs.bench import MIN_LENGTH as MIN_BENCH_LENGTH
from zoo.terminal import Table, warn
from zoo.train import Trainer, check_fits, fit_to_task, load_run, load_train_config, save_evaluation

console = Console(emoji=False)  # user text such as ":smile:" is printed as written
errors = Console(stderr=True, emoji=False)


def _print_metrics(heading: str, metrics: dict) -> None:
    """`heading` on a line of its own, then the metrics: as the table's title, a path wrapped mid-word to the
    width of the table's two narrow columns."""
    console.print(escape(heading), soft_wrap=True)
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    console.print(table)


def prepare(args: argparse.Namespace):
    """Resolve spec, task and training config; the task fixes the vocabulary sizes."""
    config, task_table = load_train_config(args.config, parse_assignments(args.train))
    task_options = {**task_table, **parse_assignments(args.task_set), "name": args.task}
    if args.data_dir:
        task_options["data_dir"] = args.data_dir
    spec = load_spec(args.spec, parse_assignments(args.set))
    task_config = TaskConfig(**task_options)
    check_fits(spec, task_config)  # before the data is read and a tokenizer trained
    check_files(task_config)
    with errors.status(f"preparing task {args.task}..."):
        task = load_task(task_config, pad_id=spec.pad_id)
    return fit_to_task(spec, task), task, config


def cmd_train(args: argparse.Namespace) -> int:
    from zoo.train.tensorboard import log_destination

    log_to = log_destination(args.log_to)  # checked before any data is read
    spec, task, config = prepare(args)
    if config.precision == "bf16":
        _warn_about_bf16("this run trains", config.device)
    pairs = len(task.examples("train"))
    dropped = task.dropped.get("train", 0)
    left_out = f" ({dropped:,} longer than max_tokens_per_sentence left out)" if dropped else ""
    errors.print(f"training {spec.name} ({spec.digest()}) on {args.task}: {task.src_vocab} / {task.tgt_vocab} tokens, "
                 f"{pairs:,} training pairs{left_out} -> {args.out}")
    # a checkpoint that is not this run's, intact, goes to OUT/.stale/<time>/, as a stale cell's files do
    set_aside = partial(store.move_aside, root=Path(args.out), when=store.stamp())
    summary = Trainer(spec, task, config, args.out, resume=args.resume, progress=not args.no_progress,
                      console=errors, log_to=log_to, set_aside=set_aside).run()
    final = summary.get("final") or {}
    _print_metrics(f"{args.out}: {summary['status']} after {summary['steps']} steps ({summary['train_seconds']:.0f} s)",
                   {k: v for k, v in final.items() if k != "event"})
    if summary["status"] != "complete":
        errors.print(f"[bold red]{escape(summary['reason'])}[/bold red]")
        return 1
    return 0


def _warn_about_bf16(runs: str, device: str) -> None:
    """zoo.machine.bf16_warning, where `runs` train in bf16 on this machine's CPU (train.device `device`)."""
    if device_type_here(device) == "cpu":
        warn(errors, bf16_warning(runs))


def _decode_config(args: argparse.Namespace) -> DecodeConfig:
    return DecodeConfig(beam=args.beam, alpha=args.alpha, max_ratio=args.max_ratio, max_extra=args.max_extra,
                        use_cache=not args.no_cache)


def cmd_translate(args: argparse.Namespace) -> int:
    from zoo.train.evaluate import translate

    decode = _decode_config(args)
    model, task, _ = load_run(args.run_dir)
    text = decode_utf8(sys.stdin.buffer.read(), "stdin", "zoo translate reads UTF-8 text, one sentence per line")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines[-1] == "":  # the final newline ends the last line; it does not start another
        lines.pop()
    outputs = translate(model, task, [task.encode_source(line) for line in lines], decode)
    for line in outputs:
        print(line)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from zoo.train.evaluate import evaluate

    decode = _decode_config(args)  # checked before the model is loaded: a bad setting is one line at once
    if args.limit is not None and args.limit < 1:
        raise ZooError(f"--limit: {args.limit} is not allowed; expected a number of sentences >= 1")
    model, task, _ = load_run(args.run_dir)
    total = min(args.limit or len(task.examples(args.split)), len(task.examples(args.split)))
    with Progress(console=errors, transient=True) as bar:
        progress = bar.add_task(f"decoding {args.split} (beam {args.beam})", total=total)
        metrics, hypotheses = evaluate(model, task, args.split, decode, limit=args.limit,
                                       progress=lambda n: bar.advance(progress, n))
    name = f"eval-{args.split}-beam{args.beam}" + (f"-first{args.limit}" if args.limit else "")
    _print_metrics(f"{args.run_dir} on {args.split} -> {name}.json", metrics)  # before saving: a
    try:  # read-only run directory must not cost the decoding just finished
        save_evaluation(Path(args.run_dir), name, metrics, hypotheses)
    except OSError as err:
        raise RunError(f"{args.run_dir}: could not save {name}.json ({err.strerror or err}); "
                       "the metrics printed above are the only copy") from None
    return 0


def _process_counts(text: str) -> list[int]:
    """`--processes 1,2,4`, read before anything is measured: a typo costs one line, not a finished bench."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ZooError(f"--processes: {text!r} is not allowed; expected process counts >= 1 separated by commas, "
                       "such as 1,2,4")
    return counts


def _progress(line: str) -> None:
    errors.print(f"[dim]{line}[/dim]")


def _bench_table(args: argparse.Namespace, results: dict) -> Table:
    table = Table(title=f"zoo bench: {args.spec} at d_model {args.d_model}, {args.layers}+{args.layers} layers, "
                  f"vocab {args.vocab}, batches of {args.batch} sentences (about "
                  f"{results['batch_target_tokens']:,.0f} target tokens), on {results['device']} with "
                  f"{results['threads']} CPU threads (medians of interleaved rounds)", title_justify="left")
    for column in ("measure", "zoo", "reference", "ratio"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    reference = "no_reference" not in results
    for precision in ("fp32", "bf16"):
        zoo_rate, fast_rate = results[f"train_{precision}_zoo_tok_s"], results[f"train_{precision}_fast_tok_s"]
        torch_rate = f"{results[f'train_{precision}_torch_tok_s']:,.0f}" if reference else "-"
        table.add_row(f"training tokens/s, {precision} (vs torch.nn.Transformer)", f"{zoo_rate:,.0f}", torch_rate,
                      f"{results[f'train_{precision}_ratio']:.2f}x" if reference else "-")
        table.add_row(f"  fast path, {precision} (vs zoo's reference path)", f"{fast_rate:,.0f}", f"{zoo_rate:,.0f}",
                      f"{results[f'train_{precision}_fast_ratio']:.2f}x")
        table.add_row(f"  fast path, {precision} (vs torch.nn.Transformer)", f"{fast_rate:,.0f}", torch_rate,
                      f"{results[f'train_{precision}_fast_torch_ratio']:.2f}x" if reference else "-")
        if f"train_{precision}_graphed_ratio" in results:
            table.add_row(f"  fast path in CUDA graphs, {precision} (vs the fast path)",
                          f"{results[f'train_{precision}_graphed_tok_s']:,.0f}", f"{fast_rate:,.0f}",
                          f"{results[f'train_{precision}_graphed_ratio']:.2f}x")
    table.add_row("greedy decoding tokens/s, 64 tokens (KV cache vs none)", f"{results['decode_cached_tok_s']:,.0f}",
                  f"{results['decode_uncached_tok_s']:,.0f}", f"{results['decode_cache_ratio']:.2f}x")
    for precision in ("fp32", "bf16"):
        for path, suffix in (("", ""), ("  fast path", "_fast"), ("  fast path in CUDA graphs", "_graphed")):
            if f"train_{precision}{suffix}_peak_fraction" not in results:
                continue
            table.add_row(f"{path or 'training FLOP/s'}, {precision} (vs measured {precision} matmul peak)",
                          f"{results[f'train_{precision}{suffix}_achieved_flop_s'] / 1e9:,.1f} G",
                          f"{results[f'matmul_{precision}_peak_flop_s'] / 1e9:,.1f} G",
                          f"{results[f'train_{precision}{suffix}_peak_fraction']:.0%}")
    return table


def _processes_table(args: argparse.Namespace, results: dict) -> Table:
    table = Table(title=f"runs per device: k processes training {args.spec} at once on {results['device']}, "
                  f"{args.process_steps} timed fp32 steps each on the {args.process_path} path", title_justify="left")
    for column in ("processes", "aggregate tokens/s", "per-process median tokens/s", "scaling vs 1"):
        table.add_column(column, justify="right")
    for row in results["processes"]:
        table.add_row(str(row["processes"]), f"{row['aggregate_tok_s']:,.0f}",
                      f"{row['per_process_median_tok_s']:,.0f}", f"{row['scaling']:.2f}x")
    return table


def cmd_bench(args: argparse.Namespace) -> int:
    import json

    from zoo.proofs.bench import BenchConfig, run, runs_per_device

    counts = _process_counts(args.processes) if args.processes is not None else None
    if args.process_steps < 1:
        raise ZooError(f"--process-steps: {args.process_steps} is not allowed; expected a number of steps >= 1")
    for option, value, least in (("--batch", args.batch, 1), ("--length", args.length, MIN_BENCH_LENGTH),
                                 ("--rounds", args.rounds, 1)):
        if value < least:
            raise ZooError(f"{option}: {value} is not allowed; expected a whole number >= {least}")
    if args.process_path == "graphed" and args.device != "cuda":
        raise ZooError("--process-path: 'graphed' replays CUDA graphs, so it needs --device cuda; allowed here: "
                       "reference, fast")
    config = BenchConfig(spec=args.spec, d_model=args.d_model, n_heads=args.n_heads, d_ff=args.d_ff,
                         layers=args.layers, vocab=args.vocab, batch=args.batch, length=args.length,
                         rounds=args.rounds, device=args.device, process_path=args.process_path)
    _warn_about_bf16("the bench's bf16 measurements train", args.device)
    results = run(config, report=_progress)
    if counts is not None:
        results["processes"] = runs_per_device(config, counts, args.process_steps, report=_progress)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    console.print(_bench_table(args, results))
    if "no_reference" in results:
        console.print(f"no torch.nn.Transformer reference: {results['no_reference']}")
    if "no_bf16_peak" in results:
        console.print(f"no bf16 matmul peak: {results['no_bf16_peak']}")
    if counts is not None:
        console.print(_processes_table(args, results))
    return 0


def add_commands(sub) -> None:
    """`zoo train`, `zoo translate`, `zoo evaluate` and `zoo bench`, in the order `zoo --help` lists them."""
    _add_train(sub)
    _add_translate_and_evaluate(sub)
    _add_bench(sub)


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a spec on a task into a run directory",
                       description="Train SPEC (preset or spec file) on TASK: copy, reverse, sort, long-copy, or "
                       "CORPUS:SRC-TGT such as multi30k:de-en read from --data-dir. Resumable with --resume.")
    p.add_argument("spec", metavar="SPEC", help="preset name or spec file")
    p.add_argument("--task", required=True, help="copy | reverse | sort | long-copy | CORPUS:SRC-TGT")
    p.add_argument("--data-dir",
                   help="folder holding CORPUS/{train,valid,test}.LANG (default: $ZOO_DATA_DIR or ../shared/data)")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="the run directory: checkpoints, logs, the model")
    p.add_argument("--config", metavar="TRAIN_FILE",
                   help="training config (TOML/YAML/JSON); a [task] table sets task options")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a model spec field")
    p.add_argument("--train", action="append", metavar="KEY=VALUE",
                   help="override a training config field, e.g. steps=2000")
    p.add_argument("--task-set", action="append", metavar="KEY=VALUE",
                   help="override a task option, e.g. vocab_size=8000")
    p.add_argument("--resume", action="store_true", help="continue the run in RUN_DIR from its last checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--log-to", nargs=2, metavar=("tensorboard", "DIR"), help="also write the logged curves to "
                   "TensorBoard while training (the tensorboard extra)")
    p.set_defaults(run=cmd_train)


def _add_translate_and_evaluate(sub) -> None:
    """The two commands that decode with a trained run, with the same decoding options."""
    for name, helptext in (("translate", "translate stdin line by line with a trained run"),
                           ("evaluate", "score a trained run on a split (BLEU/chrF or exact match, perplexity)")):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory `zoo train` wrote")
        if name == "evaluate":
            p.add_argument("--split", default="test", choices=["train", "valid", "test"],
                           help="the split to score (default test)")
            p.add_argument("--limit", type=int, help="only the first N sentences")
        p.add_argument("--beam", type=int, default=1 if name == "evaluate" else 4,
                       help=f"beam size (1 = greedy, at most {MAX_BEAM})")
        p.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty exponent")
        p.add_argument("--max-ratio", type=float, default=1.5, help="output length limit: ratio x source length")
        p.add_argument("--max-extra", type=int, default=10, help="... plus this many tokens")
        p.add_argument("--no-cache", action="store_true", help="decode without the key/value cache")
        p.set_defaults(run=cmd_translate if name == "translate" else cmd_evaluate)


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="throughput ratios against torch.nn.Transformer and the KV cache",
                       description="Train the same model as zoo (its reference path and its fast path, kernels = "
                       "fast-attention) and as torch.nn.Transformer in one process, interleaved, and print ratios "
                       "(fp32 and bf16); also "
                       "greedy decoding with vs without the key/value cache, and achieved FLOP/s against the "
                       "device's measured matmul peaks; with --processes, how many training processes one device "
                       "carries at once.")
    p.add_argument("--spec", default="paper-base", help="preset or spec file (default paper-base)")
    p.add_argument("--d-model", type=int, default=256, help="model width, overriding the spec's (default 256)")
    p.add_argument("--n-heads", type=int, default=4, help="attention heads (default 4)")
    p.add_argument("--d-ff", type=int, default=1024, help="feed-forward width (default 1024)")
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--vocab", type=int, default=8000, help="source and target vocabulary size (default 8000)")
    p.add_argument("--batch", type=int, default=64,
                   help="sentences per training batch (default 64: about 1,500 target tokens at --length 24); "
                        "the paper's 25,000-token batches are about --batch 1000")
    p.add_argument("--length", type=int, default=24,
                   help=f"mean source sentence length in tokens, at least {MIN_BENCH_LENGTH} (default 24; lengths "
                        "vary by half of it either way, targets are 10%% longer)")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds per training comparison; cached "
                   "decoding, slower a round, takes half as many (at least 3)")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu",
                   help="where to measure (default cpu; auto = cuda if PyTorch sees a GPU)")
    p.add_argument("--processes", metavar="K,K,...",
                   help="also measure runs per device: K processes training at once, for each K (1 is always "
                   "measured as the baseline), e.g. 1,2,4")
    p.add_argument("--process-steps", type=int, default=50,
                   help="timed training steps per process for --processes (default 50)")
    p.add_argument("--process-path", choices=["reference", "fast", "graphed"], default="reference",
                   help="the step each --processes process trains with: zoo's reference path, the fast path, or "
                        "the fast path replayed from CUDA graphs (a GPU run's step; --device cuda only)")
    p.add_argument("--json", action="store_true", help="print the raw results as JSON")
    p.set_defaults(run=cmd_bench)
