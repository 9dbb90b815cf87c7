package deploy

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"berth.dev/berth/api/market/v1"
)

func TestIngressHost(t *testing.T) {
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 1, OSeq: 1, Provider: "akash1prov"}
	// The UUID v5 (DNS) of "akash1owner/42/1/1/akash1provweb" in lower-case base32hex,
	// as Python's uuid.uuid5 and base64.b32hexencode compute it.
	if got := IngressHostLabel(id, "web"); got != "h7o5fv0n9pdnr03sap2jrhnvrk" {
		t.Fatalf("label %q", got)
	}
	h := IngressHost(id, "web", "ingress.example.com")
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		t.Fatalf("%q: %v", h, errs)
	}
	other := id
	other.DSeq = 43
	if IngressHost(other, "web", "d") == IngressHost(id, "web", "d") || IngressHost(id, "api", "d") == IngressHost(id, "web", "d") {
		t.Fatal("hosts of different leases or services collide")
	}
}

func TestWithIngressHosts(t *testing.T) {
	id := market.LeaseID{Owner: "akash1owner", DSeq: 42, GSeq: 1, OSeq: 1, Provider: "akash1prov"}
	g := market.ManifestGroup{Name: "dc", Services: []market.Service{
		{Name: "web", Expose: []market.ServiceExpose{
			{Port: 80, Proto: market.ProtoTCP, Global: true, Hosts: []string{"www.example.com"}},
			{Port: 8080, ExternalPort: 8080, Proto: market.ProtoTCP, Global: true},
			{Port: 9000, Proto: market.ProtoTCP},
		}},
		{Name: "api", Expose: []market.ServiceExpose{{Port: 3000, ExternalPort: 80, Proto: market.ProtoTCP, Global: true}}},
	}}
	orig := deepCopyGroup(t, g)
	got := WithIngressHosts(id, g, "ingress.example.com")
	if !reflect.DeepEqual(g, orig) {
		t.Fatal("the input was changed")
	}
	web, api := got.Services[0].Expose, got.Services[1].Expose
	if want := []string{"www.example.com", IngressHost(id, "web", "ingress.example.com")}; !reflect.DeepEqual(web[0].Hosts, want) {
		t.Fatalf("web hosts %v, want %v", web[0].Hosts, want)
	}
	if web[1].Hosts != nil || web[2].Hosts != nil {
		t.Fatalf("non-ingress ports got hosts: %+v", web)
	}
	if len(api[0].Hosts) != 1 || !strings.HasPrefix(api[0].Hosts[0], IngressHostLabel(id, "api")+".") {
		t.Fatalf("api hosts %v", api[0].Hosts)
	}
	if again := WithIngressHosts(id, got, "ingress.example.com"); !reflect.DeepEqual(again, got) {
		t.Fatal("not idempotent")
	}
	if back := WithoutIngressHosts(id, got, "ingress.example.com"); !reflect.DeepEqual(back, orig) {
		t.Fatalf("round trip: %+v, want %+v", back, orig)
	}
	if same := WithIngressHosts(id, g, ""); !reflect.DeepEqual(same, orig) {
		t.Fatal("no domain changed the group")
	}
}

func deepCopyGroup(t *testing.T, g market.ManifestGroup) market.ManifestGroup {
	t.Helper()
	out := g
	out.Services = nil
	for _, s := range g.Services {
		c := s
		c.Expose = nil
		for _, e := range s.Expose {
			ec := e
			if e.Hosts != nil {
				ec.Hosts = append([]string(nil), e.Hosts...)
			}
			c.Expose = append(c.Expose, ec)
		}
		out.Services = append(out.Services, c)
	}
	return out
}
