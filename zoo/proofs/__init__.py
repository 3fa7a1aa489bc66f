"""Proofs: evidence that zoo's models compute what they claim, and how fast.

    equivalence.py  canonical weight names, transplants between layouts, and whether two specs compute the same
                    function (`zoo.equivalence`, `zoo.transplant`, `zoo equiv`)
    interop.py      to and from a real torch.nn.Transformer computing the same function (`to_torch`, `from_torch`)
    bench.py        `zoo bench`: zoo's training and decoding throughput against torch.nn.Transformer's

They build models (zoo/model/) and, for the bench, train them (zoo/train/); nothing below them imports them but
the contracts (zoo/testing/, which check transplants) and the report's equivalence matrix.
"""
