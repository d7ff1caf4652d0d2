"""The workshop notebook's code (``notebooks/workshop_colab.ipynb``): the Colab-style runtime it
lands on and the target that runtime routes to, with the Colab links (``runtime``), installing
vLLM's CPU build there (``install``), where that build's torch comes from (``cpu_torch``;
``make setup`` asks it too), and what the stand-in it serves is (``standin``).
"""
