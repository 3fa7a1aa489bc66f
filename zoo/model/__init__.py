"""The model: what a variant is and how it becomes an nn.Module.

    spec.py       ModelSpec, the validated description of one model, and load_spec
    presets.py    the named presets (registry/), read as specs' bases
    overrides.py  dotted overrides (`--set ffn.kind=conv1d`) applied to a spec, a preset or a training config
    build.py      ModelSpec -> the registry's components -> Seq2Seq (`zoo.build`)
    seq2seq.py    the encoder-decoder skeleton the components plug into
    decode.py     greedy and beam-search decoding of a built model
    summary.py    specs and models for people: flattened fields, diffs, parameter counts

It sits on the component registry (zoo/registry.py, zoo/components/) and the kernels (zoo/kernels/); training,
experiments and the command line sit on it. The public face is zoo's own: `zoo.build`, `zoo.load_spec`,
`zoo.ModelSpec`, `zoo.preset_names`.
"""
