package cluster

// This file: the cluster-wide pools (storage classes, leased IPs, node ports).

import "fmt"

// SetPoolCapacity sets the size of a pool (storage bytes of a class, leased IPs, node
// ports).
func (c *Capacity) SetPoolCapacity(name string, capacity int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poolLocked(name).capacity = capacity
}

// SetPoolItem adds or replaces a use of a pool.
func (c *Capacity) SetPoolItem(name string, it PoolItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.poolLocked(name)
	c.unusePoolLocked(p, it.Key)
	p.items[it.Key] = it
	if !c.coveredLocked(it) {
		p.used += it.Amount
	}
}

// DeletePoolItem removes a use of a pool.
func (c *Capacity) DeletePoolItem(name, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[name]; ok {
		c.unusePoolLocked(p, key)
	}
}

func (c *Capacity) unusePoolLocked(p *pool, key string) {
	if old, ok := p.items[key]; ok {
		if !c.coveredLocked(old) {
			p.used -= old.Amount
		}
		delete(p.items, key)
	}
}

// coveredLocked: a lease's own use of a pool is covered by its reservation.
func (c *Capacity) coveredLocked(it PoolItem) bool {
	return it.Lease != nil && c.res[it.Lease.Order()] != nil
}

func (c *Capacity) poolLocked(name string) *pool {
	p, ok := c.pools[name]
	if !ok {
		p = &pool{items: map[string]PoolItem{}}
		c.pools[name] = p
	}
	return p
}

// checkPoolsLocked reports the first pool d needs more of than is free.
func (c *Capacity) checkPoolsLocked(d Demand) error {
	for _, class := range sortedKeys(d.Storage) {
		if need := d.Storage[class]; need > 0 {
			if free := c.poolFreeLocked(StoragePool(class)); need > free {
				return &Insufficient{Resource: "storage", Detail: fmt.Sprintf("storage class %q: %s needed, %s free", class, bytesString(need), bytesString(max(free, 0)))}
			}
		}
	}
	if need := int64(d.LeasedIPs); need > 0 {
		if free := c.poolFreeLocked(PoolLeasedIPs); need > free {
			return &Insufficient{Resource: "leased_ips", Detail: fmt.Sprintf("%d leased IPs needed, %d free", need, max(free, 0))}
		}
	}
	if need := int64(d.NodePorts); need > 0 {
		if free := c.poolFreeLocked(PoolNodePorts); need > free {
			return &Insufficient{Resource: "node_ports", Detail: fmt.Sprintf("%d node ports needed, %d free", need, max(free, 0))}
		}
	}
	return nil
}

func (c *Capacity) poolFreeLocked(name string) int64 {
	p, ok := c.pools[name]
	if !ok {
		return 0
	}
	return p.capacity - p.used - p.reserved
}

// claimPoolsLocked adds (sign +1) or removes (−1) r's pool claims, and moves the
// lease's own pool items between used and covered.
func (c *Capacity) claimPoolsLocked(r *reservation, sign int64) {
	claim := func(name string, n int64) {
		if n != 0 {
			c.poolLocked(name).reserved += sign * n
		}
	}
	for class, n := range r.demand.Storage {
		claim(StoragePool(class), n)
	}
	claim(PoolLeasedIPs, int64(r.demand.LeasedIPs))
	claim(PoolNodePorts, int64(r.demand.NodePorts))
	for _, p := range c.pools {
		for _, it := range p.items {
			if it.Lease != nil && it.Lease.Order() == r.order {
				p.used -= sign * it.Amount
			}
		}
	}
}
