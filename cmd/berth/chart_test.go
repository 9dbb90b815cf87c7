package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/chartspec"
	"berth.dev/berth/internal/chartspec/charttest"
	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
)

var chartDir = charttest.Dir()

// render renders the chart with values over charttest.Values; it returns the documents.
func render(t *testing.T, values ...map[string]any) ([]map[string]any, error) {
	t.Helper()
	out, err := charttest.Render(t, values...)
	if err != nil {
		return nil, err
	}
	var docs []map[string]any
	dec := yamlv3.NewDecoder(bytes.NewReader(out))
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rendered YAML: %v", err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

var merge = charttest.Merge

func deepCopy(m map[string]any) map[string]any {
	out := map[string]any{}
	merge(out, m)
	return out
}

// at builds {a: {b: {c: v}}} from "a.b.c".
func at(path string, v any) map[string]any {
	parts := strings.Split(path, ".")
	out := map[string]any{parts[len(parts)-1]: v}
	for i := len(parts) - 2; i >= 0; i-- {
		out = map[string]any{parts[i]: out}
	}
	return out
}

// find returns the rendered document of kind and name.
func find(docs []map[string]any, kind, name string) map[string]any {
	for _, d := range docs {
		if md, _ := d["metadata"].(map[string]any); d["kind"] == kind && md["name"] == name {
			return d
		}
	}
	return nil
}

// settingsFile writes the settings file a ConfigMap carries and returns its path.
func settingsFile(t *testing.T, docs []map[string]any, configMap, key string) string {
	t.Helper()
	cm := find(docs, "ConfigMap", configMap)
	if cm == nil {
		t.Fatalf("no ConfigMap %s", configMap)
	}
	data, _ := cm["data"].(map[string]any)
	s, ok := data[key].(string)
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", configMap, key)
	}
	path := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settingPaths are the keys of a settings type: every struct field down to scalars
// (a type that reads its own text, such as a size, is one), and lists and maps as a
// whole.
func settingPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		text := reflect.PointerTo(f.Type).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
		if f.Type.Kind() == reflect.Struct && !text {
			out = append(out, settingPaths(f.Type, path)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// change is a value other than the default for a setting (and whatever else, of the
// settings or the chart, it needs to be valid).
type change struct {
	value any
	also  map[string]any // more settings
	chart map[string]any // more chart values
}

// providerChanges: every provider setting, a valid value other than its default.
var providerChanges = map[string]change{
	"home": {value: "/var/lib/berth2"}, "from": {value: "operator"}, "node": {value: "tcp://ledger2.example.com:26657"},
	"kubeconfig": {value: "/etc/kube/config"}, "kube_qps": {value: 50}, "kube_burst": {value: 100}, "log_level": {value: "debug"},
	"host_uri": {value: "https://p2.example.com:8443"}, "attributes": {value: []any{map[string]any{"key": "region", "value": "eu-west"}}},
	"bidding.timeout": {value: "10m"}, "bidding.deposit": {value: "1000000uakt"},
	"bidding.pricing.strategy":              {value: "script", also: at("bidding.pricing.script.path", "/bin/true")},
	"bidding.pricing.scale.denom":           {value: "uact"},
	"bidding.pricing.scale.exchange":        {value: map[string]any{"uact": "2"}},
	"bidding.pricing.scale.cpu":             {value: "0.02"},
	"bidding.pricing.scale.memory":          {value: "0.003"},
	"bidding.pricing.scale.storage":         {value: map[string]any{"beta3": "0.01"}},
	"bidding.pricing.scale.endpoint":        {value: "2"},
	"bidding.pricing.scale.leased_ip":       {value: "20"},
	"bidding.pricing.scale.gpu":             {value: map[string]any{"a100": "120"}},
	"bidding.pricing.script.path":           {value: "/bin/true"},
	"bidding.pricing.script.timeout":        {value: "20s"},
	"bidding.pricing.script.max_concurrent": {value: 4},
	"bidding.tenants.allow":                 {value: []any{"akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78"}},
	"bidding.tenants.deny":                  {value: []any{"akash1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq7cdc78"}},
	"bidding.budget.bids_per_hour":          {value: 100},
	"bidding.budget.tenant_bids_per_hour":   {value: 10},
	"bidding.limits.cpu_per_replica":        {value: "8"},
	"bidding.limits.memory_per_replica":     {value: "64Gi"},
	"bidding.limits.storage_per_replica":    {value: "1Ti"},
	"bidding.limits.volumes_per_replica":    {value: 2},
	"bidding.limits.gpus_per_replica":       {value: 4},
	"bidding.limits.replicas_per_order":     {value: 10},
	"bidding.limits.endpoints_per_order":    {value: 5},
	"bidding.require_attributes":            {value: []any{map[string]any{"key": "tier", "value": "community"}}},
	"bidding.history":                       {value: 500},
	"bidding.concurrency":                   {value: 16},
	"inventory.storage":                     {value: map[string]any{"beta3": "2Ti"}, chart: at("operators.inventory.enabled", false)},
	"inventory.leased_ips":                  {value: 4},
	"inventory.leased_ip_pool":              {value: "metallb-system/leased-ips"},
	"inventory.node_ports":                  {value: 100},
	"inventory.operator":                    {value: "other"},
	"inventory.max_age":                     {value: "5m"},
	"cluster.install_crds":                  {value: false},
	"cluster.storage_classes":               {value: map[string]any{"beta3": "fast-ssd"}},
	"cluster.gpu_runtime_class":             {value: "nvidia"},
	"cluster.ingress_namespace":             {value: "ingress"},
	"cluster.ingress_domain":                {value: "ingress.example.com"},
	"cluster.ingress_http_port":             {value: 8080},
	"cluster.egress_deny":                   {value: []any{"10.0.0.0/8"}},
	"cluster.orphan_interval":               {value: "5m"},
	"cluster.failed_pod_ttl":                {value: "1h"},
	"cluster.orphan_dry_run":                {value: true},
	"cluster.unhealthy_close_after":         {value: "2h"},
	"cluster.deploy_concurrency":            {value: 8},
	"cluster.overcommit.cpu":                {value: 10},
	"cluster.overcommit.memory":             {value: 20},
	"cluster.overcommit.storage":            {value: 30},
	"gateway.listen":                        {value: "0.0.0.0:9443"},
	"gateway.grpc_listen":                   {value: "0.0.0.0:9444"},
	"gateway.cert_file":                     {value: "/etc/tls/tls.crt", also: at("gateway.key_file", "/etc/tls/tls.key")},
	"gateway.key_file":                      {value: "/etc/tls/tls.key", also: at("gateway.cert_file", "/etc/tls/tls.crt")},
	"gateway.public_hostname":               {value: "p.example.com"},
	"gateway.manifest_timeout":              {value: "10m"},
	"gateway.blocked_hostnames":             {value: []any{".example.org"}},
	"balance.withdraw_period":               {value: "2h"},
	"balance.check_interval":                {value: "2m"},
	"balance.low_funds_blocks":              {value: 100},
	"balance.min_balance":                   {value: "10000000uakt"},
	"balance.earnings_file":                 {value: "/var/lib/berth/e.json"},
	"bus.redis":                             {value: "redis://redis.example.com:6379"},
	"bus.prefix":                            {value: "p1.", also: at("bus.redis", "redis://redis.example.com:6379")},
	"bus.ca_file":                           {value: "/etc/redis/ca.pem", also: at("bus.redis", "rediss://redis.example.com:6380")},
}

// leaderChanges are the leader-election settings every operator shares.
var leaderChanges = map[string]change{
	"kubeconfig": {value: "/etc/kube/config"}, "leader_election.disabled": {value: true},
	"leader_election.namespace": {value: "elsewhere"}, "leader_election.name": {value: "lease-1"},
	"leader_election.lease_duration": {value: "30s"}, "leader_election.renew_deadline": {value: "8s"}, "leader_election.retry_period": {value: "5s"},
	"resync": {value: "5m"},
}

var operatorChanges = map[string]map[string]change{
	"hostname": {
		"provider": {value: "akash1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}, "chain_id": {value: "other-1"}, "listen": {value: "0.0.0.0:9085"},
		"mode": {value: "gateway", also: map[string]any{"gateway": map[string]any{"name": "public", "namespace": "gateways"}}}, "ingress.class": {value: "traefik"}, "ingress.annotations": {value: "traefik"},
		"gateway.name": {value: "public"}, "gateway.namespace": {value: "gateways"}, "gateway.section_name": {value: "https"},
		"gateway.annotations": {value: "nginx"}, "tls.issuer": {value: "letsencrypt"}, "tls.issuer_kind": {value: "Issuer"},
		"tls.provider_hosts": {value: true, also: at("tls.issuer", "letsencrypt")}, "health.mode": {value: "none"},
		"health.address": {value: "10.0.0.1:80"}, "health.path": {value: "/healthz"}, "health.interval": {value: "1m"}, "health.timeout": {value: "10s"},
		"ingress_domain": {value: "ingress.example.com"}, "workers": {value: 8},
	},
	"ip": {
		"provider": {value: "akash1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}, "chain_id": {value: "other-1"}, "listen": {value: "0.0.0.0:9086"},
		"pool": {value: "pool-2"}, "metallb_namespace": {value: "lb"}, "load_balancer_class": {value: "metallb"}, "workers": {value: 8},
	},
	"inventory": {
		"name": {value: "cluster-2"}, "listen": {value: "0.0.0.0:9087"},
		"gpu.models":       {value: map[string]any{"10de:2330": map[string]any{"model": "h100", "ram": "80Gi", "interface": "sxm"}}},
		"gpu.offer_shared": {value: true}, "storage": {value: []any{map[string]any{"class": "beta3", "source": "csi"}}},
		"label_nodes": {value: false}, "heartbeat": {value: "1m"}, "min_interval": {value: "2s"},
		"bus.redis": {value: "redis://redis.example.com:6379"}, "bus.prefix": {value: "p1.", also: at("bus.redis", "redis://redis.example.com:6379")},
		"bus.ca_file": {value: "/etc/redis/ca.pem", also: at("bus.redis", "rediss://redis.example.com:6380")},
	},
}

// TestChartSettingsReachTheBinary: every setting of every process the chart runs, set
// to a value other than its default, reaches the file the process reads — decoded
// exactly as the same setting written by hand — and `berth … --check` accepts that
// file; a setting the binary does not read is refused by helm, naming it.
func TestChartSettingsReachTheBinary(t *testing.T) {
	charttest.Helm(t) // skipped here when missing
	defaults := chartspec.Defaults()
	type process struct {
		name, configMap, key string
		typ                  reflect.Type
		changes              map[string]change
		decode               func(string) (any, error)
		check                []string
		values               func(map[string]any) map[string]any // settings → chart values
	}
	read := func(decode func([]byte) (any, error)) func(string) (any, error) {
		return func(path string) (any, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			return decode(b)
		}
	}
	processes := []process{{
		name: "provider", configMap: "rel-provider", key: "provider.yaml", typ: reflect.TypeOf(config.ProviderConfig{}), changes: providerChanges,
		decode: func(path string) (any, error) {
			c, err := config.LoadProviderConfig(path, func(string) string { return "" })
			return c, err
		},
		check: []string{"provider", "run", "--check"},
		values: func(s map[string]any) map[string]any {
			return map[string]any{"provider": map[string]any{"settings": s}}
		},
	}}
	for _, name := range []string{"hostname", "ip", "inventory"} {
		changes := map[string]change{}
		for k, v := range leaderChanges {
			changes[k] = v
		}
		for k, v := range operatorChanges[name] {
			changes[k] = v
		}
		p := process{name: name, configMap: "rel-" + name + "-operator", key: name + "-operator.yaml", typ: reflect.TypeOf(defaults[name]), changes: changes,
			check: []string{"operator", name, "--check"},
			values: func(s map[string]any) map[string]any {
				return map[string]any{"operators": map[string]any{name: map[string]any{"enabled": true, "settings": s}}}
			}}
		switch name {
		case "hostname":
			p.decode = read(func(b []byte) (any, error) { return hostname.DecodeConfig(b) })
		case "ip":
			p.decode = read(func(b []byte) (any, error) { return ip.DecodeConfig(b) })
			p.values = func(s map[string]any) map[string]any {
				if _, ok := s["pool"]; !ok {
					s["pool"] = "leased-ips"
				}
				return map[string]any{"operators": map[string]any{"ip": map[string]any{"enabled": true, "settings": s}}}
			}
		case "inventory":
			p.decode = read(func(b []byte) (any, error) { return inventoryop.DecodeConfig(b) })
		}
		processes = append(processes, p)
	}
	for _, p := range processes {
		t.Run(p.name, func(t *testing.T) {
			base, err := render(t, p.values(map[string]any{}))
			if err != nil {
				t.Fatal(err)
			}
			baseCfg, err := p.decode(settingsFile(t, base, p.configMap, p.key))
			if err != nil {
				t.Fatal(err)
			}
			paths := settingPaths(p.typ, "")
			for path := range p.changes {
				if !slices.Contains(paths, path) {
					t.Errorf("%s: in the test's table, but no setting of %s", path, p.name)
				}
			}
			for _, path := range paths {
				c, ok := p.changes[path]
				if !ok {
					t.Errorf("%s: no other value for this setting in the test's table: add one", path)
					continue
				}
				settings := at(path, c.value)
				merge(settings, c.also)
				docs, err := render(t, p.values(deepCopy(settings)), c.chart)
				if err != nil {
					t.Errorf("%s = %v: %v", path, c.value, err)
					continue
				}
				file := settingsFile(t, docs, p.configMap, p.key)
				got, err := p.decode(file)
				if err != nil {
					t.Errorf("%s = %v: the rendered file: %v", path, c.value, err)
					continue
				}
				if reflect.DeepEqual(got, baseCfg) {
					t.Errorf("%s = %v: the rendered file is the default one", path, c.value)
					continue
				}
				// The same settings written by hand, over the chart's own.
				hand := filepath.Join(t.TempDir(), "hand.yaml")
				baseFile := settingsFile(t, base, p.configMap, p.key)
				bb, _ := os.ReadFile(baseFile)
				var want map[string]any
				if err := yaml.Unmarshal(bb, &want); err != nil {
					t.Fatal(err)
				}
				merge(want, settings)
				if inv, ok := want["inventory"].(map[string]any); ok && c.chart != nil && p.name == "provider" && path == "inventory.storage" {
					inv["operator"] = "" // the inventory operator is off: not filled in
				}
				hb, _ := yaml.Marshal(want)
				if err := os.WriteFile(hand, hb, 0o600); err != nil {
					t.Fatal(err)
				}
				wantCfg, err := p.decode(hand)
				if err != nil {
					t.Fatalf("%s: by hand: %v", path, err)
				}
				if !reflect.DeepEqual(got, wantCfg) {
					t.Errorf("%s = %v: rendered\n%+v\nwant\n%+v", path, c.value, got, wantCfg)
					continue
				}
				args := slices.Concat(p.check, []string{"--config", file})
				if out, err := run(t, args...); err != nil {
					t.Errorf("%s = %v: berth %s: %v\n%s", path, c.value, strings.Join(args, " "), err, out)
				}
			}
			t.Logf("%s: %d settings, each rendered with another value, read back and checked", p.name, len(settingPaths(p.typ, "")))
			// A setting the binary does not read: refused, named.
			if _, err := render(t, p.values(map[string]any{"no_such_setting": 1})); err == nil || !strings.Contains(err.Error(), "no_such_setting") {
				t.Errorf("an unknown setting: %v", err)
			}
			if p.name == "provider" {
				// A coin without its denomination: refused by the schema, named.
				if _, err := render(t, p.values(at("bidding.deposit", 5000000))); err == nil || !strings.Contains(err.Error(), "deposit") {
					t.Errorf("a deposit without a denomination: %v", err)
				}
			}
		})
	}
}

// TestChartRBAC: the chart's roles are config/'s, rule for rule (the files the RBAC
// tests run each process with).
func TestChartRBAC(t *testing.T) {
	charttest.Helm(t) // skipped here when missing
	docs, err := render(t, at("operators.ip.enabled", true), at("operators.ip.settings.pool", "leased-ips"))
	if err != nil {
		t.Fatal(err)
	}
	for rendered, file := range map[string]string{
		"berth-system-rel-provider":           "../../config/rbac/provider_role.yaml",
		"berth-system-rel-crd-installer":      "../../config/rbac/crd_installer_role.yaml",
		"berth-system-rel-hostname-operator":  "../../config/operators/hostname/rbac.yaml",
		"berth-system-rel-ip-operator":        "../../config/operators/ip/rbac.yaml",
		"berth-system-rel-inventory-operator": "../../config/operators/inventory/rbac.yaml",
	} {
		got := find(docs, "ClusterRole", rendered)
		if got == nil {
			t.Errorf("no ClusterRole %s", rendered)
			continue
		}
		want := clusterRoleIn(t, file)
		var gotRole rbacv1.ClusterRole
		b, _ := yaml.Marshal(got)
		if err := yaml.Unmarshal(b, &gotRole); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotRole.Rules, want.Rules) {
			t.Errorf("%s: rules differ from %s:\n%+v\nwant\n%+v", rendered, file, gotRole.Rules, want.Rules)
		}
	}
}

func clusterRoleIn(t *testing.T, file string) rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(b), "\n---") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err == nil && r.Kind == "ClusterRole" {
			return r
		}
	}
	t.Fatalf("no ClusterRole in %s", file)
	return rbacv1.ClusterRole{}
}

// chartValues: every value of the chart outside the processes' settings, a
// non-default value and where it must show in the rendered manifests (the JSON of the
// document kind/name contains want; want "" with absent: the document is not rendered).
var chartValues = map[string]struct {
	value      any
	kind, name string
	want       string
	absent     bool
	also       map[string]any
}{
	"image.repository":                       {value: "r.example.com/b", kind: "Deployment", name: "rel-provider", want: `"image":"r.example.com/b:0.1.0"`},
	"image.tag":                              {value: "1.2.3", kind: "Deployment", name: "rel-hostname-operator", want: `"image":"registry.example.com/berth:1.2.3"`},
	"image.pullPolicy":                       {value: "Always", kind: "Deployment", name: "rel-provider", want: `"imagePullPolicy":"Always"`},
	"imagePullSecrets":                       {value: []any{map[string]any{"name": "regcred"}}, kind: "Deployment", name: "rel-inventory-operator", want: `"imagePullSecrets":[{"name":"regcred"}]`},
	"owner.address":                          {value: "akash1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", kind: "ConfigMap", name: "rel-hostname-operator", want: `akash1zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz`},
	"owner.chainID":                          {value: "other-1", kind: "ConfigMap", name: "rel-hostname-operator", want: `other-1`},
	"podSecurityContext":                     {value: map[string]any{"runAsUser": 1234}, kind: "Deployment", name: "rel-provider", want: `"runAsUser":1234`},
	"securityContext":                        {value: map[string]any{"privileged": false}, kind: "Deployment", name: "rel-ip-operator", want: `"privileged":false`, also: map[string]any{"operators": map[string]any{"ip": map[string]any{"enabled": true, "settings": map[string]any{"pool": "p"}}}}},
	"provider.enabled":                       {value: false, kind: "Deployment", name: "rel-provider", absent: true},
	"provider.key.existingSecret":            {value: "my-key", kind: "Deployment", name: "rel-provider", want: `"secretName":"my-key"`},
	"provider.key.json":                      {value: `{"k":"v"}`, kind: "Secret", name: "rel-provider-key", want: `"provider.json":"eyJrIjoidiJ9"`},
	"provider.persistence.size":              {value: "5Gi", kind: "PersistentVolumeClaim", name: "rel-provider-home", want: `"storage":"5Gi"`},
	"provider.persistence.storageClass":      {value: "fast", kind: "PersistentVolumeClaim", name: "rel-provider-home", want: `"storageClassName":"fast"`},
	"provider.persistence.existingClaim":     {value: "home-2", kind: "Deployment", name: "rel-provider", want: `"claimName":"home-2"`},
	"provider.service.type":                  {value: "NodePort", kind: "Service", name: "rel-gateway", want: `"type":"NodePort"`},
	"provider.service.annotations":           {value: map[string]any{"a": "b"}, kind: "Service", name: "rel-gateway", want: `"annotations":{"a":"b"}`},
	"provider.service.nodePorts.gateway":     {value: 31443, kind: "Service", name: "rel-gateway", want: `"nodePort":31443`},
	"provider.service.nodePorts.grpc":        {value: 31444, kind: "Service", name: "rel-gateway", want: `"nodePort":31444`},
	"provider.metrics.port":                  {value: 9999, kind: "Deployment", name: "rel-provider", want: `"--metrics-listen","0.0.0.0:9999"`},
	"provider.resources":                     {value: map[string]any{"limits": map[string]any{"memory": "3Gi"}}, kind: "Deployment", name: "rel-provider", want: `"memory":"3Gi"`},
	"provider.keyringImage":                  {value: "alpine:3", kind: "Deployment", name: "rel-provider", want: `"image":"alpine:3"`},
	"provider.podAnnotations":                {value: map[string]any{"x": "y"}, kind: "Deployment", name: "rel-provider", want: `"x":"y"`},
	"provider.nodeSelector":                  {value: map[string]any{"role": "berth"}, kind: "Deployment", name: "rel-provider", want: `"nodeSelector":{"role":"berth"}`},
	"provider.tolerations":                   {value: []any{map[string]any{"key": "k", "operator": "Exists"}}, kind: "Deployment", name: "rel-provider", want: `"tolerations":[{"key":"k","operator":"Exists"}]`},
	"provider.affinity":                      {value: map[string]any{"podAntiAffinity": map[string]any{}}, kind: "Deployment", name: "rel-provider", want: `"affinity":{"podAntiAffinity":{}}`},
	"bus.existingSecret":                     {value: "bus-url", kind: "Deployment", name: "rel-inventory-operator", want: `"name":"BERTH_BUS_REDIS","valueFrom":{"secretKeyRef":{"key":"url","name":"bus-url"}}`},
	"redis.enabled":                          {value: true, kind: "ConfigMap", name: "rel-provider", want: `redis://rel-redis.berth-system.svc:6379`},
	"redis.image":                            {value: "redis:7.2", kind: "Deployment", name: "rel-redis", want: `"image":"redis:7.2"`, also: at("redis.enabled", true)},
	"redis.resources":                        {value: map[string]any{"limits": map[string]any{"memory": "1Gi"}}, kind: "Deployment", name: "rel-redis", want: `"memory":"1Gi"`, also: at("redis.enabled", true)},
	"serviceMonitor.enabled":                 {value: true, kind: "ServiceMonitor", name: "rel", want: `"berth.dev/metrics":"true"`},
	"serviceMonitor.interval":                {value: "1m", kind: "ServiceMonitor", name: "rel", want: `"interval":"1m"`, also: at("serviceMonitor.enabled", true)},
	"serviceMonitor.labels":                  {value: map[string]any{"release": "prom"}, kind: "ServiceMonitor", name: "rel", want: `"release":"prom"`, also: at("serviceMonitor.enabled", true)},
	"grafana.dashboard.enabled":              {value: true, kind: "ConfigMap", name: "rel-dashboard", want: `\"uid\": \"berth\"`},
	"grafana.dashboard.labels":               {value: map[string]any{"dash": "yes"}, kind: "ConfigMap", name: "rel-dashboard", want: `"dash":"yes"`, also: at("grafana.dashboard.enabled", true)},
	"prometheusRule.enabled":                 {value: true, kind: "PrometheusRule", name: "rel", want: `"alert":"BerthNoBids"`},
	"prometheusRule.labels":                  {value: map[string]any{"release": "prom"}, kind: "PrometheusRule", name: "rel", want: `"release":"prom"`, also: at("prometheusRule.enabled", true)},
	"prometheusRule.noBidsFor":               {value: "2h", kind: "PrometheusRule", name: "rel", want: `berth_bid_decisions_total{result=\"bid\"}[2h]`, also: at("prometheusRule.enabled", true)},
	"prometheusRule.leaseReadyP99Seconds":    {value: 600, kind: "PrometheusRule", name: "rel", want: `[1h]))) \u003e 600`, also: at("prometheusRule.enabled", true)},
	"prometheusRule.manifestTimeoutsPerHour": {value: 3, kind: "PrometheusRule", name: "rel", want: `increase(berth_manifest_timeouts_total[1h]) \u003e 3`, also: at("prometheusRule.enabled", true)},
	"prometheusRule.ledgerBehindBlocks":      {value: 99, kind: "PrometheusRule", name: "rel", want: `berth_bidengine_height \u003e 99`, also: at("prometheusRule.enabled", true)},
	"prometheusRule.inventoryStaleSeconds":   {value: 999, kind: "PrometheusRule", name: "rel", want: `berth_inventory_operator_last_report_timestamp_seconds \u003e 999`, also: at("prometheusRule.enabled", true)},
}

// operatorValues: each operator's values outside its settings.
func operatorValues(name string) map[string]struct {
	value  any
	want   string
	absent bool
} {
	return map[string]struct {
		value  any
		want   string
		absent bool
	}{
		"enabled":        {value: name == "ip", want: `"kind":"Deployment"`, absent: name != "ip"},
		"replicas":       {value: 3, want: `"replicas":3`},
		"resources":      {value: map[string]any{"limits": map[string]any{"memory": "777Mi"}}, want: `"memory":"777Mi"`},
		"podAnnotations": {value: map[string]any{"x": "y"}, want: `"x":"y"`},
		"nodeSelector":   {value: map[string]any{"role": "ops"}, want: `"nodeSelector":{"role":"ops"}`},
		"tolerations":    {value: []any{map[string]any{"key": "k", "operator": "Exists"}}, want: `"tolerations":[{"key":"k","operator":"Exists"}]`},
		"affinity":       {value: map[string]any{"nodeAffinity": map[string]any{}}, want: `"affinity":{"nodeAffinity":{}}`},
	}
}

// TestChartValues: every value of the chart (its settings aside) changes what it
// renders where it should; values.yaml has no value the test does not know.
func TestChartValues(t *testing.T) {
	charttest.Helm(t) // skipped here when missing
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	// The values, down to the settings and to Kubernetes fields passed through.
	var known []string
	for path := range chartValues {
		known = append(known, path)
	}
	for _, name := range []string{"hostname", "ip", "inventory"} {
		for k := range operatorValues(name) {
			known = append(known, "operators."+name+"."+k)
		}
		known = append(known, "operators."+name+".settings")
	}
	known = append(known, "provider.settings")
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := strings.TrimPrefix(prefix+"."+k, ".")
			if slices.Contains(known, path) {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path, sub)
				continue
			}
			t.Errorf("values.yaml: %s has no case in the test: add one", path)
		}
	}
	walk("", values)
	// The values reference lists them all.
	ref, err := os.ReadFile("../../docs/helm-values.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range known {
		if !strings.Contains(string(ref), "`"+path+"`") {
			t.Errorf("docs/helm-values.md lacks %s (make generate)", path)
		}
	}

	check := func(what string, docs []map[string]any, kind, name, want string, absent bool) {
		t.Helper()
		d := find(docs, kind, name)
		switch {
		case absent && d != nil:
			t.Errorf("%s: %s %s still rendered", what, kind, name)
		case absent:
		case d == nil:
			t.Errorf("%s: no %s %s", what, kind, name)
		default:
			j, _ := json.Marshal(d)
			if !strings.Contains(string(j), want) {
				t.Errorf("%s: %s %s lacks %s:\n%s", what, kind, name, want, j)
			}
		}
	}
	for path, c := range chartValues {
		docs, err := render(t, at(path, c.value), c.also)
		if err != nil {
			t.Errorf("%s = %v: %v", path, c.value, err)
			continue
		}
		check(path, docs, c.kind, c.name, c.want, c.absent)
	}
	// No gateway (a provider that only bids): no gateway ports, no gateway Service.
	docs, err := render(t, at("provider.settings.gateway", map[string]any{"listen": "", "grpc_listen": ""}))
	if err != nil {
		t.Fatal(err)
	}
	check("no gateway", docs, "Service", "rel-gateway", "", true)
	check("no gateway", docs, "Deployment", "rel-provider", `"readinessProbe":{"periodSeconds":10,"tcpSocket":{"port":"metrics"}}`, false)
	for _, name := range []string{"hostname", "ip", "inventory"} {
		for k, c := range operatorValues(name) {
			o := map[string]any{k: c.value}
			if name == "ip" {
				o["settings"] = map[string]any{"pool": "p"}
				if k != "enabled" {
					o["enabled"] = true
				}
			}
			docs, err := render(t, map[string]any{"operators": map[string]any{name: o}})
			if err != nil {
				t.Errorf("operators.%s.%s: %v", name, k, err)
				continue
			}
			check("operators."+name+"."+k, docs, "Deployment", "rel-"+name+"-operator", c.want, c.absent)
		}
	}
}

// TestChartLint: helm lint --strict finds nothing to say of the chart, with the
// required values and with everything optional turned on.
func TestChartLint(t *testing.T) {
	helm := charttest.Helm(t)
	for _, values := range []map[string]any{{}, {
		"redis": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true},
		"grafana": map[string]any{"dashboard": map[string]any{"enabled": true}}, "prometheusRule": map[string]any{"enabled": true},
		"operators": map[string]any{"ip": map[string]any{"enabled": true, "settings": map[string]any{"pool": "leased-ips"}}},
	}} {
		cmd := exec.CommandContext(t.Context(), helm, "lint", "--strict", chartDir, "--values", charttest.ValuesFile(t, values))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm lint --strict: %v\n%s", err, out)
		}
	}
}
