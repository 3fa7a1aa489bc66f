"""zoo.data: tasks as token ids, tokenizers, and token-count batches.

    task = load_task("multi30k:de-en", pad_id=spec.pad_id, vocab_size=8000)
    pairs = task.examples("train")                     # [(src ids, tgt ids)], src ends with eos,
                                                       # tgt is [bos] ... [eos]
    for batch in token_batches([(len(s), len(t)) for s, t in pairs], 4096, seed=0, epoch=e):
        src, tgt_in, tgt_out = collate([pairs[i] for i in batch], task.specials.pad)  # (B,S) (B,T) (B,T)
    task.decode_target(ids) vs task.references("test")  # scored by task.metrics (zoo/metrics.py)

Files: config.py (TaskConfig, load_task, load_saved), task.py (Specials, TaskName, Task), tasks.py
(the task registry: register_task), synthetic.py, text.py + corpus.py + tokenizer.py (parallel text),
batching.py (token_batches, collate); datasets.py (the dataset registry for `zoo data`:
register_dataset), download.py, and the datasets multi30k.py and wmt14.py.
"""

from zoo.data.batching import collate, token_batches
from zoo.data.config import TaskConfig, load_saved, load_task
from zoo.data.corpus import check_files
from zoo.data.datasets import DATASETS, Dataset, Downloads, register_dataset
from zoo.data.download import Source
from zoo.data.multi30k import Multi30k
from zoo.data.synthetic import SyntheticTask
from zoo.data.task import Specials, Task
from zoo.data.tasks import TASKS, register_task, task_class
from zoo.data.text import TextTask
from zoo.data.wmt14 import Wmt14Sample
from zoo.errors import DataError

__all__ = ["DATASETS", "TASKS", "DataError", "Dataset", "Downloads", "Multi30k", "Source", "Specials", "SyntheticTask",
           "Task", "TaskConfig", "TextTask", "Wmt14Sample", "check_files", "collate", "load_saved",
           "load_task", "register_dataset", "register_task", "task_class", "token_batches"]
