"""Probes for interpretable cells (the `cells` analysis; Karpathy et al. 2016 sec 4.2, Fig 2).

features      per-character labels from raw text (label t = the state after reading character t)
probe         linear probes as scikit-learn estimators, selectivity, single-cell probes
controls      block splits, control tasks, the last-k-characters baseline
activations   activations on windows of text, clean or with chosen cells held at zero
view          the activation viewer: an HTML fragment, a static image, `python -m probes.view`
"""
