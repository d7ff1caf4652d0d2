"""lab.fleet: replicas behind vllm-router, DP+EP, and the deployment renderings."""
