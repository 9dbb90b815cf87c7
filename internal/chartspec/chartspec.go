// Package chartspec is what berth's Helm chart (charts/berth) takes from the code: each
// process's settings at the binary's defaults (values.yaml) and the JSON schema of the
// chart's values (values.schema.json), the settings' part derived from their Go types
// so that it names exactly the keys the binary reads. hack/chartgen writes both files
// (make generate); the chart's tests check them.
package chartspec

import (
	"encoding"
	"reflect"
	"strings"
	"time"

	"berth.dev/berth/internal/config"
	"berth.dev/berth/internal/operator/hostname"
	inventoryop "berth.dev/berth/internal/operator/inventory"
	"berth.dev/berth/internal/operator/ip"
)

// Home is where the chart mounts the provider's home volume.
const Home = "/var/lib/berth"

// Defaults are the settings of each process the chart runs, by the name the chart's
// values give them (provider.settings, operators.NAME.settings): the binary's
// defaults, but for what the chart decides (the home on its volume, listening on the
// pod's address for the Services and probes).
func Defaults() map[string]any {
	p := config.DefaultProviderConfig()
	p.Home = Home
	h := hostname.DefaultConfig()
	h.Listen = "0.0.0.0:8085"
	i := ip.DefaultConfig()
	i.Listen = "0.0.0.0:8086"
	v := inventoryop.DefaultConfig()
	v.Listen = "0.0.0.0:8087"
	return map[string]any{"provider": p, "hostname": h, "ip": i, "inventory": v}
}

// Settings is the JSON schema of a settings type: every struct an object of exactly
// its yaml keys (additionalProperties false), maps objects of their values' schema,
// lists arrays; scalars are also accepted as strings (the binary reads "100" and 100
// alike), durations are strings, and a type that reads its own text (a size) is a
// string or a number unless it gives its schema (SettingSchema).
func Settings(v any) map[string]any { return schemaOf(reflect.TypeOf(v)) }

func schemaOf(t reflect.Type) map[string]any {
	if t == reflect.TypeFor[time.Duration]() {
		return map[string]any{"type": "string", "description": "a Go duration (30s, 5m, 1h30m)"}
	}
	if s, ok := reflect.Zero(t).Interface().(interface{ SettingSchema() map[string]any }); ok && t.Kind() != reflect.Pointer {
		return s.SettingSchema() // a type that says what its text may be
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		// Read by its UnmarshalText from the scalar's text: 4 as "4".
		return map[string]any{"type": []string{"string", "number"}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := schemaOf(t.Elem())
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	case reflect.Map:
		return map[string]any{"type": []string{"object", "null"}, "additionalProperties": schemaOf(t.Elem())}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": []string{"array", "null"}, "items": schemaOf(t.Elem())}
	case reflect.String:
		return map[string]any{"type": []string{"string", "number", "boolean"}}
	case reflect.Bool:
		return map[string]any{"type": []string{"boolean", "string"}}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": []string{"integer", "string"}}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": []string{"number", "string"}}
	}
	return map[string]any{}
}

// object is the schema of an object with exactly props.
func object(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

var (
	str     = map[string]any{"type": "string"}
	boolean = map[string]any{"type": "boolean"}
	port    = map[string]any{"type": "integer", "minimum": 1, "maximum": 65535}
	// nodePort is a Service's node port, 0 for one the cluster picks.
	nodePort = map[string]any{"type": "integer", "minimum": 0, "maximum": 65535}
	// anyObject and anyList are Kubernetes fields passed through as they are
	// (resources, affinity, …): the API server checks them.
	anyObject = map[string]any{"type": "object"}
	anyList   = map[string]any{"type": "array"}
)

// pod are the values every process's pod takes.
func pod(props map[string]any) map[string]any {
	for k, v := range map[string]any{"resources": anyObject, "podAnnotations": anyObject, "nodeSelector": anyObject, "tolerations": anyList, "affinity": anyObject} {
		props[k] = v
	}
	return object(props)
}

// Schema is values.schema.json: the chart's values, each process's settings from its
// configuration type.
func Schema() map[string]any {
	d := Defaults()
	operator := func(name string) map[string]any {
		return pod(map[string]any{"enabled": boolean, "replicas": map[string]any{"type": "integer", "minimum": 1}, "settings": Settings(d[name])})
	}
	s := object(map[string]any{
		"image": object(map[string]any{"repository": str, "tag": str,
			"pullPolicy": map[string]any{"enum": []string{"Always", "IfNotPresent", "Never"}}}),
		"imagePullSecrets":   anyList,
		"owner":              object(map[string]any{"address": str, "chainID": str}),
		"podSecurityContext": anyObject,
		"securityContext":    anyObject,
		"provider": pod(map[string]any{
			"enabled":     boolean,
			"key":         object(map[string]any{"existingSecret": str, "json": str}),
			"settings":    Settings(d["provider"]),
			"persistence": object(map[string]any{"size": str, "storageClass": str, "existingClaim": str}),
			"service": object(map[string]any{"type": map[string]any{"enum": []string{"ClusterIP", "NodePort", "LoadBalancer"}}, "annotations": anyObject,
				"nodePorts": object(map[string]any{"gateway": nodePort, "grpc": nodePort})}),
			"metrics":      object(map[string]any{"port": port}),
			"keyringImage": str,
		}),
		"operators":      object(map[string]any{"hostname": operator("hostname"), "ip": operator("ip"), "inventory": operator("inventory")}),
		"bus":            object(map[string]any{"existingSecret": str}),
		"redis":          object(map[string]any{"enabled": boolean, "image": str, "resources": anyObject}),
		"serviceMonitor": object(map[string]any{"enabled": boolean, "interval": str, "labels": anyObject}),
		"grafana":        object(map[string]any{"dashboard": object(map[string]any{"enabled": boolean, "labels": anyObject})}),
		"prometheusRule": object(map[string]any{"enabled": boolean, "labels": anyObject,
			"noBidsFor":               map[string]any{"type": "string", "pattern": "^[0-9]+[smhd]$"},
			"leaseReadyP99Seconds":    map[string]any{"type": "number", "exclusiveMinimum": 0},
			"manifestTimeoutsPerHour": map[string]any{"type": "number", "minimum": 0},
			"ledgerBehindBlocks":      map[string]any{"type": "integer", "minimum": 1},
			"inventoryStaleSeconds":   map[string]any{"type": "number", "exclusiveMinimum": 0}}),
	})
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	s["title"] = "berth chart values"
	return s
}
