package status

import (
	"encoding/json"
	"testing"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/cluster"
	"berth.dev/berth/internal/gpu"
)

// TestInventoryPerReservation: /status lists one entry per reservation, active and
// pending apart, with persistent storage by class, in Akash's field names; nodes with
// GPUs name their model, storage classes their total, and the leased IP pool its size.
func TestInventoryPerReservation(t *testing.T) {
	const gi = int64(1) << 30
	order := func(n uint64) market.OrderID { return market.OrderID{Owner: "akash1t", DSeq: n, GSeq: 1, OSeq: 1} }
	snap := cluster.Snapshot{
		Reservations: []cluster.ReservationSnapshot{
			{Order: order(1), Active: true, Total: cluster.Amounts{CPU: 1000, Memory: gi, EphemeralStorage: gi, Pods: 1}},
			{Order: order(2), Active: true, Total: cluster.Amounts{CPU: 2000, Memory: 2 * gi, GPUs: 1, Pods: 2}, Storage: map[string]int64{"beta3": 10 * gi}},
			{Order: order(3), Active: false, Total: cluster.Amounts{CPU: 500, Memory: gi / 2, Pods: 1}, Storage: map[string]int64{"beta2": gi, "beta3": 2 * gi}},
		},
		Nodes: []cluster.NodeSnapshot{
			{Name: "n1", Allocatable: cluster.Amounts{CPU: 8000}, Available: cluster.Amounts{CPU: 4500}, Schedulable: true},
			{Name: "g1", Allocatable: cluster.Amounts{CPU: 32000, GPUs: 4}, Available: cluster.Amounts{CPU: 30000, GPUs: 3}, Schedulable: true,
				GPU: gpu.Model{Vendor: "nvidia", Model: "a100", RAM: "80Gi", Interface: "sxm"}},
		},
		Pools: []cluster.PoolSnapshot{{Name: cluster.StoragePool("beta3"), Capacity: 100 * gi, Used: 12 * gi}, {Name: cluster.PoolLeasedIPs, Capacity: 4, Used: 1}, {Name: cluster.PoolNodePorts, Capacity: 2768}},
	}
	b, err := json.Marshal(inventoryOf(snap))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"active":[` +
		`{"cpu":1000,"gpu":0,"memory":1073741824,"storage_ephemeral":1073741824},` +
		`{"cpu":2000,"gpu":1,"memory":2147483648,"storage_ephemeral":0,"storage":{"beta3":10737418240}}],` +
		`"pending":[{"cpu":500,"gpu":0,"memory":536870912,"storage_ephemeral":0,"storage":{"beta2":1073741824,"beta3":2147483648}}],` +
		`"available":{"nodes":[{"name":"n1","allocatable":{"cpu":8000,"gpu":0,"memory":0,"storage_ephemeral":0},"available":{"cpu":4500,"gpu":0,"memory":0,"storage_ephemeral":0}},` +
		`{"name":"g1","allocatable":{"cpu":32000,"gpu":4,"memory":0,"storage_ephemeral":0},"available":{"cpu":30000,"gpu":3,"memory":0,"storage_ephemeral":0},` +
		`"gpu_model":{"vendor":"nvidia","model":"a100","ram":"80Gi","interface":"sxm"}}],` +
		`"storage":[{"class":"beta3","size":94489280512,"allocatable":107374182400}],"leased_ips":{"total":4,"available":3}}}`
	if string(b) != want {
		t.Fatalf("inventory\n%s\nwant\n%s", b, want)
	}
	// The entry's storage is the inventory's own copy.
	inv := inventoryOf(snap)
	inv.Active[1].Storage["beta3"] = 0
	if snap.Reservations[1].Storage["beta3"] != 10*gi {
		t.Error("the status shares its storage map with the snapshot")
	}
}
