// Package chaos is berth's fault-injection suite: it runs a real marketplace on one
// machine (a ledger node in this process, a Kubernetes control plane with kwok nodes,
// and two providers as separate `berth provider run` processes sharing the cluster),
// drives tenant lease lifecycles against it (create, bid, lease, manifest, ready,
// update, close), and meanwhile kills provider processes (SIGKILL and SIGTERM, at
// moments a seeded random source picks), takes the API server down and restarts the
// ledger node. After each round of lifecycles it checks the promises berth makes:
//
//   - every manifest answered 200 runs (it reaches ready, its update too);
//   - no lease namespace is left once its lease is closed;
//   - no provider touches another's leases (their namespaces and workloads keep their
//     identity until their own provider tears them down);
//   - no reservation outlives its open bid or active lease;
//   - no lease a tenant did not close is closed (no manifest_timeout, no unstable);
//   - all of that holds again within 30 s of the round's last fault.
//
// Run is what `berth bench chaos` runs; the tests run it short. Everything listens on
// 127.0.0.1 on free ports. Run is not safe for concurrent use with itself on one
// directory.
package chaos
