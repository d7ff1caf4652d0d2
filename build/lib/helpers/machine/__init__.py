"""This machine: its GPUs, the right vLLM for it, and the Colab-style runtime a workshop lands on.

- ``gpus``      read the NVIDIA GPUs (NVML, then ``nvidia-smi``)
- ``hardware``  match GPUs to registry targets; ``check_machine`` refuses what cannot run
- ``install``   the installed vLLM against the target's pin, and the install plan
- ``runtime``   which runtime a workshop notebook is on and where it routes; Colab links
- ``workshop``  the workshop notebook's install step (the CPU build of vLLM on Colab)
"""
