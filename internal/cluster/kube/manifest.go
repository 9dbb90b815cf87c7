package kube

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"berth.dev/berth/api/market/v1"
	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/deploy"
	"berth.dev/berth/internal/ownership"
)

// ManifestName is the name of a lease's Manifest resource (in the lease's namespace).
const ManifestName = "lease"

// NewManifest is the Manifest resource recording what a lease runs. Registry passwords
// are left out (the lease's pull Secrets hold them).
func NewManifest(id market.LeaseID, owner ownership.Owner, version []byte, group market.ManifestGroup, routes deploy.Routes) (*berthv1.Manifest, error) {
	clean := group
	clean.Services = slices.Clone(group.Services)
	for i := range clean.Services {
		if c := clean.Services[i].Credentials; c != nil {
			without := *c
			without.Password = ""
			clean.Services[i].Credentials = &without
		}
	}
	raw, err := json.Marshal(clean)
	if err != nil {
		return nil, fmt.Errorf("manifest of lease %s: %w", id, err)
	}
	return &berthv1.Manifest{
		TypeMeta:   metav1.TypeMeta{APIVersion: berthv1.GroupVersion.String(), Kind: "Manifest"},
		ObjectMeta: metav1.ObjectMeta{Name: ManifestName, Namespace: LeaseNamespace(id), Labels: owner.LeaseLabels(id)},
		Spec: berthv1.ManifestSpec{
			Lease: berthv1.LeaseRef{
				Owner: id.Owner, DSeq: strconv.FormatUint(id.DSeq, 10),
				GSeq: int64(id.GSeq), OSeq: int64(id.OSeq), Provider: id.Provider,
			},
			Version: hex.EncodeToString(version),
			Group:   runtime.RawExtension{Raw: raw},
			Routes:  manifestRoutes(routes),
		},
	}, nil
}

func manifestRoutes(r deploy.Routes) *berthv1.ManifestRoutes {
	if len(r.Hosts) == 0 && len(r.IPs) == 0 {
		return nil
	}
	out := &berthv1.ManifestRoutes{Hosts: slices.Clone(r.Hosts)}
	for _, p := range r.IPs {
		out.LeasedIPs = append(out.LeasedIPs, berthv1.LeasedIPRoute{Endpoint: p.Endpoint, Port: int32(min(p.Port, 65535)), Protocol: p.Proto})
	}
	return out
}

// ManifestRoutes reads back the routes a Manifest resource records.
func ManifestRoutes(m *berthv1.Manifest) deploy.Routes {
	if m.Spec.Routes == nil {
		return deploy.Routes{}
	}
	r := deploy.Routes{Hosts: slices.Clone(m.Spec.Routes.Hosts)}
	for _, p := range m.Spec.Routes.LeasedIPs {
		r.IPs = append(r.IPs, deploy.IPPort{Endpoint: p.Endpoint, Port: uint32(max(p.Port, 0)), Proto: p.Protocol})
	}
	return r
}

// ManifestLease reads a Manifest resource back: the lease, the version and the group
// (without registry passwords).
func ManifestLease(m *berthv1.Manifest) (market.LeaseID, []byte, market.ManifestGroup, error) {
	l := m.Spec.Lease
	dseq, err := strconv.ParseUint(l.DSeq, 10, 64)
	if err != nil || l.GSeq < 1 || l.GSeq > 1<<32-1 || l.OSeq < 1 || l.OSeq > 1<<32-1 || l.Owner == "" || l.Provider == "" {
		return market.LeaseID{}, nil, market.ManifestGroup{}, fmt.Errorf("manifest %s/%s: invalid lease %+v", m.Namespace, m.Name, l)
	}
	id := market.LeaseID{Owner: l.Owner, DSeq: dseq, GSeq: uint32(l.GSeq), OSeq: uint32(l.OSeq), Provider: l.Provider}
	version, err := hex.DecodeString(m.Spec.Version)
	if err != nil || len(version) != 32 {
		return id, nil, market.ManifestGroup{}, fmt.Errorf("manifest of lease %s: version %q is not 64 hex digits", id, m.Spec.Version)
	}
	var g market.ManifestGroup
	if err := json.Unmarshal(m.Spec.Group.Raw, &g); err != nil {
		return id, nil, g, fmt.Errorf("manifest of lease %s: group: %w", id, err)
	}
	return id, version, g, nil
}
