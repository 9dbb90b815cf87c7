// Command coredns is CoreDNS with only the plugins a real node's cluster DNS uses:
// Kubernetes' Services and pods under cluster.local, answered from the API server,
// with caching, health and readiness. It has no forwarding plugin: names outside the
// cluster are refused, so nothing a pod asks leaves the machine. hack/dns.sh builds it
// and localenv.RealNode runs it as the cluster's DNS pod.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins this build registers; directives lists them in CoreDNS's order.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the registered plugins in the order CoreDNS's own build runs them
// (core/dnsserver/zdirectives.go): each sees a request before those after it.
var directives = []string{"reload", "ready", "health", "errors", "log", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
