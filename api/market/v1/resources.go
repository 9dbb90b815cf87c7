package market

import (
	"path"
	"strconv"
)

// Attribute is a key/value pair: placement requirements, provider attributes, and the
// capability attributes of storage and GPUs.
type Attribute struct {
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// Attributes keep the order they are built in (sorted by key where Akash sorts them).
type Attributes []Attribute

// Find returns the value of key and whether it is present.
func (a Attributes) Find(key string) (string, bool) {
	for _, at := range a {
		if at.Key == key {
			return at.Value, true
		}
	}
	return "", false
}

// ResourceValue is an unsigned quantity, encoded as Akash encodes it: {"val": "1000"}.
type ResourceValue struct {
	Val Uint `json:"val"`
}

// Uint is an unsigned quantity encoded in JSON as a decimal string.
type Uint uint64

// MarshalJSON encodes the value as a quoted decimal.
func (u Uint) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 24)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(u), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a quoted decimal.
func (u *Uint) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return &strconv.NumError{Func: "Uint", Num: string(b), Err: strconv.ErrSyntax}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return err
	}
	*u = Uint(v)
	return nil
}

// CPU is a CPU request in millicores.
type CPU struct {
	Attributes Attributes    `json:"attributes,omitempty"`
	Units      ResourceValue `json:"units"`
}

// Memory is a memory request in bytes.
type Memory struct {
	Attributes Attributes    `json:"attributes,omitempty"`
	Size       ResourceValue `json:"size"`
}

// Storage is one storage volume request in bytes; its attributes carry the class and
// whether it is persistent.
type Storage struct {
	Attributes Attributes    `json:"attributes,omitempty"`
	Name       string        `json:"name"`
	Size       ResourceValue `json:"size"`
}

// Storage attribute keys and the storage classes Akash's SDL knows.
const (
	StorageAttributePersistent = "persistent"
	StorageAttributeClass      = "class"
	StorageClassDefault        = "default"
	StorageClassRAM            = "ram"
)

// GPU is a GPU request: a number of units and the acceptable vendor/model/ram/interface
// combinations as attributes ("vendor/nvidia/model/a100/ram/80Gi" = "true").
type GPU struct {
	Attributes Attributes    `json:"attributes,omitempty"`
	Units      ResourceValue `json:"units"`
}

// EndpointKind is how a service port is reached from outside.
type EndpointKind int

// Endpoint kinds, numbered as on Akash.
const (
	// EndpointSharedHTTP is an HTTP port behind the provider's ingress (hostnames).
	EndpointSharedHTTP EndpointKind = 0
	// EndpointRandomPort is a global non-HTTP port forwarded from a random node port.
	EndpointRandomPort EndpointKind = 1
	// EndpointLeasedIP is a port on a dedicated leased IP address.
	EndpointLeasedIP EndpointKind = 2
)

// Endpoint is one externally reachable port of a resource unit.
type Endpoint struct {
	Kind           EndpointKind `json:"kind,omitempty"`
	SequenceNumber uint32       `json:"sequence_number"`
}

// Endpoints is sorted by sequence number where Akash sorts it (sort.Sort, so ties keep
// the order that algorithm leaves them in, which the version hash depends on).
type Endpoints []Endpoint

func (e Endpoints) Len() int           { return len(e) }
func (e Endpoints) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e Endpoints) Less(i, j int) bool { return e[i].SequenceNumber < e[j].SequenceNumber }

// Resources is one resource unit's shape: what each replica needs.
type Resources struct {
	CPU       *CPU      `json:"cpu,omitempty"`
	Endpoints Endpoints `json:"endpoints"`
	GPU       *GPU      `json:"gpu,omitempty"`
	ID        uint32    `json:"id"`
	Memory    *Memory   `json:"memory,omitempty"`
	Storage   []Storage `json:"storage,omitempty"`
}

// Satisfies reports whether the attributes meet the requirement req: some attribute
// has the required value under a key that req's key matches, a path.Match pattern
// ("region", "capabilities/gpu/vendor/*/model/a100"). A malformed pattern matches
// only itself.
func (a Attributes) Satisfies(req Attribute) bool {
	for _, at := range a {
		if at.Value != req.Value {
			continue
		}
		if at.Key == req.Key {
			return true
		}
		if ok, err := path.Match(req.Key, at.Key); err == nil && ok {
			return true
		}
	}
	return false
}
