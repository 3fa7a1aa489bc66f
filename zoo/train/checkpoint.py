"""The training checkpoint: one safetensors file that loading cannot turn into code execution.

`torch.load` of a pickle runs whatever the file asks for, so a run directory copied from
someone else (or a crafted `checkpoint.pt`) could execute code on `zoo evaluate`. Here every
tensor (model weights, optimizer moments, RNG states as uint8) is stored with safetensors, and
the rest (optimizer param_groups and the layout of its state, position in the data, spec digest)
as JSON in the file's metadata. Legacy pickle checkpoints are refused, never unpickled.

    tensors   model/<name>   optimizer/<param index>/<key>   rng/cpu   rng/cuda/<device>
    metadata  {"zoo": JSON {"format", "identity", "position", "spec_digest", "param_groups", "state",
                            "content_hash"}}

A checkpoint copied from another seed's run directory, or damaged on disk, loads as well as the right
one, and a resume from it would end in numbers no run of this cell gives. So format 2 carries whose it
is (`identity`: the grid cell's definition digest, or a plain run's spec digest, and the seed) and a
content hash over every tensor and the rest of the metadata; `disagreement` says why a checkpoint must
not be resumed, and the loop then trains from step 0 (zoo/train/loop.py). A format-1 file has neither,
so nothing says it is this run's, intact: it is still loaded (`zoo evaluate` of an older run), never
resumed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from zoo.atomic import write_atomic
from zoo.errors import RunError

FILE = "checkpoint.safetensors"
LEGACY_FILE = "checkpoint.pt"  # pickled by torch.save before safetensors; refused
FORMAT = 2
READABLE = (1, FORMAT)  # format 1: before identities and content hashes


@dataclass
class Checkpoint:
    path: Path
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]  # as torch.optim.Optimizer.state_dict() gives it
    position: dict[str, Any]
    rng: torch.Tensor
    cuda_rng: list[torch.Tensor]
    spec_digest: str
    identity: dict[str, Any]  # {"digest", "seed"} of the run that wrote it; {} in format 1
    format: int
    intact: bool  # its content hash matches what was read (never, in format 1)


def identity(spec_digest: str, seed: int, definition: str | None = None) -> dict[str, Any]:
    """Whose checkpoint it is: the grid cell's definition digest (zoo/experiment/store.py, which covers spec, data,
    training and seed), or for a plain `zoo train` run its spec's digest; and the seed."""
    return {"digest": definition or spec_digest, "seed": seed}


def find(run_dir: Path) -> Path | None:
    """The run's checkpoint file, None if it has none; a legacy pickle is a RunError, never loaded."""
    path, legacy = Path(run_dir) / FILE, Path(run_dir) / LEGACY_FILE
    if path.exists():
        return path
    if legacy.exists():
        raise RunError(f"{legacy}: a pickle checkpoint, which zoo refuses to load because unpickling can run "
                       f"arbitrary code; retrain the run (checkpoints are now {FILE})")
    return None


def save(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, position: dict[str, Any],
         spec_digest: str, *, seed: int = 0, definition: str | None = None) -> None:
    """Write the training state to `path` atomically (a kill mid-write leaves the previous checkpoint), with the
    identity of its run (see `identity`) and its content hash."""
    tensors = {f"model/{name}": value for name, value in model.state_dict().items()}
    state = optimizer.state_dict()
    layout: dict[str, dict[str, Any]] = {}
    for index, entries in state["state"].items():
        layout[str(index)] = {}
        for key, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer/{index}/{key}"] = value
                layout[str(index)][key] = None  # None marks "the tensor of that name"
            else:
                layout[str(index)][key] = {"value": value}
    tensors["rng/cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors.update({f"rng/cuda/{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    meta = {"format": FORMAT, "identity": identity(spec_digest, seed, definition), "position": position,
            "spec_digest": spec_digest, "param_groups": _portable(state["param_groups"]), "state": layout}
    tensors = _unshared(tensors)
    meta["content_hash"] = content_hash(tensors, meta)
    write_atomic(path, lambda tmp: save_file(tensors, str(tmp), metadata={"zoo": json.dumps(meta)}))


def _portable(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The optimizer's settings as any step can resume them: the learning rate a number (a CUDA-graphed step
    reads it from a tensor, zoo/train/graphs.py) and Adam's `capturable` off (the graphed step turns it on
    again; a CPU Adam refuses it)."""
    return [{**group, "lr": float(group["lr"]), **({"capturable": False} if "capturable" in group else {})}
            for group in groups]


def _unshared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CPU, contiguous, and a copy where storage is shared (tied embeddings): safetensors refuses aliases."""
    seen: set[int] = set()
    out = {}
    for name, value in tensors.items():
        value = value.detach().to("cpu").contiguous()
        pointer = value.untyped_storage().data_ptr()
        out[name] = value.clone() if pointer in seen else value
        seen.add(pointer)
    return out


def content_hash(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> str:
    """sha256 (hex) over every tensor, names sorted, each as its name, dtype, shape and bytes, then over the
    metadata's canonical JSON without the hash itself: a flipped bit in a weight, a moment or an RNG state, and an
    edited position, optimizer setting or identity, each change it."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    digest.update(json.dumps({k: v for k, v in meta.items() if k != "content_hash"}, sort_keys=True).encode())
    return digest.hexdigest()


def load(path: Path) -> Checkpoint:
    """Read a checkpoint written by `save`; anything else (truncated, corrupt, pickled) is one RunError."""
    try:
        with safe_open(str(path), framework="pt", device="cpu") as file:
            meta = json.loads((file.metadata() or {})["zoo"])
            tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118 (safe_open is not iterable)
        if meta.get("format") not in READABLE:
            raise ValueError(f"format {meta.get('format')!r}, expected one of {READABLE}")
        _check_shape(meta, tensors)
        state = {int(index): {key: tensors[f"optimizer/{index}/{key}"] if entry is None else entry["value"]
                              for key, entry in entries.items()} for index, entries in meta["state"].items()}
        return Checkpoint(
            path=Path(path),
            model={name[len("model/"):]: t for name, t in tensors.items() if name.startswith("model/")},
            optimizer={"state": state, "param_groups": meta["param_groups"]},
            position=dict(meta["position"]), rng=tensors["rng/cpu"],
            cuda_rng=[tensors[f"rng/cuda/{i}"] for i in range(sum(n.startswith("rng/cuda/") for n in tensors))],
            spec_digest=str(meta["spec_digest"]), identity=dict(meta.get("identity", {})), format=meta["format"],
            intact=meta.get("content_hash") == content_hash(tensors, meta))
    except (SafetensorError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        detail = " ".join(str(err).split())[:200]  # one line, whatever the file says
        raise RunError(f"{path}: not a readable zoo checkpoint ({type(err).__name__}: {detail}); "
                       "it is truncated or corrupt, or was not written by zoo") from None


def _check_shape(meta: Any, tensors: dict[str, torch.Tensor]) -> None:
    """The metadata and RNG states have the shapes `save` writes (ValueError otherwise), so that a crafted
    file fails here, naming itself, and not as a TypeError in the optimizer or a RuntimeError in torch's RNG."""
    tables = {"position": dict, "param_groups": list, "state": dict, "identity": dict}
    for key, kind in tables.items():
        if not isinstance(meta.get(key, {}), kind):
            raise ValueError(f"{key}: expected a {kind.__name__}, got {type(meta.get(key)).__name__}")
    if not all(isinstance(group, dict) and isinstance(group.get("params"), list)
               and all(isinstance(i, int) and not isinstance(i, bool) for i in group["params"])
               for group in meta["param_groups"]):
        raise ValueError("param_groups: expected a list of tables, each with its params a list of indices")
    if not all(isinstance(entries, dict) and all(entry is None or isinstance(entry, dict) and "value" in entry
                                                 for entry in entries.values()) for entries in meta["state"].values()):
        raise ValueError("state: expected {index: {key: null or {\"value\": ...}}}")
    expected = torch.get_rng_state()
    for name, state in tensors.items():
        if name.startswith("rng/") and (state.dtype != torch.uint8 or state.dim() != 1
                                        or name == "rng/cpu" and state.shape != expected.shape):
            raise ValueError(f"{name}: not an RNG state, a uint8 vector as torch saves it "
                             f"(got {state.dtype} of shape {tuple(state.shape)})")


def disagreement(checkpoint: Checkpoint, expected: dict[str, Any]) -> str | None:
    """Why `checkpoint` must not be resumed by the run whose `identity` is `expected`, None when it may be. The hash
    is checked before the identity, which is read from the metadata that only the hash vouches for: an edited seed
    reads as an edited file, not as another seed's checkpoint. The seed before the digest: a cell's definition
    covers its seed, so another seed's checkpoint differs in both, and its seed says it best."""
    if checkpoint.format != FORMAT:
        return (f"a format-{checkpoint.format} checkpoint, written before checkpoints carried their run's identity "
                "and a content hash, so nothing says it is this run's, intact")
    if not checkpoint.intact:
        return "its tensors or metadata do not match its content hash: it was damaged or edited"
    theirs = checkpoint.identity
    if theirs.get("seed") != expected["seed"]:
        return f"seed {theirs.get('seed')}'s checkpoint, not seed {expected['seed']}'s"
    if theirs.get("digest") != expected["digest"]:
        return f"the checkpoint of another run (digest {theirs.get('digest')}, this run's {expected['digest']})"
    return None


def restore(checkpoint: Checkpoint, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Load weights (and optimizer state and RNG, when resuming training) into freshly built objects."""
    try:
        model.load_state_dict(checkpoint.model)
        if optimizer is not None:
            # JSON turned tuples (Adam's betas) into lists; give each setting the type the optimizer uses.
            groups = [{key: tuple(value) if isinstance(current.get(key), tuple) else value
                       for key, value in group.items()}
                      for group, current in zip(checkpoint.optimizer["param_groups"], optimizer.param_groups)]
            optimizer.load_state_dict({**checkpoint.optimizer, "param_groups": groups})
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RunError(f"{checkpoint.path}: does not fit the model or optimizer: {first}") from None
    if optimizer is not None:
        torch.set_rng_state(checkpoint.rng)
        if torch.cuda.is_available() and checkpoint.cuda_rng:
            torch.cuda.set_rng_state_all(checkpoint.cuda_rng)
