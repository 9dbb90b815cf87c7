// Package market is the marketplace's vocabulary, shared by the ledger, the provider and
// the tenant tools: deployment groups and their resource units, prices, attributes, and
// the manifest a provider receives. It depends on the standard library only.
//
// The JSON encodings are Akash's, field for field (names, nulls, omitted zero values),
// so that groups and manifests written by Akash tools read the same here and hash the
// same. Struct fields are declared in the order of their JSON names, so encoding/json
// writes keys sorted. A manifest's version (Manifest.Version) is the sha256 of its
// canonical JSON, written without reflection by AppendCanonicalJSON and byte-identical
// to what Akash hashes.
//
// Values are plain data: safe to share once built, not safe to mutate concurrently.
package market
