package status

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestBoardPublishesChangesOnly(t *testing.T) {
	b := NewBoard(Status{Address: "akash1p", Timestamp: time.Now()})
	_, _, changed := b.Get()
	// A new timestamp alone is not a change: watchers are not woken.
	if b.Publish(Status{Address: "akash1p", Timestamp: time.Now().Add(time.Second)}) {
		t.Fatal("a timestamp alone counted as a change")
	}
	select {
	case <-changed:
		t.Fatal("watchers woken without a change")
	default:
	}
	next := Status{Address: "akash1p", Cluster: Cluster{Leases: 3}, Timestamp: time.Now()}
	if !b.Publish(next) {
		t.Fatal("a change was not published")
	}
	select {
	case <-changed:
	default:
		t.Fatal("watchers not woken by a change")
	}
	s, data, again := b.Get()
	if s.Cluster.Leases != 3 || again == changed {
		t.Fatalf("after the change: %+v", s)
	}
	var decoded Status
	if err := json.Unmarshal(b.StatusJSON(), &decoded); err != nil || decoded.Cluster.Leases != 3 || !bytes.Equal(data, b.StatusJSON()) {
		t.Fatalf("JSON %s: %v", data, err)
	}
}
