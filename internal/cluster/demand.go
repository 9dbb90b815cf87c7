package cluster

import (
	"fmt"
	"math"
	"strconv"

	"berth.dev/berth/api/market/v1"
	"berth.dev/berth/internal/gpu"
)

// Amounts are countable per-node resources: what a node offers, what a pod requests,
// what a replica needs. CPU is in millicores, the rest in bytes except GPUs and Pods.
type Amounts struct {
	CPU              int64
	Memory           int64
	EphemeralStorage int64
	GPUs             int64
	Pods             int64
}

// Add returns a + b.
func (a Amounts) Add(b Amounts) Amounts {
	return Amounts{a.CPU + b.CPU, a.Memory + b.Memory, a.EphemeralStorage + b.EphemeralStorage, a.GPUs + b.GPUs, a.Pods + b.Pods}
}

// Sub returns a − b.
func (a Amounts) Sub(b Amounts) Amounts {
	return Amounts{a.CPU - b.CPU, a.Memory - b.Memory, a.EphemeralStorage - b.EphemeralStorage, a.GPUs - b.GPUs, a.Pods - b.Pods}
}

// Mul returns a × n.
func (a Amounts) Mul(n int64) Amounts {
	return Amounts{a.CPU * n, a.Memory * n, a.EphemeralStorage * n, a.GPUs * n, a.Pods * n}
}

// Max0 returns a with negative amounts (overcommitted) shown as 0.
func (a Amounts) Max0() Amounts {
	return Amounts{max(a.CPU, 0), max(a.Memory, 0), max(a.EphemeralStorage, 0), max(a.GPUs, 0), max(a.Pods, 0)}
}

// Fits reports whether a fits in free.
func (a Amounts) Fits(free Amounts) bool {
	return a.CPU <= free.CPU && a.Memory <= free.Memory && a.EphemeralStorage <= free.EphemeralStorage &&
		a.GPUs <= free.GPUs && a.Pods <= free.Pods
}

// Negative reports whether any amount is below zero.
func (a Amounts) Negative() bool {
	return a.CPU < 0 || a.Memory < 0 || a.EphemeralStorage < 0 || a.GPUs < 0 || a.Pods < 0
}

// String is for messages: "cpu=500m memory=512Mi …".
func (a Amounts) String() string {
	return fmt.Sprintf("cpu=%dm memory=%s ephemeral-storage=%s gpus=%d pods=%d",
		a.CPU, bytesString(a.Memory), bytesString(a.EphemeralStorage), a.GPUs, a.Pods)
}

func bytesString(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b != 0 && b%u.size == 0 {
			return fmt.Sprintf("%d%s", b/u.size, u.suffix)
		}
	}
	return fmt.Sprintf("%d", b)
}

// Unit is one resource unit of an order as the cluster must place it: Count replicas,
// each needing Each on one node, with GPUs of one of the accepted models.
type Unit struct {
	ID    uint32
	Count uint32
	Each  Amounts
	// GPUs lists the accepted GPU models when Each.GPUs > 0.
	GPUs []gpu.Model
}

// Demand is everything an order needs from the cluster.
type Demand struct {
	Units []Unit
	// Storage is persistent storage in bytes per storage class, for all replicas.
	Storage map[string]int64
	// LeasedIPs is the number of distinct leased IPs; NodePorts the number of global
	// ports forwarded from a node port (they are per service, not per replica).
	LeasedIPs int
	NodePorts int
}

// Overcommit lets the cluster promise more than it has: a resource overcommitted by P
// percent is requested (and reserved) at 100/(100+P) of what the tenant asked, while
// the container's limit stays what was asked. Storage overcommit applies to ephemeral
// storage requests and to persistent pools' accounting (a volume's size is never
// shrunk).
type Overcommit struct {
	CPU, Memory, Storage uint32 // percent, 0 = none
}

// MaxOvercommit bounds each percentage.
const MaxOvercommit = 1000

// Request is the request for a limit under pct percent of overcommit, rounded up (a
// positive limit never requests 0).
func Request(limit int64, pct uint32) int64 {
	if pct == 0 || limit <= 0 {
		return limit
	}
	d := int64(100 + min(pct, MaxOvercommit))
	return (limit*100 + d - 1) / d
}

// maxQuantity bounds any single quantity: 64 TiB (or 64 Ti millicores), above the
// largest an SDL unit may ask for (32 TiB of storage).
const maxQuantity = 1 << 46

// maxTotal bounds a group's total of each resource (64 PiB), so that sums of the
// demands a cluster can hold stay far from overflow.
const maxTotal = math.MaxInt64 / (1 << 7)

// DemandOf converts an order's group into what the cluster must provide, under oc:
// ephemeral volumes count as the node's ephemeral storage, "ram" volumes as memory,
// persistent volumes against their class's pool.
func DemandOf(spec market.GroupSpec, oc Overcommit) (Demand, error) {
	d := Demand{Storage: map[string]int64{}}
	ips := map[uint32]bool{}
	var total Amounts
	// within adds n × each to *sum, refusing totals over maxTotal.
	within := func(i int, field string, sum *int64, each int64, n uint32) error {
		if each > 0 && (int64(n) > maxTotal/each || *sum > maxTotal-each*int64(n)) {
			return fmt.Errorf("resources[%d].%s: %d × %d replicas takes the group's total out of range", i, field, each, n)
		}
		*sum += each * int64(n)
		return nil
	}
	for i, ru := range spec.Resources {
		res := ru.Resources
		u := Unit{ID: res.ID, Count: ru.Count, Each: Amounts{Pods: 1}}
		q := func(field string, v market.Uint) (int64, error) {
			n, err := strconv.ParseInt(strconv.FormatUint(uint64(v), 10), 10, 64)
			if err != nil || n > maxQuantity {
				return 0, fmt.Errorf("resources[%d].%s: %d is out of range", i, field, v)
			}
			return n, nil
		}
		var err error
		if res.CPU != nil {
			if u.Each.CPU, err = q("cpu", res.CPU.Units.Val); err != nil {
				return Demand{}, err
			}
		}
		if res.Memory != nil {
			if u.Each.Memory, err = q("memory", res.Memory.Size.Val); err != nil {
				return Demand{}, err
			}
		}
		for j, st := range res.Storage {
			size, err := q(fmt.Sprintf("storage[%d]", j), st.Size.Val)
			if err != nil {
				return Demand{}, err
			}
			switch class, persistent := storageClass(st.Attributes); {
			case class == market.StorageClassRAM:
				u.Each.Memory += size
			case persistent:
				sum := d.Storage[class]
				if err := within(i, fmt.Sprintf("storage[%d]", j), &sum, size, ru.Count); err != nil {
					return Demand{}, err
				}
				d.Storage[class] = sum
			default:
				u.Each.EphemeralStorage += size
			}
		}
		if res.GPU != nil && res.GPU.Units.Val > 0 {
			if u.Each.GPUs, err = q("gpu", res.GPU.Units.Val); err != nil {
				return Demand{}, err
			}
			if u.GPUs, err = gpu.ParseAttributes(res.GPU.Attributes); err != nil {
				return Demand{}, fmt.Errorf("resources[%d]: %w", i, err)
			}
			if len(u.GPUs) == 0 {
				return Demand{}, fmt.Errorf("resources[%d]: %d GPUs and no accepted model", i, u.Each.GPUs)
			}
		}
		for _, ep := range res.Endpoints {
			switch ep.Kind {
			case market.EndpointRandomPort:
				d.NodePorts++
			case market.EndpointLeasedIP:
				ips[ep.SequenceNumber] = true
			}
		}
		for _, f := range []struct {
			name string
			sum  *int64
			each int64
		}{{"cpu", &total.CPU, u.Each.CPU}, {"memory", &total.Memory, u.Each.Memory}, {"storage", &total.EphemeralStorage, u.Each.EphemeralStorage}, {"gpu", &total.GPUs, u.Each.GPUs}} {
			if err := within(i, f.name, f.sum, f.each, ru.Count); err != nil {
				return Demand{}, err
			}
		}
		u.Each.CPU = Request(u.Each.CPU, oc.CPU)
		u.Each.Memory = Request(u.Each.Memory, oc.Memory)
		u.Each.EphemeralStorage = Request(u.Each.EphemeralStorage, oc.Storage)
		d.Units = append(d.Units, u)
	}
	for class, n := range d.Storage {
		d.Storage[class] = Request(n, oc.Storage)
	}
	d.LeasedIPs = len(ips)
	return d, nil
}

// storageClass is a volume's class and whether it is persistent: a persistent volume
// without a class is in class "default".
func storageClass(attrs market.Attributes) (string, bool) {
	class, _ := attrs.Find(market.StorageAttributeClass)
	persistent, _ := attrs.Find(market.StorageAttributePersistent)
	if class == market.StorageClassRAM {
		return class, false
	}
	if persistent == "true" {
		if class == "" {
			class = market.StorageClassDefault
		}
		return class, true
	}
	return "ephemeral", false
}
