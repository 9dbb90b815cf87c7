// Package hostname is the hostname operator: it turns each ProviderHost (a hostname a
// lease's HTTP port accepts) into an Ingress or a Gateway API HTTPRoute in the lease's
// namespace, holds every hostname to one lease, checks that each route works, and
// reports all of it in the ProviderHost's status.
package hostname

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/operator"
	"berth.dev/berth/internal/ownership"
	"berth.dev/berth/internal/yaml"
)

// Route kinds the operator writes (Config.Mode).
const (
	ModeIngress = "ingress"
	ModeGateway = "gateway"
)

// Annotation sets for the SDL's http_options (IngressConfig.Annotations and
// GatewayConfig.Annotations).
const (
	// AnnotationsNginx: ingress-nginx's (Ingress) or NGINX Gateway Fabric's
	// (HTTPRoute), as Akash's provider writes them.
	AnnotationsNginx = "nginx"
	// AnnotationsTraefik: Traefik's router annotations; Traefik has no per-route
	// timeouts, body size or retries without its Middleware resources.
	AnnotationsTraefik = "traefik"
	// AnnotationsNone writes no controller-specific annotations.
	AnnotationsNone = "none"
)

// Health checks (HealthConfig.Mode).
const (
	// HealthStatus: a route is ready once its controller says it took it (an Ingress's
	// load-balancer status; an HTTPRoute's Accepted condition from the gateway).
	HealthStatus = "status"
	// HealthProbe: a route is ready once a request for its hostname, sent to the
	// ingress controller's address, gets an answer that is not a gateway error (502,
	// 503, 504): it reached the service.
	HealthProbe = "probe"
	// HealthNone: routes are not checked (phase Routed).
	HealthNone = "none"
)

// Config is the hostname operator's configuration (hostname-operator.yaml).
type Config struct {
	// Provider and ChainID are whose ProviderHosts this operator routes: one
	// operator per provider, so that providers sharing a cluster never touch each
	// other's routes.
	Provider string `yaml:"provider"`
	ChainID  string `yaml:"chain_id"`
	// Kubeconfig is the cluster's ("": in-cluster).
	Kubeconfig string `yaml:"kubeconfig"`
	// Listen is the address of /healthz, /readyz and /metrics ("": none).
	Listen         string                  `yaml:"listen"`
	LeaderElection operator.LeaderElection `yaml:"leader_election"`
	// Mode is ingress (networking.k8s.io Ingress) or gateway (Gateway API HTTPRoute).
	Mode    string        `yaml:"mode"`
	Ingress IngressConfig `yaml:"ingress"`
	Gateway GatewayConfig `yaml:"gateway"`
	TLS     TLSConfig     `yaml:"tls"`
	Health  HealthConfig  `yaml:"health"`
	// IngressDomain is the provider's own domain (cluster.ingress_domain): hostnames
	// under it are the provider's per-service names, which the TLS settings leave to
	// the ingress's wildcard certificate unless TLS.ProviderHosts.
	IngressDomain string `yaml:"ingress_domain"`
	// Workers is how many hostnames are reconciled at once (default 4).
	Workers int `yaml:"workers"`
	// Resync is how often every hostname is reconciled again even without a change
	// (default 10m).
	Resync time.Duration `yaml:"resync"`
}

// IngressConfig shapes Ingresses.
type IngressConfig struct {
	// Class is spec.ingressClassName (default "nginx").
	Class string `yaml:"class"`
	// Annotations is nginx (default), traefik or none.
	Annotations string `yaml:"annotations"`
}

// GatewayConfig shapes HTTPRoutes: the Gateway they attach to.
type GatewayConfig struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	// SectionName, when set, attaches to one listener of the Gateway.
	SectionName string `yaml:"section_name"`
	// Annotations is nginx (NGINX Gateway Fabric's, as Akash writes them) or none
	// (default).
	Annotations string `yaml:"annotations"`
}

// TLSConfig asks cert-manager for certificates (Ingress mode).
type TLSConfig struct {
	// Issuer names the cert-manager Issuer (in the lease's namespace) or ClusterIssuer
	// ("": no TLS section and no cert-manager annotations).
	Issuer string `yaml:"issuer"`
	// IssuerKind is ClusterIssuer (default) or Issuer.
	IssuerKind string `yaml:"issuer_kind"`
	// ProviderHosts also asks for certificates for hostnames under IngressDomain.
	ProviderHosts bool `yaml:"provider_hosts"`
}

// HealthConfig is how routes are checked.
type HealthConfig struct {
	// Mode is status (default), probe or none.
	Mode string `yaml:"mode"`
	// Address is the ingress controller's HTTP address, host:port, that probes are
	// sent to (probe mode).
	Address string `yaml:"address"`
	// Path is the probes' request path (default "/").
	Path string `yaml:"path"`
	// Interval between probes of a hostname (default 30s); Timeout of one (default 5s).
	Interval time.Duration `yaml:"interval"`
	Timeout  time.Duration `yaml:"timeout"`
}

// DefaultConfig is the configuration a file's keys are read over.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:8085", Mode: ModeIngress,
		Ingress: IngressConfig{Class: "nginx", Annotations: AnnotationsNginx},
		Gateway: GatewayConfig{Annotations: AnnotationsNone},
		TLS:     TLSConfig{IssuerKind: "ClusterIssuer"},
		Health:  HealthConfig{Mode: HealthStatus, Path: "/", Interval: 30 * time.Second, Timeout: 5 * time.Second},
		Workers: 4, Resync: 10 * time.Minute,
	}
}

// Owner is whose ProviderHosts the operator routes.
func (c *Config) Owner() ownership.Owner {
	return ownership.Owner{Provider: c.Provider, ChainID: c.ChainID}
}

// Validate checks every setting and says which is wrong.
func (c *Config) Validate() error {
	if err := operator.CheckCommon(c.Owner(), c.LeaderElection, c.Listen, c.Workers, c.Resync); err != nil {
		return err
	}
	switch c.Mode {
	case ModeIngress:
		if errs := validation.IsDNS1123Subdomain(c.Ingress.Class); len(errs) > 0 {
			return fmt.Errorf("ingress.class %q: %s", c.Ingress.Class, strings.Join(errs, "; "))
		}
		if !oneOf(c.Ingress.Annotations, AnnotationsNginx, AnnotationsTraefik, AnnotationsNone) {
			return fmt.Errorf("ingress.annotations %q: want nginx, traefik or none", c.Ingress.Annotations)
		}
	case ModeGateway:
		if errs := validation.IsDNS1123Subdomain(c.Gateway.Name); len(errs) > 0 {
			return fmt.Errorf("gateway.name %q (the Gateway HTTPRoutes attach to): %s", c.Gateway.Name, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1123Label(c.Gateway.Namespace); len(errs) > 0 {
			return fmt.Errorf("gateway.namespace %q: %s", c.Gateway.Namespace, strings.Join(errs, "; "))
		}
		if s := c.Gateway.SectionName; s != "" && len(validation.IsDNS1123Subdomain(s)) > 0 {
			return fmt.Errorf("gateway.section_name %q is not a valid listener name", s)
		}
		if !oneOf(c.Gateway.Annotations, AnnotationsNginx, AnnotationsNone) {
			return fmt.Errorf("gateway.annotations %q: want nginx or none", c.Gateway.Annotations)
		}
		if c.TLS.Issuer != "" {
			return errors.New("tls.issuer: cert-manager certificates are for Ingresses; with Gateway API, TLS is configured on the Gateway's listeners")
		}
	default:
		return fmt.Errorf("mode %q: want ingress or gateway", c.Mode)
	}
	if c.TLS.Issuer != "" {
		if errs := validation.IsDNS1123Subdomain(c.TLS.Issuer); len(errs) > 0 {
			return fmt.Errorf("tls.issuer %q: %s", c.TLS.Issuer, strings.Join(errs, "; "))
		}
		if !oneOf(c.TLS.IssuerKind, "ClusterIssuer", "Issuer") {
			return fmt.Errorf("tls.issuer_kind %q: want ClusterIssuer or Issuer", c.TLS.IssuerKind)
		}
	}
	switch c.Health.Mode {
	case HealthStatus, HealthNone:
	case HealthProbe:
		if _, _, err := net.SplitHostPort(c.Health.Address); err != nil {
			return fmt.Errorf("health.address %q (the ingress controller's host:port that probes go to): %w", c.Health.Address, err)
		}
		if !strings.HasPrefix(c.Health.Path, "/") {
			return fmt.Errorf("health.path %q must start with /", c.Health.Path)
		}
		if c.Health.Interval < time.Second || c.Health.Timeout <= 0 || c.Health.Timeout > c.Health.Interval {
			return fmt.Errorf("health: interval %s must be at least 1s and timeout %s positive and at most the interval", c.Health.Interval, c.Health.Timeout)
		}
	default:
		return fmt.Errorf("health.mode %q: want status, probe or none", c.Health.Mode)
	}
	if d := c.IngressDomain; d != "" && !market.ValidHostname(d) {
		return fmt.Errorf("ingress_domain %q is not a valid DNS name", d)
	}
	return nil
}

func oneOf(s string, of ...string) bool {
	for _, o := range of {
		if s == o {
			return true
		}
	}
	return false
}

// DecodeConfig reads hostname-operator.yaml's bytes over DefaultConfig: unknown keys
// and values of the wrong type are errors naming their line.
func DecodeConfig(b []byte) (Config, error) {
	c := DefaultConfig()
	if err := yaml.Decode(b, &c); err != nil {
		return c, err
	}
	return c, nil
}
