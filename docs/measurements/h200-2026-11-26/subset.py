"""Write an experiment file holding only some of its tasks (and none of its findings): the same cells."""
import re
import sys

source, out, *keep = sys.argv[1:]
text = open(source).read()
chunks = re.split(r"(?m)^(?=\[)", text)
kept = []
for chunk in chunks:
    header = chunk.split("\n", 1)[0].strip()
    if header == "[[findings]]":
        continue
    if header == "[[tasks]]":
        label = re.search(r'(?m)^label = "([^"]+)"', chunk) or re.search(r'(?m)^name = "([^"]+)"', chunk)
        if label.group(1) not in keep:
            continue
    kept.append(chunk)
open(out, "w").write("".join(kept))
