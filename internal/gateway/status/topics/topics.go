// Package topics carries the provider's status to other processes: each section of
// GET /status on its topic of the Redis bus (the seeds' names), when it changes and
// every so often unchanged.
package topics

import (
	"context"
	"reflect"
	"sync"
	"time"

	"berth.dev/berth/internal/bus/redisbus"
	"berth.dev/berth/internal/gateway/status"
)

// The provider's status topics, the seeds' names. Each carries a section of GET
// /status: when it changes (the status board is refreshed every second, so at most
// once a second), and every 30 s unchanged, so that a subscriber that joined late or
// was cut off (bus.ErrLost) has the whole state again within 30 s.
const (
	ClusterStatus   = "akash.provider.cluster.status"   // status.Cluster: leases and inventory
	BidEngineStatus = "akash.provider.bidengine.status" // status.BidEngine: orders being decided
	ManifestStatus  = "akash.provider.manifest.status"  // status.Manifest: deployments
	InventoryStatus = "akash.provider.inventory.status" // status.Inventory: reserved and available
)

// Publish publishes, on Redis (bus.redis), each section of the provider's status
// when it changes, and all of them every `every`, until ctx ends. Publishing never
// waits for Redis (redisbus): the provider bids and serves whether Redis answers or not.
func Publish(ctx context.Context, board *status.Board, c *redisbus.Client, every time.Duration) error {
	cluster := redisbus.NewPublisher[status.Cluster](c, ClusterStatus)
	bidengine := redisbus.NewPublisher[status.BidEngine](c, BidEngineStatus)
	manifest := redisbus.NewPublisher[status.Manifest](c, ManifestStatus)
	inventory := redisbus.NewPublisher[status.Inventory](c, InventoryStatus)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, run := range []func(context.Context){cluster.Run, bidengine.Run, manifest.Run, inventory.Run} {
		wg.Go(func() { run(ctx) })
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last *status.Status
	for {
		st, _, changed := board.Get()
		all := last == nil
		if all || !reflect.DeepEqual(last.Cluster, st.Cluster) {
			cluster.Publish(st.Cluster)
		}
		if all || last.BidEngine != st.BidEngine {
			bidengine.Publish(st.BidEngine)
		}
		if all || last.Manifest != st.Manifest {
			manifest.Publish(st.Manifest)
		}
		if all || !reflect.DeepEqual(last.Cluster.Inventory, st.Cluster.Inventory) {
			inventory.Publish(st.Cluster.Inventory)
		}
		last = &st
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
			last = nil
		}
	}
}
