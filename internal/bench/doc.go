// Package bench holds berth's measuring commands (berth bench lease-ready, berth bench
// status): each builds what it measures as the provider builds it — the cluster side
// through app.NewClusterSide, the gateway's status on loopback — drives it, and prints
// `name value unit` lines. docs/benchmarks.md has the figures and how to reproduce
// them.
package bench
