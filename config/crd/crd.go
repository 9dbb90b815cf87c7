// Package crd embeds berth's CustomResourceDefinitions (generated from api/v1 by
// `make generate`), so the binary can install them.
package crd

import "embed"

// Files holds the CRD YAML files.
//
//go:embed *.yaml
var Files embed.FS
