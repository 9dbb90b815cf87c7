package app

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/deploy"
)

// TestLeaseReadyClock: a lease's time to first ready is measured once, from its first
// manifest; a lease rebuilt at start (no first manifest here) is not measured; a lease
// gone is forgotten.
func TestLeaseReadyClock(t *testing.T) {
	a := market.LeaseID{Owner: "a", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "p"}
	rebuilt := market.LeaseID{Owner: "b", DSeq: 1, GSeq: 1, OSeq: 1, Provider: "p"}
	accepted := time.Now().Add(-3 * time.Second)
	c := newLeaseReadyClock(func(id market.LeaseID) (time.Time, bool) { return accepted, id == a })
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.hist)
	samples := func() (uint64, float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("gather: %v %v", mfs, err)
		}
		h := mfs[0].GetMetric()[0].GetHistogram()
		return h.GetSampleCount(), h.GetSampleSum()
	}
	svc := []deploy.ServiceStatus{{}}
	c.observe(deploy.LeaseStatus{Lease: a, Services: svc, Ready: false})
	c.observe(deploy.LeaseStatus{Lease: rebuilt, Services: svc, Ready: true})
	if n, _ := samples(); n != 0 {
		t.Fatalf("%d observations before a measured lease was ready", n)
	}
	c.observe(deploy.LeaseStatus{Lease: a, Services: svc, Ready: true})
	c.observe(deploy.LeaseStatus{Lease: a, Services: svc, Ready: true}) // again: measured once
	if n, sum := samples(); n != 1 || sum < 3 || sum > 60 {
		t.Fatalf("%d observations summing %.1fs, want 1 of about 3 s", n, sum)
	}
	c.observe(deploy.LeaseStatus{Lease: a}) // gone
	if len(c.done) != 0 {
		t.Fatalf("a lease gone is still remembered: %v", c.done)
	}
}
