// Package capacity does the capacity arithmetic of LLM inference on Kubernetes that the
// platform's seed documents (docs/platform.md) work by hand: the KV cache a model needs per
// token and per conversation, whether a vLLM configuration fits its GPU, what the
// HorizontalPodAutoscaler will do with a metric, and how long a cold start takes compared with
// the startupProbe budget.
//
// Every function is pure: no I/O, no clock. Sizes are parsed like Kubernetes quantities
// ("10Gi", "16G", also "10GiB" and "16GB"), bandwidths like "1Gbit/s", "125MB/s" or "2GB/s".
package capacity
