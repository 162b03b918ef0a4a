"""The suite's bottom layer: what every package uses and that imports none of them.

- :mod:`.atomic`: a file written whole or not at all (one rename), and the temporaries of
  killed writers removed;
- :mod:`.safeload`: one bounded loader for every JSON and YAML file from outside;
- :mod:`.limits`: every bound on what the suite reads from outside, in one place;
- :mod:`.printable`: text a stranger controls, escaped before a person sees it;
- :mod:`.registry`: the named registries (generators, exporters, predictors, tracks, ...);
- :mod:`.configs`: plain values coerced into the structured configs' dataclasses.

generators, pipelines, kernels and leaderboard import from here; nothing here imports from them.
"""
