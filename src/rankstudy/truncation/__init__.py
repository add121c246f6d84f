"""Ranked-list truncation (Choppy, Bahri et al., SIGIR 2020).

- ``tables``: per-query metric tables C[i] (F1 or the penalised DCG) for every cut i = 1..N;
- ``baselines``: Fixed-k, Greedy-k and the Oracle over those tables;
- ``bicut``: the BiCut baseline (Lien et al., SIGIR 2019), a BiLSTM over the score sequence.
"""
