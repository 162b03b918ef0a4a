"""Kernel deduction: which kernels a runtime will actually execute for a network, without
running it (see docs/kernels.md).

- :mod:`.gpu_tflite`: the TFLite GPU delegate's fusion (USC study, Algorithm B.2) and
  convolution kernel selection (Algorithm B.3);
- :mod:`.gpu_vulkan`: PyTorch Mobile's Vulkan convolution kernel selection (Algorithm B.1);
- :mod:`.xnnpack`: the XNNPACK operators LiteRT runs on CPU for a network;
- :mod:`.executorch`: the XNNPACK operators ExecuTorch's XNNPACK delegate runs for a network,
  and what stays on its portable kernels;
- :mod:`.nnmeter_rules`: nn-Meter's black-box fusion-rule detection and kernel search
  (``find_kernels(graph, rules)``, ``load_rules()``);
- :mod:`.gpu_truth`: the TFLite-GPU deduction compared with what ran on this host's GPU;
- :mod:`.usc_check`: the GPU deductions compared with the USC study's executed kernel names;
- :mod:`.report`: the accuracy reports against executed kernel names.

A top-level package: the leaderboard's baselines import it (nnmeter_kernelwise); it builds on
``generators`` and, to measure or to run what it checks against, on ``pipelines``. Labelling
what a GPU dispatch ran stays a measurement step (``pipelines/gpu/programs.py``).
"""
from .nnmeter_rules import FusionRules, Kernel, find_kernels, load_rules

__all__ = ["FusionRules", "Kernel", "find_kernels", "load_rules"]
