"""``duomq rollout``: role-aware rolling restarts and upgrades of broker
groups on Kubernetes, through ``kubectl`` (``kube``); what a group needs done
and in what order is worked out apart from any I/O (``plan``); ``run``
carries it out, one group at a time, stopping at the first unhealthy step."""
