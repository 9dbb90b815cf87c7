//go:build tools

// Package tools pins kube-router's command in this module's graph.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
