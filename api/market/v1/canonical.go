package market

import (
	"crypto/sha256"
	"strconv"
	"unicode/utf8"
)

// Canonical JSON of a manifest: the bytes Akash hashes for the version. Akash encodes
// the manifest with encoding/json, decodes that into generic values and encodes them
// again (Cosmos SDK's SortJSON), which sorts object keys. This encoder writes the same
// bytes directly, without reflection: keys in sorted order, encoding/json's string
// escaping (HTML characters, U+2028/U+2029), and, as the round trip leaves them, invalid
// UTF-8 bytes as the raw replacement character rather than a \ufffd escape.

// Version is the manifest's version hash: the sha256 of its canonical JSON.
func (m Manifest) Version() []byte {
	sum := sha256.Sum256(m.AppendCanonicalJSON(make([]byte, 0, 4096)))
	return sum[:]
}

// AppendCanonicalJSON appends the manifest's canonical JSON to b.
func (m Manifest) AppendCanonicalJSON(b []byte) []byte {
	return appendList(b, m, (*ManifestGroup).appendJSON)
}

// appendList writes xs as a JSON array, or null when xs is nil (as encoding/json does).
func appendList[T any](b []byte, xs []T, elem func(*T, []byte) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(&xs[i], b)
	}
	return append(b, ']')
}

func (g *ManifestGroup) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, g.Name)
	b = append(b, `,"services":`...)
	b = appendList(b, g.Services, (*Service).appendJSON)
	return append(b, '}')
}

func (s *Service) appendJSON(b []byte) []byte {
	b = append(b, `{"args":`...)
	b = appendStrings(b, s.Args)
	b = append(b, `,"command":`...)
	b = appendStrings(b, s.Command)
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, uint64(s.Count), 10)
	b = append(b, `,"credentials":`...)
	if c := s.Credentials; c == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"email":`...)
		b = appendString(b, c.Email)
		b = append(b, `,"host":`...)
		b = appendString(b, c.Host)
		b = append(b, `,"password":`...)
		b = appendString(b, c.Password)
		b = append(b, `,"username":`...)
		b = appendString(b, c.Username)
		b = append(b, '}')
	}
	b = append(b, `,"env":`...)
	b = appendStrings(b, s.Env)
	b = append(b, `,"expose":`...)
	b = appendList(b, s.Expose, (*ServiceExpose).appendJSON)
	b = append(b, `,"image":`...)
	b = appendString(b, s.Image)
	b = append(b, `,"name":`...)
	b = appendString(b, s.Name)
	if p := s.Params; p != nil {
		b = append(b, `,"params":{`...)
		if p.Permissions != nil {
			b = append(b, `"permissions":{`...)
			if len(p.Permissions.Read) > 0 {
				b = append(b, `"read":`...)
				b = appendStrings(b, p.Permissions.Read)
			}
			b = append(b, "},"...)
		}
		b = append(b, `"storage":`...)
		b = appendList(b, p.Storage, (*StorageParams).appendJSON)
		if p.TEE != nil {
			b = append(b, `,"tee":{"attestation":`...)
			b = strconv.AppendBool(b, p.TEE.Attestation)
			b = append(b, `,"type":`...)
			b = appendString(b, p.TEE.Type)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = append(b, `,"resources":`...)
	b = s.Resources.appendJSON(b)
	return append(b, '}')
}

func (sp *StorageParams) appendJSON(b []byte) []byte {
	b = append(b, `{"mount":`...)
	b = appendString(b, sp.Mount)
	b = append(b, `,"name":`...)
	b = appendString(b, sp.Name)
	b = append(b, `,"readOnly":`...)
	b = strconv.AppendBool(b, sp.ReadOnly)
	return append(b, '}')
}

func (e *ServiceExpose) appendJSON(b []byte) []byte {
	b = append(b, `{"endpointSequenceNumber":`...)
	b = strconv.AppendUint(b, uint64(e.EndpointSequenceNumber), 10)
	b = append(b, `,"externalPort":`...)
	b = strconv.AppendUint(b, uint64(e.ExternalPort), 10)
	b = append(b, `,"global":`...)
	b = strconv.AppendBool(b, e.Global)
	b = append(b, `,"hosts":`...)
	b = appendStrings(b, e.Hosts)
	h := &e.HTTPOptions
	b = append(b, `,"httpOptions":{"maxBodySize":`...)
	b = strconv.AppendUint(b, uint64(h.MaxBodySize), 10)
	if len(h.NextCases) > 0 {
		b = append(b, `,"nextCases":`...)
		b = appendStrings(b, h.NextCases)
	}
	b = append(b, `,"nextTimeout":`...)
	b = strconv.AppendUint(b, uint64(h.NextTimeout), 10)
	b = append(b, `,"nextTries":`...)
	b = strconv.AppendUint(b, uint64(h.NextTries), 10)
	if h.ProxyBufferSize != 0 {
		b = append(b, `,"proxyBufferSize":`...)
		b = strconv.AppendUint(b, uint64(h.ProxyBufferSize), 10)
	}
	b = append(b, `,"readTimeout":`...)
	b = strconv.AppendUint(b, uint64(h.ReadTimeout), 10)
	b = append(b, `,"sendTimeout":`...)
	b = strconv.AppendUint(b, uint64(h.SendTimeout), 10)
	b = append(b, `},"ip":`...)
	b = appendString(b, e.IP)
	b = append(b, `,"port":`...)
	b = strconv.AppendUint(b, uint64(e.Port), 10)
	b = append(b, `,"proto":`...)
	b = appendString(b, e.Proto)
	b = append(b, `,"service":`...)
	b = appendString(b, e.Service)
	return append(b, '}')
}

func (r *Resources) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if r.CPU != nil {
		b = append(b, `"cpu":`...)
		b = appendUnits(b, r.CPU.Attributes, "units", r.CPU.Units)
		b = append(b, ',')
	}
	b = append(b, `"endpoints":`...)
	b = appendList(b, r.Endpoints, (*Endpoint).appendJSON)
	if r.GPU != nil {
		b = append(b, `,"gpu":`...)
		b = appendUnits(b, r.GPU.Attributes, "units", r.GPU.Units)
	}
	b = append(b, `,"id":`...)
	b = strconv.AppendUint(b, uint64(r.ID), 10)
	if r.Memory != nil {
		b = append(b, `,"memory":`...)
		b = appendUnits(b, r.Memory.Attributes, "size", r.Memory.Size)
	}
	if len(r.Storage) > 0 {
		b = append(b, `,"storage":`...)
		b = appendList(b, r.Storage, (*Storage).appendJSON)
	}
	return append(b, '}')
}

func (ep *Endpoint) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if ep.Kind != 0 {
		b = append(b, `"kind":`...)
		b = strconv.AppendInt(b, int64(ep.Kind), 10)
		b = append(b, ',')
	}
	b = append(b, `"sequence_number":`...)
	b = strconv.AppendUint(b, uint64(ep.SequenceNumber), 10)
	return append(b, '}')
}

func (st *Storage) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if len(st.Attributes) > 0 {
		b = append(b, `"attributes":`...)
		b = appendList(b, st.Attributes, (*Attribute).appendJSON)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = appendString(b, st.Name)
	b = append(b, `,"size":`...)
	b = appendValue(b, st.Size)
	return append(b, '}')
}

// appendUnits writes {"attributes": [...] (when any), key: {"val": "N"}}.
func appendUnits(b []byte, attrs Attributes, key string, v ResourceValue) []byte {
	b = append(b, '{')
	if len(attrs) > 0 {
		b = append(b, `"attributes":`...)
		b = appendList(b, attrs, (*Attribute).appendJSON)
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	b = appendValue(b, v)
	return append(b, '}')
}

func appendValue(b []byte, v ResourceValue) []byte {
	b = append(b, `{"val":"`...)
	b = strconv.AppendUint(b, uint64(v.Val), 10)
	return append(b, `"}`...)
}

func (a *Attribute) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if a.Key != "" {
		b = append(b, `"key":`...)
		b = appendString(b, a.Key)
	}
	if a.Value != "" {
		if a.Key != "" {
			b = append(b, ',')
		}
		b = append(b, `"value":`...)
		b = appendString(b, a.Value)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	return appendList(b, ss, func(s *string, b []byte) []byte { return appendString(b, *s) })
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does with HTML escaping on, except that an
// invalid UTF-8 byte becomes the replacement character itself, as it is after Akash's
// decode and re-encode.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
