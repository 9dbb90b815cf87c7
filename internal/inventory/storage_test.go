package inventory_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	berthv1 "berth.dev/berth/api/v1"
	"berth.dev/berth/internal/inventory"
	"berth.dev/berth/internal/ownership"
)

const (
	gib = int64(1) << 30
	tib = int64(1) << 40
)

var (
	ownerA = ownership.Owner{Provider: "akash1aaa", ChainID: "akashnet-2"}
	ownerB = ownership.Owner{Provider: "akash1aaa", ChainID: "sandbox-01"}
	ownerZ = ownership.Owner{Provider: "akash1zzz", ChainID: "akashnet-2"}
)

func owner(o ownership.Owner) *ownership.Owner { return &o }

func TestStorageClassValidate(t *testing.T) {
	const where = "storage[2]"
	tests := []struct {
		name string
		sc   inventory.StorageClass
		want []string // nil for valid, else fragments of the error
	}{
		{name: "csi", sc: inventory.StorageClass{Class: "ebs-gp3", Source: inventory.SourceCSI}},
		{name: "local size", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "2Ti"}},
		{name: "local size per node", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, SizePerNode: "500Gi"}},
		{name: "local size in bytes", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "1000000000000"}},
		{name: "ceph size", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, Size: "10Ti"}},
		{name: "ceph cluster", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/rook-ceph"}},
		{name: "ceph cluster, 2 replicas", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/my.cluster", Replicas: 2}},
		{name: "ceph cluster, 10 replicas", sc: inventory.StorageClass{Class: "ceph.rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/rook-ceph", Replicas: 10}},

		{name: "no class", sc: inventory.StorageClass{Source: inventory.SourceCSI}, want: []string{where + ".class"}},
		{name: "class not a name", sc: inventory.StorageClass{Class: "Local_Path", Source: inventory.SourceCSI}, want: []string{where + `.class "Local_Path"`}},
		{name: "class too long", sc: inventory.StorageClass{Class: strings.Repeat("a", 254), Source: inventory.SourceCSI}, want: []string{where + ".class"}},
		{name: "no source", sc: inventory.StorageClass{Class: "local-path", Size: "1Ti"}, want: []string{where + `.source ""`, "csi, local or ceph"}},
		{name: "unknown source", sc: inventory.StorageClass{Class: "nfs", Source: "nfs", Size: "1Ti"}, want: []string{where + `.source "nfs"`}},
		{name: "size not a quantity", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "two terabytes"}, want: []string{where + `.size "two terabytes"`}},
		{name: "size negative", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "-1Ti"}, want: []string{where + ".size", "positive"}},
		{name: "size zero", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "0"}, want: []string{where + ".size"}},
		{name: "size per node not a quantity", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, SizePerNode: "1TB!"}, want: []string{where + ".size_per_node"}},
		{name: "size per node zero", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, SizePerNode: "0Gi"}, want: []string{where + ".size_per_node"}},
		{name: "csi with a size", sc: inventory.StorageClass{Class: "ebs", Source: inventory.SourceCSI, Size: "1Ti"}, want: []string{where + ":", "source csi", "size"}},
		{name: "csi with a size per node", sc: inventory.StorageClass{Class: "ebs", Source: inventory.SourceCSI, SizePerNode: "1Ti"}, want: []string{where + ":", "size_per_node"}},
		{name: "csi with a ceph cluster", sc: inventory.StorageClass{Class: "ebs", Source: inventory.SourceCSI, CephCluster: "a/b"}, want: []string{where + ":", "ceph_cluster"}},
		{name: "local without size", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal}, want: []string{where + ":", "size or size_per_node"}},
		{name: "local with both sizes", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "1Ti", SizePerNode: "1Ti"}, want: []string{where + ":", "size or size_per_node"}},
		{name: "local with a ceph cluster", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "1Ti", CephCluster: "a/b"}, want: []string{where + ".ceph_cluster"}},
		{name: "ceph with a size per node", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, SizePerNode: "1Ti"}, want: []string{where + ".size_per_node"}},
		{name: "ceph without size nor cluster", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph}, want: []string{where + ":", "size or ceph_cluster"}},
		{name: "ceph with size and cluster", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, Size: "1Ti", CephCluster: "a/b"}, want: []string{where + ":", "size or ceph_cluster"}},
		{name: "ceph cluster without namespace", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph"}, want: []string{where + `.ceph_cluster "rook-ceph"`, "NAMESPACE/NAME"}},
		{name: "ceph cluster, empty namespace", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "/rook-ceph"}, want: []string{where + ".ceph_cluster"}},
		{name: "ceph cluster, empty name", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/"}, want: []string{where + ".ceph_cluster"}},
		{name: "ceph cluster, namespace with a dot", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook.ceph/x"}, want: []string{where + ".ceph_cluster"}},
		{name: "ceph cluster in capitals", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "Rook/Ceph"}, want: []string{where + ".ceph_cluster"}},
		{name: "ceph, negative replicas", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/rook-ceph", Replicas: -1}, want: []string{where + ".replicas -1"}},
		{name: "ceph, 11 replicas", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, Size: "1Ti", Replicas: 11}, want: []string{where + ".replicas 11"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sc.Validate(where)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error with %q, got none", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// checkStorage compares a report with what is wanted, quantities by value.
func checkStorage(t *testing.T, got berthv1.InventoryStorage, class, source string, capacity, used int64, leases map[ownership.Owner]int64, msg []string) {
	t.Helper()
	if got.Class != class || got.Source != source {
		t.Errorf("class %q source %q, want %q %q", got.Class, got.Source, class, source)
	}
	if got.Capacity.Value() != capacity {
		t.Errorf("capacity %s (%d), want %d", got.Capacity.String(), got.Capacity.Value(), capacity)
	}
	if got.Used.Value() != used {
		t.Errorf("used %s, want %d", got.Used.String(), used)
	}
	if len(got.Leases) != len(leases) {
		t.Errorf("leases %+v, want %v", got.Leases, leases)
	}
	for _, l := range got.Leases {
		if want, ok := leases[ownership.Owner{Provider: l.Provider, ChainID: l.ChainID}]; !ok || l.Used.Value() != want {
			t.Errorf("lease %s/%s uses %s, want %d", l.Provider, l.ChainID, l.Used.String(), want)
		}
	}
	if !slices.IsSortedFunc(got.Leases, func(a, b berthv1.InventoryOwnerStorage) int {
		return strings.Compare(a.Provider+"/"+a.ChainID, b.Provider+"/"+b.ChainID)
	}) {
		t.Errorf("leases not sorted: %+v", got.Leases)
	}
	if len(msg) == 0 && got.Message != "" {
		t.Errorf("want no message, got %q", got.Message)
	}
	for _, m := range msg {
		if !strings.Contains(got.Message, m) {
			t.Errorf("message %q does not mention %q", got.Message, m)
		}
	}
}

func TestStorageCSI(t *testing.T) {
	sc := inventory.StorageClass{Class: "ebs", Source: inventory.SourceCSI}
	schedulable := []string{"a", "b", "c", "d", "e"}
	in := inventory.StorageInput{
		Claims: []inventory.Claim{
			{Class: "ebs", Size: 10 * gib, Owner: owner(ownerA)},
			{Class: "ebs", Size: 5 * gib},
			{Class: "other", Size: 100 * gib, Owner: owner(ownerA)},
		},
		CSI: []inventory.CSICapacity{
			{Class: "ebs", Capacity: 100 * gib, Nodes: []string{"a", "b"}},
			{Class: "ebs", Capacity: 50 * gib, Nodes: []string{"c", "x"}}, // x takes no workloads
			{Class: "ebs", Capacity: -1, Nodes: []string{"d"}},            // a driver's nonsense counts as none
			{Class: "other", Capacity: tib, Nodes: []string{"e"}},
		},
		Schedulable: slices.Clone(schedulable),
	}
	got, nodes := inventory.Storage(sc, in)
	checkStorage(t, got, "ebs", inventory.SourceCSI, 150*gib+15*gib, 15*gib, map[ownership.Owner]int64{ownerA: 10 * gib}, nil)
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(nodes, want) {
		t.Errorf("nodes %q, want %q", nodes, want)
	}
	if !slices.Equal(in.Schedulable, schedulable) {
		t.Errorf("Storage changed the schedulable nodes: %q", in.Schedulable)
	}

	t.Run("no CSIStorageCapacity", func(t *testing.T) {
		in := inventory.StorageInput{
			Claims:      []inventory.Claim{{Class: "ebs", Size: 10 * gib, Owner: owner(ownerA)}},
			CSI:         []inventory.CSICapacity{{Class: "other", Capacity: tib, Nodes: []string{"a"}}},
			Schedulable: []string{"a", "b"},
		}
		got, nodes := inventory.Storage(sc, in)
		checkStorage(t, got, "ebs", inventory.SourceCSI, 10*gib, 10*gib, map[ownership.Owner]int64{ownerA: 10 * gib}, []string{"CSIStorageCapacity", "ebs", "storageCapacity"})
		if len(nodes) != 0 {
			t.Errorf("nodes %q, want none", nodes)
		}
	})
	t.Run("nothing at all", func(t *testing.T) {
		got, nodes := inventory.Storage(sc, inventory.StorageInput{})
		checkStorage(t, got, "ebs", inventory.SourceCSI, 0, 0, nil, []string{"CSIStorageCapacity"})
		if len(nodes) != 0 || got.Leases != nil {
			t.Errorf("nodes %q, leases %v", nodes, got.Leases)
		}
	})
	t.Run("full", func(t *testing.T) {
		in := inventory.StorageInput{
			Claims:      []inventory.Claim{{Class: "ebs", Size: 100 * gib}},
			CSI:         []inventory.CSICapacity{{Class: "ebs", Capacity: 0, Nodes: []string{"a"}}},
			Schedulable: []string{"a"},
		}
		got, nodes := inventory.Storage(sc, in)
		checkStorage(t, got, "ebs", inventory.SourceCSI, 100*gib, 100*gib, nil, nil)
		if !slices.Equal(nodes, []string{"a"}) {
			t.Errorf("nodes %q", nodes)
		}
	})
}

func TestStorageLocal(t *testing.T) {
	claims := []inventory.Claim{
		{Class: "local-path", Size: 100 * gib, Owner: owner(ownerA)},
		{Class: "local-path", Size: 50 * gib},
		{Class: "ceph-rbd", Size: 10 * tib},
	}
	tests := []struct {
		name        string
		sc          inventory.StorageClass
		schedulable []string
		capacity    int64
		msg         []string
	}{
		{name: "size", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "2Ti"}, schedulable: []string{"a", "b"}, capacity: 2 * tib},
		{name: "size in bytes", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "1e12"}, schedulable: []string{"a"}, capacity: 1e12},
		{name: "size per node", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, SizePerNode: "500Gi"}, schedulable: []string{"a", "b", "c"}, capacity: 1500 * gib},
		{
			name: "size per node, no schedulable node", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, SizePerNode: "500Gi"},
			capacity: 0, msg: []string{"bound claims hold 150Gi, more than the class's size 0"},
		},
		{
			name: "claims over the size", sc: inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "100Gi"}, schedulable: []string{"a"},
			capacity: 100 * gib, msg: []string{"150Gi", "100Gi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sc.Validate("storage[0]"); err != nil {
				t.Fatal(err)
			}
			got, nodes := inventory.Storage(tt.sc, inventory.StorageInput{Claims: claims, Schedulable: tt.schedulable})
			checkStorage(t, got, "local-path", inventory.SourceLocal, tt.capacity, 150*gib, map[ownership.Owner]int64{ownerA: 100 * gib}, tt.msg)
			if !slices.Equal(nodes, tt.schedulable) {
				t.Errorf("nodes %q, want %q", nodes, tt.schedulable)
			}
		})
	}
}

func TestStorageCeph(t *testing.T) {
	const cluster1 = "rook-ceph/rook-ceph"
	claims := []inventory.Claim{
		{Class: "ceph-rbd", Size: 100 * gib, Owner: owner(ownerZ)},
		{Class: "ceph-rbd", Size: 24 * gib, Owner: owner(ownerA)},
		{Class: "local-path", Size: 10 * tib},
	}
	leases := map[ownership.Owner]int64{ownerZ: 100 * gib, ownerA: 24 * gib}
	ceph := map[string]inventory.CephCapacity{
		cluster1:             {Available: 3 * tib, Reported: true},
		"rook-ceph/new":      {},
		"rook-ceph/negative": {Available: -5, Reported: true},
	}
	tests := []struct {
		name     string
		sc       inventory.StorageClass
		capacity int64
		msg      []string
	}{
		{name: "size", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, Size: "10Ti"}, capacity: 10 * tib},
		{name: "cluster, 3 replicas by default", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: cluster1}, capacity: tib + 124*gib},
		{name: "cluster, 3 replicas", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: cluster1, Replicas: 3}, capacity: tib + 124*gib},
		{name: "cluster, 2 replicas", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: cluster1, Replicas: 2}, capacity: 3*tib/2 + 124*gib},
		{name: "cluster, 1 replica", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: cluster1, Replicas: 1}, capacity: 3*tib + 124*gib},
		{
			name: "cluster missing", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/missing"},
			capacity: 124 * gib, msg: []string{"CephCluster rook-ceph/missing not found"},
		},
		{
			name: "cluster reports nothing yet", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/new"},
			capacity: 124 * gib, msg: []string{"CephCluster rook-ceph/new reports no capacity yet"},
		},
		{name: "cluster reports nonsense", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, CephCluster: "rook-ceph/negative"}, capacity: 124 * gib},
		{
			name: "claims over the size", sc: inventory.StorageClass{Class: "ceph-rbd", Source: inventory.SourceCeph, Size: "100Gi"},
			capacity: 100 * gib, msg: []string{"bound claims hold 124Gi, more than the class's size 100Gi"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sc.Validate("storage[0]"); err != nil {
				t.Fatal(err)
			}
			schedulable := []string{"a", "b"}
			got, nodes := inventory.Storage(tt.sc, inventory.StorageInput{Claims: claims, Ceph: ceph, Schedulable: schedulable})
			checkStorage(t, got, "ceph-rbd", inventory.SourceCeph, tt.capacity, 124*gib, leases, tt.msg)
			if !slices.Equal(nodes, schedulable) {
				t.Errorf("nodes %q, want %q", nodes, schedulable)
			}
		})
	}
}

func TestStorageLeasesSorted(t *testing.T) {
	sc := inventory.StorageClass{Class: "local-path", Source: inventory.SourceLocal, Size: "10Ti"}
	in := inventory.StorageInput{Claims: []inventory.Claim{
		{Class: "local-path", Size: 1 * gib, Owner: owner(ownerZ)},
		{Class: "local-path", Size: 2 * gib, Owner: owner(ownerB)},
		{Class: "local-path", Size: 4 * gib, Owner: owner(ownerA)},
		{Class: "local-path", Size: 8 * gib, Owner: owner(ownerZ)},
		{Class: "local-path", Size: 16 * gib},
		{Class: "other", Size: 32 * gib, Owner: owner(ownerA)},
	}}
	got, _ := inventory.Storage(sc, in)
	var order []ownership.Owner
	for _, l := range got.Leases {
		order = append(order, ownership.Owner{Provider: l.Provider, ChainID: l.ChainID})
	}
	if want := []ownership.Owner{ownerA, ownerB, ownerZ}; !reflect.DeepEqual(order, want) {
		t.Fatalf("leases in the order %v, want %v", order, want)
	}
	checkStorage(t, got, "local-path", inventory.SourceLocal, 10*tib, 31*gib, map[ownership.Owner]int64{ownerA: 4 * gib, ownerB: 2 * gib, ownerZ: 9 * gib}, nil)
	if inventory.OthersStorage(got, ownerZ) != 22*gib {
		t.Errorf("others than %v hold %d", ownerZ, inventory.OthersStorage(got, ownerZ))
	}
}

func TestOthersStorage(t *testing.T) {
	s := berthv1.InventoryStorage{
		Class: "ceph-rbd", Source: inventory.SourceCeph,
		Capacity: *resource.NewQuantity(tib, resource.BinarySI),
		Used:     *resource.NewQuantity(100*gib, resource.BinarySI),
		Leases: []berthv1.InventoryOwnerStorage{
			{Provider: ownerA.Provider, ChainID: ownerA.ChainID, Used: *resource.NewQuantity(30*gib, resource.BinarySI)},
			{Provider: ownerB.Provider, ChainID: ownerB.ChainID, Used: *resource.NewQuantity(50*gib, resource.BinarySI)},
		},
	}
	for _, tt := range []struct {
		owner ownership.Owner
		want  int64
	}{
		{ownerA, 70 * gib},
		{ownerB, 50 * gib},
		{ownerZ, 100 * gib},
		{ownership.Owner{Provider: ownerA.Provider}, 100 * gib},
	} {
		if got := inventory.OthersStorage(s, tt.owner); got != tt.want {
			t.Errorf("OthersStorage(%v) = %d, want %d", tt.owner, got, tt.want)
		}
	}
	s.Used = *resource.NewQuantity(10*gib, resource.BinarySI) // a report out of step
	if got := inventory.OthersStorage(s, ownerA); got != 0 {
		t.Errorf("OthersStorage of a lease using more than the class = %d, want 0", got)
	}
	if got := inventory.OthersStorage(berthv1.InventoryStorage{}, ownerA); got != 0 {
		t.Errorf("OthersStorage of nothing = %d", got)
	}
}

// FuzzStorageClassValidate: Validate never panics, and a configuration it accepts gives
// a report without panicking, with a capacity that is not negative nor less than the
// size configured, and nodes that take workloads.
func FuzzStorageClassValidate(f *testing.F) {
	f.Add("local-path", "local", "2Ti", "", "", int64(0), uint8(3), uint32(1024), int32(0), false)
	f.Add("local-path", "local", "", "500Gi", "", int64(0), uint8(3), uint32(1024), int32(0), false)
	f.Add("ebs", "csi", "", "", "", int64(0), uint8(2), uint32(100), int32(100), false)
	f.Add("ceph-rbd", "ceph", "10Ti", "", "", int64(0), uint8(1), uint32(0), int32(0), false)
	f.Add("ceph-rbd", "ceph", "", "", "rook-ceph/rook-ceph", int64(3), uint8(4), uint32(1<<20), int32(3072), true)
	f.Add("ceph-rbd", "ceph", "", "", "rook-ceph/rook-ceph", int64(0), uint8(4), uint32(1), int32(-1), true)
	f.Add("x", "local", "1e3", "", "", int64(0), uint8(0), uint32(1<<31), int32(0), false)
	f.Add("local-path", "local", "", "7Ei", "", int64(0), uint8(1), uint32(0), int32(0), false)
	f.Add("local-path", "local", "9223372036854775807", "", "", int64(0), uint8(1), uint32(0), int32(0), false)
	f.Fuzz(func(t *testing.T, class, source, size, sizePerNode, cephCluster string, replicas int64, nodes uint8, claimMiB uint32, availableGiB int32, reported bool) {
		// What the cluster reports is of sizes that exist (under 2 EiB); the configuration
		// is what is fuzzed.
		available := int64(availableGiB) << 30
		sc := inventory.StorageClass{Class: class, Source: source, Size: size, SizePerNode: sizePerNode, CephCluster: cephCluster, Replicas: replicas}
		if err := sc.Validate("storage[0]"); err != nil {
			if !strings.HasPrefix(err.Error(), "storage[0]") {
				t.Fatalf("error %q does not name the entry", err)
			}
			return
		}
		schedulable := make([]string, nodes)
		for i := range schedulable {
			schedulable[i] = "node-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		}
		claim := int64(claimMiB) << 20 // up to 4 PiB
		in := inventory.StorageInput{
			Claims:      []inventory.Claim{{Class: class, Size: claim, Owner: owner(ownerA)}, {Class: class + "-other", Size: claim}},
			CSI:         []inventory.CSICapacity{{Class: class, Capacity: available, Nodes: schedulable[:len(schedulable)/2]}},
			Ceph:        map[string]inventory.CephCapacity{cephCluster: {Available: available, Reported: reported}},
			Schedulable: schedulable,
		}
		got, gotNodes := inventory.Storage(sc, in)
		if got.Class != class || got.Source != source {
			t.Fatalf("report of %q/%q for %q/%q", got.Class, got.Source, class, source)
		}
		if got.Capacity.Sign() < 0 {
			t.Fatalf("%+v: capacity %s", sc, got.Capacity.String())
		}
		if size != "" {
			// Never less than the size configured (a fraction of a byte rounds up).
			if q := resource.MustParse(size); got.Capacity.Cmp(q) < 0 {
				t.Fatalf("%+v: capacity %s, less than the size %s", sc, got.Capacity.String(), q.String())
			}
		}
		if got.Used.Value() != claim {
			t.Fatalf("%+v: used %s, want %d", sc, got.Used.String(), claim)
		}
		for _, n := range gotNodes {
			if !slices.Contains(schedulable, n) {
				t.Fatalf("node %q does not take workloads", n)
			}
		}
	})
}
