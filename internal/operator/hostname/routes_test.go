package hostname

import (
	"maps"
	"strings"
	"testing"
	"time"

	berthv1 "berth.dev/berth/api/v1"
)

// TestNginxAnnotations: the http_options as Akash maps them to ingress-nginx;
// options left at 0 leave the controller's defaults, and only known next cases pass.
func TestNginxAnnotations(t *testing.T) {
	const r = "nginx.ingress.kubernetes.io"
	cases := []struct {
		name string
		spec berthv1.ProviderHostSpec
		want map[string]string
	}{
		{"sdl defaults", berthv1.ProviderHostSpec{ReadTimeout: 60000, SendTimeout: 60000, MaxBodySize: 1 << 20, NextTries: 3, NextCases: []string{"error", "timeout"}},
			map[string]string{r + "/proxy-read-timeout": "60", r + "/proxy-send-timeout": "60", r + "/proxy-body-size": "1048576",
				r + "/proxy-next-upstream-tries": "3", r + "/proxy-next-upstream-timeout": "0", r + "/proxy-next-upstream": "error timeout"}},
		{"rounded up, codes, buffer", berthv1.ProviderHostSpec{ReadTimeout: 1, SendTimeout: 1001, NextTimeout: 2500, NextCases: []string{"500", "404", "429"}, ProxyBufferSize: 8192},
			map[string]string{r + "/proxy-read-timeout": "1", r + "/proxy-send-timeout": "2", r + "/proxy-next-upstream-timeout": "3",
				r + "/proxy-next-upstream": "http_500 http_404 http_429", r + "/proxy-buffer-size": "8192"}},
		{"nothing set", berthv1.ProviderHostSpec{}, map[string]string{r + "/proxy-next-upstream-timeout": "0"}},
		{"unknown cases dropped", berthv1.ProviderHostSpec{NextCases: []string{"error; more_set_headers", "off"}},
			map[string]string{r + "/proxy-next-upstream-timeout": "0", r + "/proxy-next-upstream": "off"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := nginxAnnotations(r, &berthv1.ProviderHost{Spec: c.spec})
			if !maps.Equal(got, c.want) {
				t.Errorf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

// TestConfigValidate: every bad setting is refused, naming it.
func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Provider, ok.ChainID = "akash1p", "chain-1"
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, edit := range map[string]func(*Config){
		"provider":      func(c *Config) { c.Provider = "" },
		"mode":          func(c *Config) { c.Mode = "nginx" },
		"ingress.class": func(c *Config) { c.Ingress.Class = "Bad Class" },
		"gateway.name":  func(c *Config) { c.Mode = ModeGateway },
		"tls.issuer": func(c *Config) {
			c.Mode, c.Gateway.Name, c.Gateway.Namespace, c.TLS.Issuer = ModeGateway, "g", "gw", "le"
		},
		"tls.issuer_kind": func(c *Config) { c.TLS.Issuer, c.TLS.IssuerKind = "le", "Other" },
		"health.address":  func(c *Config) { c.Health.Mode = HealthProbe },
		"health.mode":     func(c *Config) { c.Health.Mode = "ping" },
		"workers":         func(c *Config) { c.Workers = 0 },
		"resync":          func(c *Config) { c.Resync = 0 },
		"listen":          func(c *Config) { c.Listen = "8085" },
		"ingress_domain":  func(c *Config) { c.IngressDomain = "-bad" },
		"leader_election": func(c *Config) { c.LeaderElection.RenewDeadline = time.Hour },
	} {
		c := ok
		edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name it", name, err)
		}
	}
}
